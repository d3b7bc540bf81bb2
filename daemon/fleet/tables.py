"""What the fleet knows of each table, and the one-line summary of it the views print.

:class:`Fleet` keeps, per table, the last retained ``status``, ``health`` and ``state``
(validated by :mod:`daemon.fleet.payloads`; an invalid one is kept as its problem, never
as data). :func:`summarize` turns one table's record into a :class:`TableSummary` at a given
time: the figures of the terminal view, the ``--json`` output and the Prometheus exporter,
computed once so the three never disagree.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from daemon.alerts import ALERTS, AlertCode, Severity
from daemon.fleet.payloads import KINDS, Checked, ServerAck, check, server_ack
from daemon.mqtt.topics import PREFIX, TopicError, validate_table_id

SUBSCRIPTIONS = tuple(f"{PREFIX}/+/{kind}" for kind in KINDS)
"""The topic filters the fleet view subscribes to."""

STALE_AFTER_S = 60.0
"""Default: an ``online`` table whose last health report is older than this is ``stale``
(six missed reports at the daemon's default ``delivery.health_interval_s`` of 10 s)."""


@dataclass(slots=True)
class Slot:
    """The last payload of one retained topic: the message, or why it was refused."""

    message: dict[str, Any] | None = None
    problem: str | None = None
    ignored: tuple[str, ...] = ()


@dataclass(slots=True)
class TableRecord:
    """Every retained topic of one table as last received."""

    table_id: str
    slots: dict[str, Slot] = field(default_factory=dict)


class Fleet:
    """Thread-safe store of the tables seen on a broker (fed from the MQTT network thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, TableRecord] = {}
        self.ignored_topics = 0
        """Messages on a matching filter whose table id is not a valid one (never stored)."""

    def receive(self, topic: str, payload: bytes) -> None:
        """Store one message of ``baccarat/v1/<table>/<kind>``; an empty payload clears it."""
        parts = topic.split("/")
        if len(parts) != 4 or f"{parts[0]}/{parts[1]}" != PREFIX or parts[3] not in KINDS:
            with self._lock:
                self.ignored_topics += 1
            return
        table_id, kind = parts[2], parts[3]
        try:
            validate_table_id(table_id)
        except TopicError:
            with self._lock:
                self.ignored_topics += 1
            return
        checked = check(kind, table_id, payload) if payload else Checked(None, None)
        with self._lock:
            record = self._tables.setdefault(table_id, TableRecord(table_id))
            if not payload:  # a retained message deleted: the topic is empty again
                record.slots.pop(kind, None)
                if not record.slots:
                    del self._tables[table_id]
                return
            record.slots[kind] = Slot(checked.message, checked.problem, checked.ignored)

    def records(self) -> list[TableRecord]:
        """A copy of every table's record."""
        with self._lock:
            return [TableRecord(r.table_id, dict(r.slots)) for r in self._tables.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._tables)


@dataclass(frozen=True, slots=True)
class TableSummary:
    """One table's figures at ``now`` (seconds since the epoch). None: not known."""

    table_id: str
    level: str
    """``critical``, ``warning`` or ``ok``: the worst of ``problems``."""
    problems: tuple[tuple[str, str], ...]
    """(level, text) for everything that needs a look, worst first."""
    status: str
    """``online``, ``offline``, ``stale`` (online, health too old), ``unknown`` (no valid status)."""
    status_since: float | None
    last_seen: float | None
    version: str | None
    config_digest: str | None
    variant: str | None
    shoe_id: str | None
    shoe_phase: str | None
    hand: int | None
    last_seq: int | None
    last_card_age_s: float | None
    backlog: int | None
    oldest_undelivered_age_s: float | None
    ack: ServerAck | None
    alerts: dict[str, int]
    """Open alerts by severity (``critical``, ``warning``)."""
    alert_codes: tuple[str, ...]
    readers_disconnected: tuple[str, ...]
    health_age_s: float | None
    invalid: dict[str, str]
    """Topic kind -> why its retained payload was refused."""
    missing: tuple[str, ...]
    ignored_fields: dict[str, tuple[str, ...]]
    pace: dict[str, Any] | None = None
    """``health.pace``: the table's pace per dealer and in all (None from tables older than it)."""

    def sort_key(self) -> tuple[int, int, int, float, str]:
        """Worst first: level, then critical alerts, backlog, ack lag, then table id."""
        rank = {"critical": 0, "warning": 1, "ok": 2}[self.level]
        lag = self.ack.lag_s if self.ack is not None and self.ack.lag_s is not None else 0.0
        return (rank, -self.alerts.get("critical", 0), -(self.backlog or 0), -lag, self.table_id)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a figure becomes a problem (the terminal view's colours and the worst-first order)."""

    stale_after_s: float = STALE_AFTER_S
    backlog_age_s: float = 30.0
    """Warn when the oldest undelivered event is older than this."""
    ack_lag_s: float = 30.0
    """Warn when the game server's acknowledgement lags this much."""
    card_age_s: float | None = None
    """Warn when no card came for this long (None: never; tables pause between shoes)."""


def summarize(record: TableRecord, now: float, limits: Thresholds | None = None) -> TableSummary:
    """The figures of one table at ``now``."""
    limits = limits or Thresholds()
    problems: list[tuple[str, str]] = []
    status_msg, health, state = (_message(record, k) for k in ("status", "health", "state"))
    invalid = {k: s.problem for k, s in record.slots.items() if s.problem is not None}
    missing = tuple(k for k in KINDS if k not in record.slots)
    for kind, why in sorted(invalid.items()):
        problems.append(("critical", f"invalid {kind}: {why}"))
    for kind in missing:
        problems.append(("warning", f"no retained {kind}"))

    seen = [m["ts"] for m in (status_msg, health, state) if m is not None]
    last_seen = max(seen) if seen else None
    health_age = None if health is None else max(0.0, now - health["ts"])
    status = "unknown" if status_msg is None else status_msg["status"]
    if status == "online" and health_age is not None and health_age > limits.stale_after_s:
        status = "stale"
    if status == "offline":
        problems.append(("critical", "offline"))
    elif status == "stale":
        problems.append(("critical", f"online but no health report for {health_age:.0f} s"))

    snapshot = state["state"] if state is not None else None
    alerts, codes = _open_alerts(snapshot, health)
    for code in codes:
        problems.append((_severity(code), f"alert {code}"))

    readers_down = _disconnected(snapshot, health)
    if readers_down:
        problems.append(("critical", f"reader disconnected: {', '.join(readers_down)}"))

    backlog = None if health is None else health["queue_depth"]
    oldest = None if health is None else health["oldest_undelivered_age_s"]
    if oldest is not None and oldest > limits.backlog_age_s:
        problems.append(("warning", f"{backlog} undelivered, oldest {oldest:.0f} s"))
    if health is not None:
        if not health["running"]:
            problems.append(("critical", "publisher not running"))
        if health["journal"]["full"]:
            problems.append(("critical", "journal full"))

    ack = None
    if health is not None:
        parsed = server_ack(health)
        if isinstance(parsed, str):
            problems.append(("warning", f"health {parsed}"))
        else:
            ack = parsed
    if ack is not None and ack.enabled and ack.lag_s is not None and ack.lag_s > limits.ack_lag_s:
        problems.append(("warning", f"game server ack lags {ack.lag_events} events, {ack.lag_s:.0f} s"))

    card_age = _last_card_age(health, now)
    if limits.card_age_s is not None and card_age is not None and card_age > limits.card_age_s:
        problems.append(("warning", f"no card for {card_age:.0f} s"))

    problems.sort(key=lambda p: p[0] != "critical")
    level = problems[0][0] if problems else "ok"
    shoe = snapshot["shoe"] if snapshot is not None else None
    return TableSummary(
        table_id=record.table_id,
        level=level,
        problems=tuple(problems),
        status=status,
        status_since=None if status_msg is None else status_msg["ts"],
        last_seen=last_seen,
        version=None if status_msg is None else status_msg.get("version"),
        config_digest=None if status_msg is None else status_msg.get("config_digest"),
        variant=None if snapshot is None else snapshot["variant"],
        shoe_id=None if shoe is None else shoe["shoe_id"],
        shoe_phase=None if shoe is None else shoe["phase"],
        hand=None if snapshot is None else snapshot["hand"],
        last_seq=_last_seq(health, state),
        last_card_age_s=card_age,
        backlog=backlog,
        oldest_undelivered_age_s=oldest,
        ack=ack,
        alerts=alerts,
        alert_codes=tuple(codes),
        readers_disconnected=readers_down,
        health_age_s=health_age,
        invalid=invalid,
        missing=missing,
        ignored_fields={k: s.ignored for k, s in record.slots.items() if s.ignored},
        pace=None if health is None else health.get("pace"),
    )


def worst_first(
    records: list[TableRecord], now: float, limits: Thresholds | None = None
) -> list[TableSummary]:
    """Every table summarized, the worst first."""
    return sorted((summarize(r, now, limits) for r in records), key=TableSummary.sort_key)


def _message(record: TableRecord, kind: str) -> dict[str, Any] | None:
    slot = record.slots.get(kind)
    return None if slot is None else slot.message


def _severity(code: str) -> str:
    """The catalogue's severity of an alert code; an unknown code counts as critical (a
    newer table's alert this tool cannot judge must not look harmless)."""
    try:
        return ALERTS[AlertCode(code)].severity.value
    except ValueError:
        return Severity.CRITICAL.value


def _open_alerts(
    snapshot: dict[str, Any] | None, health: dict[str, Any] | None
) -> tuple[dict[str, int], list[str]]:
    """Open alerts by severity and their codes: the engine's (state) and the publisher's
    delivery alert (health ``delivery_failing``)."""
    codes = [a["code"] for a in snapshot["alerts"]] if snapshot is not None else []
    if health is not None and "delivery_failing" in health:
        codes.append(AlertCode.MQTT_DELIVERY_FAILING.value)
    counts = {Severity.CRITICAL.value: 0, Severity.WARNING.value: 0}
    for code in codes:
        counts[_severity(code)] += 1
    return counts, codes


def _disconnected(snapshot: dict[str, Any] | None, health: dict[str, Any] | None) -> tuple[str, ...]:
    """Devices the engine lists as disconnected, and readers whose health says so."""
    names = set(snapshot["disconnected_devices"]) if snapshot is not None else set()
    devices = health.get("devices") if health is not None else None
    if isinstance(devices, dict) and "error" not in devices:
        for name, block in devices.items():
            # a device still "opening" (the daemon just started) has no open result yet: not down
            down = (
                isinstance(block, dict)
                and block.get("connected") is False
                and block.get("state") != "opening"
            )
            if name != "engine" and down:
                names.add(name)
    return tuple(sorted(names))


def _last_card_age(health: dict[str, Any] | None, now: float) -> float | None:
    """Seconds since the newest ``last_read_at`` of any device (None: no card read yet)."""
    devices = health.get("devices") if health is not None else None
    if not isinstance(devices, dict):
        return None
    reads = [
        block["last_read_at"]
        for name, block in devices.items()
        if name != "engine" and isinstance(block, dict) and isinstance(block.get("last_read_at"), int | float)
    ]
    return max(0.0, now - max(reads)) if reads else None


def _last_seq(health: dict[str, Any] | None, state: dict[str, Any] | None) -> int | None:
    seqs = [m["last_seq"] for m in (health, state) if m is not None]
    return max(seqs) if seqs else None
