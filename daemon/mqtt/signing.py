"""HMAC-SHA256 signatures over the canonical JSON form of a message.

A signed message is a JSON object with a ``sig`` member. The signature is
``hex(HMAC-SHA256(key, JCS(message without "sig" and without the unsigned members)))``
where JCS is RFC 8785 (see :mod:`daemon.mqtt.canonical`). For events the only unsigned
member besides ``sig`` is ``published_at``, which changes when an event is republished.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any

from daemon.mqtt.canonical import canonical_json
from daemon.mqtt.secrets import Secret

SIGNATURE_FIELD = "sig"
UNSIGNED_EVENT_FIELDS: frozenset[str] = frozenset({"published_at"})


def signing_bytes(message: Mapping[str, Any], unsigned: Iterable[str] = ()) -> bytes:
    """The exact bytes a signature covers."""
    skip = {SIGNATURE_FIELD, *unsigned}
    return canonical_json({k: v for k, v in message.items() if k not in skip})


def sign(message: Mapping[str, Any], key: Secret, unsigned: Iterable[str] = ()) -> str:
    """Hex HMAC-SHA256 of the message's signing bytes."""
    return sign_bytes(signing_bytes(message, unsigned), key)


def sign_bytes(data: bytes, key: Secret) -> str:
    """Hex HMAC-SHA256 of signing bytes already computed (see :func:`signing_bytes`)."""
    return hmac.new(key.reveal(), data, hashlib.sha256).hexdigest()


def verify(message: Mapping[str, Any], key: Secret, unsigned: Iterable[str] = ()) -> bool:
    """True when ``message["sig"]`` is the right signature (constant-time compare)."""
    given = message.get(SIGNATURE_FIELD)
    if not isinstance(given, str):
        return False
    try:
        expected = sign(message, key, unsigned)
    except ValueError:
        return False
    return hmac.compare_digest(expected, given.lower())
