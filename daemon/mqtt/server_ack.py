"""The game server's acknowledgement: its message, its verification, and the lag rule (pure).

The game server publishes, retained, on ``baccarat/v1/{table_id}/ack`` (QoS 1)::

    {"schema_version": 1, "table_id": "T01", "seq": 412,
     "event_id": "<the event_id of seq 412>", "hash": "<its chain hash>",
     "epoch": "<its epoch>", "key_id": "gs-main", "ts": 1764423000.5,
     "sig": "<hex HMAC-SHA256 with gs-main's key>"}

``seq`` is the highest ``seq`` the server has durably processed *with every lower one*
(contiguous); an integral JSON number such as ``412.0`` is the same integer. ``event_id``,
``hash`` and ``epoch`` are that event's as the server received it: the hash chains the whole
history below it (:mod:`daemon.journal.chain`), so the table compares the acknowledgement with
its own chain at that ``seq``. ``hash`` and ``epoch`` are optional for servers written before
the chain (then only the ``event_id`` is compared, and a rollback's restore point is the
cautious one).
``key_id`` names a keyring key (``broker.signing.command_keys``) with the ``game_server`` role
(or, without ``key_id``, the legacy ``command_key``); the signature is HMAC-SHA256 over the
RFC 8785 form of the message without ``sig``, like a command's. No nonce: an acknowledgement
is a statement of fact, idempotent and monotonic; an old one replayed says less than what
the table already holds and is ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from daemon.mqtt.keyring import Keyring
from daemon.mqtt.roles import Role
from daemon.mqtt.settings import KEY_ID_PATTERN, ServerAckSettings
from daemon.mqtt.signing import verify
from daemon.mqtt.wire_fields import EpochSeconds, HmacSignature, integral

MAX_ACK_BYTES = 4096
EVENT_ID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
HASH_PATTERN = r"^[0-9a-f]{64}$"


class AckMessage(BaseModel):
    """The wire form of a server acknowledgement, strictly typed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    schema_version: Literal[1]
    table_id: str = Field(min_length=1, max_length=64)
    seq: Annotated[int, BeforeValidator(integral)] = Field(ge=1)
    event_id: str = Field(pattern=EVENT_ID_PATTERN)
    hash: str | None = Field(default=None, pattern=HASH_PATTERN)
    epoch: str | None = Field(default=None, pattern=EVENT_ID_PATTERN)
    key_id: str | None = Field(default=None, pattern=KEY_ID_PATTERN)
    ts: EpochSeconds
    sig: HmacSignature


@dataclass(frozen=True, slots=True)
class AckClaim:
    """A verified acknowledgement: the server processed every event through ``seq``."""

    seq: int
    event_id: str
    key_id: str | None
    hash: str | None = None
    """The chain hash of ``seq`` as the server received it (None: a server without the chain)."""
    epoch: str | None = None
    """The epoch of ``seq`` as the server received it (None when not sent)."""


def check_ack(payload: bytes, table_id: str, keyring: Keyring) -> AckClaim | str:
    """Parse and authenticate one ``ack`` payload: the claim, or why it is refused."""
    if len(payload) > MAX_ACK_BYTES:
        return f"acknowledgement is {len(payload)} bytes, the limit is {MAX_ACK_BYTES}"
    try:
        raw = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return f"acknowledgement is not UTF-8 JSON: {exc}"
    if not isinstance(raw, dict):
        return f"acknowledgement must be a JSON object, got {type(raw).__name__}"
    try:
        message = AckMessage.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(ack)'}: {err['msg']}" for err in exc.errors()
        )
        return f"acknowledgement malformed: {problems[:400]}"
    if message.table_id != table_id:
        return f"acknowledgement is for table {message.table_id[:64]!r}, this is {table_id!r}"
    key = keyring.get(message.key_id)
    if key is None:
        return f"acknowledgement names an unknown key_id {message.key_id!r}"
    if Role.GAME_SERVER not in key.roles:
        return f"acknowledgement signed with key {key.key_id!r}, which lacks the game_server role"
    if not verify(raw, key.secret):
        return "acknowledgement signature does not match"
    return AckClaim(message.seq, message.event_id, message.key_id, message.hash, message.epoch)


@dataclass(frozen=True, slots=True)
class Lag:
    """How far the server's acknowledgement is behind the journal."""

    events: int
    """Events journaled and not acknowledged by the server."""
    seconds: float | None
    """Age of the oldest of them (None when none)."""


class LagRule:
    """When ``server_ack_lagging`` opens and closes: open past either limit, closed once
    both are back to half of it (the alert events themselves add a ``seq`` each: without the
    margin a raise and a clear could follow each other forever)."""

    def __init__(self, settings: ServerAckSettings) -> None:
        self.max_events = settings.max_lag_events
        self.max_s = settings.max_lag_s

    def exceeded(self, lag: Lag) -> str | None:
        """Why the lag is past a limit, or None."""
        if lag.events > self.max_events:
            return (
                f"{lag.events} events are not acknowledged by the game server "
                f"(delivery.server_ack.max_lag_events = {self.max_events})"
            )
        if lag.seconds is not None and lag.seconds > self.max_s:
            return (
                "the oldest event the game server has not acknowledged was journaled "
                f"{lag.seconds:.0f} s ago (delivery.server_ack.max_lag_s = {self.max_s:g})"
            )
        return None

    def caught_up(self, lag: Lag) -> bool:
        """Both limits are back to half: the alert may close."""
        return lag.events <= self.max_events // 2 and (lag.seconds is None or lag.seconds <= self.max_s / 2)
