"""Canonical JSON for signatures: RFC 8785, the JSON Canonicalization Scheme (JCS).

Signatures are computed over bytes, and two JSON encoders rarely produce the same bytes
for the same value. JCS fixes the form: object members sorted by the UTF-16 code units of
their names, no insignificant whitespace, strings with only the mandatory escapes, and
numbers printed the way ECMAScript's ``Number.prototype.toString`` prints them
(``1.0`` -> ``1``, ``1e-7`` -> ``1e-7``, ``1e21`` -> ``1e+21``). Libraries exist for every
server language, so the game server can recompute the exact bytes we signed.

NaN and infinities have no JSON form and are rejected.

Fast path: for most values the standard library's encoder, with sorted keys, no whitespace and
no ASCII escaping, already prints exactly the JCS bytes, at a fraction of the cost of the
general algorithm below (which publishing every event paid twice over). It is used only after
a walk proved every part of the value is one where both agree: exact ``dict``/``list``/
``tuple``/``bool``/``None``, strings (``str`` and its subclasses, such as the engine's
``StrEnum`` members: both encoders print a string's characters), integers within +-2**53,
floats that ``repr()`` prints in fixed notation with a fraction (``1e-4 <= |x| < 1e16``;
Python prints ``1e-05`` where ECMAScript prints ``0.00001``), integral floats within +-2**53
(handed to the encoder as the int ECMAScript prints: ``-1.0`` -> ``-1``) and keys without
characters beyond U+FFFF (so code point order is UTF-16 code unit order). Anything else goes
through the general algorithm; a property test proves both give the same bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any


class CanonicalJsonError(ValueError):
    """A value that has no canonical JSON form."""


_FAST_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))
_MAX_EXACT_INT = 2**53
# Python's repr() switches to exponent notation below 1e-4 and from 1e16 on.
_FIXED_REPR_MIN = 1e-4
_FIXED_REPR_MAX = 1e16
_LAST_BMP_CHAR = "\uffff"
_NEEDS_GENERAL: Any = object()


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON-ready value."""
    ready = _encoder_ready(value)
    if ready is _NEEDS_GENERAL:
        return canonical_json_general(value)
    return _FAST_ENCODER.encode(ready).encode("utf-8")


def canonical_json_general(value: Any) -> bytes:
    """:func:`canonical_json` by the general algorithm alone (no fast path)."""
    parts: list[str] = []
    _write(value, parts, "$")
    return "".join(parts).encode("utf-8")


def _encoder_ready(value: Any) -> Any:
    """``value`` in a form the sorted-keys stdlib encoder prints exactly as JCS does, or
    :data:`_NEEDS_GENERAL`. The form is ``value`` itself unless it holds integral floats,
    which become ints (ECMAScript prints ``-1.0`` as ``-1``); containers are copied only then."""
    kind = type(value)
    if isinstance(value, str) or kind is bool or value is None:
        return value
    if kind is int:
        return value if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT else _NEEDS_GENERAL
    if kind is float:
        magnitude = abs(value)
        if value.is_integer():  # False for NaN and the infinities
            return int(value) if magnitude <= _MAX_EXACT_INT else _NEEDS_GENERAL
        return value if _FIXED_REPR_MIN <= magnitude < _FIXED_REPR_MAX else _NEEDS_GENERAL
    if kind is dict:
        copy: dict[str, Any] | None = None
        for key, item in value.items():
            if not isinstance(key, str) or not (key.isascii() or max(key) <= _LAST_BMP_CHAR):
                return _NEEDS_GENERAL
            ready = _encoder_ready(item)
            if ready is not item:
                if ready is _NEEDS_GENERAL:
                    return _NEEDS_GENERAL
                if copy is None:
                    copy = dict(value)
                copy[key] = ready
        return value if copy is None else copy
    if kind is list or kind is tuple:
        items: list[Any] | None = None
        for index, item in enumerate(value):
            ready = _encoder_ready(item)
            if ready is not item:
                if ready is _NEEDS_GENERAL:
                    return _NEEDS_GENERAL
                if items is None:
                    items = list(value)
                items[index] = ready
        return value if items is None else items
    return _NEEDS_GENERAL


def format_number(number: float) -> str:
    """ECMAScript ``Number.prototype.toString`` for a finite double (RFC 8785 section 3.2.2.3)."""
    if not math.isfinite(number):
        raise CanonicalJsonError(f"{number!r} has no JSON form")
    if number == 0:
        return "0"  # also turns -0 into 0, as ECMAScript does
    sign = "-" if number < 0 else ""
    # repr() gives the shortest digit string that round-trips, the same digits ECMAScript picks.
    mantissa, _, exp_text = repr(abs(number)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # Decimal exponent n such that value = 0.d1d2d3... * 10**n (ECMAScript's n).
    leading_zeros = len(int_part + frac_part) - len((int_part + frac_part).lstrip("0"))
    n = len(int_part) - leading_zeros + (int(exp_text) if exp_text else 0)
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        exponent = n - 1
        exp_sign = "+" if exponent >= 0 else "-"
        head = digits[0] + ("." + digits[1:] if k > 1 else "")
        text = f"{head}e{exp_sign}{abs(exponent)}"
    return sign + text


def _utf16_key(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def _write(value: Any, out: list[str], path: str) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int | float):
        out.append(_number(value, path))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, Mapping):
        _write_object(value, out, path)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out, f"{path}[{index}]")
        out.append("]")
    else:
        raise CanonicalJsonError(f"{path}: {type(value).__name__} is not a JSON value")


def _number(value: float, path: str) -> str:
    if isinstance(value, int):
        if abs(value) <= 2**53:
            return str(value)
        # JCS numbers are doubles: a big integer is read as the nearest double by every
        # verifier, so it is canonicalised as that double (as ECMAScript prints it).
        try:
            return format_number(float(value))
        except OverflowError:
            raise CanonicalJsonError(f"{path}: integer {value} is too large for a double") from None
    try:
        return format_number(value)
    except CanonicalJsonError as exc:
        raise CanonicalJsonError(f"{path}: {exc}") from None


def _write_object(value: Mapping[Any, Any], out: list[str], path: str) -> None:
    for key in value:
        if not isinstance(key, str):
            raise CanonicalJsonError(f"{path}: object key {key!r} is not a string")
    out.append("{")
    for index, key in enumerate(sorted(value, key=_utf16_key)):
        if index:
            out.append(",")
        out.append(json.dumps(key, ensure_ascii=False))
        out.append(":")
        _write(value[key], out, f"{path}.{key}")
    out.append("}")
