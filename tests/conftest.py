"""Shared pytest fixtures, the hypothesis profile in force, and the lanes' markers.

Hypothesis profiles (``HYPOTHESIS_PROFILE`` picks one; otherwise ``ci`` when ``CI`` is set
to a true value, as CI does, else ``dev``):

* ``dev``: the default, randomised, examples remembered in ``.hypothesis/``;
* ``ci``: derandomised (each test's examples derived from the test itself, the same in every
  run) and no example database, so a CI run is reproducible;
* ``explore``: many more examples at the seed given to ``--hypothesis-seed`` (``make
  test-explore SEED=n`` prints and uses one), for a run that looks further than CI does.

Markers for the lanes (README, "Tests") are set here by module path, so a test module needs no
marker line of its own; a single slow test in an otherwise fast module carries its own
``@pytest.mark.slow``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.broker import MosquittoBroker

# Every setting a profile depends on is spelled out: hypothesis loads its own "ci" profile
# (derandomised) on import when it sees CI, and unset values would come from that.
settings.register_profile(
    "dev",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=100,
    derandomize=False,
)
settings.register_profile(
    "ci", parent=settings.get_profile("dev"), derandomize=True, database=None, print_blob=True
)
# Tests that set their own max_examples keep it: explore them with several seeds.
settings.register_profile("explore", parent=settings.get_profile("dev"), max_examples=1000, database=None)


def hypothesis_profile(environ: Mapping[str, str]) -> str:
    """The profile to load: ``HYPOTHESIS_PROFILE``, else ``ci`` under CI, else ``dev``."""
    chosen = environ.get("HYPOTHESIS_PROFILE", "").strip()
    if chosen:
        return chosen
    return "ci" if environ.get("CI", "").strip().lower() in {"1", "true", "yes"} else "dev"


# Loaded before any test module is imported: a test's own @settings inherits what it leaves out
# (derandomize, database) from the profile in force when it is decorated.
settings.load_profile(hypothesis_profile(os.environ))

REPO_ROOT = Path(__file__).resolve().parent.parent

LANE_MARKERS: dict[str, tuple[str, ...]] = {
    # a folder (ending in /), a module, or one test (module::name; for modules that do not
    # import pytest), relative to the repository root
    "tests/console/test_console_browser.py": ("browser",),
    "tests/console/test_pit_browser.py": ("browser",),
    "tests/console/test_squeeze_browser.py": ("browser",),
    "tests/service/test_squeeze_leak.py": ("restarts", "slow"),  # 27 daemon runs, one restarted mid-squeeze
    "tests/packaging/": ("packaging", "slow"),
    "tests/chaos/": ("restarts", "slow"),
    "tests/service/test_crash_recovery.py": ("restarts", "slow"),
    "tests/service/test_run_e2e.py": ("restarts", "slow"),  # the daemon killed, stopped, restarted
    "tests/service/test_stop_anywhere.py": ("restarts", "slow"),  # 140 starts, each signalled
    "tests/service/test_demo.py": ("slow",),
    "tests/camera/": ("slow",),  # real card art, calibrated per run
    "tests/drivers/test_commands.py": ("slow",),  # the record/replay/decode commands as processes
    "tests/mqtt/test_tls_acl.py": ("slow",),  # a PKI made with openssl per module
    "tests/mqtt/test_tls_files.py": ("slow",),
    "tests/mqtt/test_contract_official_parser.py": ("slow",),  # node + the AsyncAPI parser, npm ci once
    "tests/fleet/test_fleet.py": ("slow",),  # hundreds of tables on a real broker
    "tests/engine/test_reference.py::test_engine_events_equal_the_reference_dealers": ("slow",),
    "tests/engine/test_reference.py::test_pulled_cards_in_any_arrival_order_give_the_reference_result": (
        "slow",
    ),
    "tests/engine/test_properties.py::test_injected_faults_never_yield_an_illegal_round": ("slow",),
    "tests/engine/test_properties.py::test_arbitrary_input_streams_never_crash_and_always_fold": ("slow",),
    "tests/drivers/test_hid_wedge.py::test_every_card_typed_with_shift_and_rollover": ("slow",),
    "tests/console/test_floor_model.py::test_any_payload_leaves_a_model_that_renders": ("slow",),
    "tests/console/test_pit_http.py::test_the_demo_tells_the_round_it_holds_and_warns_of_nothing": ("slow",),
    "tests/audit/test_null_model.py::test_committed_table_agrees_with_a_fresh_simulation": ("slow",),
    "tests/audit/test_bounds.py::test_factory_bound_is_not_below_a_simulated_rate": ("slow",),
    "tests/console/test_pit_http.py::test_a_dealer_display_keeps_only_a_watch_only_session_alive": ("slow",),
}
"""Markers every test under a path gets. A path or test that no longer exists stops the run."""


def lane_markers(relative: str, name: str = "") -> tuple[str, ...]:
    """The markers :data:`LANE_MARKERS` gives test ``name`` (its function's name) of the module
    at ``relative`` (POSIX path from the repository root)."""
    names: list[str] = []
    for key, markers in LANE_MARKERS.items():
        if key in (relative, f"{relative}::{name}") or (key.endswith("/") and relative.startswith(key)):
            names.extend(m for m in markers if m not in names)
    return tuple(names)


def pytest_configure(config: pytest.Config) -> None:
    keys = [*LANE_MARKERS, *LONGEST_FIRST]
    stale = sorted(key for key in keys if not (REPO_ROOT / key.split("::")[0]).exists())
    if stale:
        raise pytest.UsageError(f"tests/conftest.py names paths that do not exist: {stale}")


@pytest.hookimpl(tryfirst=True)  # before -m and pytest-xdist look at the markers and the order
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules: dict[str, object] = {}
    for item in items:
        try:
            relative = item.path.resolve().relative_to(REPO_ROOT).as_posix()
        except ValueError:
            continue
        module = item.getparent(pytest.Module)
        if module is not None:
            modules[relative] = module.obj
        for name in lane_markers(relative, getattr(item, "originalname", item.name)):
            item.add_marker(name)
    tests = [key.split("::") for key in LANE_MARKERS if "::" in key]
    renamed = [
        f"{path}::{name}" for path, name in tests if path in modules and not hasattr(modules[path], name)
    ]
    if renamed:
        raise pytest.UsageError(f"tests/conftest.py LANE_MARKERS names tests that do not exist: {renamed}")
    items.sort(key=run_order({item.path for item in items if item.get_closest_marker("slow")}))


LONGEST_FIRST = (
    "tests/packaging/",
    "tests/service/test_crash_recovery.py",
    "tests/service/test_stop_anywhere.py",
    "tests/camera/",
    "tests/service/test_squeeze_leak.py",
    "tests/service/test_demo.py",
    "tests/service/test_run_e2e.py",
    "tests/chaos/",
)
"""The longest modules (measured with --durations), started first in this order."""


def run_order(slow_modules: set[Path]) -> Callable[[pytest.Item], tuple[int, int]]:
    """The sort key of the run order: `make test` hands out whole modules to its workers in
    the order left here (--dist loadfile), so the longest modules start at once and the many
    short ones fill in behind them. The camera's modules share one calibration per run
    (tests/camera/conftest.py): the first of them starts early and calibrates while the other
    worker is busy elsewhere; the others go last, when the calibration is there to reuse."""
    camera = sorted(path for path in slow_modules if path.is_relative_to(REPO_ROOT / "tests" / "camera"))

    def key(item: pytest.Item) -> tuple[int, int]:
        if item.path in camera[1:]:
            return (3, 0)
        relative = item.path.relative_to(REPO_ROOT).as_posix()
        for rank, prefix in enumerate(LONGEST_FIRST):
            if relative.startswith(prefix):
                return (0, rank)
        return (1, 0) if item.path in slow_modules else (2, 0)

    return key


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {settings.get_current_profile_name()}"


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A fresh anonymous mosquitto on its own port, stopped after the test."""
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
