"""An embedded MQTT broker for the first-run demo: amqtt in its own thread and event loop.

Only for ``baccarat-edge demo`` and tests of it: it listens on 127.0.0.1 only,
allows anonymous clients, keeps nothing on disk and speaks MQTT 3.1.1 (amqtt
refuses MQTT 5), so the daemon's broker section sets ``protocol: "3.1.1"``.
Production tables use a real broker (see ``config/mosquitto/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from concurrent.futures import Future
from typing import Any


def free_local_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class EmbeddedBroker:
    """amqtt 0.12.1 on 127.0.0.1:``port``, started and stopped from synchronous code."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port or free_local_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker: Any = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def _config(self) -> dict[str, Any]:
        return {
            "listeners": {
                "default": {"type": "tcp", "bind": f"{self.host}:{self.port}", "max_connections": 50},
            },
            # Only anonymous auth: no event/packet loggers, no $SYS publisher (noise in the demo).
            "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
        }

    def start(self, timeout: float = 10.0) -> EmbeddedBroker:
        """Start the broker thread and wait until the port accepts connections."""
        if self._thread is not None:
            return self
        # amqtt logs every client that disconnects without DISCONNECT as a warning: demo noise.
        logging.getLogger("amqtt").setLevel(logging.ERROR)
        started: Future[None] = Future()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, args=(self._loop, started), name="demo-broker", daemon=True
        )
        self._thread.start()
        try:
            # Broker.start() returns once its listener is bound, so this is "accepting connections".
            started.result(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, loop: asyncio.AbstractEventLoop, started: Future[None]) -> None:
        asyncio.set_event_loop(loop)
        try:
            from amqtt.broker import Broker

            async def boot() -> None:
                self._broker = Broker(self._config(), loop=loop)
                await self._broker.start()

            loop.run_until_complete(boot())
        except BaseException as exc:  # report any start failure to the caller's thread
            started.set_exception(exc)
            loop.close()
            return
        started.set_result(None)
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the broker down and join its thread."""
        loop, thread, broker = self._loop, self._thread, self._broker
        if loop is None or thread is None:
            return
        if broker is not None and loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(broker.shutdown(), loop).result(timeout=timeout)
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=timeout)
        self._loop = self._thread = self._broker = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
