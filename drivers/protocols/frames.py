"""What a protocol decoder hands back for each frame it recognised or refused.

A decoder never raises on input bytes: every byte ends up either in a decoded
frame (``input`` set), a duplicate transmission (``duplicate``), a command reply
(``reply``), a rejected frame (``rejected`` names the reason), or is still
buffered as the start of a frame that has not finished arriving.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple, Protocol, runtime_checkable

from common.cards import Card
from common.inputs import (
    BettingClosed,
    BettingOpened,
    CardRead,
    CutCardDrawn,
    OutsideGameCard,
    ReaderSignal,
    ReadFailed,
    RevealSignal,
    ShoeSignal,
    ShoeVerdict,
)

ReaderInput = (
    CardRead
    | ReadFailed
    | OutsideGameCard
    | CutCardDrawn
    | ReaderSignal
    | ShoeVerdict
    | ShoeSignal
    | BettingOpened
    | BettingClosed
    | RevealSignal
)
"""The engine inputs a reader's decoder can produce."""


@dataclass(frozen=True, slots=True)
class CommandReply:
    """A shoe's answer to a host command: ACK, or NAK with a reason code."""

    ok: bool
    code: str | None = None
    meaning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "code": self.code, "meaning": self.meaning}


class DecodedFrame(NamedTuple):
    """One frame out of a decoder (immutable; ``_replace`` makes a changed copy).

    A ``NamedTuple`` rather than a frozen dataclass: a frozen dataclass's ``__init__`` sets
    each field through ``object.__setattr__``, which made building one cost ~1.7 us against
    ~0.3 us, on every frame of a 4,800-baud line (bench/README.md, "plain code against the tricks").

    Exactly one of ``input``, ``reply``, ``notice`` and ``rejected`` is set. A
    duplicate transmission carries the ``input`` (or ``notice``) it repeats with
    ``duplicate=True``; drivers count it and do not forward it. ``notice`` is a
    valid frame with no engine input: drivers log and count it (no current
    decoder has such a frame; an Angel Eye ``d`` card drawn outside the game
    flow is an ``OutsideGameCard`` input). ``raw`` holds the bytes the frame was made of.

    ``rescan`` goes with ``rejected`` when the refused bytes stood for a dealt card (an
    Angel Eye ``D`` frame with a bad BCC or an invalid target/card byte, or a skipped
    sequence mark): drivers forward it, so the engine asks for a rescan instead of
    silently missing a card.
    """

    raw: bytes
    input: ReaderInput | None = None
    rejected: str | None = None
    reply: CommandReply | None = None
    notice: str | None = None
    duplicate: bool = False
    rescan: ReadFailed | None = None

    @property
    def status(self) -> str:
        """``"input"``, ``"notice"``, ``"duplicate"``, ``"reply"`` or ``"rejected"``."""
        if self.rejected is not None:
            return "rejected"
        if self.reply is not None:
            return "reply"
        if self.duplicate:
            return "duplicate"
        return "notice" if self.notice is not None else "input"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the ``decode`` command prints one per line)."""
        out: dict[str, Any] = {"status": self.status, "raw": self.raw.hex(" ")}
        if self.rejected is not None:
            out["reason"] = self.rejected
        if self.rescan is not None:
            out["rescan"] = input_to_dict(self.rescan)
        if self.reply is not None:
            out["reply"] = self.reply.to_dict()
        if self.notice is not None:
            out["notice"] = self.notice
        if self.input is not None:
            out["input"] = input_to_dict(self.input)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def input_to_dict(inp: ReaderInput) -> dict[str, Any]:
    """JSON-ready form of a reader input, with its type name under ``type``."""
    out: dict[str, Any] = {"type": type(inp).__name__}
    for name in inp._fields:
        value = getattr(inp, name)
        if isinstance(value, Card):
            value = value.code
        elif isinstance(value, Enum):
            value = value.value
        out[name] = value
    return out


class Decoder(Protocol):
    """A pure, incremental wire-protocol decoder."""

    def feed(self, data: bytes, at: float) -> list[DecodedFrame]:
        """Consume bytes observed at time ``at``; return every frame they completed."""
        ...

    def reset(self, reason: str = ...) -> list[DecodedFrame]:
        """Drop any partial frame (device unplugged); return it as a rejected frame, if any."""
        ...

    @property
    def has_partial_frame(self) -> bool:
        """Whether bytes of an unfinished frame are buffered."""
        ...


@runtime_checkable
class DuplicateCounting(Protocol):
    """A decoder that can count repeat transmissions instead of returning them as frames."""

    def drop_duplicates(self) -> None:
        """From now on, repeats are counted (``take_dropped_duplicates``), not returned."""
        ...

    def take_dropped_duplicates(self) -> int:
        """Repeats dropped since the last call."""
        ...


def hex_raw(data: bytes) -> str:
    """The ``raw`` audit form of wire bytes stored in engine inputs."""
    return data.hex(" ")
