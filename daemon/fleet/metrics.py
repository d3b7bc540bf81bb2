"""Prometheus text exposition (format 0.0.4) of the fleet's figures, one series per table.

Every figure of :class:`~daemon.fleet.tables.TableSummary` that a rule can use is a gauge
labelled ``table``; a figure a table does not report (an older table without the server
acknowledgement, a table without retained health) has no sample rather than a made-up 0.
Label values are escaped as the format requires (a hostile table id cannot exist: ids are
validated against the topic rule before they are stored, but versions and variants come from
payloads). ``config/prometheus/baccarat-edge-rules.yml`` holds example alert rules.
"""

from __future__ import annotations

from collections.abc import Iterable

from daemon.fleet.pace_metrics import pace_exposition
from daemon.fleet.tables import TableSummary

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_KINDS = ("status", "health", "state")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    pairs = list(pairs)
    if not pairs:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


class _Family:
    """One metric family: HELP, TYPE, then its samples."""

    def __init__(self, name: str, help_text: str, kind: str = "gauge") -> None:
        self.name = name
        self.help = help_text
        self.kind = kind
        self.samples: list[str] = []

    def add(self, value: float | bool | None, **labels: str) -> None:
        if value is None:
            return
        number = int(value) if isinstance(value, bool) else value
        self.samples.append(f"{self.name}{_labels(labels.items())} {_number(number)}")

    def text(self) -> str:
        head = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        return "\n".join(head + self.samples)


def exposition(summaries: list[TableSummary], messages: int, connected: bool, invalid_topics: int) -> str:
    """The whole scrape body for the tables in ``summaries``."""
    f = {
        name: _Family(name, help_text)
        for name, help_text in (
            ("baccarat_table_up", "1 when the table's retained status is online (0 offline or stale)"),
            ("baccarat_table_info", "Always 1; the labels carry the table's version, config digest, variant"),
            ("baccarat_table_status_since_timestamp_seconds", "When the table's current status was set"),
            ("baccarat_table_last_seen_timestamp_seconds", "Newest ts of the table's status, health, state"),
            ("baccarat_table_health_age_seconds", "Age of the table's last retained health report"),
            ("baccarat_table_level", "The fleet view's verdict: 0 ok, 1 warning, 2 critical"),
            ("baccarat_table_hand", "The hand number in the current shoe"),
            ("baccarat_table_last_seq", "The newest event seq the table journaled"),
            ("baccarat_table_last_card_age_seconds", "Seconds since the table's newest card read"),
            ("baccarat_table_undelivered_events", "Events journaled, not yet acknowledged by the broker"),
            ("baccarat_table_oldest_undelivered_age_seconds", "Age of the oldest undelivered event"),
            ("baccarat_table_server_ack_enabled", "1 when the table expects the game server's ack"),
            ("baccarat_table_server_ack_lag_events", "Events the game server has not acknowledged yet"),
            ("baccarat_table_server_ack_lag_seconds", "How long the oldest unacknowledged event waits"),
            ("baccarat_table_open_alerts", "Open alerts by the catalogue's severity"),
            ("baccarat_table_readers_disconnected", "Readers or cameras the table reports disconnected"),
            ("baccarat_table_payload_valid", "1 when the table's retained payload of that topic is valid"),
        )
    }
    for s in summaries:
        t = s.table_id
        f["baccarat_table_up"].add(s.status == "online", table=t)
        f["baccarat_table_info"].add(
            1,
            table=t,
            version=s.version or "",
            config_digest=s.config_digest or "",
            variant=s.variant or "",
        )
        f["baccarat_table_status_since_timestamp_seconds"].add(s.status_since, table=t)
        f["baccarat_table_last_seen_timestamp_seconds"].add(s.last_seen, table=t)
        f["baccarat_table_health_age_seconds"].add(s.health_age_s, table=t)
        f["baccarat_table_level"].add({"ok": 0, "warning": 1, "critical": 2}[s.level], table=t)
        f["baccarat_table_hand"].add(s.hand, table=t)
        f["baccarat_table_last_seq"].add(s.last_seq, table=t)
        f["baccarat_table_last_card_age_seconds"].add(s.last_card_age_s, table=t)
        f["baccarat_table_undelivered_events"].add(s.backlog, table=t)
        f["baccarat_table_oldest_undelivered_age_seconds"].add(s.oldest_undelivered_age_s, table=t)
        if s.ack is not None:
            f["baccarat_table_server_ack_enabled"].add(s.ack.enabled, table=t)
            if s.ack.enabled:
                f["baccarat_table_server_ack_lag_events"].add(s.ack.lag_events, table=t)
                f["baccarat_table_server_ack_lag_seconds"].add(s.ack.lag_s, table=t)
        for severity, count in sorted(s.alerts.items()):
            f["baccarat_table_open_alerts"].add(count, table=t, severity=severity)
        f["baccarat_table_readers_disconnected"].add(len(s.readers_disconnected), table=t)
        for kind in _KINDS:
            if kind not in s.missing:
                f["baccarat_table_payload_valid"].add(kind not in s.invalid, table=t, topic=kind)
    fleet = [
        _Family("baccarat_fleet_tables", "Tables with at least one retained topic on the broker"),
        _Family("baccarat_fleet_broker_connected", "1 while the exporter's broker connection is up"),
        _Family("baccarat_fleet_messages_received_total", "Messages the exporter received", "counter"),
        _Family(
            "baccarat_fleet_ignored_topics_total", "Messages on topics whose table id is invalid", "counter"
        ),
    ]
    fleet[0].add(len(summaries))
    fleet[1].add(connected)
    fleet[2].add(messages)
    fleet[3].add(invalid_topics)
    families = [*f.values(), *fleet]
    body = "\n".join(fam.text() for fam in families) + "\n"
    paces = {s.table_id: s.pace for s in summaries if s.pace is not None}
    return body + pace_exposition(paces) if paces else body
