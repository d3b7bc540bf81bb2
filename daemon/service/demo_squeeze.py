"""``baccarat-edge demo --reveal squeeze``: the demo's game server reveals each card in order.

On a squeeze table (``table.reveal.mode: squeeze``, reveals from the game server) every card is
published face down, as a commitment. The demo plays the game server: once a round's cards are all
read (before it opens the next round's betting, and at the end of the shoe), it sends one signed
``reveal`` command per face-down slot, in the table's ``reveal.order``, a moment apart, so the live
view turns the cards up one by one; the round is decided when its last card is revealed.

Which slots are face down comes from the table's retained state as the engine publishes it (a
``null`` card), never from the cards themselves: the demo's game server knows no more than any
subscriber.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

REVEAL_MODES = ("open", "squeeze")


def squeeze_table() -> dict[str, Any]:
    """The ``table.reveal`` settings of the demo's squeeze table."""
    return {"mode": "squeeze", "order_source": "server"}


class DemoRevealer:
    """Reveals the face-down slots of the table's round(s), one signed command per slot."""

    def __init__(
        self,
        snapshot: Callable[[], dict[str, Any]],
        send: Callable[[str, dict[str, Any]], dict[str, Any]],
        order: tuple[str, ...],
        pause_s: float,
    ) -> None:
        """``snapshot``: the table's public state (its retained ``state`` member); ``send``: a
        signed command and its reply; ``order``: the table's ``reveal.order``; ``pause_s``: the
        time between two reveals (the live view shows each card turned)."""
        self._snapshot = snapshot
        self._send = send
        self._order = order
        self._pause_s = pause_s
        self.revealed = 0
        self.refused: list[str] = []

    def reveal_all(self) -> None:
        """Reveal every face-down slot of the round in progress and of each held round."""
        state = self._snapshot()
        rounds = [state.get("round"), *state.get("held_rounds", [])]
        for rnd in rounds:
            if not isinstance(rnd, dict) or not isinstance(rnd.get("cards"), dict):
                continue
            hidden = [slot for slot in self._order if slot in rnd["cards"] and rnd["cards"][slot] is None]
            for slot in hidden:
                reply = self._send("reveal", {"slots": [slot], "hand": rnd["hand"]})
                if reply.get("status") == "accepted":
                    self.revealed += 1
                else:
                    self.refused.append(f"reveal {slot} of hand {rnd['hand']}: {reply.get('reason')}")
                time.sleep(self._pause_s)
