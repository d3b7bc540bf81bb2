"""The fold of a squeeze table's commitments and reveals (``squeeze.py``): each round card's
commitment and nonce kept by ``hand/slot`` until its round completes or is voided."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon.engine.state import TableState


def slot_key(hand: int, slot: str) -> str:
    """The key of a round card in ``TableState.sealed_slots``."""
    return f"{hand}/{slot}"


def note_commitment(st: TableState, data: dict[str, Any]) -> None:
    """A squeeze ``card_dealt`` (unsealed): keep a round card's commitment and nonce."""
    hand = data.get("round")
    slot = data["slot"]
    if hand is None or slot == "burn":
        return  # burn cards are never revealed to the players
    st.sealed_slots[slot_key(hand, slot)] = {
        "hand": hand,
        "slot": slot,
        "commitment": data["commitment"],
        "nonce": data["nonce"],
        "revealed_at": None,
    }


def card_revealed(st: TableState, e: Any) -> None:
    """A slot revealed: it is shown from now on."""
    key = slot_key(e.data["round"], e.data["slot"])
    entry = st.sealed_slots.get(key)
    if entry is not None:
        st.sealed_slots[key] = {**entry, "revealed_at": e.at}


def forget_round(st: TableState, hand: int) -> None:
    """A round completed or voided: its cards are no longer sealed by the engine."""
    prefix = f"{hand}/"
    st.sealed_slots = {k: v for k, v in st.sealed_slots.items() if not k.startswith(prefix)}
