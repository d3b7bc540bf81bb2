"""Feed a decoder the same bytes in different cuts and compare what comes out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import strategies as st

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


cut_points = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)
"""Where to cut a stream (taken modulo its length + 1, so any offset of any stream; repeats fold)."""


def cut_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``data`` cut at the offsets ``cuts`` name (modulo ``len(data) + 1``), empty pieces kept."""
    points = sorted(c % (len(data) + 1) for c in cuts)
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def assert_same_when_cut(factory: DecoderFactory, data: bytes, cuts: Iterable[int]) -> list[dict[str, Any]]:
    """Cut at the given offsets (hypothesis picks them): the same frames as whole. Returns them."""
    whole = decode_chunks(factory, [data])
    pieces = cut_at(data, cuts)
    assert decode_chunks(factory, pieces) == whole, f"differs when cut into {[len(p) for p in pieces]}"
    return whole
