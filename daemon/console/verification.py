"""Which tables' messages the console can verify, and the verdict on each message.

A table signs everything it publishes with its events key (``broker.signing.events_key``):
events as the reference consumer checks them (:func:`daemon.mqtt.consumer.parse_event`),
``status``, ``health``, ``state`` and ``cmd/reply`` as :func:`daemon.mqtt.envelope.signed_message`
makes them (:func:`daemon.mqtt.signing.verify`). With keys configured for a table, a message
that verifies with none of them (unsigned, forged, another table's, not JSON) is **refused**:
counted and shown as refused, its content never used. Without a key for a table the console
cannot tell a table's message from anyone else's: it shows them marked **unverified**.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from daemon.mqtt.consumer import parse_event
from daemon.mqtt.secrets import Secret, SigningKeySource
from daemon.mqtt.signing import verify
from daemon.mqtt.topics import validate_table_id

MAX_KEYS_PER_TABLE = 4


class VerifySettings(BaseModel):
    """The tables' events keys the console verifies with (``verify`` in console.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: tuple[SigningKeySource, ...] = Field(
        default=(),
        max_length=MAX_KEYS_PER_TABLE,
        description="Events key(s) of every table without its own entry under 'tables'.",
    )
    tables: dict[str, tuple[SigningKeySource, ...]] = Field(
        default_factory=dict,
        description="Per table id: its events key(s); two while a key is being rotated.",
    )

    @field_validator("tables")
    @classmethod
    def _table_entries(
        cls, value: dict[str, tuple[SigningKeySource, ...]]
    ) -> dict[str, tuple[SigningKeySource, ...]]:
        for table_id, keys in value.items():
            validate_table_id(table_id)
            if not 1 <= len(keys) <= MAX_KEYS_PER_TABLE:
                raise ValueError(f"table {table_id}: give 1 to {MAX_KEYS_PER_TABLE} keys")
        return value


class Trust(Enum):
    """What the console knows of where a message came from."""

    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    """No key is configured for the table: shown, marked unverified."""
    REFUSED = "refused"
    """Keys are configured and the message verifies with none of them: never used."""


@dataclass(frozen=True, slots=True)
class Checked:
    """The verdict on one message, and why it was refused."""

    trust: Trust
    reason: str = ""


class MessageVerifier:
    """The loaded keys; :meth:`check` judges one message of a table's topic."""

    def __init__(
        self, default: tuple[Secret, ...] = (), per_table: dict[str, tuple[Secret, ...]] | None = None
    ):
        self._default = default
        self._per_table = dict(per_table or {})

    @classmethod
    def from_settings(cls, settings: VerifySettings) -> MessageVerifier:
        """Read every key now (a :class:`~daemon.mqtt.secrets.SecretError` names the one that fails)."""
        return cls(
            tuple(k.load() for k in settings.keys),
            {t: tuple(k.load() for k in keys) for t, keys in settings.tables.items()},
        )

    def keys_for(self, table_id: str) -> tuple[Secret, ...]:
        return self._per_table.get(table_id, self._default)

    def trust_of(self, table_id: str) -> Trust:
        """VERIFIED when the table's messages are checked, else UNVERIFIED."""
        return Trust.VERIFIED if self.keys_for(table_id) else Trust.UNVERIFIED

    def check(self, table_id: str, suffix: str, payload: bytes) -> Checked:
        """The verdict on ``payload`` of ``baccarat/v1/{table_id}/{suffix}``."""
        keys = self.keys_for(table_id)
        if not keys:
            return Checked(Trust.UNVERIFIED)
        if suffix == "events":
            reason = ""
            for key in keys:
                envelope, problem = parse_event(payload, table_id, key, require_signature=True)
                if envelope is not None:
                    return Checked(Trust.VERIFIED)
                reason = reason or problem
            return Checked(Trust.REFUSED, reason)
        try:
            message = json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return Checked(Trust.REFUSED, "not JSON")
        if not isinstance(message, dict):
            return Checked(Trust.REFUSED, "not a JSON object")
        if message.get("table_id") != table_id:
            return Checked(
                Trust.REFUSED, f"table_id {str(message.get('table_id'))[:40]!r} is not {table_id!r}"
            )
        if "sig" not in message:
            return Checked(Trust.REFUSED, "unsigned (a key is configured: a signature is required)")
        if any(verify(message, key) for key in keys):
            return Checked(Trust.VERIFIED)
        return Checked(Trust.REFUSED, "signature does not verify")
