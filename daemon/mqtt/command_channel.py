"""The command channel: each message on ``cmd`` is verified
(:class:`daemon.mqtt.commands.CommandVerifier`), refused at once (journaled as a
``command_refused`` event, answered) or handed to the engine's queue with the function that
answers it. Replies go to ``cmd/reply`` and, with MQTT 5, to the request's Response Topic."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

from common.inputs import SupervisorCommand
from daemon.journal.records import DeliveryEvent
from daemon.journal.store import Journal
from daemon.mqtt.alerts import COMMAND_REFUSED_KIND
from daemon.mqtt.commands import CommandVerifier, Refusal, Verified
from daemon.mqtt.connection import CommandMessage, Connection
from daemon.mqtt.counters import Counters
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.refusal_limit import RefusalLimiter
from daemon.mqtt.resend_command import ResendCommands
from daemon.mqtt.roles import PUBLISHER_ACTIONS
from daemon.mqtt.secrets import Secret

log = logging.getLogger(__name__)


class CommandAnswer(TypedDict):
    """The answer to one command, as the reply carries it: ``event_id`` and ``seq`` name the
    journaled ``command_accepted``/``command_refused`` event when there is one."""

    accepted: bool
    reason: NotRequired[str | None]
    event_id: NotRequired[str]
    seq: NotRequired[int]


def refused(reason: str) -> CommandAnswer:
    """A refusal with no journaled event behind it (the handler failed, the journal stopped)."""
    return CommandAnswer(accepted=False, reason=reason)


ReplyFn = Callable[[CommandAnswer], None]
"""Answers one command, from any thread, once (later calls are ignored)."""

CommandHandler = Callable[[SupervisorCommand, ReplyFn], None]
"""Receives a verified engine command and the function to answer it with. Must return
quickly (hand the command to the engine's queue); reply when the engine has decided."""


class CommandChannel:
    """Verifies, dispatches and answers the commands of one table (network thread, outside
    paho's callbacks; replies from whichever thread answers)."""

    def __init__(
        self,
        connection: Connection,
        verifier: CommandVerifier,
        limiter: RefusalLimiter,
        journal: Journal,
        *,
        handler: CommandHandler | None,
        events_key: Secret | None,
        counters: Counters,
        clock: Callable[[], float],
        wake: Callable[[], None],
        resend: ResendCommands | None = None,
    ) -> None:
        self._connection = connection
        self._resend = resend
        self._verifier = verifier
        self._journal = journal
        self._handler = handler
        self._events_key = events_key
        self._counters = counters
        self._clock = clock
        self._wake = wake
        self._limiter = limiter
        self._successor: CommandChannel | None = None

    def hand_over(self, successor: CommandChannel) -> None:
        """A reload replaces this channel's publisher: replies still owed (commands queued for
        the engine) go out through ``successor``'s connection, signed with its events key, from
        now on; this connection is about to stop, and a reply published on it would be lost.
        Paho queues a QoS 1 reply until the successor's connection is up."""
        self._successor = successor

    def serve(self, messages: list[CommandMessage]) -> None:
        """Handle the messages that arrived, then journal the summary of a refusal window
        that has passed (called after every network loop turn, with or without messages)."""
        for message in messages:
            self.handle(message)
        self._journal_summary_when_due()

    def handle(self, message: CommandMessage) -> None:
        """Verify one ``cmd`` message; refuse it or hand it to the engine."""
        try:
            outcome = self._verifier.check(message.payload)
        except Exception as exc:  # e.g. the journal failing: refuse, never stop the channel
            log.exception("command verification failed")
            outcome = Refusal("internal_error", f"command could not be checked: {exc}")
        if isinstance(outcome, Verified) and outcome.command.action in PUBLISHER_ACTIONS:
            served = self._serve_publisher_action(outcome)
            if isinstance(served, str):
                self._counters.commands_accepted += 1
                log.info("command %s accepted: %s", outcome.command.action, served)
                self._send_reply(
                    message,
                    outcome.command.command_id,
                    outcome.command.action,
                    accepted=True,
                    code=None,
                    reason=served,
                    extra={},
                )
                return
            outcome = served
        if isinstance(outcome, Refusal):
            self._counters.commands_refused += 1
            self._journal_summary_when_due()
            if self._limiter.admit(time.monotonic(), outcome.code, self._clock()):
                log.warning("command refused: %s (%s)", outcome.code, outcome.reason)
                extra = self._journal_refusal(outcome)
            else:
                extra = {}  # counted into the window's summary event
            self._send_reply(
                message,
                outcome.command_id,
                outcome.action,
                accepted=False,
                code=outcome.code,
                reason=outcome.reason,
                extra=extra,
            )
            return
        self._dispatch(outcome, message)

    def _serve_publisher_action(self, verified: Verified) -> Refusal | str:
        """A command the publisher serves itself (``resend``): the reply's reason, or a refusal."""
        request = verified.request
        if self._resend is None:
            return Refusal(
                "unknown_action",
                f"{request.action!r} is not served here",
                request.command_id,
                request.action,
                verified.command.actor,
                request.key_id,
            )
        try:
            return self._resend.serve(verified)
        except Exception as exc:  # e.g. the journal failing: refuse, never stop the channel
            log.exception("resend command failed")
            return Refusal(
                "internal_error",
                f"resend could not be served: {exc}",
                request.command_id,
                request.action,
                verified.command.actor,
                request.key_id,
            )

    def _journal_refusal(self, refusal: Refusal) -> dict[str, Any]:
        """Record a command refused before the engine (bad signature, forbidden, replay, stale,
        unknown action, malformed), with the key it names, as a ``command_refused`` event on
        the events stream: an auditor sees every attempt, not only the log. Returns the
        reply's ``event_id``/``seq``."""
        try:
            event = self._journal.append_delivery_event(
                DeliveryEvent(
                    kind=COMMAND_REFUSED_KIND,
                    at=self._clock(),
                    data={
                        "command_id": refusal.command_id,
                        "action": refusal.action,
                        "actor": refusal.actor,
                        "key_id": refusal.key_id,
                        "code": refusal.code,
                        "reason": refusal.reason,
                        "refused_by": "edge",
                    },
                )
            )
        except Exception:  # the reply still goes out; the failure is in the log
            log.exception("refused command could not be journaled")
            return {}
        self._wake()
        return {"event_id": event.event_id, "seq": event.seq}

    def flush(self) -> None:
        """Journal the summary of the refusal window still open (the channel stops)."""
        self._journal_summary(math.inf)

    def _journal_summary_when_due(self) -> None:
        self._journal_summary(time.monotonic())

    def _journal_summary(self, now: float) -> None:
        summary = self._limiter.take_summary(now)
        if summary is None:
            return
        codes = ", ".join(f"{code} x{count}" for code, count in summary.codes.items())
        log.warning("%d more commands refused (%s): journaled as one summary", summary.count, codes)
        try:
            self._journal.append_delivery_event(
                DeliveryEvent(
                    kind=COMMAND_REFUSED_KIND,
                    at=self._clock(),
                    data={
                        "command_id": None,
                        "action": None,
                        "actor": None,
                        "key_id": None,
                        "code": "refusals_aggregated",
                        "reason": f"{summary.count} more commands refused in one "
                        f"{self._limiter.window_s:g} s window ({codes}): counted, not journaled one by one",
                        "refused_by": "edge",
                        "aggregated": summary.count,
                        "codes": summary.codes,
                        "first_at": summary.first_at,
                        "last_at": summary.last_at,
                    },
                )
            )
        except Exception:
            log.exception("refusal summary could not be journaled")
            return
        self._wake()

    def _dispatch(self, verified: Verified, message: CommandMessage) -> None:
        command = verified.command
        answered = threading.Event()

        def reply(answer: CommandAnswer) -> None:
            if answered.is_set():
                return
            answered.set()
            accepted = answer["accepted"]
            reason = answer.get("reason")
            extra: dict[str, Any] = {}
            if "event_id" in answer:
                extra["event_id"] = answer["event_id"]
            if "seq" in answer:
                extra["seq"] = answer["seq"]
            if accepted:
                self._counters.commands_accepted += 1
            else:
                self._counters.commands_refused += 1
            code = None if accepted else "refused_by_table"
            self._send_reply(
                message,
                command.command_id,
                command.action,
                accepted=accepted,
                code=code,
                reason=reason,
                extra=extra,
            )

        try:
            if self._handler is None:
                reply(refused(f"no table engine is attached to handle {command.action!r}"))
            else:
                self._handler(command, reply)
        except Exception as exc:
            log.exception("command handler failed")
            reply(refused(f"command handler failed: {exc}"))

    def _send_reply(
        self,
        message: CommandMessage,
        command_id: str | None,
        action: str | None,
        *,
        accepted: bool,
        code: str | None,
        reason: str | None,
        extra: dict[str, Any],
    ) -> None:
        successor = self._successor
        if successor is not None:
            successor._send_reply(
                message, command_id, action, accepted=accepted, code=code, reason=reason, extra=extra
            )
            return
        body: dict[str, Any] = {
            "table_id": self._connection.table_id,
            "command_id": command_id,
            "action": action,
            "status": "accepted" if accepted else "refused",
            "code": code,
            "reason": reason,
            "ts": self._clock(),
            **extra,
        }
        payload = encode(signed_message(body, self._events_key))
        props = self._connection.json_properties()
        if props is not None and message.correlation is not None:
            props.CorrelationData = message.correlation
        reply_topic = self._connection.topics.cmd_reply
        self._connection.publish(reply_topic, payload, properties=props)
        response_topic = message.response_topic
        if response_topic and response_topic != reply_topic:
            if reply_topic_allowed(response_topic, reply_topic):
                self._connection.publish(response_topic, payload, properties=props)
            else:
                log.warning("response topic %r ignored: outside %s/#", response_topic[:200], reply_topic)


def reply_topic_allowed(topic: str, reply_topic: str) -> bool:
    """Whether ``topic`` is a publishable topic under ``reply_topic/``: an MQTT 5 Response
    Topic is the requester's choice, so it may only name the table's own reply subtree
    (never its events, state or status topics, nor another table's)."""
    return (
        topic.startswith(reply_topic + "/")
        and len(topic.encode("utf-8", errors="replace")) <= 65535
        and "+" not in topic
        and "#" not in topic
        and "\0" not in topic
    )
