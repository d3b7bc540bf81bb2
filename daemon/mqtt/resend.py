"""Ranges of events to publish again: what the broker acknowledged but the game server did not.

Two things queue a range (drain thread; a ``resend`` command from the network thread through
:meth:`ResendQueue.request`):

* every (re)connect with the server acknowledgement enabled: ``server_ack + 1`` up to the
  newest event sent (the broker may have lost what it acknowledged, e.g. a crash before its
  autosave);
* a signed ``resend {from_seq, to_seq}`` command from the game server (gap fill).

Only events the broker already acknowledged (``delivered_at`` set) are taken: those it did not
are in flight (paho sends them again after a reconnect) or not sent yet (the drain sends them
in order anyway). Dead-lettered events are never republished: their dead-letter alert
explains the gap. Ranges are merged; the queue holds at most ``max_events`` seqs, so a burst
of commands cannot make the table read its whole journal again and again.
"""

from __future__ import annotations

import threading

from daemon.journal.records import JournaledEvent
from daemon.journal.store import Journal


class ResendQueue:
    """Merged, ordered ``seq`` ranges waiting to be republished."""

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self._ranges: list[tuple[int, int]] = []
        self._lock = threading.Lock()  # requests come from the network thread

    @property
    def waiting(self) -> int:
        """Seqs still queued (an upper bound: undelivered and missing ones are skipped)."""
        with self._lock:
            return sum(last - first + 1 for first, last in self._ranges)

    def request(self, first: int, last: int, bounded: bool = True) -> bool:
        """Queue ``first..last``; False (nothing queued) when ``bounded`` and the queue would
        hold more than ``max_events`` seqs (a reconnect's range is never refused)."""
        if last < first:
            return True
        with self._lock:
            merged = _merge([*self._ranges, (first, last)])
            if bounded and sum(b - a + 1 for a, b in merged) > self.max_events:
                return False
            self._ranges = merged
            return True

    def drop_through(self, seq: int) -> None:
        """The server acknowledged ``seq``: nothing at or below it needs sending again."""
        with self._lock:
            self._ranges = [(max(a, seq + 1), b) for a, b in self._ranges if b > seq]

    def take(self, journal: Journal, limit: int) -> list[JournaledEvent]:
        """Up to ``limit`` broker-acknowledged events of the queued ranges, lowest first; the
        ranges advance past what was read."""
        out: list[JournaledEvent] = []
        while len(out) < limit:
            with self._lock:
                if not self._ranges:
                    return out
                first, last = self._ranges[0]
            found = journal.delivered_between(first, last, limit - len(out))
            out.extend(found)
            # A full read may stop inside the range; a short one finished it.
            self._advance(first, found[-1].seq if len(out) >= limit and found else last)
        return out

    def _advance(self, first: int, through: int) -> None:
        """``first..through`` was read: take it out of every range (a request from the network
        thread may have merged into the head meanwhile)."""
        with self._lock:
            kept: list[tuple[int, int]] = []
            for a, b in self._ranges:
                if b < first or a > through:
                    kept.append((a, b))
                    continue
                if a < first:
                    kept.append((a, first - 1))
                if b > through:
                    kept.append((through + 1, b))
            self._ranges = kept


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged
