"""A thread-safe sink that records what a driver hands to the engine."""

from __future__ import annotations

import threading
import time

from common.inputs import CardRead, DeviceConnection, EngineInput


class Collector:
    def __init__(self) -> None:
        self.items: list[EngineInput] = []
        self._cond = threading.Condition()

    def __call__(self, item: EngineInput) -> None:
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float = 10.0) -> bool:
        with self._cond:
            return bool(self._cond.wait_for(lambda: predicate(self.items), timeout))

    def cards(self) -> list[str]:
        with self._cond:
            return [i.card.code for i in self.items if isinstance(i, CardRead)]

    def connections(self) -> list[bool]:
        with self._cond:
            return [i.connected for i in self.items if isinstance(i, DeviceConnection)]


def clock() -> float:
    return time.monotonic()
