"""The console's settings file (YAML, validated by pydantic; every error reported at once)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from daemon.console.verification import VerifySettings
from daemon.mqtt.settings import AuthSettings, Protocol, TlsSettings
from daemon.mqtt.topics import validate_table_id
from daemon.service.configfile import read_yaml, validate


class HttpTlsSettings(BaseModel):
    """HTTPS for the browsers: the console's own certificate and key (PEM)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cert_file: Path = Field(description="Server certificate chain (PEM).")
    key_file: Path = Field(description="Server private key (PEM).")


class ListenSettings(BaseModel):
    """Where the console serves browsers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default="127.0.0.1", description="Address to bind; 0.0.0.0 for the pit network.")
    port: int = Field(default=8443, ge=0, le=65535, description="TCP port (0: any free port).")
    tls: HttpTlsSettings | None = Field(
        default=None, description="HTTPS certificate and key; plain HTTP only when unset (a lab)."
    )
    hostnames: tuple[str, ...] = Field(
        default=(),
        max_length=32,
        description="DNS names browsers use for the console (e.g. pit-console.casino.local); "
        "a request naming any other host is refused. IP addresses and localhost always work.",
    )

    @field_validator("hostnames")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not re.fullmatch(
                r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*",
                name,
            ):
                raise ValueError(f"{name[:80]!r} is not a DNS name (letters, digits, '-' and '.')")
        return tuple(n.lower() for n in value)


class ConsoleBrokerSettings(BaseModel):
    """The broker the tables publish to (the same broker and TLS rules as the daemon's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "localhost"
    port: int | None = Field(default=None, ge=1, le=65535, description="Default 8883 with TLS, else 1883.")
    protocol: Protocol = Protocol.MQTT5
    tls: TlsSettings = Field(default_factory=TlsSettings)
    auth: AuthSettings | None = None

    @property
    def effective_port(self) -> int:
        if self.port is not None:
            return self.port
        return 8883 if self.tls.enabled else 1883


class ConsoleSettings(BaseModel):
    """Everything ``baccarat-edge console --config FILE`` reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listen: ListenSettings = Field(default_factory=ListenSettings)
    broker: ConsoleBrokerSettings = Field(default_factory=ConsoleBrokerSettings)
    users_file: Path = Field(description="The console's user file (console-users.yaml).")
    tables: list[str] = Field(
        default_factory=list, description="Only these table ids; every table on the broker when empty."
    )
    session_idle_s: float = Field(default=900.0, gt=0, le=86_400, description="Idle time before log-out.")
    session_max_s: float = Field(
        default=12 * 3600.0, gt=0, le=7 * 86_400, description="A session ends this long after log-in."
    )
    reply_timeout_s: float = Field(default=10.0, gt=0, le=120, description="How long to wait for a reply.")
    verify: VerifySettings = Field(
        default_factory=VerifySettings,
        description="The tables' events keys: with a key, only messages it verifies are shown.",
    )
    limits: dict[str, str] = Field(
        default_factory=dict,
        description="Per table id: its betting limits as the pit shows them (e.g. '25 - 5,000'); "
        "the tables do not publish them.",
    )
    max_streams_per_session: int = Field(
        default=6, ge=1, le=100, description="Live streams (open pages) one session may hold at once."
    )
    max_streams: int = Field(
        default=64, ge=1, le=10_000, description="Live streams the console serves at once in all."
    )

    @field_validator("tables")
    @classmethod
    def _table_ids(cls, value: list[str]) -> list[str]:
        for table_id in value:
            validate_table_id(table_id)  # a TopicError (a ValueError) names the id and the rule
        return value

    @field_validator("limits")
    @classmethod
    def _limits(cls, value: dict[str, str]) -> dict[str, str]:
        for table_id, text in value.items():
            validate_table_id(table_id)
            if not 1 <= len(text) <= 40 or not text.isprintable():
                raise ValueError(f"limits of {table_id}: 1 to 40 printable characters")
        return value

    @model_validator(mode="after")
    def _idle_within_max(self) -> ConsoleSettings:
        if self.session_idle_s > self.session_max_s:
            raise ValueError("session_idle_s must not exceed session_max_s")
        return self


def load_settings(path: Path) -> ConsoleSettings:
    """Read and validate ``path``; a :class:`~daemon.service.configfile.ConfigError` lists every
    problem with its file, line and key. A relative ``users_file`` is relative to the file."""
    settings = validate(ConsoleSettings, read_yaml(path))
    if not settings.users_file.is_absolute():
        settings = settings.model_copy(update={"users_file": path.parent / settings.users_file})
    return settings
