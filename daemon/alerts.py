"""Every alert the product raises, in one catalogue.

An alert is an ``alert_raised`` event on the events stream (copied to the alerts topic);
most end with an ``alert_cleared`` event naming the same ``alert_id``. Three parts raise
them: the table engine (``daemon/engine``: the game and its devices), the MQTT publisher
(delivery to the broker) and the service (the journal's capacity and continuity, and the
journal and the engine as running software). For each code the catalogue says how serious it is, what
it means, whether it holds a round, how it ends, the fields of its event's ``data`` and how
its ``alert_id`` is formed.

"RULES.md" in a message or detail is the product's rules reference, daemon/rules/RULES.md.
Severity is the catalogue's own classification (a monitor's colour): the alerts the publisher
and the service raise carry it in their payload (``severity`` among their fields below); the
engine's alerts do not (their events are the table's golden history).

The publisher and the service build every alert with :func:`raised_alert` and
:func:`cleared_alert`: the id from the code's scheme, the severity from the catalogue, and
the fields checked against the code's entry.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class AlertCode(StrEnum):
    """The ``code`` of an ``alert_raised`` event."""

    # raised by the table engine
    RESCAN_NEEDED = "rescan_needed"
    UNNEEDED_CARD = "unneeded_card"
    OVER_COMPOSITION = "over_composition"
    CARD_AFTER_LAST_ROUND = "card_after_last_round"
    NO_SHOE = "no_shoe"
    DEVICE_DISAGREEMENT = "device_disagreement"
    VERDICT_DISAGREEMENT = "verdict_disagreement"
    CAMERA_DISAGREEMENT = "camera_disagreement"
    CAMERA_SLOT_MISMATCH = "camera_slot_mismatch"
    AMBIGUOUS_RESCAN = "ambiguous_rescan"
    MISSING_CARD = "missing_card"
    READER_DISCONNECTED = "reader_disconnected"
    READER_ERROR = "reader_error"
    READER_REDEAL = "reader_redeal"
    FORCED_QUIT = "forced_quit"
    UNEXPECTED_CUT_CARD = "unexpected_cut_card"
    INVALID_INPUT = "invalid_input"
    CARD_OUTSIDE_GAME = "card_outside_game"
    READER_COMMAND_REFUSED = "reader_command_refused"
    SHOE_SETTINGS_DIFFER = "shoe_settings_differ"
    JOURNAL_FULL_CARD_REFUSED = "journal_full_card_refused"
    # game flow: the betting window, round ids, readers naming no slot, outages
    CARD_EXPOSED_DURING_BETTING = "card_exposed_during_betting"
    CARD_BEFORE_BETTING_CLOSED = "card_before_betting_closed"
    ROUND_ID_OUT_OF_SEQUENCE = "round_id_out_of_sequence"
    BETTING_OUT_OF_ORDER = "betting_out_of_order"
    SHOE_NOT_LOCKED = "shoe_not_locked"
    RESCAN_UNCONFIRMED = "rescan_unconfirmed"
    SHOE_SIGNAL_UNEXPECTED = "shoe_signal_unexpected"
    RESTART_GAP = "restart_gap"
    ROUND_CUT_SHORT = "round_cut_short"
    READER_GAP = "reader_gap"
    EMPTY_BETTING_WINDOW = "empty_betting_window"
    SHOE_SILENT = "shoe_silent"
    # squeeze tables (table.reveal.mode: squeeze)
    CARD_BEFORE_REVEAL = "card_before_reveal"
    REVEAL_REFUSED = "reveal_refused"
    # the clock gate: the table's clock synchronisation, the server's command times
    CLOCK_UNSYNCHRONISED = "clock_unsynchronised"
    CLOCK_GATE_CLOSED = "clock_gate_closed"
    # the shoe's audit at its end (daemon/engine/shoe_audit.py)
    SHOE_COUNT_MISMATCH = "shoe_count_mismatch"
    SHOE_IRREGULAR = "shoe_irregular"
    # raised by the MQTT publisher
    MQTT_DEAD_LETTER = "mqtt_dead_letter"
    MQTT_DELIVERY_FAILING = "mqtt_delivery_failing"
    # raised by the service (its journal housekeeping and its runner)
    JOURNAL_NEARLY_FULL = "journal_nearly_full"
    JOURNAL_FULL = "journal_full"
    JOURNAL_DISK_LOW = "journal_disk_low"
    JOURNAL_RECOVERED = "journal_recovered"
    JOURNAL_ROLLED_BACK = "journal_rolled_back"
    JOURNAL_CONTINUITY_UNPROVEN = "journal_continuity_unproven"
    ENGINE_ERROR = "engine_error"
    ENGINE_SNAPSHOT_UNUSABLE = "engine_snapshot_unusable"
    # the game server's acknowledgement (raised by the MQTT publisher)
    SERVER_ACK_LAGGING = "server_ack_lagging"
    # a TLS certificate outside its dates (raised by the service)
    TLS_CERTIFICATE_DATES = "tls_certificate_dates"
    # the installed files against the package's signed manifest (raised by the service)
    INTEGRITY_FAILED = "integrity_failed"


class AlertEventKind(StrEnum):
    """The ``kind`` of the events that carry alerts (also copied to the ``alerts`` topic)."""

    RAISED = "alert_raised"
    CLEARED = "alert_cleared"


ALERT_EVENT_KINDS: frozenset[str] = frozenset(AlertEventKind)
"""The event kinds the publisher also copies to the ``alerts`` topic."""


class Severity(StrEnum):
    """``critical``: the table cannot go on as dealt, or events are not getting out, until
    someone acts. ``warning``: something to look at; the game goes on."""

    WARNING = "warning"
    CRITICAL = "critical"


class RaisedBy(StrEnum):
    """The part of the daemon that raises the alert."""

    ENGINE = "engine"  # daemon/engine: in the table's own event history, restored with it
    PUBLISHER = "publisher"  # daemon/mqtt: a journal "delivery" event
    SERVICE = "service"  # daemon/service: a journal "delivery" event


class IdScheme(StrEnum):
    """How an ``alert_id`` is formed (each value is the scheme's template)."""

    ENGINE = "{shoe_id}:a{n}"
    """Numbered from 1 within the shoe (``noshoe:a{n}`` before the first shoe), so ids stay
    unique when the journal drops old shoes."""
    DELIVERY = "delivery-<12 hex>"
    """The first 12 hex digits of a random UUID."""
    JOURNAL = "journal-<12 hex>"
    """The first 12 hex digits of a random UUID."""
    ENGINE_ERROR = "engine-error-<12 hex>"
    """The first 12 hex digits of a random UUID (a count since start repeated after restarts)."""

    @property
    def pattern(self) -> re.Pattern[str]:
        """A regular expression every id of this scheme matches in full."""
        return _ID_PATTERNS[self]


_ID_PATTERNS: dict[IdScheme, re.Pattern[str]] = {
    IdScheme.ENGINE: re.compile(r"(?P<shoe>.+):a(?P<n>[1-9][0-9]*)"),
    IdScheme.DELIVERY: re.compile(r"delivery-[0-9a-f]{12}"),
    IdScheme.JOURNAL: re.compile(r"journal-[0-9a-f]{12}"),
    IdScheme.ENGINE_ERROR: re.compile(r"engine-error-[0-9a-f]{12}"),
}

NO_SHOE_ID = "noshoe"
"""Stands for the shoe id in engine alert ids raised before the first shoe."""


def engine_alert_id(shoe_id: str | None, number: int) -> str:
    """The id of the ``number``-th engine alert of a shoe (``IdScheme.ENGINE``)."""
    return f"{shoe_id or NO_SHOE_ID}:a{number}"


def engine_alert_number(alert_id: str) -> int:
    """The number within its shoe of an engine alert id (``IdScheme.ENGINE``)."""
    return int(alert_id.rsplit(":a", 1)[1])


ENGINE_FIELDS = ("alert_id", "code", "message", "hand", "holds", "device", "details", "read")
"""The ``data`` fields of every engine alert: ``message`` is the catalogue's summary; ``hand``
the round concerned (or null); ``holds`` the hand held, ``"next_round"`` or null; ``device``
the device concerned (or null); ``details`` the code's own fields (``AlertSpec.details``);
``read`` (only when a read caused it) the read's audit form."""


@dataclass(frozen=True, slots=True)
class AlertSpec:
    """One alert code: what it means and how it ends.

    ``summary`` is the engine alerts' ``message`` verbatim; the publisher's and runner's
    messages are built for each occurrence, and the summary describes them. ``holds``: it can
    hold a round for a supervisor's decision (``resolve_hold``, a correction, ``void_round``).
    ``clears``: how it ends (``alert_cleared``), or that it is a report that is never cleared.
    ``fields``: the keys of its event's ``data``; ``details``: the keys of ``data.details``
    (engine alerts; a key in parentheses only sometimes present).
    """

    severity: Severity
    summary: str
    clears: str
    raised_by: RaisedBy = RaisedBy.ENGINE
    id_scheme: IdScheme = IdScheme.ENGINE
    holds: bool = False
    fields: tuple[str, ...] = ENGINE_FIELDS
    details: tuple[str, ...] = ()


_DELIVERY_FIELDS = ("alert_id", "code", "severity", "message")
_NEVER_CLEARED = "never cleared: it reports something that happened"
_CONTINUITY_FIELDS = (
    *_DELIVERY_FIELDS,
    "continuity",
    "detected_by",
    "journal_seq",
    "marker_seq",
    "acknowledged_seq",
    "restore_seq",
    "first_lost_seq",
    "lost_through_seq",
    "lost_epoch",
    "old_epoch",
    "new_epoch",
    "old_journal_id",
    "new_journal_id",
)

ALERTS: dict[AlertCode, AlertSpec] = {
    AlertCode.RESCAN_NEEDED: AlertSpec(
        Severity.CRITICAL,
        "the reader could not read a card: rescan it; no card is accepted until a valid read",
        "a valid read of the card (reader rescan or a confident camera read, assign_card, a correction "
        "supplying its slot; during a remainder count, the next card read, and the count cannot finish "
        "before), or rescan_ack",
        details=("reason", "reader_code", "(missing_position)", "(remainder_count)"),
    ),
    AlertCode.UNNEEDED_CARD: AlertSpec(
        Severity.CRITICAL,
        "a card came out right after a decided round (RULES.md dealing mistakes 1/2): that round stands; "
        "the engine took it as the next round's burn (or Player 1), which a fast dealer's real Player 1 "
        "would also look like, so the next round is held: acknowledge (the reading is right) or correct it",
        "acknowledge_alert (the reading is right), a correction of the held round, resolve_hold, void_round",
        holds=True,
        details=("card", "became", "rule"),
    ),
    AlertCode.OVER_COMPOSITION: AlertSpec(
        Severity.CRITICAL,
        "this exact card has already appeared as often as the shoe holds it: misread or foreign card, "
        "refused; a reader's card keeps its slot waiting for a rescan and holds the round (or the next one)",
        "resolve_hold, void_round (a camera read, which holds nothing: acknowledge_alert)",
        holds=True,
        details=("card", "already_seen", "decks"),
    ),
    AlertCode.CARD_AFTER_LAST_ROUND: AlertSpec(
        Severity.WARNING,
        "a card came out after the shoe's last round: refused (later cards are counted in this alert, "
        "details.refused, by cards_refused summaries)",
        "acknowledge_alert",
        details=("refused",),
    ),
    AlertCode.NO_SHOE: AlertSpec(
        Severity.WARNING,
        "a card came out while no shoe is running: refused (start a new shoe; later cards are counted in "
        "this alert, details.refused, by cards_refused summaries)",
        "acknowledge_alert",
        details=("refused",),
    ),
    AlertCode.DEVICE_DISAGREEMENT: AlertSpec(
        Severity.CRITICAL,
        "the reader names a different slot for the card than the draw order gives",
        "resolve_hold, void_round",
        holds=True,
        details=(
            "card",
            "(engine_slot)",
            "(device_target)",
            "(position)",
            "(reason)",
            "(pull_next_position)",
        ),
    ),
    AlertCode.VERDICT_DISAGREEMENT: AlertSpec(
        Severity.CRITICAL,
        "the reader's own round result differs from the engine's",
        "resolve_hold, void_round; acknowledge_alert for a round already completed",
        holds=True,
        details=("verdict", "engine", "round_already_completed"),
    ),
    AlertCode.CAMERA_DISAGREEMENT: AlertSpec(
        Severity.CRITICAL,
        "the camera confidently sees a different card than the reader reported",
        "resolve_hold, void_round; acknowledge_alert for a round already completed",
        holds=True,
        details=("slot", "reader_card", "camera_card", "round_already_completed"),
    ),
    AlertCode.CAMERA_SLOT_MISMATCH: AlertSpec(
        Severity.WARNING,
        "the camera read a card in a box other than the slot the draw order expects: not used",
        "acknowledge_alert",
        details=("expected_slot", "camera_slot"),
    ),
    AlertCode.AMBIGUOUS_RESCAN: AlertSpec(
        Severity.WARNING,
        "the reader sent the card the camera already filled in: a rescan or a second identical card? "
        "refused; supply it with assign_card if it was a new card",
        "acknowledge_alert",
        details=("camera_slot",),
    ),
    AlertCode.MISSING_CARD: AlertSpec(
        Severity.CRITICAL,
        "the reader reports the round over but the engine still needs cards: supply the missing card",
        "supply the card (assign_card/rearrange, or the rescan for a pull's gap), then resolve_hold; "
        "void_round",
        holds=True,
        details=("(verdict)", "(needed_slot)", "(reason)", "(missing_position)", "(waiting)"),
    ),
    AlertCode.READER_DISCONNECTED: AlertSpec(
        Severity.CRITICAL,
        "a device went away",
        "the device comes back (cleared by the engine)",
        details=("detail",),
    ),
    AlertCode.READER_ERROR: AlertSpec(
        Severity.WARNING,
        "the reader raised an error",
        "the reader clears the error (cleared by the engine), acknowledge_alert",
        details=("reader_code",),
    ),
    AlertCode.READER_REDEAL: AlertSpec(
        Severity.CRITICAL, "the reader signalled a re-deal", "resolve_hold, void_round", holds=True
    ),
    AlertCode.FORCED_QUIT: AlertSpec(
        Severity.CRITICAL, "the reader force-quit the round", "resolve_hold, void_round", holds=True
    ),
    AlertCode.UNEXPECTED_CUT_CARD: AlertSpec(
        Severity.WARNING,
        "a cut card came out when none was expected",
        "acknowledge_alert",
        details=("raw",),
    ),
    AlertCode.INVALID_INPUT: AlertSpec(
        Severity.WARNING,
        "an input the engine cannot use (e.g. no valid time): ignored",
        "acknowledge_alert",
        details=("input", "reason"),
    ),
    AlertCode.CARD_OUTSIDE_GAME: AlertSpec(
        Severity.WARNING,
        "the reader says a card left the shoe outside the game flow (e.g. drawn while locked for betting): "
        "not a dealt card; a card exposed during betting may void the round (RULES.md dealing mistake 7), "
        "a supervisor decides",
        "acknowledge_alert (or void_round/void_shoe when the exposure voids the round)",
        details=("card", "mode", "counted", "rule", "(not_counted_because)"),
    ),
    AlertCode.READER_COMMAND_REFUSED: AlertSpec(
        Severity.WARNING,
        "the reader did not carry out a supervisor's lock/unlock (refused, no answer or no reader): "
        "the shoe's lock state is not what was asked",
        "acknowledge_alert",
        details=("reader_code", "detail", "command_id"),
    ),
    AlertCode.SHOE_SETTINGS_DIFFER: AlertSpec(
        Severity.WARNING,
        "the engine was restarted with other decks/variant than this shoe was started with: the shoe "
        "goes on with its own (the configuration takes effect at the next shoe); if its variant cannot be "
        "loaded, its rounds are held (void them, or the shoe)",
        "acknowledge_alert; the configuration starts the next shoe",
        details=("shoe", "configured", "variant_available", "pay_table_changed"),
    ),
    AlertCode.JOURNAL_FULL_CARD_REFUSED: AlertSpec(
        Severity.CRITICAL,
        "the journal is full: cards that would open a new round are refused (not dealt, counted as out of "
        "the shoe); stop dealing until it has room (details.refused counts them)",
        "the journal has room again (StorageState(full=False); cleared by the engine), acknowledge_alert",
        details=("detail", "refused"),
    ),
    # game flow: the betting window, round ids, readers naming no slot, outages
    AlertCode.CARD_EXPOSED_DURING_BETTING: AlertSpec(
        Severity.CRITICAL,
        "a card came out of the shoe while betting was open (RULES.md dealing mistake 7, a card exposed "
        "during betting): not dealt, counted against the shoe; the next round is held: void it (or the "
        "shoe), or resolve_hold if the round may stand",
        "resolve_hold, void_round, void_shoe",
        holds=True,
        details=("card", "round_id", "counted", "rule", "(not_counted_because)"),
    ),
    AlertCode.CARD_BEFORE_BETTING_CLOSED: AlertSpec(
        Severity.CRITICAL,
        "a card came out after the round was decided and before betting for the next round closed (RULES.md "
        "dealing mistakes 1/2, an unneeded card): the round stands; the card is burned (the next round's "
        "burn card), never taken as the next round's Player 1; the dealer may have made a further one the "
        "next round's Player 1, so from the second such card on the next round is held: acknowledge (it "
        "was burned) or correct the held round",
        "acknowledge_alert (it was burned; a round it alone held goes on), a correction of the held round, "
        "resolve_hold, void_round",
        holds=True,
        details=("card", "became", "rule"),
    ),
    AlertCode.ROUND_ID_OUT_OF_SEQUENCE: AlertSpec(
        Severity.CRITICAL,
        "the game server's round id does not follow the last one: a repeated or earlier id is refused; "
        "a skipped id (rounds the edge never saw, e.g. dealt while it was down) or a new id prefix is "
        "taken, and its round is held until a supervisor confirms it",
        "resolve_hold, void_round (a refused id, which holds nothing: acknowledge_alert)",
        holds=True,
        details=("round_id", "last_round_id", "reason", "accepted"),
    ),
    AlertCode.BETTING_OUT_OF_ORDER: AlertSpec(
        Severity.WARNING,
        "a betting open/close that does not fit the game flow (a close with no open betting, a close for "
        "another round, an open while a round is dealt, or from a source the table does not use): refused, "
        "nothing changed",
        "acknowledge_alert",
        details=("action", "betting_source", "round_id", "reason"),
    ),
    AlertCode.SHOE_NOT_LOCKED: AlertSpec(
        Severity.WARNING,
        "the shoe did not confirm the lock (or unlock) the engine asked for with the betting window: it may "
        "let cards out during betting (the engine still treats them as exposed cards)",
        "acknowledge_alert",
        details=("action", "command_id", "reason", "(reader_code)"),
    ),
    AlertCode.RESCAN_UNCONFIRMED: AlertSpec(
        Severity.CRITICAL,
        "after a misread, a reader that names no slot sent a card: the rescan of the unread card, or the "
        "next card dealt on? taken as the rescan, and its round is held until a supervisor confirms "
        "(resolve_hold) or corrects it",
        "resolve_hold, a correction of the round, void_round",
        holds=True,
        details=("card", "slot", "misread_alert"),
    ),
    AlertCode.SHOE_SIGNAL_UNEXPECTED: AlertSpec(
        Severity.WARNING,
        "a reader's shoe mark (shoe start/end, burn start/end) that does not fit the shoe procedure: "
        "nothing changed",
        "acknowledge_alert",
        details=("signal", "reason"),
    ),
    AlertCode.RESTART_GAP: AlertSpec(
        Severity.CRITICAL,
        "after a restart, the reader's frames do not follow on from the last one the edge journaled, or a "
        "round in progress at the restart goes on from a reader that cannot show no card was dealt "
        "meanwhile: cards or rounds may have been dealt while the edge was down; the round is held "
        "(hands are never renumbered silently)",
        "resolve_hold, void_round, void_shoe",
        holds=True,
        details=("reason", "last_transmission_id", "transmission_id", "(marks_skipped)"),
    ),
    AlertCode.ROUND_CUT_SHORT: AlertSpec(
        Severity.CRITICAL,
        "betting opened for the next round while this round still needed cards: the round is over on the "
        "table, so it is held with the cards read so far and never completed with later cards (a card the "
        "reader never saw, or cards dealt while it was out)",
        "supply the missing cards (assign_card/rearrange with hand), then resolve_hold; void_round",
        holds=True,
        details=("round_id", "next_round_id", "cards", "missing", "betting_source"),
    ),
    AlertCode.READER_GAP: AlertSpec(
        Severity.CRITICAL,
        "a reader that names no slot went away, came back or reported an error while a round was being "
        "dealt: cards of the round may have been dealt unseen, so what it reads next may sit in the wrong "
        "places; the round is held",
        "resolve_hold, a correction of the round, void_round",
        holds=True,
        details=("reason", "round_id", "cards", "detail"),
    ),
    AlertCode.EMPTY_BETTING_WINDOW: AlertSpec(
        Severity.WARNING,
        "betting closed for a round and no card of it came within table.betting.empty_window_s (the reader "
        "out, or the dealer stopped): nothing is held",
        "the round's first card (cleared by the engine), acknowledge_alert",
        details=("round_id", "window", "closed_at", "waited_s"),
    ),
    AlertCode.SHOE_SILENT: AlertSpec(
        Severity.WARNING,
        "a shoe is running but no card came for table.silent_shoe_s (the reader out, or a shoe left open "
        "with no shoe end): nothing is held",
        "the next card (cleared by the engine), the shoe's end, acknowledge_alert",
        details=("last_card_at", "silent_s", "phase"),
    ),
    # squeeze tables
    AlertCode.CARD_BEFORE_REVEAL: AlertSpec(
        Severity.CRITICAL,
        "a squeeze round needs no further card, only the reveal of its cards, and a card came out (an "
        "unneeded card, or a card drawn before its turn): refused, never dealt, counted against the shoe "
        "(its identity is sealed in the journal); the round is held",
        "resolve_hold (the round stands once revealed), void_round",
        holds=True,
        details=("reason", "counted", "(card)"),
    ),
    AlertCode.REVEAL_REFUSED: AlertSpec(
        Severity.WARNING,
        "a squeeze table's reveal was refused (details.reason: not_squeeze, wrong_source, no_round, "
        "not_dealt, already_revealed, out_of_order): no card was shown",
        "acknowledge_alert",
        details=("reason", "slots", "explanation", "reveal_source"),
    ),
    AlertCode.CLOCK_UNSYNCHRONISED: AlertSpec(
        Severity.CRITICAL,
        "the table's system clock is not synchronised (the service's clock status source): card and "
        "command times cannot be trusted against the game server's, so betting does not open "
        "(table.betting.clock_gate)",
        "the clock synchronised again (cleared by the engine), acknowledge_alert",
        details=("clock_source", "detail"),
    ),
    AlertCode.CLOCK_GATE_CLOSED: AlertSpec(
        Severity.CRITICAL,
        "open_betting was refused by the clock gate: the table's clock is not synchronised, or the server's "
        "command time is further than table.betting.max_skew_s from the table's receive time",
        "betting opened again (cleared by the engine), acknowledge_alert",
        details=("round_id", "reason", "synchronised", "skew_s", "max_skew_s"),
    ),
    AlertCode.SHOE_COUNT_MISMATCH: AlertSpec(
        Severity.CRITICAL,
        "the remainder count does not balance the shoe: cards seen plus cards counted differ from the "
        "shoe's decks (details name each missing and extra card); take the decks out of play and check them",
        "acknowledge_alert",
        details=("missing", "extra", "accounted", "expected", "seen", "remainder"),
    ),
    AlertCode.SHOE_IRREGULAR: AlertSpec(
        Severity.WARNING,
        "the shoe's order is one a fair shuffle rarely deals (a long run of one outcome, rank or suit, a "
        "stretch repeated from a recent shoe, a deck in factory order): details give each finding with its "
        "evidence and its probability under a fair shuffle",
        "acknowledge_alert",
        details=("findings", "alpha", "recent_shoes"),
    ),
    AlertCode.MQTT_DEAD_LETTER: AlertSpec(
        Severity.CRITICAL,
        "an event could not be delivered and never will be (refused permanently by the broker, refused "
        "more than delivery.refused_retries times, or too large): it stays in the journal, dead-lettered",
        _NEVER_CLEARED,
        raised_by=RaisedBy.PUBLISHER,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "seq", "event_id", "event_kind"),
    ),
    AlertCode.MQTT_DELIVERY_FAILING: AlertSpec(
        Severity.CRITICAL,
        "the broker refuses events for now: they stay in the journal and are published again with backoff",
        "the broker acknowledges events again (cleared by the publisher)",
        raised_by=RaisedBy.PUBLISHER,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "seq", "event_id", "reason"),
    ),
    AlertCode.JOURNAL_NEARLY_FULL: AlertSpec(
        Severity.WARNING,
        "a journal limit (size, undelivered count or oldest undelivered age) is journal.warn_fraction "
        "reached: dealing goes on; restore delivery or make room before the journal is full",
        "every limit is below journal.warn_fraction again (cleared by the journal housekeeping)",
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "warn_fraction"),
    ),
    AlertCode.JOURNAL_FULL: AlertSpec(
        Severity.CRITICAL,
        "the journal is over one of its limits (disk or backlog), with the configured on_full policy",
        "the journal is below its limits again (cleared by the journal housekeeping)",
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "admits_new_round"),
    ),
    AlertCode.JOURNAL_DISK_LOW: AlertSpec(
        Severity.CRITICAL,
        "the file system holding the journal is nearly full: its reserve was given to the appends and "
        "compaction ran in small steps; the alert says how much compaction freed and how much is left. "
        "Make room on that file system",
        "the free space is above the low mark again (cleared by the journal housekeeping, saying what "
        "compaction freed and what is free)",
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "free_bytes", "freed_bytes", "reserve_bytes_released"),
    ),
    AlertCode.JOURNAL_RECOVERED: AlertSpec(
        Severity.WARNING,
        "the journal could not store anything for a while; the inputs waited in memory and were then "
        "stored in the order they arrived: nothing was lost, events of that time were published late",
        _NEVER_CLEARED,
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.JOURNAL,
        fields=(
            *_DELIVERY_FIELDS,
            "failed_since",
            "failed_for_s",
            "inputs_waited",
            "failed_appends",
            "spells",
            "error",
        ),
    ),
    AlertCode.JOURNAL_ROLLED_BACK: AlertSpec(
        Severity.CRITICAL,
        "the journal on disk is behind what this table had committed (a backup restored, a VM snapshot "
        "reverted, a lost WAL) or is another journal: events may be missing and seq numbers are issued "
        "again; a new epoch keeps every event_id new. Reconcile with the game server's records",
        _NEVER_CLEARED,
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.JOURNAL,
        fields=(*_CONTINUITY_FIELDS,),
    ),
    AlertCode.JOURNAL_CONTINUITY_UNPROVEN: AlertSpec(
        Severity.WARNING,
        "the journal's continuity marker was missing or unreadable on open: a new epoch was started to "
        "be safe (event ids stay new); check that no journal file was restored",
        _NEVER_CLEARED,
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.JOURNAL,
        fields=(*_CONTINUITY_FIELDS,),
    ),
    AlertCode.ENGINE_ERROR: AlertSpec(
        Severity.CRITICAL,
        "the engine failed on an input: it was journaled for audit and not applied; the table state was "
        "rebuilt from the journal",
        _NEVER_CLEARED,
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.ENGINE_ERROR,
        fields=(*_DELIVERY_FIELDS, "error"),
    ),
    AlertCode.ENGINE_SNAPSHOT_UNUSABLE: AlertSpec(
        Severity.WARNING,
        "a stored engine snapshot did not match its own checksum (damaged in storage): it was not "
        "used; the table state was folded from the journal's events instead and a new snapshot stored",
        _NEVER_CLEARED,
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "snapshot_seq", "reason"),
    ),
    # the game server's acknowledgement
    AlertCode.SERVER_ACK_LAGGING: AlertSpec(
        Severity.WARNING,
        "the game server's acknowledgement lags past delivery.server_ack.max_lag_events or max_lag_s: "
        "it has not processed what the table published (the table keeps every such event and sends it "
        "again after a reconnect or on a resend command)",
        "both lags are back to half their limit (cleared by the publisher)",
        raised_by=RaisedBy.PUBLISHER,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "acknowledged_seq", "last_seq", "lag_events", "lag_s"),
    ),
    # a TLS certificate outside its dates
    AlertCode.TLS_CERTIFICATE_DATES: AlertSpec(
        Severity.CRITICAL,
        "a broker.tls certificate is expired or not yet valid by this PC's clock (a wrong clock "
        "at boot, or a certificate to renew): the table deals and journals, the broker connection "
        "is retried with backoff and events go out once the handshake succeeds",
        "every broker.tls certificate is within its dates again (re-checked every minute; "
        "cleared by the service)",
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "problems"),
    ),
    # self-attestation
    AlertCode.INTEGRITY_FAILED: AlertSpec(
        Severity.CRITICAL,
        "the installed files differ from the package's signed manifest (a changed, missing or extra "
        "file, or a manifest whose signature the configured public key does not verify): the table "
        "goes on journaling, and every event journaled after this alert is held from the broker",
        "a supervisor's attest command finds the files matching the manifest again (cleared by the "
        "service; the held events are then published in seq order); a restart does not clear it",
        raised_by=RaisedBy.SERVICE,
        id_scheme=IdScheme.DELIVERY,
        fields=(*_DELIVERY_FIELDS, "manifest_digest", "problems"),
    ),
}
"""Every alert code, in the order of ``AlertCode``."""

