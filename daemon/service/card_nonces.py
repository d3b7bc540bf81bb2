"""The secret nonce of each card read on a squeeze table (``table.reveal.mode: squeeze``).

The engine does no I/O: the service draws 16 bytes from the OS's random source (``secrets``) for
every card read and passes them in with it, so the engine's commitment to the card cannot be
guessed from the 52 faces. The journal keeps the nonce with the read; it is published only in the
card's ``card_revealed``.
"""

from __future__ import annotations

import secrets

from common.inputs import CardRead, EngineInput

NONCE_BYTES = 16


def with_nonce(inp: EngineInput, squeeze: bool) -> EngineInput:
    """``inp`` with a fresh nonce when it is a card read of a squeeze table (and has none yet)."""
    if squeeze and isinstance(inp, CardRead) and inp.nonce is None:
        return inp._replace(nonce=secrets.token_hex(NONCE_BYTES))
    return inp
