"""The publisher: drains the journal to the broker in ``seq`` order, QoS 1, and runs the
command channel.

Threads
-------
* **network** (:mod:`daemon.mqtt.connection`, ours, not paho's ``loop_start``): connects
  with our own exponential backoff with jitter, then runs ``client.loop()``; paho callbacks
  run here and only queue what they received (PUBACKs, ``cmd`` messages); after each
  ``loop()`` call, with no paho lock held, it serves the queued commands
  (:mod:`daemon.mqtt.command_channel`).
* **drain** (this module): settles PUBACKs through the delivery window
  (:mod:`daemon.mqtt.window`, pure; carried out by :mod:`daemon.mqtt.delivery`: the only
  owner of the in-flight map, paho ``mid`` -> ``seq``), publishes undelivered events while
  fewer than ``inflight_window`` are unacknowledged, and the state and health
  (:mod:`daemon.mqtt.status`).

Callbacks only append to a deque, set an event or call paho itself, so no lock of ours is
ever taken while paho holds its own (paho calls ``on_publish`` under its message mutex).
Journal housekeeping (compaction, the ``journal_full`` alert) is the service's
(:mod:`daemon.service.journal_housekeeping`).

Delivery guarantees
-------------------
An event is marked delivered only when its PUBACK arrives. While the connection is down,
paho keeps the (at most ``inflight_window``) unacknowledged events and resends them first,
in order, after the reconnect; everything else stays in the journal until there is room.
After a restart the drain starts again at the first undelivered event. Delivery is
therefore at-least-once, in ``seq`` order; consumers deduplicate by ``event_id``.

A PUBACK with a failure reason code is either **permanent**
(:data:`~daemon.mqtt.window.PERMANENT_REASON_CODES`: not authorized, topic name invalid,
payload format invalid, packet too large): the event is dead-lettered (kept in the journal
for audit, an ``mqtt_dead_letter`` alert names it); or **transient** (any other failure,
e.g. 0x80 unspecified, 0x83 implementation specific, 0x91 packet id in use, 0x97 quota
exceeded): the event stays undelivered and is published again after a backoff, at most
``delivery.refused_retries`` times; refused once more after that, it is dead-lettered like a
permanent refusal. An ``mqtt_delivery_failing`` alert is open from the first transient
failure until an acknowledgement arrives with no refused event waiting.

While a refused event waits for its retry, the window falls to that one event: refused events
go out again one at a time, lowest ``seq`` first, each only after the previous one was
acknowledged or dead-lettered, and nothing newer is published until none is left. The broker
therefore receives events in ``seq`` order, except the (at most ``inflight_window - 1``) newer
events that were already in flight when the first refusal arrived: those may be acknowledged
before the refused one, a gap its retry fills.

On every (re)connect, in this order: ``status`` = online (retained), subscribe to ``cmd``,
republish the retained ``state``, then resume draining. :attr:`Publisher.subscribed` is set
when the broker acknowledged the ``cmd`` subscription. The retained ``state`` is published
at most every ``delivery.state_interval_s``, at once after a round or shoe boundary event was
published, on every connect, and by :meth:`Publisher.stop` before ``status`` = offline (the
Last Will only covers unclean exits).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from daemon.journal.store import Journal
from daemon.mqtt.command_channel import CommandChannel, CommandHandler
from daemon.mqtt.commands import ENGINE_ACTIONS, CommandVerifier
from daemon.mqtt.connection import CommandMessage, Connection
from daemon.mqtt.counters import Counters
from daemon.mqtt.delivery import Delivery
from daemon.mqtt.keyring import Keyring
from daemon.mqtt.refusal_limit import RefusalLimiter
from daemon.mqtt.resend_command import ResendCommands
from daemon.mqtt.roles import PUBLISHER_ACTIONS
from daemon.mqtt.secrets import Secret
from daemon.mqtt.settings import BrokerSettings
from daemon.mqtt.status import HealthExtraFn, HealthPaceFn, HealthReporter, SnapshotFn, StatePublisher

log = logging.getLogger(__name__)

DRAIN_TURN_S = 0.5
"""The drain loop turns at least this often, broker or not (see :meth:`Publisher.last_progress`)."""


class Publisher:
    """Publishes one table's journal and serves its command channel."""

    def __init__(
        self,
        settings: BrokerSettings,
        table_id: str,
        journal: Journal,
        on_command: CommandHandler | None = None,
        *,
        snapshot: SnapshotFn | None = None,
        health_extra: HealthExtraFn | None = None,
        health_pace: HealthPaceFn | None = None,
        clock: Callable[[], float] = time.time,
        identity: Mapping[str, str] | None = None,
        held_after: Callable[[], int | None] | None = None,
        health_sections: HealthExtraFn | None = None,
    ) -> None:
        """``identity``: ``version`` and ``config_digest`` for the retained status;
        ``held_after``: the highest seq that may be published now (None: all); ``health_sections``:
        top-level sections of the health report the service adds (``startup``, ``attestation``)."""
        self.table_id = table_id
        self.counters = Counters()
        signing = settings.signing
        events_key: Secret | None = signing.events_key.load() if signing.events_key else None
        keyring = Keyring.load(signing)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._progress: float | None = None
        self._threads: list[threading.Thread] = []
        self.connection = Connection(
            settings,
            table_id,
            events_key,
            self.counters,
            clock=clock,
            wake=self._wake.set,
            on_connected=self._on_connected,
            on_commands=self._serve_commands,
            identity=identity,
        )
        """The broker connection (network thread, paho client)."""
        self._state = StatePublisher(self.connection, journal, snapshot, events_key, clock=clock)
        self._delivery = Delivery(
            self.connection,
            journal,
            events_key,
            self.counters,
            clock=clock,
            wake=self._wake.set,
            on_boundary=self._state.boundary_published,
            keyring=keyring,
            held_after=held_after,
        )
        self._commands = CommandChannel(
            self.connection,
            CommandVerifier(
                table_id, keyring, signing, journal, clock=clock, actions=ENGINE_ACTIONS | PUBLISHER_ACTIONS
            ),
            RefusalLimiter(signing.refusals_journaled_per_window, signing.refusal_window_s),
            journal,
            handler=on_command,
            events_key=events_key,
            counters=self.counters,
            clock=clock,
            wake=self._wake.set,
            resend=ResendCommands(
                journal, self._delivery.resend, settings.delivery.server_ack, self._wake.set
            ),
        )
        self._health = HealthReporter(
            self.connection,
            journal,
            self._delivery,
            self.counters,
            events_key=events_key,
            clock=clock,
            health_extra=health_extra,
            health_pace=health_pace,
            health_sections=health_sections,
        )
        self.subscribed = self.connection.subscribed
        """Set once the broker acknowledged the ``cmd`` subscription (SUBACK) on the current
        connection; cleared on disconnect. Commands sent before it may be lost."""

    # -- public runtime contract ------------------------------------------------------------

    def start(self) -> None:
        """Start the network and drain threads; returns at once (connection happens in the
        background, with backoff, for as long as it takes)."""
        if self._threads:
            return
        self._delivery.resume_open_alerts()
        self._threads.append(self.connection.start())
        drain = threading.Thread(target=self._drain_loop, name=f"mqtt-drain-{self.table_id}", daemon=True)
        drain.start()
        self._threads.append(drain)

    def notify(self) -> None:
        """New rows were appended to the journal: drain them now."""
        self._wake.set()

    def hand_over_replies(self, successor: Publisher) -> None:
        """Before this publisher stops for ``successor`` (a SIGHUP swap): the replies to
        commands still queued for the engine go out through ``successor``'s connection."""
        self._commands.hand_over(successor._commands)

    def stop(self, timeout: float = 5.0) -> None:
        """Publish the latest state and ``offline`` (both retained), flush delivery marks and
        disconnect cleanly."""
        if not self._threads:
            return
        deadline = time.monotonic() + timeout
        if self.connection.connected.is_set():
            # The final snapshot (the drain thread may publish one at the same moment: a
            # duplicate retained message is harmless). Never let it prevent the clean stop.
            try:
                self._state.publish(force=True)
            except Exception:
                log.exception("final state could not be published")
            self.connection.say_offline(deadline - time.monotonic())
        self._stopping.set()
        self._wake.set()
        self.connection.stop()
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        self._threads.clear()
        if stuck:
            # The delivery window belongs to the drain thread: never touch it from here while
            # that thread may still run (the unmarked events are published again next start).
            log.error("publisher threads did not stop in time: %s", ", ".join(stuck))
            return
        self._delivery.settle(self.connection.take_acks())
        self._commands.flush()  # the network thread is gone: the last refusal window's summary

    def health(self) -> dict[str, Any]:
        """Connection, queue depth, oldest undelivered age, counters, journal capacity."""
        return self._health.report(running=self.running)

    @property
    def running(self) -> bool:
        """Both threads alive and no stop requested (what a watchdog probe should check)."""
        return (
            bool(self._threads) and all(t.is_alive() for t in self._threads) and not self._stopping.is_set()
        )

    def last_progress(self) -> float | None:
        """``time.monotonic()`` of the drain loop's last turn, None when not running.

        The loop turns at least every half second whether the broker is reachable or not,
        so a value that stops advancing means delivery is stuck (e.g. blocked in the journal
        or in paho), not merely disconnected: what a watchdog probe should look at."""
        if not self.running:
            return None
        return self._progress

    @property
    def connected(self) -> bool:
        return self.connection.connected.is_set()

    # -- drain thread -----------------------------------------------------------------------

    def _on_connected(self) -> None:
        """Network thread, inside paho's ``on_connect``: the state goes out before the drain
        resumes."""
        self._state.request()
        self._delivery.connected()

    def _serve_commands(self, messages: list[CommandMessage]) -> None:
        """Network thread, after ``loop()``: verify and dispatch the ``cmd`` messages."""
        self._commands.serve(messages)

    def _drain_loop(self) -> None:
        while not self._stopping.is_set():
            self._progress = time.monotonic()
            self._wake.wait(timeout=self._drain_wait())
            self._wake.clear()
            if self._stopping.is_set():
                break
            try:
                self._drain_step()
            except Exception:
                # A failing journal or broker call must not kill delivery: log and go again.
                log.exception("publisher drain step failed")
                self._stopping.wait(0.5)

    def _drain_step(self) -> None:
        self._delivery.settle(self.connection.take_acks())
        self._delivery.server_acks(self.connection.take_server_acks())
        if self.connection.connected.is_set():
            self._state.publish_requested()
            self._delivery.fill()
            self._state.publish_if_changed(time.monotonic())
        self._health.publish_when_due(time.monotonic(), running=self.running)

    def _drain_wait(self) -> float:
        """How long the drain thread may sleep: until a retry or the state is due."""
        if not self.connection.connected.is_set():
            return DRAIN_TURN_S  # nothing is published until the connect wakes this thread
        now = time.monotonic()
        waits = [DRAIN_TURN_S, self._delivery.window.retry_wait(now), self._state.wait(now)]
        return max(min(w for w in waits if w is not None), 0.005)
