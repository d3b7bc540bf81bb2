"""The reference consumer with a durable checkpoint: every event once, in ``seq`` order.

This is the model a game server copies (``baccarat-edge tail --checkpoint`` runs it;
:mod:`daemon.mqtt.consumer_client` wires it to paho). No I/O but its SQLite checkpoint
(:mod:`daemon.mqtt.checkpoint`); time is passed in.

* **Verify** each payload (:func:`daemon.mqtt.consumer.parse_signed_event`): a rejected one changes
  nothing.
* **Deduplicate**: a ``seq`` already processed (or buffered) with the same ``event_id`` and
  content is a copy: dropped. Another ``event_id`` or other content at a processed ``seq`` is
  a **conflict**: reported, never processed, never dropped silently.
* **Order**: an event above the next expected ``seq`` waits in memory; it is processed when
  every lower one was. At most ``max_waiting`` wait: past that, every waiting event is dropped
  (counted in :attr:`OrderedConsumer.waiting_dropped`) and the whole range from the position
  to the highest ``seq`` seen is a gap asked for again; the table keeps every event the server
  did not acknowledge, so nothing is lost and nothing is processed out of order.
  :meth:`OrderedConsumer.feed` returns the events processed by that
  payload, in ``seq`` order, each exactly once (stored in the checkpoint: durable at the next
  :meth:`OrderedConsumer.commit`).
* **Gap fill**: a gap older than ``gap_grace_s`` (the missing events may only be late) is
  asked for with a signed ``resend {from_seq, to_seq}`` command (:meth:`gaps` says which,
  again every ``gap_retry_s`` while it stays open). A ``seq`` named by an ``mqtt_dead_letter``
  alert will never come: it is skipped on that alert's word (recorded with no content).
* **Acknowledge** the committed position (:meth:`ack_message`): the highest ``seq`` processed
  with every lower one, with its ``event_id`` (the epoch), signed with a ``game_server`` key.
* **Rollback**: a verified ``journal_rolled_back`` alert of a new epoch says the table's
  journal went back to ``journal_seq``: whatever was processed above it — and above the first
  processed ``seq`` the table was since seen to hold otherwise (a conflict: a whole-disk revert
  deals seqs again before the table learns of it) — is moved to ``lost`` and reported
  (:attr:`rollbacks`); the position falls back there and the table's events are processed from
  there on (gap fills bring back what was reported as a conflict).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

from daemon.alerts import AlertCode
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.consumer import ConsumerStats, Verdict, parse_signed_event
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import sign

MAX_RESEND_SEQS = 10_000
"""The largest range one resend command asks for (the table's default limit)."""
MAX_WAITING = 10_000
"""Default bound of the events held in memory above a gap (``max_waiting``)."""


@dataclass(frozen=True, slots=True)
class Fed:
    """What one payload turned out to be, and the events it let through, in order."""

    verdict: Verdict
    reason: str | None = None
    processed: tuple[dict[str, Any], ...] = ()


@dataclass
class OrderedConsumer:
    """One table's stream through a durable checkpoint."""

    table_id: str
    checkpoint: Checkpoint
    key: Secret | None
    gap_grace_s: float = 1.0
    gap_retry_s: float = 5.0
    max_waiting: int = MAX_WAITING
    """Events above a gap held in memory at most; past it they are dropped and asked for again."""
    stats: ConsumerStats = field(default_factory=ConsumerStats)
    conflicts: list[str] = field(default_factory=list)
    rollbacks: list[str] = field(default_factory=list)
    """One report per journal rollback the table announced (with the events it lost)."""
    waiting_dropped: int = 0
    """Events dropped from memory because more than ``max_waiting`` waited (asked for again)."""
    _waiting: dict[int, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    _dead: dict[int, str] = field(default_factory=dict)  # seq -> event_id, dead-lettered
    _gap: tuple[int, float] | None = None  # (first missing seq, since)
    _asked: dict[int, float] = field(default_factory=dict)  # first missing seq -> asked at
    _known_last: int = 0
    _conflicting: set[int] = field(default_factory=set)  # processed seqs the table now holds otherwise

    def __post_init__(self) -> None:
        if self.max_waiting < 1:
            raise ValueError(f"max_waiting must be at least 1, not {self.max_waiting}")

    @property
    def position(self) -> int:
        """Highest ``seq`` processed with every lower one."""
        return self.checkpoint.position.seq

    def feed(self, payload: bytes | str | dict[str, Any], now: float) -> Fed:
        """Classify one ``events`` payload; process what is now in order."""
        envelope, problem, signed = parse_signed_event(payload, self.table_id, self.key, self.key is not None)
        if envelope is None:
            self.stats.rejected += 1
            return Fed(Verdict.REJECTED, problem)
        seq: int = envelope["seq"]
        digest = hashlib.sha256(signed).digest()
        if self._is_copy(seq, envelope["event_id"], digest):
            self.stats.duplicates += 1
            return Fed(Verdict.DUPLICATE)
        self._note_rollback(envelope)  # only a rollback alert never processed before counts
        if seq <= self.position:
            return self._seen(seq, envelope, digest, self.checkpoint.processed(seq))
        held = self._waiting.get(seq)
        if held is not None:
            if held[0]["event_id"] == envelope["event_id"] and held[1] == digest:
                self.stats.duplicates += 1
                return Fed(Verdict.DUPLICATE)
            return self._conflict(
                f"seq {seq} arrived as {held[0]['event_id']} and now as {envelope['event_id']}"
            )
        self._waiting[seq] = (envelope, digest)
        self._note_dead_letter(envelope)
        self.stats.new += 1
        processed = self._process_in_order()
        self._known_last = max(self._known_last, seq)
        if len(self._waiting) > self.max_waiting:
            self._drop_waiting()
        self._follow_gap(now)
        return Fed(Verdict.NEW, None, processed)

    def note_last_seq(self, last_seq: int, now: float) -> None:
        """The table says it journaled through ``last_seq`` (its retained ``state``/``health``):
        events past what arrived are missing too (e.g. lost by a broker with nothing after them)."""
        self._known_last = max(self._known_last, last_seq)
        self._follow_gap(now)

    def gaps(self, now: float) -> list[tuple[int, int]]:
        """Ranges to ask the table for now (``resend``), at most :data:`MAX_RESEND_SEQS` each."""
        if self._gap is None:
            return []
        first, since = self._gap
        asked = self._asked.get(first)
        if now - since < self.gap_grace_s or (asked is not None and now - asked < self.gap_retry_s):
            return []
        last = self._gap_end()
        if last < first:
            return []
        self._asked = {first: now}
        return [(a, min(a + MAX_RESEND_SEQS - 1, last)) for a in range(first, last + 1, MAX_RESEND_SEQS)]

    def commit(self) -> int:
        """Make what was processed durable; returns the committed position's ``seq``."""
        return self.checkpoint.commit().seq

    def ack_message(self, key_id: str | None, key: Secret, now: float) -> dict[str, Any] | None:
        """The signed acknowledgement of the committed position (None before any event)."""
        p = self.checkpoint.committed
        if p.seq < 1 or p.event_id is None:
            return None
        message: dict[str, Any] = {
            "schema_version": 1,
            "table_id": self.table_id,
            "seq": p.seq,
            "event_id": p.event_id,
            "ts": now,
        }
        if key_id is not None:
            message["key_id"] = key_id
        message["sig"] = sign(message, key)
        return message

    def resend_command(
        self, first: int, last: int, key_id: str | None, key: Secret, now: float
    ) -> dict[str, Any]:
        """A signed ``resend`` command for ``first..last``."""
        command: dict[str, Any] = {
            "table_id": self.table_id,
            "action": "resend",
            "args": {"from_seq": first, "to_seq": last},
            "command_id": f"resend-{first}-{last}-{secrets.token_hex(3)}",
            "ts": now,
            "nonce": secrets.token_hex(12),
        }
        if key_id is None:
            command["actor"] = "game_server"
        else:
            command["key_id"] = key_id
        command["sig"] = sign(command, key)
        return command

    @property
    def missing(self) -> list[int]:
        """Seqs known to exist and not processed (gaps, and the tail ``note_last_seq`` saw)."""
        last = self._gap_end()
        return [s for s in range(self.position + 1, last + 1) if s not in self._waiting]

    # -- internals ----------------------------------------------------------------------------

    def _is_copy(self, seq: int, event_id: str, digest: bytes) -> bool:
        """The same event as one processed or waiting at ``seq`` (a redelivery)."""
        if seq <= self.position:
            held = self.checkpoint.processed(seq)
            return held is not None and held.event_id == event_id and held.digest in (digest, None)
        waiting = self._waiting.get(seq)
        return waiting is not None and waiting[0]["event_id"] == event_id and waiting[1] == digest

    def _seen(self, seq: int, envelope: dict[str, Any], digest: bytes, held: Any) -> Fed:
        if held is None:  # processed before this checkpoint began keeping events
            self.stats.duplicates += 1
            return Fed(Verdict.DUPLICATE, "below the checkpoint")
        if held.event_id == envelope["event_id"] and held.digest in (digest, None):
            self.stats.duplicates += 1
            return Fed(Verdict.DUPLICATE)
        self._conflicting.add(seq)
        if held.event_id == envelope["event_id"]:
            return self._conflict(f"event_id {held.event_id} (seq {seq}) arrived again with other content")
        return self._conflict(
            f"seq {seq} was processed as event {held.event_id} ({held.kind}), now {envelope['event_id']} "
            f"({envelope['kind']}) arrives: the table's journal was rolled back or replaced"
        )

    def _conflict(self, reason: str) -> Fed:
        self.stats.conflicts += 1
        self.conflicts.append(reason)
        return Fed(Verdict.CONFLICT, reason)

    def _process_in_order(self) -> tuple[dict[str, Any], ...]:
        out: list[dict[str, Any]] = []
        while True:
            nxt = self.position + 1
            waiting = self._waiting.pop(nxt, None)
            if waiting is not None:
                envelope, digest = waiting
                self.checkpoint.add(nxt, envelope["event_id"], digest, envelope["kind"])
                self._dead.pop(nxt, None)
                out.append(envelope)
                continue
            dead = self._dead.pop(nxt, None)
            if dead is not None:
                self.checkpoint.add(nxt, dead, None, "dead_lettered")
                continue
            return tuple(out)

    def _drop_waiting(self) -> None:
        """Too many events wait above a gap: forget them and ask for the whole range again
        (the table resends every unacknowledged event; copies of processed ones are dropped)."""
        self.waiting_dropped += len(self._waiting)
        self._waiting.clear()
        self._asked = {}  # the gap now reaches to the highest seq seen: ask at once after the grace

    def _note_dead_letter(self, envelope: dict[str, Any]) -> None:
        data = envelope["data"]
        if envelope["kind"] == "alert_raised" and data.get("code") == AlertCode.MQTT_DEAD_LETTER:
            lost, event_id = data.get("seq"), data.get("event_id")
            if isinstance(lost, int) and isinstance(event_id, str) and lost > self.position:
                self._dead[lost] = event_id

    def _note_rollback(self, envelope: dict[str, Any]) -> None:
        """A verified alert that the table's journal started a new epoch."""
        data = envelope["data"]
        if envelope["kind"] != "alert_raised":
            return
        code = data.get("code")
        epoch_id, epoch, journal_seq = (
            data.get("new_journal_id"),
            data.get("new_epoch"),
            data.get("journal_seq"),
        )
        if not (isinstance(epoch_id, str) and isinstance(epoch, int) and isinstance(journal_seq, int)):
            return
        if epoch_id == self.checkpoint.position.epoch_id:
            return
        if code == AlertCode.JOURNAL_CONTINUITY_UNPROVEN:
            self.checkpoint.note_epoch(epoch_id, epoch)
            return
        if code != AlertCode.JOURNAL_ROLLED_BACK:
            return
        # Processed events the table now holds otherwise (a whole-disk revert: the table dealt
        # those seqs again before it learnt of the rollback) are lost too, and processed anew.
        base = min([journal_seq, *(s - 1 for s in self._conflicting)])
        self._conflicting = set()
        lost = self.checkpoint.rebase(base, epoch_id, epoch)
        dropped = [s for s in self._waiting if s > journal_seq]
        for s in dropped:
            del self._waiting[s]
        self._dead = {s: e for s, e in self._dead.items() if s <= base}
        self._known_last = min(self._known_last, journal_seq)
        self._gap, self._asked = None, {}
        lost_text = f"seq {lost[0][0]}..{lost[-1][0]} ({len(lost)} events)" if lost else "nothing processed"
        self.rollbacks.append(
            f"table {self.table_id}: journal rolled back to seq {journal_seq} (processed here through "
            f"{base} as the table holds it), "
            f"new epoch {epoch} ({epoch_id}); lost by the table: {lost_text}; {data.get('message', '')}"
        )

    def _gap_end(self) -> int:
        below_waiting = min(self._waiting) - 1 if self._waiting else None
        return below_waiting if below_waiting is not None else self._known_last

    def _follow_gap(self, now: float) -> None:
        first = self.position + 1
        if self._gap_end() < first:
            self._gap = None
            return
        if self._gap is None or self._gap[0] != first:
            self._gap = (first, now)
