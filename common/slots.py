"""The six places of a round's cards on the layout, named once for the whole product.

A round is dealt Player 1, Banker 1, Player 2, Banker 2, then Player 3 when the Player draws and
Banker 3 when the Banker draws. ``Slot`` is a ``StrEnum``: a member is its own name as text
(``Slot.P1 == "P1"``), so events, JSON and dictionary keys carry it as they always did.
"""

from __future__ import annotations

from enum import StrEnum


class Slot(StrEnum):
    """A card's place in a round, in the order the cards are dealt."""

    P1 = "P1"
    B1 = "B1"
    P2 = "P2"
    B2 = "B2"
    P3 = "P3"
    B3 = "B3"

    @property
    def is_player(self) -> bool:
        """Whether the slot is on the Player's side (else the Banker's)."""
        return self in PLAYER_SLOTS


ROUND_SLOTS: tuple[Slot, ...] = (Slot.P1, Slot.B1, Slot.P2, Slot.B2, Slot.P3, Slot.B3)
"""Every slot, in draw order."""
PLAYER_SLOTS: tuple[Slot, ...] = (Slot.P1, Slot.P2, Slot.P3)
"""The Player's slots, in deal order."""
BANKER_SLOTS: tuple[Slot, ...] = (Slot.B1, Slot.B2, Slot.B3)
"""The Banker's slots, in deal order."""
OPENING_SLOTS: tuple[Slot, ...] = (Slot.P1, Slot.B1, Slot.P2, Slot.B2)
"""The four cards every round is dealt before the tableau decides on third cards."""
MIRROR: dict[Slot, Slot] = {
    Slot.P1: Slot.B1,
    Slot.B1: Slot.P1,
    Slot.P2: Slot.B2,
    Slot.B2: Slot.P2,
    Slot.P3: Slot.B3,
    Slot.B3: Slot.P3,
}
"""Each slot's counterpart on the other side (the Player and Banker boxes swapped)."""
SLOT_NAMED: dict[str, Slot] = {slot.value: slot for slot in Slot}
"""The slot a name (``"P1"``...) stands for: ``SLOT_NAMED.get(name)`` is None for any other text,
such as a device target that names no slot (``"burn"``)."""
