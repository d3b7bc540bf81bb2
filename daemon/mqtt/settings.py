"""Broker connection, signing and command-channel settings (the ``broker:`` config section)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from daemon.mqtt.roles import Role
from daemon.mqtt.secrets import MIN_SIGNING_KEY_BYTES, SecretSource, SigningKeySource


class Protocol(Enum):
    MQTT5 = "mqtt5"
    MQTT311 = "mqtt311"


class TlsSettings(BaseModel):
    """TLS to the broker. Certificate and host name verification are on unless turned off here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    ca_file: Path | None = Field(default=None, description="CA bundle; the system store when unset.")
    cert_file: Path | None = Field(default=None, description="Client certificate (PEM).")
    key_file: Path | None = Field(default=None, description="Client private key (PEM).")
    verify: bool = Field(
        default=True, description="Verify the broker certificate and host name. Never off in production."
    )

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> TlsSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: give both or neither")
        return self


class AuthSettings(BaseModel):
    """Username/password login; the password comes from a file or an environment variable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str
    password: SecretSource | None = None


_KEY_LENGTH = f"At least {MIN_SIGNING_KEY_BYTES} bytes."

LEGACY_KEY_ID = "table"
"""The key id of the legacy single ``command_key`` (it holds every role); reserved."""

KEY_ID_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,31}$"


class CommandKeySettings(BaseModel):
    """One named command key of the keyring: who holds it, what it may send, where it lives."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_id: str = Field(
        pattern=KEY_ID_PATTERN,
        description="Short name the command carries (e.g. sup-anna): 1-32 of a-z 0-9 _ . -.",
    )
    role: Role = Field(description="game_server, supervisor or technician (daemon/mqtt/roles.py).")
    secret: SecretSource = Field(description=f"The HMAC key (file or env). {_KEY_LENGTH}")

    @field_validator("secret", mode="after")
    @classmethod
    def _as_signing_key(cls, value: SecretSource) -> SecretSource:
        if isinstance(value, SigningKeySource):
            return value
        return SigningKeySource(file=value.file, env=value.env)


class SigningSettings(BaseModel):
    """Per-table HMAC keys. ``events_key`` signs what the table publishes (events, replies);
    ``command_keys`` (the keyring) authenticate what the server and the staff send, each key
    bound to a person or system and one role. ``command_key`` is the legacy form: one key
    with every role (key id ``table``) whose commands declare their own actor. Without any
    command key every command is refused. Each key must be at least 16 bytes (checked when
    it is loaded)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Typed as SecretSource so code may pass one; stored as SigningKeySource (the validator).
    events_key: SecretSource | None = Field(default=None, description=_KEY_LENGTH)
    command_key: SecretSource | None = Field(
        default=None,
        description=f"Legacy: one command key with every role (key id 'table'); prefer command_keys. "
        f"{_KEY_LENGTH}",
    )
    command_keys: tuple[CommandKeySettings, ...] = Field(
        default=(),
        description="The keyring: named command keys, each with one role; a command names its "
        "key_id. Add, revoke or rotate a key and send SIGHUP.",
    )
    command_max_skew_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Commands whose ts is further than this from now are refused.",
    )
    nonce_cache_max: int = Field(default=100_000, ge=100)
    refusals_journaled_per_window: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description="Commands refused at the edge that are journaled one by one in each "
        "refusal_window_s; the others of that window are counted into one summary event, so a "
        "flood of junk commands cannot fill the journal.",
    )
    refusal_window_s: float = Field(default=10.0, gt=0, le=3600)

    @field_validator("command_keys", mode="after")
    @classmethod
    def _unique_key_ids(cls, value: tuple[CommandKeySettings, ...]) -> tuple[CommandKeySettings, ...]:
        seen: set[str] = set()
        for key in value:
            if key.key_id == LEGACY_KEY_ID:
                raise ValueError(f"key_id {LEGACY_KEY_ID!r} is reserved for the legacy command_key")
            if key.key_id in seen:
                raise ValueError(f"key_id {key.key_id!r} is given twice")
            seen.add(key.key_id)
        return value

    @field_validator("events_key", "command_key", mode="after")
    @classmethod
    def _as_signing_key(cls, value: SecretSource | None) -> SecretSource | None:
        """Every HMAC key source checks the key length when loaded."""
        if value is None or isinstance(value, SigningKeySource):
            return value
        return SigningKeySource(file=value.file, env=value.env)


class ServerAckSettings(BaseModel):
    """The game server's acknowledgement (``baccarat/v1/{table_id}/ack``).

    Enabled, the table keeps every event until the *server* acknowledged it (a PUBACK is only
    the broker's word): after every reconnect it publishes again what the broker acknowledged
    but the server did not, compaction never deletes an event the server has not
    acknowledged, and ``server_ack_lagging`` is raised while the acknowledgement lags past
    ``max_lag_events`` or ``max_lag_s``. Disabled (a table without a game server, e.g. the
    demo): delivery is PUBACK-based and nothing waits for the server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        default=False,
        description="Wait for the game server's signed acknowledgement. Turn on once the game server "
        "acknowledges (daemon/mqtt/README.md, 'Server acknowledgement'); off keeps PUBACK-based delivery.",
    )
    max_lag_events: int = Field(
        default=1000,
        ge=10,
        le=10_000_000,
        description="server_ack_lagging is raised when more events than this are journaled but not "
        "acknowledged by the server (cleared at half of it).",
    )
    max_lag_s: float = Field(
        default=60.0,
        ge=1.0,
        le=30 * 86400.0,
        description="server_ack_lagging is raised when the oldest event the server has not "
        "acknowledged was journaled longer ago than this (cleared at half of it).",
    )
    resend_max_events: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="The largest range one resend command may ask for; a larger one is refused "
        "(range_too_large).",
    )


