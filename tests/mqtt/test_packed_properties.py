"""FrozenProperties: packed once, the same bytes paho packs, and never changed afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from paho.mqtt.exception import MQTTException
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from daemon.mqtt.packed_properties import FrozenProperties

EVENT_PROPERTIES: dict[str, Any] = {
    "ContentType": "application/json",
    "PayloadFormatIndicator": 1,
    "UserProperty": [("contract", "baccarat/v1"), ("schema_version", "1")],
}


def paho_packed(packet_type: int, values: dict[str, Any]) -> bytes:
    props = Properties(packet_type)  # type: ignore[no-untyped-call]
    for name, value in values.items():
        setattr(props, name, value)
    packed: bytes = props.pack()  # type: ignore[no-untyped-call]
    return packed


@pytest.mark.parametrize(
    "values",
    [
        {},
        EVENT_PROPERTIES,
        {**EVENT_PROPERTIES, "MessageExpiryInterval": 600},
        {"ContentType": "text/plain; charset=ütf-8", "UserProperty": [("k", "v")] * 3},
    ],
)
def test_the_bytes_are_the_ones_paho_packs(values: dict[str, Any]) -> None:
    frozen = FrozenProperties(PacketTypes.PUBLISH, values)
    assert frozen.pack() == paho_packed(PacketTypes.PUBLISH, values)
    assert frozen.pack() is frozen.pack()  # packed once
    for name, value in values.items():
        assert getattr(frozen, name) == value  # still readable as paho's Properties


def test_a_change_after_packing_is_refused_and_the_bytes_stay() -> None:
    frozen = FrozenProperties(PacketTypes.PUBLISH, EVENT_PROPERTIES)
    packed = frozen.pack()
    with pytest.raises(AttributeError, match="ContentType cannot change"):
        frozen.ContentType = "text/plain"
    with pytest.raises(AttributeError, match="MessageExpiryInterval cannot change"):
        frozen.MessageExpiryInterval = 5
    assert frozen.pack() == packed
    assert frozen.ContentType == "application/json"  # type: ignore[attr-defined]


def test_a_property_the_packet_type_cannot_carry_is_refused_when_built() -> None:
    with pytest.raises(MQTTException, match="ResponseTopic does not apply to packet type Puback"):
        FrozenProperties(PacketTypes.PUBACK, {"ResponseTopic": "x"})
