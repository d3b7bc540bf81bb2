"""MQTT 5 properties packed once: the event PUBLISH properties never change after start-up.

paho packs a publish's :class:`~paho.mqtt.properties.Properties` inside every ``publish()``,
under its message mutex, walking every property name the packet type may carry. While a
backlog drains that was the largest cost the daemon added: packing once took its CPU per
drained event from 207-227 us to 141-152 us (``bench/README.md``, the third pass of
1 Dec 2026, 15:15-16:15 UTC). :class:`FrozenProperties` packs them when built and refuses
any change afterwards, so the bytes on the wire are always the ones packed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paho.mqtt.properties import Properties


class FrozenProperties(Properties):
    """Properties of one packet type, set from ``values`` and packed once; read-only after."""

    def __init__(self, packet_type: int, values: Mapping[str, Any]) -> None:
        super().__init__(packet_type)  # type: ignore[no-untyped-call]
        for name, value in values.items():
            setattr(self, name, value)
        self._frozen: bytes = super().pack()  # type: ignore[no-untyped-call]

    def __setattr__(self, name: str, value: Any) -> None:
        if "_frozen" in self.__dict__:
            raise AttributeError(f"frozen MQTT properties: {name} cannot change after packing")
        if name == "_frozen":
            object.__setattr__(self, name, value)  # Properties' own __setattr__ takes property names only
            return
        super().__setattr__(name, value)  # type: ignore[no-untyped-call]

    def pack(self) -> bytes:
        """The bytes packed when built."""
        return self._frozen
