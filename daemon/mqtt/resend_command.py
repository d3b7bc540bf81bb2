"""The ``resend`` command: the game server asks for a range of events again (a gap fill).

``{"action": "resend", "args": {"from_seq": 120, "to_seq": 180}, ...}``, signed like every
command with a key whose role is ``game_server``. The publisher serves it itself (it is not an
engine action, nothing is journaled when it is accepted): the events of the range the broker
has acknowledged are published again on ``events``, in ``seq`` order, before anything newer;
those it has not acknowledged yet are on their way anyway; dead-lettered ones never go out
again (their ``mqtt_dead_letter`` alert explains the gap).

A range reaching past the journal's end is not an error (the server's idea of the end may be
stale, e.g. after a rollback): it is served up to the end, and the reply's reason says where
the journal ends ("the journal ends at seq N"); a range wholly past the end is answered the
same way with nothing sent. Neither is journaled, however often it is asked. Integral JSON
numbers (``120.0``) are integers.

Refusal codes (journaled as ``command_refused`` like every edge refusal):

* ``bad_range``: ``args`` is not exactly ``{from_seq, to_seq}`` as integers with
  ``1 <= from_seq <= to_seq``, or ``from_seq`` is no longer in the journal (compacted);
* ``range_too_large``: more than ``delivery.server_ack.resend_max_events`` seqs;
* ``busy``: the ranges already queued to go out again would exceed four times that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.journal.store import Journal
from daemon.mqtt.commands import Refusal, Verified
from daemon.mqtt.resend import ResendQueue
from daemon.mqtt.settings import ServerAckSettings
from daemon.mqtt.wire_fields import integral


class ResendCommands:
    """Checks ``resend`` commands and queues their range (network thread)."""

    def __init__(
        self, journal: Journal, queue: ResendQueue, settings: ServerAckSettings, wake: Callable[[], None]
    ) -> None:
        self._journal = journal
        self._queue = queue
        self._max_events = settings.resend_max_events
        self._wake = wake

    def serve(self, verified: Verified) -> Refusal | str:
        """Queue the range: the reply's reason when accepted, else the refusal."""
        request = verified.request

        def refuse(code: str, reason: str) -> Refusal:
            return Refusal(
                code, reason, request.command_id, request.action, verified.command.actor, request.key_id
            )

        bounds = _range(request.args)
        if isinstance(bounds, str):
            return refuse("bad_range", bounds)
        first, last = bounds
        newest = self._journal.last_seq()
        if first > newest:
            return f"nothing to send from seq {first}: the journal ends at seq {newest}"
        end_note = ""
        if last > newest:
            last, end_note = (
                newest,
                f" (to_seq {bounds[1]} is past the end: the journal ends at seq {newest})",
            )
        count = last - first + 1
        if count > self._max_events:
            return refuse(
                "range_too_large",
                f"{count} seqs asked, at most {self._max_events} per command "
                "(delivery.server_ack.resend_max_events): ask in parts",
            )
        if self._journal.get(first) is None:
            return refuse("bad_range", f"seq {first} is no longer in the journal (compacted)")
        if not self._queue.request(first, last):
            return refuse(
                "busy",
                f"{self._queue.waiting} seqs are already queued to go out again "
                f"(at most {self._queue.max_events}): ask again later",
            )
        self._wake()
        return (
            f"seq {first}..{last} queued: the events the broker acknowledged go out again in seq "
            f"order; the others are on their way, dead-lettered ones never{end_note}"
        )


def _range(args: dict[str, Any]) -> tuple[int, int] | str:
    """``(from_seq, to_seq)`` from the command's args, or what is wrong with them."""
    if set(args) != {"from_seq", "to_seq"}:
        return f"args must be exactly from_seq and to_seq, got {sorted(args)[:8]}"
    first, last = integral(args["from_seq"]), integral(args["to_seq"])
    for name, value in (("from_seq", first), ("to_seq", last)):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} must be an integer, got {type(value).__name__}"
    if first < 1:
        return f"from_seq must be at least 1, got {first}"
    if last < first:
        return f"to_seq {last} is below from_seq {first}"
    return first, last
