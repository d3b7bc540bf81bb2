"""Secrets (passwords, HMAC keys) come from a file or an environment variable, never argv.

Settings only ever hold *where* a secret is (a path or a variable name); the value is read
at start-up into a :class:`Secret`, whose ``repr``/``str`` never show it, so it cannot leak
into logs or tracebacks by accident.

A secret file must be a regular file that nobody but its owner and the service's group can
read, and nobody but its owner can write (:func:`check_secret_file`): the install guide puts
them in ``/etc/baccarat-edge/secrets/`` as ``root:baccarat-edge`` mode 0640. The rule is the
same whoever reads the file (the daemon as ``baccarat-edge``, or ``check-config``, ``monitor``
and ``fleet`` run by root or an operator), and the fix it prints keeps the daemon able to read it.
"""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator


class SecretError(ValueError):
    """A configured secret could not be read."""


SERVICE_GROUP = "baccarat-edge"
"""The daemon's group, as the Debian package creates it (``systemd/baccarat-edge.sysusers``)."""


def check_secret_file(path: Path) -> None:
    """Refuse a secret file that is not a regular file or that others may read or change.

    Allowed, whoever the reader is: the owner's bits, and group *read* when the file's group is
    the service's group (:data:`SERVICE_GROUP`, the group the daemon runs as) or the reader's
    own group; i.e. 0600/0400 with any group, 0640/0440 with that group (``root:baccarat-edge``
    or ``baccarat-edge:baccarat-edge`` on a table). Group write, any bit for other users, and
    group read for any other group are refused with the mode and a fix that keeps the file
    readable by the daemon. Raises :class:`SecretError`; ``OSError`` when the file cannot be
    examined at all (missing, a parent directory not searchable).
    """
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise SecretError(f"secret file {path} is not a regular file: point the setting at the file itself")
    mode = stat.S_IMODE(info.st_mode)
    service_gid, service_group = _service_group()
    group_may_read = info.st_gid in (service_gid, os.getegid())
    allowed = 0o040 if group_may_read else 0
    if mode & 0o077 & ~allowed:
        regroup = "" if info.st_gid == service_gid else f"chgrp {service_group} {path} && "
        raise SecretError(
            f"secret file {path} has mode {mode:04o}, open to {_who(mode, allowed, info.st_gid)}: "
            f"run `{regroup}chmod 640 {path}` (its owner and the group {service_group}, which the "
            f"daemon runs as, may read it; or `chmod 600 {path}` when the daemon's own user owns it)"
        )


def _service_group() -> tuple[int, str]:
    """The daemon's group (id, name): :data:`SERVICE_GROUP` where it exists, else this
    process's own group (a development machine, where the daemon runs as its developer)."""
    try:
        return grp.getgrnam(SERVICE_GROUP).gr_gid, SERVICE_GROUP
    except KeyError:
        gid = os.getegid()
        return gid, _group_name(gid)


def _who(mode: int, allowed: int, gid: int) -> str:
    """Who the offending bits let in."""
    who = []
    if mode & 0o070 & ~allowed:
        who.append("its group" if allowed else f"its group {_group_name(gid)}")
    if mode & 0o007:
        who.append("every user")
    return " and ".join(who)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


class Secret:
    """A secret value that does not print itself."""

    __slots__ = ("_value", "origin")

    def __init__(self, value: bytes, origin: str) -> None:
        self._value = value
        self.origin = origin

    def reveal(self) -> bytes:
        """The secret bytes; call only where they are used."""
        return self._value

    def reveal_text(self) -> str:
        return self._value.decode("utf-8")

    def __repr__(self) -> str:
        return f"Secret(from {self.origin}, {len(self._value)} bytes)"

    __str__ = __repr__


class SecretSource(BaseModel):
    """Where one secret lives: exactly one of ``file`` or ``env`` (a variable *name*)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path | None = None
    env: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretSource:
        if (self.file is None) == (self.env is None):
            raise ValueError("give exactly one of 'file' (a path) or 'env' (an environment variable name)")
        return self

    def load(self) -> Secret:
        """Read the secret; trailing newlines of a file are not part of it.

        A file others may read or change, or that is not a regular file, is a
        :class:`SecretError` (:func:`check_secret_file`).
        """
        if self.file is not None:
            try:
                check_secret_file(self.file)
                data = self.file.read_bytes()
            except OSError as exc:
                raise SecretError(f"cannot read secret file {self.file}: {exc.strerror}") from None
            value = data.rstrip(b"\r\n")
            origin = f"file {self.file}"
        else:
            assert self.env is not None
            text = os.environ.get(self.env)
            if text is None:
                raise SecretError(f"environment variable {self.env} (named in the settings) is not set")
            value = text.encode("utf-8")
            origin = f"env {self.env}"
        if not value:
            raise SecretError(f"secret from {origin} is empty")
        return Secret(value, origin)


MIN_SIGNING_KEY_BYTES = 16
"""HMAC-SHA256 keys shorter than this are refused: a short key can be guessed offline from
any one signed payload."""


class SigningKeySource(SecretSource):
    """Where an HMAC key lives (``broker.signing.events_key`` / ``command_key``, ``tail``'s
    events key): like :class:`SecretSource`, and the key must be at least
    :data:`MIN_SIGNING_KEY_BYTES` long."""

    def load(self) -> Secret:
        """Read the key; a key under :data:`MIN_SIGNING_KEY_BYTES` is a :class:`SecretError`
        naming where it came from (never the key)."""
        secret = super().load()
        length = len(secret.reveal())
        if length < MIN_SIGNING_KEY_BYTES:
            raise SecretError(
                f"signing key from {secret.origin} is {length} bytes; at least "
                f"{MIN_SIGNING_KEY_BYTES} are required (e.g. `openssl rand -hex 32`)"
            )
        return secret
