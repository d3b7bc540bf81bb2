"""The console's user file: who may log in, their password hash, role and signing key.

```yaml
users:
  - name: anna
    password_hash: "scrypt$32768$8$1$...$..."
    role: supervisor            # supervisor | technician | viewer
    key_id: sup-anna            # her key in the tables' keyring (broker.signing.command_keys)
    key_file: /etc/baccarat-edge/console-keys/sup-anna.key
```

A viewer has no key and can act on nothing. Each person signs with their own key, so the
table records them (``supervisor:sup-anna``) as the actor of what they did.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from daemon.console.passwords import check_hash_format
from daemon.mqtt.roles import ROLE_ACTIONS, Role
from daemon.mqtt.secrets import Secret, SigningKeySource
from daemon.mqtt.settings import KEY_ID_PATTERN
from daemon.service.configfile import read_yaml, validate


class PersonRole(Enum):
    """What a person may do from the console."""

    SUPERVISOR = "supervisor"
    TECHNICIAN = "technician"
    VIEWER = "viewer"

    @property
    def actions(self) -> frozenset[str]:
        """The commands this role may send (the tables' own role table, daemon/mqtt/roles.py)."""
        if self is PersonRole.VIEWER:
            return frozenset()
        return ROLE_ACTIONS[Role(self.value)]


class User(BaseModel):
    """One person."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="Login name.")
    password_hash: str = Field(description="scrypt hash: `baccarat-edge console --hash-password`.")
    role: PersonRole
    key_id: str | None = Field(default=None, pattern=KEY_ID_PATTERN, description="Keyring key id.")
    key_file: Path | None = Field(default=None, description="The person's command key (mode 0600).")

    @field_validator("password_hash")
    @classmethod
    def _hash_form(cls, value: str) -> str:
        return check_hash_format(value)

    @model_validator(mode="after")
    def _key_for_acting_roles(self) -> User:
        has_key = self.key_id is not None and self.key_file is not None
        if self.role is PersonRole.VIEWER and (self.key_id or self.key_file):
            raise ValueError("a viewer acts on nothing: give no key_id/key_file")
        if self.role is not PersonRole.VIEWER and not has_key:
            raise ValueError(f"a {self.role.value} signs commands: give key_id and key_file")
        return self

    def load_key(self) -> Secret:
        """The person's signing key (a :class:`~daemon.mqtt.secrets.SecretError` when unreadable)."""
        assert self.key_file is not None
        return SigningKeySource(file=self.key_file).load()


class UserFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    users: list[User] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> UserFile:
        names = [u.name for u in self.users]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"user name(s) given twice: {', '.join(twice)}")
        return self

    def find(self, name: str) -> User | None:
        return next((u for u in self.users if u.name == name), None)


def load_users(path: Path) -> UserFile:
    """Read and validate the user file (ConfigError lists every problem), and check that every
    key file can be read now rather than at the first command."""
    users = validate(UserFile, read_yaml(path))
    for user in users.users:
        if user.key_file is not None:
            user.load_key()
    return users
