"""Feed a decoder the same bytes in different cuts and compare what comes out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from drivers.protocols.frames import Decoder

DecoderFactory = Callable[[], Decoder]


def decode_chunks(factory: DecoderFactory, chunks: Iterable[bytes]) -> list[dict[str, Any]]:
    decoder = factory()
    out: list[dict[str, Any]] = []
    for chunk in chunks:
        out += [frame.to_dict() for frame in decoder.feed(chunk, 1.0)]
    out += [frame.to_dict() for frame in decoder.reset("end of input")]
    return out


def assert_split_invariant(factory: DecoderFactory, data: bytes) -> list[dict[str, Any]]:
    """Whole, split at every boundary, one byte at a time: identical output. Returns it."""
    whole = decode_chunks(factory, [data])
    for cut in range(1, len(data)):
        assert decode_chunks(factory, [data[:cut], data[cut:]]) == whole, f"differs when split at {cut}"
    assert decode_chunks(factory, [bytes([b]) for b in data]) == whole
    return whole
