"""A checkpoint of the engine's folded state, so a restart folds only the events after it.

``Engine.restore(settings, variant, events, start=checkpoint)`` gives the same engine as
folding the whole history when ``events`` are exactly the events after the one the checkpoint
covers. A checkpoint is plain JSON (:meth:`EngineCheckpoint.to_json`): every field of
:class:`~daemon.engine.state.TableState` (``settings`` aside: the configured ones are used), the
shoe's own decks and variant (what its ``shoe_started`` recorded) and the time of the last event.

It is only valid for the fold code and the table settings it was taken with (the fold depends on
both: e.g. ``duplicate_memory``, the camera devices, the per-round burn): :func:`fold_key` names
them (a digest of the fold's source and one of the settings), and a checkpoint whose key differs
is never used. :func:`capture` checks that the checkpoint decodes back to the very state it was
taken from, so a field this module cannot carry exactly raises :class:`CheckpointError` instead
of giving a wrong state later. No I/O: where checkpoints are kept is the journal's business.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from dataclasses import dataclass, fields
from typing import Any, Protocol

from daemon.engine.payloads import ShoeRecord
from daemon.engine.phases import Phase
from daemon.engine.rounds import RoundState
from daemon.engine.settings import TableSettings
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState

CHECKPOINT_FORMAT = 1
_FOLD_MODULES = (
    "daemon.alerts",
    "daemon.engine.events",
    "daemon.engine.rounds",
    "daemon.engine.phases",
    "daemon.engine.state",
    "daemon.engine.fold",
    "daemon.engine.reveal_fold",
    "daemon.engine.squeeze",
    "daemon.engine.audit_fold",
    "daemon.engine.checkpoint",
)
"""The code a fold runs (``TableState.apply`` and what it calls) and this codec."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be taken or used (malformed, or a field it cannot carry)."""


def _fold_source_digest() -> str:
    digest = hashlib.sha256(f"checkpoint format {CHECKPOINT_FORMAT}".encode())
    for name in _FOLD_MODULES:
        try:
            source = inspect.getsource(sys.modules[name])
        except (KeyError, OSError, TypeError):
            source = "(source unavailable)"  # then every checkpoint is taken and used by this build only
            digest.update(name.encode())
        digest.update(name.encode() + b"\0" + source.encode())
    return digest.hexdigest()[:16]