class DeliverySettings(BaseModel):
    """How the journal is drained."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inflight_window: int = Field(default=32, ge=1, le=1000, description="Unacknowledged events at most.")
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    refused_retries: int = Field(
        default=10,
        ge=0,
        le=1000,
        description="An event the broker refuses with a non-permanent reason code (e.g. 0x80, 0x83, "
        "0x97) is published again this many times, after backoff_initial_s..backoff_max_s, then "
        "dead-lettered with an alert. Nothing newer is published meanwhile.",
    )
    health_interval_s: float = Field(default=10.0, gt=0)
    message_expiry_s: int | None = Field(
        default=None, ge=1, description="MQTT 5 message expiry for events; unset = never expire."
    )
    compact_interval_s: float = Field(default=3600.0, gt=0)
    server_ack: ServerAckSettings = ServerAckSettings()
    state_interval_s: float = Field(
        default=0.5,
        gt=0,
        le=60,
        description="The retained state is published at most this often (and at once after a "
        "round or shoe boundary, on connect and at shutdown).",
    )

    @model_validator(mode="after")
    def _backoff_order(self) -> DeliverySettings:
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("backoff_max_s must be at least backoff_initial_s")
        return self


class BrokerSettings(BaseModel):
    """Everything the publisher needs to reach the broker."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "localhost"
    port: int | None = Field(default=None, ge=1, le=65535, description="Default 8883 with TLS, else 1883.")
    protocol: Protocol = Protocol.MQTT5
    client_id: str | None = Field(default=None, description="Default: baccarat-edge-<table_id>.")
    keepalive_s: int = Field(default=30, ge=5, le=3600)
    tls: TlsSettings = TlsSettings()
    auth: AuthSettings | None = None
    signing: SigningSettings = SigningSettings()
    delivery: DeliverySettings = DeliverySettings()

    @model_validator(mode="after")
    def _server_ack_has_a_key(self) -> BrokerSettings:
        signing = self.signing
        if self.delivery.server_ack.enabled and not (
            signing.command_key is not None or any(k.role is Role.GAME_SERVER for k in signing.command_keys)
        ):
            raise ValueError(
                "delivery.server_ack.enabled needs a key to verify the game server's acknowledgements: "
                "a signing.command_keys entry with role game_server (or the legacy signing.command_key)"
            )
        return self

    @property
    def effective_port(self) -> int:
        if self.port is not None:
            return self.port
        return 8883 if self.tls.enabled else 1883

    def effective_client_id(self, table_id: str) -> str:
        """Stable per table, so the broker treats a restart as the same client."""
        return self.client_id or f"baccarat-edge-{table_id}"
