"""The auditors' topic (``baccarat/v1/<table_id>/audit``) of a squeeze table: the cards of a round
voided before they were revealed, each with its nonce and commitment, so an auditor can check them
against the ``card_dealt`` commitments. Players' subscribers never see them (``events`` carries the
voided round without them); the broker's ACL gives this topic to the auditors only."""

from __future__ import annotations

from typing import Any

from daemon.journal.records import JournaledEvent
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.secrets import Secret

AUDIT_KIND = "round_voided_unrevealed"


def audit_message(event: JournaledEvent, table_id: str) -> dict[str, Any] | None:
    """The audit message of a journaled squeeze ``round_voided`` with unrevealed cards, else None."""
    sealed = event.data.get("sealed")
    if event.kind != "round_voided" or not isinstance(sealed, dict) or not sealed.get("audit"):
        return None
    return {
        "kind": AUDIT_KIND,
        "table_id": table_id,
        "shoe_id": event.shoe_id,
        "hand": event.hand,
        "event_id": event.event_id,
        "seq": event.seq,
        "ts": event.at,
        "scheme": "sha256-nonce-v1",
        "cards": sealed["audit"],
    }


def audit_payload(event: JournaledEvent, table_id: str, key: Secret | None) -> bytes | None:
    """Wire bytes of :func:`audit_message` (signed with the events key when there is one)."""
    message = audit_message(event, table_id)
    return None if message is None else encode(signed_message(message, key))
