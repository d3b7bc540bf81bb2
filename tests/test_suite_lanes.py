"""The suite's own set-up: which hypothesis profile a run gets, which lane a module is in."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from tests.conftest import LANE_MARKERS, REPO_ROOT, hypothesis_profile, lane_markers


@pytest.mark.parametrize(
    ("environ", "profile"),
    [
        ({}, "dev"),
        ({"CI": "true"}, "ci"),
        ({"CI": "1"}, "ci"),
        ({"CI": "false"}, "dev"),
        ({"CI": ""}, "dev"),
        ({"HYPOTHESIS_PROFILE": "explore"}, "explore"),
        ({"CI": "true", "HYPOTHESIS_PROFILE": "explore"}, "explore"),
        ({"CI": "true", "HYPOTHESIS_PROFILE": "dev"}, "dev"),
    ],
)
def test_the_profile_comes_from_the_environment(environ: dict[str, str], profile: str) -> None:
    assert hypothesis_profile(environ) == profile


def test_this_run_loaded_the_profile_its_environment_names() -> None:
    assert settings.get_current_profile_name() == hypothesis_profile(os.environ)


def test_ci_is_derandomised_and_explore_looks_further() -> None:
    ci, dev, explore = (settings.get_profile(name) for name in ("ci", "dev", "explore"))
    assert ci.derandomize
    assert ci.database is None
    assert ci.max_examples == dev.max_examples
    assert not explore.derandomize
    assert explore.max_examples >= 10 * dev.max_examples


def test_lane_markers_follow_the_module_path() -> None:
    assert set(lane_markers("tests/packaging/test_deb.py")) == {"packaging", "slow"}
    assert set(lane_markers("tests/service/test_crash_recovery.py")) == {"restarts", "slow"}
    assert lane_markers("tests/console/test_console_browser.py") == ("browser",)
    assert lane_markers("tests/engine/test_state.py") == ()
    assert lane_markers("tests/packaging_notes.py") == ()  # a folder prefix matches whole folders only
    module = "tests/engine/test_properties.py"
    assert lane_markers(module, "test_injected_faults_never_yield_an_illegal_round") == ("slow",)
    assert lane_markers(module, "test_a_test_not_named_there") == ()
    assert all((REPO_ROOT / key.split("::")[0]).exists() for key in LANE_MARKERS)


def test_a_marked_module_is_marked_when_collected(request: pytest.FixtureRequest) -> None:
    here = request.node
    assert here.get_closest_marker("slow") is None  # this module is in the fast lane
    assert {m.name for m in here.iter_markers()} & {"slow", "browser", "packaging", "restarts"} == set()
