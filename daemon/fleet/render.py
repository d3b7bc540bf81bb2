"""The fleet's terminal view and its JSON form (one object per table, worst first)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from daemon.fleet.tables import TableSummary

_COLOURS = {"critical": "\x1b[31m", "warning": "\x1b[33m", "ok": "\x1b[32m"}
_RESET = "\x1b[0m"


def as_json(summaries: list[TableSummary], now: float, messages: int, complete: bool = True) -> str:
    """The ``--json`` document: collection facts, counts by level, then every table."""
    levels = {level: sum(1 for s in summaries if s.level == level) for level in ("critical", "warning", "ok")}
    document = {
        "collected_at": now,
        "messages": messages,
        "complete": complete,
        "tables": len(summaries),
        "levels": levels,
        "table_summaries": [_table_json(s) for s in summaries],
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False, indent=1)


def _table_json(summary: TableSummary) -> dict[str, Any]:
    data = asdict(summary)
    data["problems"] = [{"level": level, "text": text} for level, text in summary.problems]
    return data


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def _text(value: object, width: int) -> str:
    """A cell: control characters of hostile payloads removed, cut to ``width``."""
    text = "-" if value is None else "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= width else text[: width - 1] + "…"


_COLUMNS = (
    ("TABLE", 12),
    ("STATUS", 16),
    ("VERSION", 9),
    ("CONFIG", 8),
    ("VARIANT", 14),
    ("SHOE", 18),
    ("HAND", 4),
    ("CARD", 5),
    ("BACKLOG", 9),
    ("ACK LAG", 11),
    ("ALERTS", 7),
)


def render_table(
    summaries: list[TableSummary], now: float, colour: bool = False, limit: int | None = None
) -> str:
    """The terminal view: a header of counts, one row per table worst first, then each
    problem of the tables that have some (at most ``limit`` tables listed)."""
    levels = {level: sum(1 for s in summaries if s.level == level) for level in ("critical", "warning", "ok")}
    online = sum(1 for s in summaries if s.status == "online")
    lines = [
        f"{len(summaries)} tables: {online} online, {levels['critical']} critical, "
        f"{levels['warning']} warning, {levels['ok']} ok",
        "  ".join(name.ljust(width) for name, width in _COLUMNS).rstrip(),
    ]
    shown = summaries if limit is None else summaries[:limit]
    for s in shown:
        since = s.status_since if s.status != "offline" else s.last_seen
        status = f"{s.status} {_age(None if since is None else max(0.0, now - since))}"
        ack = (
            "-"
            if s.ack is None
            else ("off" if not s.ack.enabled else f"{s.ack.lag_events}/{_age(s.ack.lag_s)}")
        )
        backlog = "-" if s.backlog is None else f"{s.backlog}/{_age(s.oldest_undelivered_age_s)}"
        alerts = f"{s.alerts['critical']}c{s.alerts['warning']}w"
        shoe = None if s.shoe_id is None else f"{s.shoe_id}:{s.shoe_phase}"
        cells = (
            s.table_id,
            status,
            s.version,
            None if s.config_digest is None else s.config_digest[:8],
            s.variant,
            shoe,
            s.hand,
            _age(s.last_card_age_s),
            backlog,
            ack,
            alerts,
        )
        row = "  ".join(_text(v, w).ljust(w) for v, (_n, w) in zip(cells, _COLUMNS, strict=True)).rstrip()
        lines.append(f"{_COLOURS[s.level]}{row}{_RESET}" if colour else row)
    if limit is not None and len(summaries) > limit:
        lines.append(f"... {len(summaries) - limit} more tables (--limit, or --json for all)")
    troubled = [s for s in shown if s.problems]
    if troubled:
        lines.append("")
        lines.append("problems (worst first):")
        for s in troubled:
            for level, text in s.problems:
                lines.append(f"  {_text(s.table_id, 64)}  {level:<8}  {_text(text, 200)}")
    return "\n".join(lines)
