"""JSON form of every engine input, so the journal can store them and replay them.

Each input becomes ``{"type": <class name>, <field>: <value>, ...}``: cards as their code
(``"8s"``), enums as their value, everything else as JSON. The mapping is derived from the
fields of :data:`common.inputs.EngineInput` (NamedTuples: ``_fields``, ``_field_defaults``),
so an input type or field the engine adds later is covered as long as its field types are
among the ones handled here (a test walks every input type to prove it).
"""

from __future__ import annotations

import json
import types
import typing
from enum import Enum
from typing import Any

from common import inputs as engine_inputs
from common.cards import Card, CardParseError
from common.inputs import EngineInput


class CodecError(ValueError):
    """A journaled input that cannot be decoded (names the type and field)."""


def input_types() -> dict[str, type[Any]]:
    """Every engine input class by name."""
    return {cls.__name__: cls for cls in typing.get_args(EngineInput)}


_HINTS: dict[str, dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls.__name__)
    if hints is None:
        hints = _HINTS[cls.__name__] = typing.get_type_hints(cls, vars(engine_inputs))
    return hints


def encode_input(inp: EngineInput) -> dict[str, Any]:
    """JSON-ready dict of one input."""
    cls = type(inp)
    if cls.__name__ not in input_types():
        raise CodecError(f"{cls.__name__} is not an engine input type")
    out: dict[str, Any] = {"type": cls.__name__}
    for name in inp._fields:
        out[name] = _encode_value(getattr(inp, name))
    return out


def _encode_value(value: Any) -> Any:
    if isinstance(value, Card):
        return value.code
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _encode_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode_value(v) for v in value]
    return value


def decode_input(data: dict[str, Any]) -> EngineInput:
    """Rebuild an input from :func:`encode_input`'s form; CodecError says what was wrong."""
    if not isinstance(data, dict):
        raise CodecError(f"journaled input must be an object, got {type(data).__name__}")
    type_name = data.get("type")
    cls = input_types().get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise CodecError(f"unknown input type {type_name!r}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    unknown = set(data) - set(cls._fields) - {"type"}
    if unknown:
        raise CodecError(f"{type_name}: unknown field(s) {sorted(unknown)}")
    for name in cls._fields:
        if name not in data:
            if name not in cls._field_defaults:
                raise CodecError(f"{type_name}.{name}: missing")
            continue
        try:
            kwargs[name] = _decode_value(data[name], hints[name])
        except (ValueError, TypeError, CardParseError) as exc:
            raise CodecError(f"{type_name}.{name}: {exc}") from None
    result: EngineInput = cls(**kwargs)
    return result


def _decode_value(value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None:
            if type(None) in options:
                return None
            raise ValueError("must not be null")
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode_value(value, option)
            except (ValueError, TypeError, CardParseError) as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"expected an object, got {type(value).__name__}")
        return dict(value)
    if hint is Card:
        return Card.parse(value)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true/false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        return value
    raise TypeError(f"the journal codec does not handle field type {hint!r}")


def dumps_input(inp: EngineInput) -> str:
    """Compact JSON text of one input."""
    return json.dumps(encode_input(inp), separators=(",", ":"), sort_keys=True)


def loads_input(text: str) -> EngineInput:
    """Inverse of :func:`dumps_input`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CodecError(f"journaled input is not JSON: {exc}") from None
    return decode_input(data)