HOLDING_CODES: frozenset[AlertCode] = frozenset(code for code, spec in ALERTS.items() if spec.holds)
"""Codes of the alerts that hold a round."""

UNNEEDED_CODES: frozenset[AlertCode] = frozenset(
    {AlertCode.UNNEEDED_CARD, AlertCode.CARD_BEFORE_BETTING_CLOSED}  # (the second by the betting window)
)
"""Unneeded-card alerts (RULES.md mistakes 1-2, by time or by the betting window): acknowledging one
accepts the engine's reading, and a correction of the round it holds answers it."""


_RANDOM_ID_PREFIX: dict[IdScheme, str] = {
    IdScheme.DELIVERY: "delivery-",
    IdScheme.JOURNAL: "journal-",
    IdScheme.ENGINE_ERROR: "engine-error-",
}


def new_alert_id(scheme: IdScheme) -> str:
    """A fresh id of a scheme made of random digits (every scheme but ``IdScheme.ENGINE``,
    whose ids are numbered by the engine: :func:`engine_alert_id`)."""
    prefix = _RANDOM_ID_PREFIX.get(scheme)
    if prefix is None:
        raise ValueError(f"{scheme.name} alert ids are numbered by the engine, not drawn at random")
    return f"{prefix}{uuid.uuid4().hex[:12]}"


