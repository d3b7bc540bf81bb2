"""The inputs' fast ``__init__`` builds the same objects as the one ``@dataclass`` generated."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

import pytest

from common.cards import Card
from common.inputs import (
    DATACLASS_INITS,
    CardRead,
    CutCardDrawn,
    DeviceConnection,
    DeviceTarget,
    OutsideGameCard,
    OutsideGameMode,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    ShoeVerdict,
    Source,
    StorageState,
    Tick,
    VerdictOutcome,
    _fast_init,
)

SIX = Card.parse("6s")

# (class, the required arguments, every argument set to a non-default value)
CASES: list[tuple[type, dict[str, Any], dict[str, Any]]] = [
    (
        CardRead,
        {"card": SIX, "at": 1.5},
        {
            "card": SIX,
            "at": 1.5,
            "source": Source.CAMERA,
            "position": 2,
            "target": DeviceTarget.B2,
            "transmission_id": "7",
            "confidence": 0.9,
            "raw": "02 44",
            "device": "cam",
        },
    ),
    (
        ReadFailed,
        {"at": 2.0},
        {
            "at": 2.0,
            "source": Source.CAMERA,
            "reason": "card-code error",
            "code": 3,
            "raw": "ff",
            "device": "r2",
            "position": 1,
        },
    ),
    (CutCardDrawn, {"at": 3.0}, {"at": 3.0, "source": Source.SYSTEM, "raw": "43", "device": "r2"}),
    (
        ReaderSignal,
        {"kind": ReaderSignalKind.LOCKED, "at": 4.0},
        {
            "kind": ReaderSignalKind.ERROR_RAISED,
            "at": 4.0,
            "code": 5,
            "detail": "jam",
            "raw": "45",
            "device": "r2",
            "command_id": "c1",
        },
    ),
    (
        OutsideGameCard,
        {"card": SIX, "mode": OutsideGameMode.LOCK, "at": 5.0},
        {
            "card": SIX,
            "mode": OutsideGameMode.ERROR,
            "at": 5.0,
            "transmission_id": "9",
            "raw": "64",
            "device": "r2",
        },
    ),
    (
        ShoeVerdict,
        {"outcome": VerdictOutcome.TIE, "player_pair": True, "banker_pair": False, "at": 6.0},
        {
            "outcome": VerdictOutcome.BANKER,
            "player_pair": False,
            "banker_pair": True,
            "at": 6.0,
            "raw": "47",
            "device": "r2",
        },
    ),
    (
        DeviceConnection,
        {"connected": False, "at": 7.0},
        {"connected": True, "at": 7.0, "device": "r2", "detail": "back"},
    ),
    (Tick, {"at": 8.0}, {"at": 8.0}),
    (StorageState, {"full": True, "at": 9.0}, {"full": False, "at": 9.0, "detail": "disk full"}),
]


def _by_dataclass_init(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    obj: Any = object.__new__(cls)
    DATACLASS_INITS[cls](obj, *args, **kwargs)
    return obj


def test_every_plain_input_class_has_the_fast_init() -> None:
    assert set(DATACLASS_INITS) == {cls for cls, _, _ in CASES}


@pytest.mark.parametrize(("cls", "required", "full"), CASES, ids=[c[0].__name__ for c in CASES])
def test_fast_init_builds_the_same_object(cls: type, required: dict[str, Any], full: dict[str, Any]) -> None:
    assert set(full) == {f.name for f in dataclasses.fields(cls)}  # every field set in the full case
    for kwargs in (required, full):
        expected = _by_dataclass_init(cls, (), kwargs)
        for built in (cls(**kwargs), cls(*kwargs.values())):  # by keyword and by position
            assert built == expected
            assert hash(built) == hash(expected)
            assert repr(built) == repr(expected)
            assert dataclasses.astuple(built) == dataclasses.astuple(expected)


@pytest.mark.parametrize(("cls", "required", "full"), CASES, ids=[c[0].__name__ for c in CASES])
def test_fast_init_keeps_the_signature_and_stays_frozen(
    cls: type, required: dict[str, Any], full: dict[str, Any]
) -> None:
    fast = inspect.signature(cls.__dict__["__init__"])
    original = inspect.signature(DATACLASS_INITS[cls])
    assert [(p.name, p.default, p.kind) for p in fast.parameters.values()] == [
        (p.name, p.default, p.kind) for p in original.parameters.values()
    ]
    assert typing.get_type_hints(cls.__dict__["__init__"]) == typing.get_type_hints(DATACLASS_INITS[cls])
    built = cls(**required)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.at = 0.0
    with pytest.raises(TypeError, match="missing"):
        cls()
    with pytest.raises(TypeError, match="unexpected keyword"):
        cls(**required, no_such_field=1)


def test_fast_init_refuses_a_class_whose_post_init_it_would_skip() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="__post_init__"):
        _fast_init(Checked)
