"""The alert catalogue (``daemon/alerts.py``) holds every alert the product raises.

The daemon's source is scanned for alert codes written as string literals, so a new alert
cannot be raised without its catalogue entry; the MQTT contract's codes must be catalogued
with the fields it requires; the engine's alerts in every golden fixture are as catalogued.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from daemon.alerts import (
    ALERT_EVENT_KINDS,
    ALERTS,
    HOLDING_CODES,
    AlertCode,
    IdScheme,
    RaisedBy,
    cleared_alert,
    engine_alert_id,
    engine_alert_number,
    new_alert_id,
    raised_alert,
)
from daemon.mqtt.contract import load_schema
from tests.conftest import REPO_ROOT
from tests.engine.support import assert_engine_alert_as_catalogued

DAEMON = REPO_ROOT / "daemon"


def _is_code_expr(node: ast.expr) -> bool:
    """``x["code"]``, ``x.get("code")`` or a name ending in ``code`` (an alert's code)."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "code"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "code"
    return isinstance(node, ast.Name) and node.id.endswith("code")


def _strings(node: ast.expr) -> Iterator[tuple[int, str]]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.lineno, node.value
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for item in node.elts:
            yield from _strings(item)


def alert_code_literals(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """String literals used as alert codes: the value of a ``"code"`` key in a dict display
    that also has an ``"alert_id"`` key, a ``code=`` keyword argument of a call about alerts,
    the value of a constant named ``*_ALERT`` or ``*_CODE``, and a literal compared with an
    alert's code (``d["code"] == "..."``, ``d.get("code") in (...)``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if "alert_id" in keys:
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code":
                        yield from _strings(value)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.endswith(("_ALERT", "_CODE")):
                    yield from _strings(node.value)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_code_expr(side) for side in sides):
                for side in sides:
                    yield from _strings(side)
        elif isinstance(node, ast.Call) and "alert" in ast.unparse(node.func).lower():
            for keyword in node.keywords:
                if keyword.arg == "code":
                    yield from _strings(keyword.value)


def _scan(source: str) -> set[str]:
    return {code for _, code in alert_code_literals(ast.parse(source))}


def test_the_scan_finds_each_way_a_code_is_written() -> None:
    source = """
A_ALERT = "a_alert"
b = {"alert_id": i, "code": "b_code", "message": m}
c = {"command_id": i, "code": refusal.code}
if data.get("code") == "d_code" or alert["code"] in ("e_code", "f_code"):
    pass
self._raise_alert(code="g_code")
log.error("journal_write_failed", code="h_not_alert")
"""
    assert _scan(source) == {"a_alert", "b_code", "d_code", "e_code", "f_code", "g_code"}


def test_every_alert_code_written_in_the_daemon_is_catalogued() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted(DAEMON.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"), filename=str(path))
        for line, code in alert_code_literals(tree):
            found.setdefault(code, []).append(f"{path.relative_to(REPO_ROOT)}:{line}")
    # Every part raises by AlertCode member: a code written as text bypasses the catalogue.
    assert not found, f"alert codes written as text instead of AlertCode members: {found}"


def test_every_code_has_one_entry_and_ids_follow_their_scheme() -> None:
    assert list(ALERTS) == list(AlertCode)
    assert {code for code, spec in ALERTS.items() if spec.holds} == HOLDING_CODES
    for code, spec in ALERTS.items():
        assert spec.summary, code
        assert spec.clears, code
        assert {"alert_id", "code"} <= set(spec.fields), code
        assert spec.raised_by is RaisedBy.ENGINE or not spec.holds, code  # only the engine holds rounds
        assert (spec.id_scheme is IdScheme.ENGINE) == (spec.raised_by is RaisedBy.ENGINE), code
        assert ("severity" in spec.fields) == (spec.raised_by is not RaisedBy.ENGINE), code
    assert engine_alert_id("S1", 3) == "S1:a3"
    assert engine_alert_id(None, 1) == "noshoe:a1"
    assert engine_alert_number("shoe-1-2000:a12") == 12
    assert IdScheme.ENGINE.pattern.fullmatch("noshoe:a1")
    assert IdScheme.DELIVERY.pattern.fullmatch("delivery-0123456789ab")
    assert IdScheme.JOURNAL.pattern.fullmatch("journal-0123456789ab")
    assert IdScheme.ENGINE_ERROR.pattern.fullmatch("engine-error-0123456789ab")
    assert not IdScheme.DELIVERY.pattern.fullmatch("delivery-0123")


def _contract_codes(node: Any) -> Iterator[tuple[str, list[str]]]:
    """(code, the data fields the contract requires with it) for each ``alert_raised`` rule
    of the event schema that names a code."""
    if isinstance(node, dict):
        cond = node.get("if", {}).get("properties", {})
        code = cond.get("data", {}).get("properties", {}).get("code", {}).get("const")
        if cond.get("kind", {}).get("const") == "alert_raised" and isinstance(code, str):
            yield code, node.get("then", {}).get("properties", {}).get("data", {}).get("required", [])
        for value in node.values():
            yield from _contract_codes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _contract_codes(item)


def test_the_contract_and_the_catalogue_agree() -> None:
    named = dict(_contract_codes(load_schema("event")))
    assert {"mqtt_dead_letter", "journal_recovered"} <= set(named)
    for code, required in named.items():
        assert code in set(AlertCode), f"the contract names {code!r}, the catalogue does not"
        missing = set(required) - set(ALERTS[AlertCode(code)].fields)
        assert not missing, f"{code}: the contract requires {missing}, the catalogue omits them"


def _fixture_alerts() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((REPO_ROOT / "hw-fixtures").glob("*.expected.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            event = json.loads(line)
            if event["kind"] == "alert_raised":
                out.append((path.name, event["data"]))
    return out


FIXTURE_ALERTS = _fixture_alerts()
FIXTURE_IDS = [f"{name}:{data['alert_id']}" for name, data in FIXTURE_ALERTS]


def test_the_fixtures_raise_alerts() -> None:
    assert len({data["code"] for _, data in FIXTURE_ALERTS}) >= 5


@pytest.mark.parametrize(("name", "data"), FIXTURE_ALERTS, ids=FIXTURE_IDS)
def test_every_fixture_alert_is_as_catalogued(name: str, data: dict[str, Any]) -> None:
    assert_engine_alert_as_catalogued(data)


def test_the_engine_readme_lists_exactly_the_engine_codes() -> None:
    readme = (DAEMON / "engine" / "README.md").read_text("utf-8")
    table = readme.split("## Alerts", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE))
    assert listed == {code for code, spec in ALERTS.items() if spec.raised_by is RaisedBy.ENGINE}


def _example_fields(code: AlertCode) -> dict[str, Any]:
    own = [f for f in ALERTS[code].fields if f not in ("alert_id", "code", "severity", "message")]
    return {name: f"{name}-value" for name in own}


@pytest.mark.parametrize("code", [c for c, s in ALERTS.items() if s.raised_by is not RaisedBy.ENGINE])
def test_the_constructor_builds_each_publisher_and_service_alert_as_catalogued(code: AlertCode) -> None:
    spec = ALERTS[code]
    data = raised_alert(code, "what happened", _example_fields(code))
    assert list(data) == list(spec.fields)
    assert spec.id_scheme.pattern.fullmatch(data["alert_id"])
    assert data["code"] is code
    assert data["severity"] is spec.severity
    assert data["message"] == "what happened"
    assert raised_alert(code, "again", _example_fields(code))["alert_id"] != data["alert_id"]


def test_the_constructor_refuses_fields_the_catalogue_does_not_list() -> None:
    fields = _example_fields(AlertCode.MQTT_DEAD_LETTER)
    with pytest.raises(ValueError, match=r"missing \['seq'\]"):
        raised_alert(AlertCode.MQTT_DEAD_LETTER, "m", {k: v for k, v in fields.items() if k != "seq"})
    with pytest.raises(ValueError, match=r"not listed \['hand'\]"):
        raised_alert(AlertCode.MQTT_DEAD_LETTER, "m", {**fields, "hand": 3})
    with pytest.raises(ValueError, match="raised by the engine"):
        raised_alert(AlertCode.RESCAN_NEEDED, "m", {})
    with pytest.raises(ValueError, match="numbered by the engine"):
        new_alert_id(IdScheme.ENGINE)


def test_an_alert_is_cleared_only_when_its_entry_says_it_can_be() -> None:
    assert cleared_alert("delivery-0123456789ab", AlertCode.MQTT_DELIVERY_FAILING, "back") == {
        "alert_id": "delivery-0123456789ab",
        "code": AlertCode.MQTT_DELIVERY_FAILING,
        "message": "back",
    }
    with pytest.raises(ValueError, match="never cleared"):
        cleared_alert("journal-0123456789ab", AlertCode.JOURNAL_RECOVERED, "m")


def test_the_alert_event_kinds_are_the_engines() -> None:
    from daemon.engine.events import EventKind

    assert {EventKind.ALERT_RAISED, EventKind.ALERT_CLEARED} == ALERT_EVENT_KINDS
