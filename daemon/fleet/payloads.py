"""Validation of the retained payloads the fleet view reads (``status``, ``health``, ``state``).

Every retained payload on a broker is untrusted input: any client the ACL lets publish there
(or a broken table) can leave bytes that are not JSON, are nested a thousand levels deep, are
megabytes long or break the contract. :func:`check` never raises: it returns the parsed
message when the payload is valid against the contract schema of its topic
(``daemon/mqtt/contract/schemas``), else the reason it is not.

Additive fields: a table newer than this tool may publish members the shipped schema does
not know yet (a new release adds them to the contract as optional members). A payload whose
only fault is such unknown *top-level* members is accepted with those members listed in
``ignored``, and the known part is validated in full; the fleet view reads new members it
knows about (``delivery.server_ack``) with their own shape check (:func:`server_ack`).
Signatures are not checked here: the fleet view is an operational display, keys are per
table, and the game server verifies what it settles on (the events).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from daemon.mqtt.contract import load_schema
from daemon.mqtt.envelope import SCHEMA_VERSION

if TYPE_CHECKING:
    import jsonschema

KINDS = ("status", "health", "state")
"""The retained topics the fleet view reads, each validated by the schema of that name."""

MAX_PAYLOAD_BYTES = 1_048_576
"""A retained payload above this is refused unread (a table's state is a few kB)."""

_MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class Checked:
    """One payload's verdict: ``message`` when valid, else ``problem`` says why not."""

    message: dict[str, Any] | None
    problem: str | None = None
    ignored: tuple[str, ...] = field(default=())
    """Unknown top-level members of a valid payload (a newer table's additions)."""


@cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    import jsonschema

    return jsonschema.Draft202012Validator(load_schema(kind))  # no "format" in these schemas


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


_MAX_EXACT = 2**53
"""Numbers beyond this are refused: JSON peers (and the signatures' RFC 8785 form) cannot
carry them exactly, and an infinite one (``1e999``) would break the views and the metrics."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or abs(value) > _MAX_EXACT:
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _exact_int(text: str) -> int:
    if len(text) > 20 or abs(int(text)) > _MAX_EXACT:
        raise ValueError(f"integer {text[:40]} is out of range")
    return int(text)


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, stopping at ``limit``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest >= limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def check(kind: str, topic_table: str, payload: bytes) -> Checked:
    """Parse and validate one retained ``kind`` payload published under ``topic_table``."""
    if kind not in KINDS:
        return Checked(None, f"no fleet schema for {kind!r}")
    if len(payload) > MAX_PAYLOAD_BYTES:
        return Checked(None, f"{len(payload)} bytes, over the {MAX_PAYLOAD_BYTES}-byte limit")
    try:
        message = json.loads(
            payload.decode("utf-8"),
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_exact_int,
        )
    except RecursionError:
        return Checked(None, "not JSON: nested too deeply")
    except (UnicodeDecodeError, ValueError) as exc:
        return Checked(None, f"not JSON: {_short(str(exc))}")
    if not isinstance(message, dict):
        return Checked(None, f"not a JSON object but {type(message).__name__}")
    if _depth(message, _MAX_DEPTH) >= _MAX_DEPTH:
        return Checked(None, f"nested {_MAX_DEPTH} levels or more")
    if message.get("schema_version") != SCHEMA_VERSION:
        return Checked(None, f"schema_version {_short(repr(message.get('schema_version')))} is not 1")
    known = set(load_schema(kind)["properties"])
    ignored = tuple(sorted(name for name in message if name not in known))
    core = {name: value for name, value in message.items() if name in known}
    errors = sorted(_validator(kind).iter_errors(core), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return Checked(None, f"{where}: {_short(first.message)}{more}")
    if message["table_id"] != topic_table:
        return Checked(None, f"table_id {message['table_id']!r} on the topic of table {topic_table!r}")
    return Checked(message, None, ignored)


@dataclass(frozen=True, slots=True)
class ServerAck:
    """The game server's acknowledgement as a table reports it (``health.delivery.server_ack``)."""

    enabled: bool
    seq: int | None
    lag_events: int
    lag_s: float | None


def server_ack(health: dict[str, Any]) -> ServerAck | str | None:
    """``health.delivery.server_ack`` when present and well-formed; None when absent (an older
    table); the problem as text when present but malformed."""
    delivery = health.get("delivery")
    if delivery is None:
        return None
    if not isinstance(delivery, dict):
        return "delivery is not an object"
    ack = delivery.get("server_ack")
    if ack is None:
        return None
    if not isinstance(ack, dict):
        return "delivery.server_ack is not an object"
    enabled, seq, lag_events, lag_s = (ack.get(k) for k in ("enabled", "seq", "lag_events", "lag_s"))
    if not isinstance(enabled, bool):
        return "delivery.server_ack.enabled is not a boolean"
    if seq is not None and (not _is_int(seq) or seq < 0):
        return "delivery.server_ack.seq is not a non-negative integer or null"
    if not isinstance(lag_events, int) or isinstance(lag_events, bool) or lag_events < 0:
        return "delivery.server_ack.lag_events is not a non-negative integer"
    if lag_s is not None and (not _is_number(lag_s) or lag_s < 0):
        return "delivery.server_ack.lag_s is not a non-negative number or null"
    return ServerAck(enabled, seq, lag_events, None if lag_s is None else float(lag_s))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(float(value))  # type: ignore[arg-type]


def _short(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (a hostile payload's text never floods the view)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
