"""The reference consumer with a durable checkpoint: every event once, in ``seq`` order.

This is the model a game server copies (``baccarat-edge tail --checkpoint`` runs it;
:mod:`daemon.mqtt.consumer_client` wires it to paho). No I/O but its SQLite checkpoint
(:mod:`daemon.mqtt.checkpoint`); time is passed in. The rules, as the contract states them
(``README.md``, "The game server's side"):

* **Verify** each payload (:func:`daemon.mqtt.consumer.parse_signed_event`): a rejected one changes
  nothing.
* **Deduplicate**: a ``seq`` already processed (or buffered) with the same ``event_id`` and
  content is a copy: dropped. Another ``event_id`` or other content at a processed ``seq`` is
  a **conflict**: reported, never processed, never dropped silently.
* **Order and chain**: an event above the next expected ``seq`` waits in memory; it is
  processed when every lower one was *and* its ``prev_hash`` is the ``hash`` of the event
  processed below it. At most ``max_waiting`` wait: past that, every waiting event is dropped
  (counted in :attr:`OrderedConsumer.waiting_dropped`) and the whole range from the position
  to the highest ``seq`` seen is a gap asked for again; the table keeps every event the server
  did not acknowledge, so nothing is lost and nothing is processed out of order.
  :meth:`OrderedConsumer.feed` returns the events processed by that payload, in ``seq`` order,
  each exactly once (stored in the checkpoint: durable at the next :meth:`OrderedConsumer.commit`).
* **Hold** on a conflict or a chain break (:attr:`OrderedConsumer.stopped` says why): the event
  is never processed; one that does not chain is dropped and asked for again. Nothing is
  processed until an event chains to the position, and the committed position keeps being
  acknowledged. If the table's history diverged below it, that acknowledgement is off the
  table's chain, so the table answers it with one ``journal_rolled_back`` alert (it always can:
  the hash names the whole history); if the event was a stale copy (a broker redelivery), the
  table's own event chains and processing goes on. Events without chain members (a table
  without the chain) hold on a conflict until the alert.
* **Resume** on a verified ``journal_rolled_back`` alert, acted upon when it arrives (once per
  alert, durably): ``continuity: rollback`` — everything processed above ``restore_seq`` is
  moved to ``lost`` and reported (:attr:`rollbacks`), the position falls back to
  ``restore_seq``, and the table's events from ``first_lost_seq`` on are asked for and
  processed; one that arrives unchanged (same ``event_id``) was not lost after all: it is
  taken out of ``lost`` (*recovered*) and not processed twice. ``continuity: replaced`` — the
  same above ``restore_seq``; seqs up to it never seen are lost with the old file (recorded with
  no content); the event at ``first_lost_seq`` starts a new chain (any ``prev_hash``).
* An event of a lost epoch above that rollback's ``restore_seq`` (a late copy of the lost
  history, e.g. redelivered by the broker) is never processed (:attr:`Verdict.LOST`).
* **Gap fill**: a gap older than ``gap_grace_s`` (the missing events may only be late) is
  asked for with a signed ``resend {from_seq, to_seq}`` command (:meth:`gaps` says which,
  again every ``gap_retry_s`` while it stays open). A ``seq`` named by an ``mqtt_dead_letter``
  alert will never come: it is skipped on that alert's word (recorded with no content).
* **Check reveals**: each processed ``card_revealed`` of a squeeze table is checked, in ``seq``
  order, against the commitment of its ``card_dealt`` (:mod:`daemon.mqtt.reveal_check`); a
  failed check is processed all the same (the table signed it) and reported in
  :attr:`OrderedConsumer.reveal_problems` and :attr:`Fed.reveals`. Commitments are held in
  memory: after a consumer restart a reveal whose deal came before it is ``unchecked``.
* **Acknowledge** the committed position (:meth:`ack_message`): the highest ``seq`` processed
  with every lower one, with its ``event_id``, ``hash`` and ``epoch``, signed with a
  ``game_server`` key.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

from daemon.alerts import AlertCode
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.consumer import ConsumerStats, Verdict, parse_signed_event
from daemon.mqtt.reveal_check import RevealChecker, RevealVerdict
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
    reveals: tuple[RevealVerdict, ...] = ()
    """The checks of the ``card_revealed`` events among ``processed``, in order."""


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
    recovered: int = 0
    """Events listed as lost that the table then sent unchanged (not lost, not processed twice)."""
    waiting_dropped: int = 0
    """Events dropped from memory because more than ``max_waiting`` waited (asked for again)."""
    stopped: str | None = None
    """Why processing holds (a conflict, or an event that does not chain to the position), None
    once an event was processed after it or a rollback alert was acted upon."""
    chain_breaks: int = 0
    """Events dropped because they did not chain to the position (asked for again)."""
    _waiting: dict[int, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    _dead: dict[int, str] = field(default_factory=dict)  # seq -> event_id, dead-lettered
    _gap: tuple[int, float] | None = None  # (first missing seq, since)
    _asked: dict[int, float] = field(default_factory=dict)  # first missing seq -> asked at
    _known_last: int = 0
    _chain_restart: int | None = None  # the seq a replaced journal's new chain starts at
    _held: bool = False  # an unchained conflict: nothing is processed until the rollback alert
    reveals: RevealChecker = field(init=False)
    """The squeeze reveal check, fed every processed event in ``seq`` order."""
    reveal_problems: list[str] = field(default_factory=list)
    """One line per processed ``card_revealed`` that failed its check (named problem first)."""

    def __post_init__(self) -> None:
        self.reveals = RevealChecker(self.table_id)
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
        self._note_rollback(envelope, now)  # acted upon at once, once per alert
        epoch = envelope.get("epoch")
        if isinstance(epoch, str) and self.checkpoint.lost_history(epoch, seq):
            self.stats.lost_history += 1  # a late copy of what the table lost: never processed
            return Fed(Verdict.LOST, f"seq {seq} of epoch {epoch}: history the table lost in a rollback")
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
        return Fed(Verdict.NEW, None, processed, self._check_reveals(processed))

    def _check_reveals(self, processed: tuple[dict[str, Any], ...]) -> tuple[RevealVerdict, ...]:
        verdicts = []
        for envelope in processed:
            verdict = self.reveals.observe(envelope)
            if verdict is None:
                continue
            verdicts.append(verdict)
            if not verdict.ok:
                self.stats.reveal_problems += 1
                self.reveal_problems.append(f"table {self.table_id}: {verdict.describe()}")
        return tuple(verdicts)

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
        """The signed acknowledgement of the committed position (None before any event): its
        ``seq`` and ``event_id``, and its ``hash`` and ``epoch`` when the event carried them."""
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
        held = self.checkpoint.processed(p.seq)
        if held is not None and held.event_id == p.event_id and held.hash is not None:
            message["hash"] = held.hash
            if held.epoch is not None:
                message["epoch"] = held.epoch
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
        unchained = "hash" not in envelope  # a table without the chain: hold until its alert
        if held.event_id == envelope["event_id"]:
            return self._conflict(
                f"event_id {held.event_id} (seq {seq}) arrived again with other content", hold=unchained
            )
        return self._conflict(
            f"seq {seq} was processed as event {held.event_id} ({held.kind}), now {envelope['event_id']} "
            f"({envelope['kind']}) arrives: the table's history is not the one processed here",
            hold=unchained,
        )

    def _conflict(self, reason: str, hold: bool = False) -> Fed:
        self.stats.conflicts += 1
        self.conflicts.append(reason)
        if self.stopped is None:
            self.stopped = f"conflict: {reason}"
        if hold:
            self._held = True
        return Fed(Verdict.CONFLICT, reason)

    def _chain_breaks(self, seq: int, envelope: dict[str, Any]) -> bool:
        """The event at ``seq`` (next in order) does not chain to the event processed below it."""
        prev_hash = envelope.get("prev_hash")
        if prev_hash is None or seq == self._chain_restart or seq == 1:
            return False
        below = self.checkpoint.hash_at(seq - 1)
        return below is not None and below != prev_hash

    def _process_in_order(self) -> tuple[dict[str, Any], ...]:
        out: list[dict[str, Any]] = []
        while not self._held:
            nxt = self.position + 1
            waiting = self._waiting.get(nxt)
            if waiting is not None:
                envelope, digest = waiting
                del self._waiting[nxt]
                if self._chain_breaks(nxt, envelope):
                    self.chain_breaks += 1
                    self.stopped = (
                        f"chain break: seq {nxt} ({envelope['event_id']}) does not follow the event "
                        f"processed at seq {nxt - 1}: dropped and asked for again"
                    )
                    return tuple(out)
                chain = (envelope.get("hash"), envelope.get("epoch"))
                self.checkpoint.add(nxt, envelope["event_id"], digest, envelope["kind"], chain=chain)
                self._dead.pop(nxt, None)
                self.stopped = None
                if self.checkpoint.recover(nxt, envelope["event_id"]):
                    self.recovered += 1  # the same event the rollback listed: not lost, not twice
                    continue
                out.append(envelope)
                continue
            dead = self._dead.pop(nxt, None)
            if dead is not None:
                self.checkpoint.add(nxt, dead, None, "dead_lettered")
                continue
            return tuple(out)
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

    def _note_rollback(self, envelope: dict[str, Any], now: float) -> None:
        """A verified ``journal_rolled_back`` alert: act on it once (durably remembered)."""
        data = envelope["data"]
        if envelope["kind"] != "alert_raised" or data.get("code") != AlertCode.JOURNAL_ROLLED_BACK:
            return
        restore = _integer(data.get("restore_seq"))
        if restore is None:  # a table without the chain: its journal_seq is the best word
            restore = _integer(data.get("journal_seq"))
        lost_epoch = data.get("lost_epoch")
        lost_epoch = lost_epoch if isinstance(lost_epoch, str) else None
        if restore is None or not self.checkpoint.note_rollback(envelope["event_id"], restore, lost_epoch):
            return
        replaced = data.get("continuity") == "replaced"
        epoch_id = data.get("new_journal_id")
        epoch = _integer(data.get("new_epoch")) or 0
        lost = self.checkpoint.rebase(restore, epoch_id if isinstance(epoch_id, str) else None, epoch)
        skipped = self.checkpoint.skip_to(restore, "lost_with_replaced_journal") if replaced else []
        self._chain_restart = restore + 1 if replaced else None
        self._waiting = {s: w for s, w in self._waiting.items() if s <= restore}
        self._dead = {s: e for s, e in self._dead.items() if s <= restore}
        self._known_last = max(restore, envelope["seq"])
        self._gap, self._asked = None, {}
        self.stopped, self._held = None, False
        lost_text = f"seq {lost[0][0]}..{lost[-1][0]} ({len(lost)} events)" if lost else "nothing processed"
        if skipped:
            lost_text += f"; never received, gone with the old file: seq {skipped[0]}..{skipped[-1]}"
        self.rollbacks.append(
            f"table {self.table_id}: journal {'replaced' if replaced else 'rolled back'} to seq {restore} "
            f"(first lost seq {restore + 1}, lost epoch {data.get('lost_epoch')}); lost by the table: "
            f"{lost_text}; {data.get('message', '')}"
        )
        self._follow_gap(now)

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


def _integer(value: Any) -> int | None:
    """An integral JSON number as an int (``37.0`` is 37), None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
