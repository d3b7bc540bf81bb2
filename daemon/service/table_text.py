"""The technician's plain-ANSI screen of one table: :func:`render` draws a :class:`TableView`.

No curses: the monitor and the console's ``--demo`` write the frame after a clear-screen code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.cards import Card, CardParseError, hand_total
from common.slots import BANKER_SLOTS, PLAYER_SLOTS
from daemon.rules.roads import bead_plate, big_road, big_road_grid
from daemon.service.table_view import TableView

_SUIT_SYMBOL = {"c": "♣", "d": "♦", "h": "♥", "s": "♠"}
FACE_DOWN = "▒▒"
"""A squeeze slot dealt face down and not revealed yet: never its face, never a total with it."""
_RESET, _BOLD, _DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"
_COLOURS = {"P": "\x1b[34m", "B": "\x1b[31m", "T": "\x1b[32m", "alert": "\x1b[33m"}


def _card_text(code: str) -> str:
    if len(code) >= 2:
        return code[:-1] + _SUIT_SYMBOL.get(code[-1], code[-1])
    return code


def render(view: TableView, *, colour: bool = True, road_columns: int = 30) -> str:
    """The whole screen as text (ANSI colours when ``colour``)."""

    def paint(key: str, text: str) -> str:
        return f"{_COLOURS[key]}{text}{_RESET}" if colour and key in _COLOURS else text

    def bold(text: str) -> str:
        return f"{_BOLD}{text}{_RESET}" if colour else text

    lines: list[str] = []
    status = view.status or "unknown"
    hand = view.hand if view.hand is not None else "-"
    lines.append(
        bold(f"Table {view.table_id}")
        + f"  status: {status}  shoe: {view.shoe_id or '-'}  hand: {hand}"
        + f"  cards out: {view.cards_in_shoe}"
        + (f"  shoe ended ({view.shoe_ended})" if view.shoe_ended else "")
    )
    player = [view.round_cards[s] for s in PLAYER_SLOTS if s in view.round_cards]
    banker = [view.round_cards[s] for s in BANKER_SLOTS if s in view.round_cards]
    hidden = set(view.round_hidden)
    round_state = "in progress" if view.round_open else "decided, waiting for the next round"
    if view.round_hand is None:
        round_state = "waiting for the first round"
    lines.append(
        bold(f"Round {view.round_hand if view.round_hand is not None else '-'}") + f"  {round_state}"
    )
    lines.append(bold("Betting") + "  " + betting_line(view))
    for key, name, slots, codes in (
        ("P", "Player", PLAYER_SLOTS, player),
        ("B", "Banker", BANKER_SLOTS, banker),
    ):
        shown = [
            _card_text(view.round_cards[s]) if s in view.round_cards else FACE_DOWN
            for s in slots
            if s in view.round_cards or s in hidden
        ]
        total = "? (face down)" if hidden.intersection(slots) else _side_total(codes)
        lines.append("  " + paint(key, name) + f"  {' '.join(shown) or '-':<16}" + f" total {total}")
    lines.append(bold("Last results"))
    if not view.last_rounds:
        lines.append("  (none yet)")
    for rnd in list(view.last_rounds)[:5]:
        letter = {"player": "P", "banker": "B", "tie": "T"}.get(rnd.winner, "?")
        p = " ".join(_card_text(rnd.cards[s]) for s in PLAYER_SLOTS if s in rnd.cards)
        b = " ".join(_card_text(rnd.cards[s]) for s in BANKER_SLOTS if s in rnd.cards)
        lines.append(
            f"  hand {rnd.hand:>3}  {paint(letter, rnd.winner.upper()):<6}  "
            f"P {rnd.player_total if rnd.player_total is not None else '?'} [{p}]  "
            f"B {rnd.banker_total if rnd.banker_total is not None else '?'} [{b}]"
        )
    if view.recent_rounds:
        lines.append(bold("Recall") + "  " + recall_line(view.recent_rounds))
    lines.append(bold("Bead plate") + f"  ({len(view.results)} rounds)")
    lines.extend("  " + _grid_row(row, road_columns, paint) for row in bead_plate(view.results))
    lines.append(bold("Big road"))
    lines.extend("  " + _grid_row(row, road_columns, paint) for row in big_road_grid(big_road(view.results)))
    lines.append(bold("Offered bets") + "  " + (", ".join(view.offered_bets) or "-"))
    lines.append(bold("Alerts") + f"  open: {len(view.open_alerts)}")
    for alert in list(view.open_alerts.values())[:5]:
        lines.append("  " + paint("alert", f"! {alert.get('code', 'alert')}: {alert.get('message', '')}"))
    for text in list(view.recent_alerts)[:3]:
        lines.append(f"  {_DIM if colour else ''}recent: {text}{_RESET if colour else ''}")
    lines.append(bold("Health") + "  " + _health_line(view.health))
    lines.append(
        f"Stream: {view.events_seen} events, last seq {view.last_seq if view.last_seq is not None else '-'}, "
        f"{view.duplicates} duplicates, {len(view.gaps)} gaps"
        + (f", {view.malformed} malformed ({view.last_problem})" if view.malformed else "")
    )
    return "\n".join(lines) + "\n"


def betting_line(view: TableView) -> str:
    """The betting window as one line: the game phase of a ``betting_window`` table."""
    if view.betting_phase is None:
        return "- (no betting window seen: cards_only, or none opened yet)"
    round_id = f" round {view.betting_round_id}" if view.betting_round_id else ""
    source = f" (from {view.betting_source})" if view.betting_source else ""
    text = {
        "betting": "OPEN: bets are being placed; a card drawn now is exposed",
        "dealing": "closed: dealing",
        "waiting": "waiting for the next betting window",
    }[view.betting_phase]
    return f"{text}{round_id}{source}"


def recall_line(rounds: list[dict[str, Any]]) -> str:
    """The retained recall in one line, oldest first: hand then P/B/T, or H held, V voided, … in
    progress; ``*`` corrected, ``!`` held at some time (``baccarat-edge rounds`` has the detail)."""
    marks = []
    for rnd in rounds:
        outcome = rnd["outcome"]
        letter = {"held": "H", "voided": "V", "in_progress": "…"}.get(rnd["status"], "?")
        if rnd["status"] == "completed" and outcome is not None:
            letter = outcome["winner"][0].upper()
        flags = ("*" if rnd["corrections"] else "") + ("!" if rnd["holds"] else "")
        marks.append(f"{rnd['hand']}{letter}{flags}")
    return " ".join(marks)


def _side_total(codes: list[str]) -> str:
    try:
        return str(hand_total([Card.parse(c) for c in codes])) if codes else "-"
    except CardParseError:
        return "?"


def _grid_row(row: list[str], columns: int, paint: Callable[[str, str], str]) -> str:
    visible = row[-columns:]
    return "".join(paint(c.upper(), c) if c.strip() else "·" for c in visible)


def _health_line(health: dict[str, Any] | None) -> str:
    if not health:
        return "no report yet"
    parts: list[str] = []
    devices = health.get("devices")
    if isinstance(devices, dict):
        for name, info in devices.items():
            if isinstance(info, dict) and "connected" in info:
                state = "connected" if info.get("connected") else "DISCONNECTED"
                if info.get("state") == "opening":  # just started, first open attempt under way
                    state = "opening"
                parts.append(f"{name} {state}")
    broker = "connected" if health.get("connected") else "DISCONNECTED"
    parts.append(f"broker {broker}, {health.get('queue_depth')} undelivered")
    return "; ".join(parts)
