"""Dealers' pace and accuracy as Prometheus gauges (text format 0.0.4).

Input: per table, the report of :class:`daemon.journal.pace.PaceTracker` (computed from the
table's journal, so the figures survive restarts). Every series is labelled ``table`` and
``dealer`` (``dealer=""``: rounds dealt with no dealer known; ``dealer="*"``: the whole
table); a figure not known yet (rounds per hour before the first round) has no sample.
"""

from __future__ import annotations

from typing import Any

PHASES = ("betting", "dealing", "settling")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _sample(name: str, value: float | int, **labels: str) -> str:
    text = ",".join(f'{key}="{_escape(val)}"' for key, val in labels.items())
    number = repr(float(value)) if isinstance(value, float) else str(value)
    return f"{name}{{{text}}} {number}"


def pace_exposition(reports: dict[str, dict[str, Any]]) -> str:
    """The scrape body for ``{table_id: PaceTracker.report()}``."""
    families: dict[str, tuple[str, list[str]]] = {
        "baccarat_edge_pace_rounds": ("Rounds decided, by table and dealer.", []),
        "baccarat_edge_pace_rounds_per_hour": (
            "Rounds per hour of betting, dealing and settling time, by table and dealer.",
            [],
        ),
        "baccarat_edge_pace_round_phase_seconds": (
            "Mean seconds per round in each phase (betting, dealing, settling).",
            [],
        ),
        "baccarat_edge_pace_mistakes_per_100_rounds": (
            "Dealing mistakes per 100 rounds, by kind (the alert code).",
            [],
        ),
    }
    for table_id, report in sorted(reports.items()):
        rows = [("*", report["table"]), *sorted(report["dealers"].items())]
        for dealer, figures in rows:
            labels = {"table": table_id, "dealer": dealer}
            families["baccarat_edge_pace_rounds"][1].append(
                _sample("baccarat_edge_pace_rounds", int(figures["rounds"]), **labels)
            )
            if figures["rounds_per_hour"] is not None:
                families["baccarat_edge_pace_rounds_per_hour"][1].append(
                    _sample("baccarat_edge_pace_rounds_per_hour", float(figures["rounds_per_hour"]), **labels)
                )
            for phase in PHASES:
                families["baccarat_edge_pace_round_phase_seconds"][1].append(
                    _sample(
                        "baccarat_edge_pace_round_phase_seconds",
                        float(figures["seconds_per_round"][phase]),
                        **labels,
                        phase=phase,
                    )
                )
            for kind, per_100 in figures["mistakes_per_100_rounds"].items():
                if per_100 is not None:
                    families["baccarat_edge_pace_mistakes_per_100_rounds"][1].append(
                        _sample(
                            "baccarat_edge_pace_mistakes_per_100_rounds", float(per_100), **labels, kind=kind
                        )
                    )
    out: list[str] = []
    for name, (help_text, samples) in families.items():
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples]
    return "\n".join(out) + "\n"
