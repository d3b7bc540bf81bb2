"""The command keyring: the keys a table accepts commands from, each bound to a name and roles.

Built from ``broker.signing`` when the publisher starts (and so again on every SIGHUP that
changes the keyring or rotates a key file: the service swaps the publisher). A command names
its ``key_id``; without one it is checked with the legacy ``command_key``.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.mqtt.roles import ROLE_ACTIONS, Role
from daemon.mqtt.secrets import Secret
from daemon.mqtt.settings import LEGACY_KEY_ID, SigningSettings


@dataclass(frozen=True, slots=True)
class CommandKey:
    """One loaded command key."""

    key_id: str
    roles: frozenset[Role]
    secret: Secret
    legacy: bool = False
    """The single ``command_key``: every role, and its commands declare their own actor."""

    @property
    def actor(self) -> str:
        """Who a command signed with this key comes from, as the journal records it."""
        if self.legacy:
            return LEGACY_KEY_ID
        (role,) = self.roles
        return f"{role.value}:{self.key_id}"

    def allows(self, action: str) -> bool:
        """True when one of the key's roles holds ``action``."""
        return any(action in ROLE_ACTIONS[role] for role in self.roles)


class Keyring:
    """The loaded command keys by key id."""

    def __init__(self, keys: list[CommandKey]) -> None:
        self._keys = {key.key_id: key for key in keys}

    @classmethod
    def load(cls, signing: SigningSettings) -> Keyring:
        """Read every configured command key (a :class:`~daemon.mqtt.secrets.SecretError`
        names the one that cannot be read)."""
        keys = [CommandKey(k.key_id, frozenset({k.role}), k.secret.load()) for k in signing.command_keys]
        if signing.command_key is not None:
            keys.append(CommandKey(LEGACY_KEY_ID, frozenset(Role), signing.command_key.load(), legacy=True))
        return cls(keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def get(self, key_id: str | None) -> CommandKey | None:
        """The key a command names; no ``key_id`` means the legacy key."""
        return self._keys.get(LEGACY_KEY_ID if key_id is None else key_id)

    @property
    def key_ids(self) -> list[str]:
        return sorted(self._keys)
