"""The console's one MQTT connection: the tables' topics in, signed commands out, replies back.

It subscribes to the contract's topics only (status, health, state, events and command
replies of every table, or of the configured ones) and never talks to a daemon otherwise.
"""

from __future__ import annotations

import json
import secrets
import threading
from typing import Any

import paho.mqtt.client as mqtt
import structlog
from paho.mqtt.enums import CallbackAPIVersion

from daemon.console.floor import PREFIX, SUFFIXES, Floor
from daemon.console.settings import ConsoleBrokerSettings
from daemon.console.verification import MessageVerifier, Trust
from daemon.mqtt.settings import Protocol
from daemon.mqtt.tls import tls_context

log = structlog.get_logger("baccarat_edge.console")


class BrokerFeed:
    """Connects (and reconnects) to the broker; feeds the floor; carries commands and replies."""

    def __init__(
        self,
        settings: ConsoleBrokerSettings,
        floor: Floor,
        tables: list[str],
        verifier: MessageVerifier | None = None,
    ) -> None:
        self._settings = settings
        self._floor = floor
        self._tables = tables
        self._verifier = verifier if verifier is not None else MessageVerifier()
        self._replies: dict[str, tuple[dict[str, Any], Trust]] = {}
        self._waiting: set[str] = set()
        self._arrived = threading.Condition()
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        mqtt5 = settings.protocol is Protocol.MQTT5
        self._client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"baccarat-edge-console-{secrets.token_hex(4)}",
            protocol=mqtt.MQTTv5 if mqtt5 else mqtt.MQTTv311,
        )
        if settings.tls.enabled:
            self._client.tls_set_context(tls_context(settings.tls))
        if settings.auth is not None:
            password = settings.auth.password.load().reveal_text() if settings.auth.password else None
            self._client.username_pw_set(settings.auth.username, password)
        self._client.reconnect_delay_set(1, 10)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_subscribe = self._on_subscribe
        self._client.on_message = self._on_message

    def topics(self) -> list[str]:
        """What the console subscribes to."""
        levels = self._tables or ["+"]
        return [f"{PREFIX}{t}/{s}" for t in levels for s in (*SUFFIXES, "cmd/reply")]

    def start(self) -> None:
        self._client.connect_async(self._settings.host, self._settings.effective_port, keepalive=30)
        self._client.loop_start()

    def stop(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()

    # ------------------------------------------------------------------ callbacks
    def _on_connect(self, client: mqtt.Client, _u: Any, _f: Any, reason: Any, _p: Any = None) -> None:
        if reason.is_failure:
            log.warning("console_broker_refused", reason=str(reason))
            return
        self.connected.set()
        log.info("console_broker_connected", host=self._settings.host)
        client.subscribe([(topic, 1) for topic in self.topics()])

    def _on_disconnect(self, *_args: Any) -> None:
        self.connected.clear()
        self.subscribed.clear()

    def _on_subscribe(self, *_args: Any) -> None:
        self.subscribed.set()

    def _on_message(self, _c: mqtt.Client, _u: Any, message: mqtt.MQTTMessage) -> None:
        payload = bytes(message.payload)
        if message.topic.endswith("/cmd/reply"):
            table_id = message.topic.removeprefix(PREFIX).removesuffix("/cmd/reply")
            checked = self._verifier.check(table_id, "cmd/reply", payload)
            if checked.trust is Trust.REFUSED:
                self._floor.refused_reply(table_id, checked.reason)
                return
            self._take_reply(payload, checked.trust)
            return
        try:
            self._floor.apply(message.topic, payload)
        except Exception:  # a payload the model did not foresee must not end the MQTT thread
            log.exception("console_message_failed", topic=message.topic[:200])

    def _take_reply(self, payload: bytes, trust: Trust) -> None:
        try:
            body = json.loads(payload)
        except ValueError:
            return
        if not isinstance(body, dict) or not isinstance(body.get("command_id"), str):
            return
        with self._arrived:
            if body["command_id"] in self._waiting:
                self._replies[body["command_id"]] = (body, trust)
                self._arrived.notify_all()

    # ------------------------------------------------------------------ commands
    def send(
        self, topic: str, command: dict[str, Any], timeout: float
    ) -> tuple[dict[str, Any], Trust] | None:
        """Publish a signed command and wait for its reply (and whether it verified); None when
        no reply (that verified, with keys configured) came in ``timeout``."""
        command_id = command["command_id"]
        with self._arrived:
            self._waiting.add(command_id)
        try:
            self._client.publish(topic, json.dumps(command).encode(), qos=1)
            with self._arrived:
                self._arrived.wait_for(lambda: command_id in self._replies, timeout)
                return self._replies.pop(command_id, None)
        finally:
            with self._arrived:
                self._waiting.discard(command_id)
