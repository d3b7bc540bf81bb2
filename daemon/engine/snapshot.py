"""The engine's retained state: ``Engine.snapshot()`` (topic ``…/state``, ``README.md``, "Snapshot")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.engine.events import EventKind
from daemon.engine.rounds import RoundState
from daemon.engine.settings import RevealMode
from daemon.engine.squeeze import public_data, seal, shown_cards, unrevealed
from daemon.engine.state import TableState


def snapshot(
    st: TableState, decks: int, variant: str, blockers: Callable[[RoundState], list[str]]
) -> dict[str, Any]:
    """JSON-ready current state of a table whose shoe is dealt with ``decks`` and ``variant``;
    ``blockers`` says what holds a round back. A squeeze table's state shows no card before it is
    revealed (``squeeze_view``)."""
    view = _snapshot(st, decks, variant, blockers)
    if st.settings.reveal.mode is RevealMode.SQUEEZE:
        squeeze_view(st, view)
    return view


def _snapshot(
    st: TableState, decks: int, variant: str, blockers: Callable[[RoundState], list[str]]
) -> dict[str, Any]:
    rnd = st.round
    return {
        "shoe": {
            "shoe_id": st.shoe_id,
            "phase": st.phase,
            "decks": decks,
            "cards_out": st.cards_out,
            "burn_remaining": st.burn_remaining,
            "round_burn_remaining": st.round_burn_remaining,
            "cut_card_seen": st.cut_card_seen,
            "last_hand": st.last_hand,
            "end_reason": st.shoe_end_reason,
        },
        "variant": variant,
        "hand": st.hand,
        "round": None if rnd is None else _round_view(rnd, blockers, st.round_ids),
        "offered_bets": {"hand": st.offered_hand, "bets": list(st.offered_bets)},
        "alerts": [dict(a) for a in st.alerts.values()],
        "held_rounds": [_round_view(r, blockers, st.round_ids) for _, r in sorted(st.held.items())],
        "rescan_needed": st.rescan_alert is not None,
        "disconnected_devices": list(st.disconnected),
        "storage": {
            "full": st.storage_full,
            "detail": st.storage_detail,
            "refused_cards": st.storage_refused,
        },
        "reads_waiting_in_pull": len(st.held_reads),
        "game_flow": {
            "phase": st.flow_phase,
            "round_id": st.flow_round_id,
            "closes_at": st.flow_closes_at,
            "last_round_id": st.last_round_id,
            "burn_signalled": st.burn_signalled,
        },
        "dealer": None if st.dealer is None else dict(st.dealer),
        "results": [
            {
                "hand": r["hand"],
                "winner": r["winner"],
                "totals": list(r["totals"]),
                "pairs": list(r["pairs"]),
                "naturals": list(r["naturals"]),
            }
            for r in st.results
        ],
    }


def _round_view(
    rnd: RoundState, blockers: Callable[[RoundState], list[str]], round_ids: dict[int, str]
) -> dict[str, Any]:
    view = rnd.to_dict()
    view["round_id"] = round_ids.get(rnd.hand)
    player, banker = rnd.sides()
    view["player_total"] = sum(c.points for c in player) % 10
    view["banker_total"] = sum(c.points for c in banker) % 10
    view["next_slot"] = rnd.next_slot()
    view["blocked_by"] = blockers(rnd)
    return view


def squeeze_view(st: TableState, view: dict[str, Any]) -> None:
    """A squeeze table's retained state: each round's unrevealed cards ``null`` beside their
    ``commitments``; no totals and no next slot while a dealt card is unrevealed (they would tell
    the hidden faces); the alerts without the cards they name."""
    rounds = [] if st.round is None else [(st.round, view["round"])]
    rounds += [(st.held[r["hand"]], r) for r in view["held_rounds"]]
    for rnd, shown in rounds:
        hidden = unrevealed(st, rnd)
        shown["cards"] = shown_cards(st, rnd)
        shown["commitments"] = {
            entry["slot"]: entry["commitment"]
            for entry in st.sealed_slots.values()
            if entry["hand"] == rnd.hand
        }
        if hidden:
            shown["player_total"] = shown["banker_total"] = None
            if len(rnd.cards) >= 4:
                shown["next_slot"] = None
    view["alerts"] = [public_data(seal(EventKind.ALERT_RAISED, dict(a), None)) for a in view["alerts"]]
