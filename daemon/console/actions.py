"""A person's action from the page: checked against their role, signed with their own key,
sent on the table's command topic, answered with the table's reply.

The table checks everything again (signature, key role, state); the console's own check
only keeps a person from sending what their role cannot, with a clear message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from daemon.console.feed import BrokerFeed
from daemon.console.users import User
from daemon.engine.commands import ACTIONS
from daemon.mqtt.secrets import SecretError
from daemon.mqtt.supervisor_commands import signed_command
from daemon.mqtt.topics import TableTopics, TopicError

log = structlog.get_logger("baccarat_edge.console")

MAX_ARGS_CHARS = 2000


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What the page shows: ``http_status`` 200 with the reply, or an error text."""

    http_status: int
    body: dict[str, Any]


def perform(
    feed: BrokerFeed, user: User, table_id: Any, action: Any, args: Any, timeout: float
) -> ActionResult:
    """Check, sign, send and await one command."""
    if not isinstance(action, str) or action not in ACTIONS:
        return ActionResult(400, {"error": f"unknown action {str(action)[:40]!r}"})
    if action not in user.role.actions:
        return ActionResult(403, {"error": f"{user.name} ({user.role.value}) may not {action}"})
    if not isinstance(args, dict) or len(repr(args)) > MAX_ARGS_CHARS:
        return ActionResult(400, {"error": "args must be a JSON object of modest size"})
    try:
        topics = TableTopics(str(table_id))
    except TopicError as exc:
        return ActionResult(400, {"error": str(exc)})
    try:
        key = user.load_key()
    except (SecretError, OSError) as exc:
        log.error("console_key_unreadable", user=user.name, error=str(exc))
        return ActionResult(500, {"error": f"the signing key of {user.name} cannot be read: {exc}"})
    command = signed_command(key, topics.table_id, action, args, key_id=user.key_id)
    answer = feed.send(topics.cmd, command, timeout)
    log.info(
        "console_command",
        user=user.name,
        key_id=user.key_id,
        table_id=topics.table_id,
        action=action,
        command_id=command["command_id"],
        status=answer[0].get("status") if answer else "no_reply",
    )
    if answer is None:
        return ActionResult(
            504,
            {"command_id": command["command_id"], "error": f"no reply from the table within {timeout:g} s"},
        )
    reply, trust = answer
    return ActionResult(
        200, {"command_id": command["command_id"], "reply": reply, "reply_trust": trust.value}
    )
