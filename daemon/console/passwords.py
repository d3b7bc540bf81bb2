"""Password hashes of the console's user file: scrypt (memory-hard), a random salt each.

Stored as ``scrypt$N$r$p$<salt base64>$<hash base64>`` so the cost can be raised later
without invalidating older hashes. Verification compares in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SCHEME = "scrypt"
N, R, P = 2**15, 8, 1
"""32 MiB and ~0.1 s per hash on a pit PC: costly to guess offline, cheap enough to log in."""
_DKLEN = 32
_MAXMEM = 64 * 1024 * 1024
MIN_PASSWORD_CHARS = 10


class PasswordHashError(ValueError):
    """A stored hash that is not in the ``scrypt$N$r$p$salt$hash`` form."""


def hash_password(password: str, *, n: int = N, r: int = R, p: int = P) -> str:
    """A new hash line for ``password`` (a fresh 16-byte salt)."""
    if len(password) < MIN_PASSWORD_CHARS:
        raise ValueError(f"a password needs at least {MIN_PASSWORD_CHARS} characters")
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=_DKLEN, maxmem=_MAXMEM)
    return "$".join([SCHEME, str(n), str(r), str(p), _b64(salt), _b64(digest)])


def check_hash_format(stored: str) -> str:
    """``stored`` if it parses as a hash line, else :class:`PasswordHashError` saying why."""
    _parse(stored)
    return stored


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches the stored hash."""
    n, r, p, salt, digest = _parse(stored)
    candidate = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=len(digest), maxmem=_MAXMEM)
    return hmac.compare_digest(candidate, digest)


def _parse(stored: str) -> tuple[int, int, int, bytes, bytes]:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise PasswordHashError(
            "expected scrypt$N$r$p$salt$hash (make one with `baccarat-edge console --hash-password`)"
        )
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, digest = base64.b64decode(parts[4], validate=True), base64.b64decode(parts[5], validate=True)
    except ValueError:
        raise PasswordHashError("the cost, salt or hash part does not parse") from None
    if n < 2**14 or n & (n - 1) or not 1 <= r <= 32 or not 1 <= p <= 16 or len(salt) < 16 or len(digest) < 16:
        raise PasswordHashError("cost too low (N >= 16384, a power of two) or salt/hash too short")
    return n, r, p, salt, digest


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decoy_hash(stored: list[str]) -> str:
    """A hash of a random password at the cost of the costliest of ``stored``: a log-in with a
    name nobody has is checked against it, so it takes as long as one with a real name and the
    answer's timing does not tell which names exist."""
    params = [_parse(line)[:3] for line in stored] or [(N, R, P)]
    n, r, p = max(params)
    return hash_password(secrets.token_urlsafe(24), n=n, r=r, p=p)
