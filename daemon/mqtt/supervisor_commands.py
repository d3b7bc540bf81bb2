"""Signed supervisor commands, as the game server and the staff send them (used by the demo
and ``baccarat-edge command``).

The wire form and the signature are the command channel's (``daemon.mqtt.commands``):
an HMAC-SHA256 over the RFC 8785 canonical JSON of the command without ``sig``.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from typing import Any

import paho.mqtt.client as mqtt

from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import sign
from daemon.mqtt.topics import TableTopics


def signed_command(
    key: Secret,
    table_id: str,
    action: str,
    args: dict[str, Any] | None = None,
    *,
    actor: str = "supervisor:demo",
    ts: float | None = None,
    key_id: str | None = None,
) -> dict[str, Any]:
    """A command ready to publish on ``baccarat/v1/{table_id}/cmd``: with ``key_id`` signed
    with that keyring key (the table takes the actor from the key, so none is sent), else a
    legacy ``command_key`` command declaring ``actor``."""
    command: dict[str, Any] = {
        "table_id": table_id,
        "action": action,
        "args": args or {},
        "command_id": f"c-{secrets.token_hex(6)}",
        "ts": time.time() if ts is None else ts,
        "nonce": secrets.token_hex(12),
    }
    if key_id is None:
        command["actor"] = actor
    else:
        command["key_id"] = key_id
    command["sig"] = sign(command, key)
    return command


class CommandSender:
    """Publishes signed commands on a connected client and waits for each reply."""

    def __init__(self, client: mqtt.Client, table_id: str, key: Secret, key_id: str | None = None) -> None:
        self._client = client
        self._table_id = table_id
        self._key = key
        self._key_id = key_id
        self._topics = TableTopics(table_id)
        self._replies: dict[str, dict[str, Any]] = {}
        self._arrived = threading.Condition()

    @property
    def reply_topic(self) -> str:
        return self._topics.cmd_reply

    def on_reply(self, payload: bytes) -> None:
        """Feed every message of the reply topic here (from the client's on_message)."""
        try:
            body = json.loads(payload)
        except ValueError:
            return
        if isinstance(body, dict) and isinstance(body.get("command_id"), str):
            with self._arrived:
                self._replies[body["command_id"]] = body
                self._arrived.notify_all()

    def send(
        self,
        action: str,
        args: dict[str, Any] | None = None,
        timeout: float = 10.0,
        *,
        ts: float | None = None,
    ) -> dict[str, Any]:
        """Publish one command; return its reply (``{"accepted": False, ...}`` on timeout). ``ts``: the
        time it was issued (default now)."""
        command = signed_command(self._key, self._table_id, action, args, key_id=self._key_id, ts=ts)
        self._client.publish(self._topics.cmd, json.dumps(command).encode(), qos=1)
        command_id = command["command_id"]
        with self._arrived:
            self._arrived.wait_for(lambda: command_id in self._replies, timeout)
            return self._replies.get(
                command_id, {"accepted": False, "reason": f"no reply within {timeout:.0f} s"}
            )