_BUILT_FIELDS = frozenset({"alert_id", "code", "severity", "message"})


def raised_alert(code: AlertCode, message: str, fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``data`` of the ``alert_raised`` event of a publisher or service alert, as its
    catalogue entry says: a new ``alert_id`` of the code's scheme, the code, the catalogue's
    severity (when the entry lists it), ``message`` and the code's own ``fields``.

    Raises ``ValueError`` when ``fields`` misses one of the entry's fields or names one it
    does not list, or for an engine alert (the engine numbers and builds its own)."""
    spec = ALERTS[code]
    if spec.raised_by is RaisedBy.ENGINE:
        raise ValueError(f"{code} is raised by the engine, which builds its own alerts")
    own = dict(fields or {})
    expected = set(spec.fields) - _BUILT_FIELDS
    if set(own) != expected:
        raise ValueError(
            f"{code}: fields {sorted(own)} differ from the catalogue's {sorted(expected)} "
            f"(missing {sorted(expected - set(own))}, not listed {sorted(set(own) - expected)})"
        )
    data: dict[str, Any] = {"alert_id": new_alert_id(spec.id_scheme), "code": code}
    if "severity" in spec.fields:
        data["severity"] = spec.severity
    data["message"] = message
    data.update(own)
    return data


def cleared_alert(alert_id: str, code: AlertCode, message: str) -> dict[str, Any]:
    """The ``data`` of the ``alert_cleared`` event that ends the alert ``alert_id``."""
    if ALERTS[code].clears == _NEVER_CLEARED:
        raise ValueError(f"{code} reports something that happened: it is never cleared")
    return {"alert_id": alert_id, "code": code, "message": message}
