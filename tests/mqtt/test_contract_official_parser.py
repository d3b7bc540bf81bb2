"""The MQTT contract passes the official AsyncAPI parser (``@asyncapi/parser``, pinned by npm).

``test_contract.py`` checks the document's structure in Python; this runs the reference
parser itself: the AsyncAPI 3 JSON Schema of the resolved document, the ``$ref``s into
``schemas/``, and the parser's own rules (operation messages from their channel, channel
parameters, servers). It needs Node.js and npm, and fails, never skips, without them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.mqtt.official_parser import (
    CONTRACT,
    PROJECT,
    ParserSetupError,
    ensure_installed,
    run_validator,
)


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The pinned parser, installed once per lock file (fetched from the npm registry on first use)."""
    try:
        return ensure_installed()
    except ParserSetupError as exc:
        pytest.fail(f"the official AsyncAPI parser check cannot run: {exc}")


def test_the_contract_passes_the_official_asyncapi_parser(node_modules: Path) -> None:
    declared = yaml.safe_load(CONTRACT.read_text())["asyncapi"]
    run = run_validator(CONTRACT, node_modules)
    assert run.returncode == 0, f"@asyncapi/parser found errors in the contract:\n{run.output}"
    # the parser understood the version the document declares, and said so
    assert f"AsyncAPI {declared}, 0 error(s)" in run.output, run.output


def test_a_broken_contract_fails_with_each_error_and_its_path(node_modules: Path, tmp_path: Path) -> None:
    broken = tmp_path / "contract"
    shutil.copytree(CONTRACT.parent, broken)
    doc = yaml.safe_load((broken / "asyncapi.yaml").read_text())
    # an operation on the alerts channel sending the events channel's message
    doc["operations"]["publishAlert"]["messages"] = [{"$ref": "#/channels/events/messages/event"}]
    doc["components"]["messages"]["ack"]["payload"]["schema"]["$ref"] = "schemas/missing.json"
    (broken / "asyncapi.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    run = run_validator(broken / "asyncapi.yaml", node_modules)

    assert run.returncode == 1, run.output
    errors = [line for line in run.output.splitlines() if line.startswith("error ")]
    expected = [
        ("asyncapi3-operation-messages-from-referred-channel", "#/operations/publishAlert/messages/0"),
        ("invalid-ref", "#/components/messages/ack/payload/schema/$ref"),
    ]
    for code, pointer in expected:
        assert any(f"error {code}:" in line and pointer in line for line in errors), run.output
    assert any("missing.json" in line for line in errors), run.output
    assert re.search(r"AsyncAPI \S+, 2 error\(s\)", run.output), run.output


def test_the_parser_is_pinned_to_one_version_by_the_committed_lock() -> None:
    wanted = json.loads((PROJECT / "package.json").read_text())["dependencies"]["@asyncapi/parser"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", wanted), f"pin an exact version, not {wanted!r}"
    lock = json.loads((PROJECT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@asyncapi/parser"]["version"] == wanted
    # parser 3.x reads AsyncAPI 2.x and 3.x documents; the contract declares 3.x
    assert wanted.split(".")[0] == "3"
    assert str(yaml.safe_load(CONTRACT.read_text())["asyncapi"]).startswith("3.")


def test_missing_node_tools_fail_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ParserSetupError, match="npm is not installed"):
        ensure_installed(tmp_path / "cache")
    with pytest.raises(ParserSetupError, match="node is not installed"):
        run_validator(CONTRACT, tmp_path / "node_modules")
