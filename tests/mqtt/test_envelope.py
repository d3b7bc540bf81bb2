"""The event payload on the wire: one serialisation that carries the signed bytes verbatim."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.journal.records import JournaledEvent
from daemon.mqtt.canonical import CanonicalJsonError
from daemon.mqtt.envelope import encode, event_envelope, event_payload
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, signing_bytes, verify

KEY = Secret(b"events-key", "test")

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
)
event_data = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        json_leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=10,
    ),
    max_size=5,
)


def journaled(
    data: dict[str, Any], at: float = 1_764_400_000.25, shoe_id: str | None = "S-1"
) -> JournaledEvent:
    return JournaledEvent(
        seq=42,
        event_id="0b5c8f8e-8f43-5d1e-9d8e-3f1f1c7a2b10",
        kind="round_completed",
        at=at,
        shoe_id=shoe_id,
        hand=7,
        source="reader",
        data=data,
        origin="engine",
        journaled_at=at,
    )


def same_json_value(a: Any, b: Any) -> bool:
    """Equal as JSON values (1 and 1.0 are the same number)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return bool(a == b)


@settings(max_examples=150)
@given(event_data, st.floats(min_value=0, max_value=4e9), st.floats(min_value=0, max_value=4e9))
def test_signed_payload_carries_the_envelope_and_its_signing_bytes(
    data: dict[str, Any], at: float, published_at: float
) -> None:
    event = journaled(data, at)
    payload = event_payload(event, "T1", published_at, KEY)
    message = json.loads(payload)
    reference = json.loads(encode(event_envelope(event, "T1", published_at, KEY)))
    assert same_json_value(message, reference)
    assert message["sig"] == reference["sig"]
    assert verify(message, KEY, UNSIGNED_EVENT_FIELDS)
    assert list(message)[-2:] == ["published_at", "sig"]
    signed = signing_bytes(message, UNSIGNED_EVENT_FIELDS)
    assert payload.startswith(signed[:-1] + b',"published_at":')


def test_republishing_changes_only_published_at() -> None:
    event = journaled({"bets": {"Tie": {"multiplier_float": 8.0}}, "card": "8s"})
    first = json.loads(event_payload(event, "T1", 1_764_400_001.5, KEY))
    again = json.loads(event_payload(event, "T1", 1_764_400_777.125, KEY))
    assert first["published_at"] == 1_764_400_001.5
    assert again["published_at"] == 1_764_400_777.125
    assert {k: v for k, v in first.items() if k != "published_at"} == {
        k: v for k, v in again.items() if k != "published_at"
    }
    assert first["data"]["bets"]["Tie"]["multiplier_float"] == 8  # ECMAScript form of 8.0


def test_unsigned_payload_is_the_compact_envelope() -> None:
    event = journaled({"card": "8s"}, shoe_id=None)
    payload = event_payload(event, "T1", 1_764_400_001.5, None)
    assert payload == encode(event_envelope(event, "T1", 1_764_400_001.5, None))
    assert "sig" not in json.loads(payload)


@pytest.mark.parametrize("key", [KEY, None])
def test_a_value_without_a_json_form_is_refused_with_a_value_error(key: Secret | None) -> None:
    with pytest.raises(ValueError, match=r"JSON|\$\.data\.confidence"):
        event_payload(journaled({"confidence": math.nan}), "T1", 1.5, key)
    with pytest.raises(ValueError, match="JSON"):
        event_payload(journaled({}), "T1", math.nan, key)


def test_canonical_refusal_names_the_member() -> None:
    with pytest.raises(CanonicalJsonError, match=r"\$\.data\.read\.confidence"):
        event_payload(journaled({"read": {"confidence": math.inf}}), "T1", 1.5, KEY)
