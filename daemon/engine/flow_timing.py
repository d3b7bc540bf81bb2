"""What the betting window's times say about a card (``README.md``, "Game flow": "Judged by time").

Two rules, both pure functions of the state, the settings and the times given:

- **Unneeded, not exposed**: a card read soon after a round was decided (within
  ``table.betting.unneeded_window_s`` of the deciding card, or of the unneeded card before it) is
  that round's unneeded card even when betting has already reopened for the next round: the dealer
  drew one card too many (RULES.md dealing mistake 1), the next round has not started. Later cards
  while betting is open are exposed (mistake 7).
- **A late close**: the game server's ``close_betting`` is signed with the time it was issued. When it
  reaches the table after cards already read as exposed, but was issued before them and arrived
  within ``table.betting.max_skew_s`` of its own time, those cards were drawn after betting had
  closed: they are the round's. A card read before the close's own time never is (no past-posting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from daemon.alerts import AlertCode
from daemon.engine.emitter import Emitter
from daemon.engine.payloads import ExposedRead
from daemon.engine.settings import BettingSettings
from daemon.engine.state import TableState

if TYPE_CHECKING:  # (dealing.py uses this module's rule: imported for the type only)
    from daemon.engine.dealing import Dealing


def unneeded_in_time(st: TableState, betting: BettingSettings, at: float) -> bool:
    """Whether a card read at ``at`` while betting is open is the last round's unneeded card."""
    window = betting.unneeded_window_s
    decided = st.decided_at
    return window > 0 and decided is not None and 0 <= at - decided <= window


@dataclass(frozen=True, slots=True)
class LateClose:
    """How a server's ``close_betting`` is judged by its own time.

    ``skew_s``: the table's receive time minus the command's issued time (network lag plus the two
    clocks' difference); ``honoured``: within ``max_skew_s``; ``claimed``: the cards exposed in this
    window, read at or after the issued time, that become the round's (oldest first)."""

    issued_at: float
    skew_s: float
    honoured: bool
    claimed: tuple[ExposedRead, ...]


def judge_close(st: TableState, betting: BettingSettings, issued_at: float, at: float) -> LateClose:
    """Judge a close issued at ``issued_at`` (server clock) and received at ``at`` (table clock)."""
    skew = at - issued_at
    bound = betting.max_skew_s
    honoured = bound > 0 and abs(skew) <= bound
    claimed: tuple[ExposedRead, ...] = ()
    if honoured:
        # Only the cards read at or after the close's own time, and only counted ones (a card over
        # the composition was never a physical card of the shoe's count); they are a suffix of the
        # window's exposed cards, which are in read order.
        claimed = tuple(c for c in st.flow_exposed if c["read_at"] >= issued_at and c["counted"])
    return LateClose(issued_at, round(skew, 3), honoured, claimed)


def claim_late_cards(
    late: LateClose, at: float, *, state: TableState, emitter: Emitter, dealing: Dealing
) -> None:
    """After ``betting_closed`` at ``at``: each card the late close claims has its exposed alert
    cleared and is dealt where the draw order puts it, counted once (it was counted when drawn)."""
    for exposed in late.claimed:
        code = exposed["card"]
        source = exposed["read"]["source"]
        for alert_id in state.open_alert_ids(AlertCode.CARD_EXPOSED_DURING_BETTING):
            details = state.alerts[alert_id]["details"]
            if details.get("card") == code and details.get("round_id") == state.flow_round_id:
                issued = f"{late.issued_at:.3f}"
                reason = f"betting had closed: the close was issued at {issued}, before this card was read"
                emitter.clear_alert(alert_id, at, source, reason)
                break
        plan = dealing.plan(exposed["read_at"])
        dealing.place(plan, code, at, source, read=exposed["read"], from_outside_game=True)
