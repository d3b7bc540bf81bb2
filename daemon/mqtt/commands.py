"""The inbound command channel: parse, authenticate and validate a supervisor command.

A command is a JSON object published on ``baccarat/v1/{table_id}/cmd``::

    {"table_id": "T01", "action": "void_round", "args": {"reason": "misdeal"},
     "command_id": "c-2291", "key_id": "sup-anna", "ts": 1764423000.5,
     "nonce": "6c1f0a9e2b7d4c33", "sig": "<hex HMAC-SHA256 with sup-anna's key>"}

``key_id`` names the keyring key (:mod:`daemon.mqtt.keyring`) the command is signed with; the
command's actor is that key's (``"{role}:{key_id}"``), never the payload's: a command signed
with a named key that also carries an ``actor`` other than its key's is ``malformed``. A
command without ``key_id`` is checked with the legacy ``command_key`` (key id ``table``,
every role) and must declare its ``actor``, as before the keyring.

Checks, in this order (the first failure is the reply's ``code``):

1. ``malformed``: not JSON, not an object, a missing/extra/mistyped field, oversized args.
2. ``wrong_table``: ``table_id`` is not this table.
3. ``unknown_action``: ``action`` is not one this table accepts.
4. ``bad_signature``: no command key configured, an unknown ``key_id``, or ``sig`` is not
   the HMAC of the command with the named key.
5. ``malformed``: a named key's command declares another actor.
6. ``forbidden``: the key's role does not hold the action (:mod:`daemon.mqtt.roles`).
7. ``stale`` / ``future``: ``ts`` further than the allowed skew from the table's clock.
8. ``replayed``: the ``nonce`` was already used (nonces are kept in the journal, so a restart
   does not reopen replay) or ``nonce_cache_full``.

The signature is checked before the nonce is stored, so unauthenticated junk cannot fill
the nonce cache. Commands that pass are handed on as :class:`SupervisorCommand`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from common.inputs import SupervisorCommand
from daemon.engine.commands import ACTIONS, SERVICE_ACTIONS
from daemon.journal.nonces import NonceVerdict
from daemon.journal.store import Journal
from daemon.mqtt.keyring import Keyring
from daemon.mqtt.settings import KEY_ID_PATTERN, SigningSettings
from daemon.mqtt.signing import verify
from daemon.mqtt.wire_fields import EpochSeconds, HmacSignature

MAX_COMMAND_BYTES = 16 * 1024
MAX_ARGS_BYTES = 4 * 1024
MAX_NESTING = 8
"""Deepest nesting of objects and arrays a command may have (its ``args`` hold flat values)."""
MAX_ECHOED_CHARS = 128
"""How much of a refused command's own ``command_id``/``action``/``actor``/``key_id`` is echoed into the
journal and the reply: a refused command is attacker-controlled text."""
MAX_REASON_CHARS = 512

ENGINE_ACTIONS: frozenset[str] = frozenset(ACTIONS) | SERVICE_ACTIONS
"""Actions handed to the engine (it validates their arguments and accepts or refuses them);
the engine's own list, so a new engine action is accepted here without a change. ``lock``/
``unlock`` go the same way: the engine journals them and asks the service to send them to the
reader."""

_NONCE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")


class CommandRequest(BaseModel):
    """The wire form of a command, strictly typed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    table_id: str = Field(min_length=1, max_length=64)
    action: str = Field(min_length=1, max_length=64)
    args: dict[str, Any] = Field(default_factory=dict)
    command_id: str = Field(min_length=1, max_length=128)
    key_id: str | None = Field(default=None, pattern=KEY_ID_PATTERN)
    actor: str | None = Field(default=None, min_length=1, max_length=128)
    ts: EpochSeconds
    nonce: str
    sig: HmacSignature

    @model_validator(mode="after")
    def _legacy_names_its_actor(self) -> CommandRequest:
        if self.key_id is None and self.actor is None:
            raise ValueError("actor is required without key_id (a legacy command_key command)")
        return self

    @field_validator("nonce")
    @classmethod
    def _nonce_form(cls, value: str) -> str:
        if not _NONCE.match(value):
            raise ValueError("must be 16-128 characters of A-Z a-z 0-9 _ -")
        return value

    @field_validator("args")
    @classmethod
    def _args_bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value, allow_nan=False)) > MAX_ARGS_BYTES:
            raise ValueError(f"larger than {MAX_ARGS_BYTES} bytes")
        return value


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a command was refused; becomes the reply."""

    code: str
    reason: str
    command_id: str | None = None
    action: str | None = None
    actor: str | None = None
    key_id: str | None = None
    """The key the command names (claimed until its signature checked)."""


@dataclass(frozen=True, slots=True)
class Verified:
    """A command that passed every check."""

    command: SupervisorCommand
    request: CommandRequest


class CommandVerifier:
    """Applies the checks above; the nonce memory lives in the journal."""

    def __init__(
        self,
        table_id: str,
        keyring: Keyring,
        settings: SigningSettings,
        journal: Journal,
        *,
        clock: Callable[[], float],
        actions: frozenset[str] = ENGINE_ACTIONS,
    ) -> None:
        self.table_id = table_id
        self._keyring = keyring
        self._settings = settings
        self._journal = journal
        self._clock = clock
        self.actions = actions

    def check(self, payload: bytes) -> Verified | Refusal:
        """Verify one raw command payload."""
        raw = _parse(payload)
        if isinstance(raw, Refusal):
            return raw
        # What it claims to be, and who claims to send it (unauthenticated until the signature
        # checked): echoed for the audit, bounded.
        claimed = _Claimed(
            _echo(raw.get("command_id")),
            _echo(raw.get("action")),
            _echo(raw.get("actor")),
            _echo(raw.get("key_id")),
        )
        try:
            request = CommandRequest.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(command)'}: {err['msg']}" for err in exc.errors()
            )
            return claimed.refusal("malformed", _bounded(problems, MAX_REASON_CHARS))
        except ValueError as exc:  # e.g. args holding NaN
            return claimed.refusal("malformed", str(exc))
        if request.table_id != self.table_id:
            return claimed.refusal(
                "wrong_table", f"command is for table {request.table_id!r}, this is {self.table_id!r}"
            )
        if request.action not in self.actions:
            return claimed.refusal(
                "unknown_action",
                f"unknown action {request.action!r}; accepted: {', '.join(sorted(self.actions))}",
            )
        actor = self._authenticated_actor(raw, request, claimed)
        if isinstance(actor, Refusal):
            return actor
        now = self._clock()
        refused = self._stale_or_replayed(request, now, replace(claimed, actor=actor))
        if refused is not None:
            return refused
        command = SupervisorCommand(
            action=request.action,
            at=now,
            actor=actor,
            command_id=request.command_id,
            args=dict(request.args),
            issued_at=request.ts,
        )
        return Verified(command, request)

    def _authenticated_actor(
        self, raw: dict[str, Any], request: CommandRequest, claimed: _Claimed
    ) -> str | Refusal:
        """The actor of a command signed by a key allowed to send its action."""
        if not self._keyring:
            return claimed.refusal("bad_signature", "this table has no command key configured")
        key = self._keyring.get(request.key_id)
        if key is None:
            reason = (
                f"unknown key_id {request.key_id!r}"
                if request.key_id is not None
                else "no key_id given and this table has no legacy command_key"
            )
            return claimed.refusal("bad_signature", reason)
        if not verify(raw, key.secret):
            return claimed.refusal("bad_signature", "signature does not match the command")
        if key.legacy:
            actor = request.actor or key.actor
        elif request.actor is not None and request.actor != key.actor:
            return replace(claimed, actor=key.actor).refusal(
                "malformed",
                f"actor {claimed.actor!r} is not the key's ({key.actor!r}): "
                "the actor comes from the key; omit it",
            )
        else:
            actor = key.actor
        if not key.allows(request.action):
            return replace(claimed, actor=actor).refusal(
                "forbidden", f"key {key.key_id!r} ({key.actor}) may not send {request.action!r}"
            )
        return actor

    def _stale_or_replayed(self, request: CommandRequest, now: float, claimed: _Claimed) -> Refusal | None:
        """Why a signed command is refused for its time or its nonce, else None (the nonce is
        then remembered)."""
        skew = self._settings.command_max_skew_s
        if request.ts < now - skew:
            return claimed.refusal("stale", f"command ts is {now - request.ts:.1f}s old (limit {skew:g}s)")
        if request.ts > now + skew:
            return claimed.refusal(
                "future", f"command ts is {request.ts - now:.1f}s in the future (limit {skew:g}s)"
            )
        verdict = self._journal.remember_nonce(
            request.nonce, request.ts, now, 2 * skew, self._settings.nonce_cache_max
        )
        if verdict is NonceVerdict.REUSED:
            return claimed.refusal("replayed", "nonce already used")
        if verdict is NonceVerdict.CACHE_FULL:
            return claimed.refusal("nonce_cache_full", "too many commands in the replay window")
        return None


@dataclass(frozen=True, slots=True)
class _Claimed:
    """What a command says it is and who sends it, as a refusal echoes it."""

    command_id: str | None
    action: str | None
    actor: str | None
    key_id: str | None

    def refusal(self, code: str, reason: str) -> Refusal:
        return Refusal(code, reason, self.command_id, self.action, self.actor, self.key_id)


def _parse(payload: bytes) -> dict[str, Any] | Refusal:
    """The command as a JSON object of usable text, or why it is malformed."""
    if len(payload) > MAX_COMMAND_BYTES:
        return Refusal("malformed", f"command is {len(payload)} bytes, the limit is {MAX_COMMAND_BYTES}")
    try:
        raw = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Refusal("malformed", f"command is not UTF-8 JSON: {exc}")
    except RecursionError:
        return Refusal("malformed", f"command is nested deeper than {MAX_NESTING} levels")
    if not isinstance(raw, dict):
        return Refusal("malformed", f"command must be a JSON object, got {type(raw).__name__}")
    problem = _text_problem(raw, MAX_NESTING)
    if problem is not None:
        return Refusal("malformed", problem)
    return raw


def _echo(value: object) -> str | None:
    """A refused command's own text field as the audit may echo it: a string, cut to
    :data:`MAX_ECHOED_CHARS`; None for anything else."""
    return _bounded(value, MAX_ECHOED_CHARS) if isinstance(value, str) else None


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _text_problem(value: object, depth_left: int) -> str | None:
    """Why a parsed command cannot be used as text: a string that is not valid Unicode (a
    lone surrogate from a ``\\ud800`` escape cannot be encoded back to UTF-8: the reply and
    the journal could not carry it), or nesting deeper than :data:`MAX_NESTING`."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "command holds a string that is not valid Unicode (a lone surrogate escape)"
        return None
    if isinstance(value, dict | list):
        if depth_left <= 0:
            return f"command is nested deeper than {MAX_NESTING} levels"
        items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
        for key, item in items:
            problem = _text_problem(key, depth_left) or _text_problem(item, depth_left - 1)
            if problem is not None:
                return problem
    return None