def fold_key(settings: TableSettings) -> str:
    """What a checkpoint is valid for: the fold's code and the table settings it ran under."""
    settings_text = json.dumps(settings.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return f"fold={_FOLD_DIGEST} settings={hashlib.sha256(settings_text.encode()).hexdigest()[:16]}"


def key_difference(stored: str, wanted: str) -> str:
    """Why a checkpoint's key is not the one wanted, in words (for the log)."""
    old, new = dict(_parts(stored)), dict(_parts(wanted))
    changed = [name for name in ("fold", "settings") if old.get(name) != new.get(name)]
    words = {
        "fold": "the engine's fold code changed (another daemon version)",
        "settings": "the table settings changed",
    }
    return "; ".join(words[name] for name in changed) or "its key differs"


def _parts(key: str) -> list[tuple[str, str]]:
    return [tuple(part.split("=", 1)) for part in key.split() if "=" in part]  # type: ignore[misc]


# ------------------------------------------------------------------ the state as JSON
def _round_to_json(rnd: RoundState) -> dict[str, Any]:
    return {f.name: _copy(getattr(rnd, f.name)) for f in fields(RoundState)}


def _round_from_json(data: Any) -> RoundState:
    names = {f.name for f in fields(RoundState)}
    if not isinstance(data, dict) or set(data) != names:
        raise CheckpointError(f"a round's fields are {sorted(data) if isinstance(data, dict) else data!r}")
    return RoundState(**data)


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


_PAIRS = "__pairs__"
"""A dict whose keys are not all text (hand numbers, (device, transmission id, card) tuples) is
kept as ``{"__pairs__": [[key, value], ...]}`` in its order (``recent``'s order is its eviction
order); a tuple key as a list."""


def _pairs_to_json(value: dict[Any, Any]) -> dict[str, Any]:
    return {_PAIRS: [[list(k) if isinstance(k, tuple) else k, v] for k, v in value.items()]}


def _plain_from_json(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {_PAIRS}:
        return {tuple(k) if isinstance(k, list) else k: v for k, v in value[_PAIRS]}
    return value


def _plain_to_json(value: Any) -> Any:
    if isinstance(value, dict) and any(not isinstance(k, str) for k in value):
        return _pairs_to_json(value)
    return value


_SPECIAL: dict[str, tuple[Any, Any]] = {
    "phase": (str, Phase),
    "round": (
        lambda r: None if r is None else _round_to_json(r),
        lambda d: None if d is None else _round_from_json(d),
    ),
    "held": (
        lambda held: [[hand, _round_to_json(r)] for hand, r in held.items()],
        lambda rows: {int(hand): _round_from_json(r) for hand, r in rows},
    ),
}
"""Fields that are not plain data; every other field is kept as it is (:func:`_plain_to_json`)."""


def encode_state(state: TableState) -> dict[str, Any]:
    """Every field of ``state`` but ``settings``, as JSON-ready data."""
    out: dict[str, Any] = {}
    for f in fields(TableState):
        if f.name == "settings":
            continue
        value = getattr(state, f.name)
        special = _SPECIAL.get(f.name)
        out[f.name] = special[0](value) if special is not None else _plain_to_json(value)
    return out


def decode_state(data: dict[str, Any], settings: TableSettings) -> TableState:
    """The :class:`TableState` that :func:`encode_state` gave ``data`` for."""
    names = {f.name for f in fields(TableState)} - {"settings"}
    if set(data) != names:
        missing, extra = sorted(names - set(data)), sorted(set(data) - names)
        raise CheckpointError(f"state fields differ: missing {missing}, unknown {extra}")
    state = TableState(settings)
    try:
        for name, value in data.items():
            special = _SPECIAL.get(name)
            setattr(state, name, special[1](value) if special is not None else _plain_from_json(value))
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"state field {name!r} cannot be read: {exc}") from None
    return state


def plain(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples as lists, dict keys as text): the form in
    which two states, one live and one folded from stored events, are compared."""
    if isinstance(value, RoundState):
        return plain(_round_to_json(value))
    if isinstance(value, dict):
        return {k if isinstance(k, str) else json.dumps(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def state_differences(a: TableState, b: TableState) -> list[str]:
    """The names of the fields in which two states differ (compared as JSON gives them)."""
    return [
        f.name
        for f in fields(TableState)
        if f.name != "settings" and plain(getattr(a, f.name)) != plain(getattr(b, f.name))
    ]


# ------------------------------------------------------------------ the checkpoint
@dataclass(frozen=True, slots=True)
class EngineCheckpoint:
    """The engine's state after one event: what :meth:`Engine.restore` starts from."""

    key: str
    """:func:`fold_key` of the fold code and table settings it was taken with."""
    at: float
    """The time of the last event it covers (the engine's clock after it)."""
    shoe: dict[str, Any] | None
    """The shoe's own ``decks``, ``variant`` and ``variant_digest`` (as its ``shoe_started``
    recorded them), None before the first shoe."""
    state: dict[str, Any]
    """:func:`encode_state` of the table state."""
    settings: dict[str, Any]
    """The table settings it was taken with (``journal verify`` folds with them)."""

    def table_state(self, settings: TableSettings) -> TableState:
        """The table state it holds, under ``settings`` (the configured ones)."""
        return decode_state(_copy(self.state), settings)

    def table_settings(self) -> TableSettings:
        """The table settings it was taken with."""
        try:
            return TableSettings.model_validate(self.settings)
        except ValueError as exc:
            raise CheckpointError(f"its table settings are invalid: {exc}") from None

    def to_json(self) -> str:
        """The checkpoint as one JSON text (what the journal stores)."""
        return json.dumps(
            {
                "format": CHECKPOINT_FORMAT,
                "key": self.key,
                "at": self.at,
                "shoe": self.shoe,
                "state": self.state,
                "settings": self.settings,
            },
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )

    @classmethod
    def from_json(cls, text: str) -> EngineCheckpoint:
        """Parse a stored checkpoint; :class:`CheckpointError` when it is not one."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"not a format {CHECKPOINT_FORMAT} checkpoint")
        try:
            shoe, state, settings = data["shoe"], data["state"], data["settings"]
            if not (shoe is None or isinstance(shoe, dict)) or not isinstance(state, dict):
                raise TypeError("shoe/state are not objects")
            if not isinstance(settings, dict):
                raise TypeError("settings is not an object")
            return cls(key=str(data["key"]), at=float(data["at"]), shoe=shoe, state=state, settings=settings)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"malformed: {exc}") from None


class Checkpointable(Protocol):
    """What a checkpoint is taken of: an engine's state and its shoe's setup."""

    @property
    def state(self) -> TableState: ...

    @property
    def shoe(self) -> ShoeSetup: ...


def shoe_of(engine: Checkpointable) -> ShoeRecord | None:
    """What the current shoe's ``shoe_started`` told the engine (None before any shoe)."""
    if engine.state.shoe_id is None:
        return None
    return engine.shoe.record()


def capture(engine: Checkpointable, at: float) -> EngineCheckpoint:
    """A checkpoint of ``engine`` right after an event at ``at``; :class:`CheckpointError` when
    it would not decode back to exactly this state."""
    state = engine.state
    configured = engine.shoe.configured_settings
    shoe = shoe_of(engine)
    try:
        encoded = _copy(encode_state(state))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"the state is not plain data: {exc}") from None
    checkpoint = EngineCheckpoint(
        key=fold_key(configured),
        at=float(at),
        shoe=None if shoe is None else dict(shoe),
        state=encoded,
        settings=configured.model_dump(mode="json"),
    )
    differs = state_differences(checkpoint.table_state(configured), state)
    if differs:
        raise CheckpointError(f"fields {differs} do not survive the checkpoint")
    return checkpoint


# Read when the engine is imported (at process start): the source on disk is then the code
# running, even if a package upgrade replaces the files before the process restarts.
_FOLD_DIGEST = _fold_source_digest()
