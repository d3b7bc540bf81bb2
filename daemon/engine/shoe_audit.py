"""The shoe's audit at its end: the certificate, the irregular-shoe detectors, the remainder count.

When a shoe ends (its last round, a new shoe, a void), :meth:`ShoeAudit.on_shoe_ended` accounts
for every card of the shoe's decks (``daemon.audit.certificate``) and emits it as
``shoe_certificate`` (``stage: end``); then the irregular-shoe detectors (``daemon.audit.irregular``)
look at the shoe's order against the table's recent shoes, and any finding raises
``shoe_irregular`` with its evidence and probability.

The **remainder count** is the supervisor's ``remainder_count`` command: ``step: start`` after the
shoe ended, then the dealer runs the undealt cards through the reader (each a ``remainder_card``),
then ``step: finish``: the certificate is issued again (``stage: remainder``), now balancing each
face, and a count that does not balance raises ``shoe_count_mismatch`` naming each missing and
extra card.
"""

from __future__ import annotations

from collections import Counter

from common.inputs import CardRead, ReadFailed, Source, SupervisorCommand
from daemon.alerts import AlertCode
from daemon.audit.certificate import CodeCounts, ShoeCertificate, Status, certify_counts
from daemon.audit.irregular import ShoeSequence, detect
from daemon.audit.streaks import encode_codes
from daemon.engine import commands as args_
from daemon.engine.audit_fold import (
    BURNED,
    END_STAGE,
    EXPOSED,
    EXTRAS,
    FOREIGN,
    REMAINDER_STAGE,
    VOIDED,
    RecentShoe,
)
from daemon.engine.commands import Outcome, Refused
from daemon.engine.emitter import Emitter
from daemon.engine.events import Event, EventKind
from daemon.engine.phases import Phase
from daemon.engine.reads import read_fields
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState
from daemon.rules.outcome import Winner

_WINNERS = {"P": Winner.PLAYER, "B": Winner.BANKER, "T": Winner.TIE}
_WINNER_OF = {w.value: w for w in Winner}
_STEPS = ("start", "finish")


class ShoeAudit:
    """The shoe's certificate and irregularity check at its end, and the remainder count."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    decoded: dict[tuple[str, str], ShoeSequence]
    """The table's recent shoes (``TableState.recent_shoes``) as the detectors take them, decoded
    once: a cache of the state, never anything else (a restored engine decodes them again)."""

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.decoded = {}

    # ------------------------------------------------------------------ the shoe's end
    def on_shoe_ended(self, ended: Event) -> None:
        """Certify the shoe that ``ended`` (a ``shoe_ended`` just applied) and check its order."""
        st = self.state
        shoe_id = st.shoe_id
        assert shoe_id is not None, "a shoe ended without an id"
        settings = self.shoe.settings.audit.irregular.for_decks(self.shoe.settings.decks)
        # (a shoe ended twice, by its cut card then voided, is never compared with itself)
        history = [h for h in self._history() if h.shoe_id != shoe_id]
        winners = tuple(_WINNER_OF[r["winner"]] for r in st.results)
        sequence = ShoeSequence(shoe_id, encode_codes(st.audit_cards), winners)
        findings = () if settings is None else detect(sequence, history, settings)
        irregular: dict[str, object]
        if settings is None or not settings.enabled:
            why = "disabled" if settings is not None else "no simulated null table for this many decks"
            irregular = {"checked": False, "reason": why, "findings": []}
        else:
            irregular = {"checked": True, "reason": None, "findings": [f.to_dict() for f in findings]}
        self._emit_certificate(
            ended.at, ended.source, stage=END_STAGE, cert=self.certificate(None), irregular=irregular
        )
        if findings and settings is not None:
            self.emitter.alert(
                AlertCode.SHOE_IRREGULAR,
                ended.at,
                ended.source,
                findings=[f.to_dict() for f in findings],
                alpha=settings.alpha,
                recent_shoes=min(len(history), settings.recent_shoes),
            )

    def _history(self) -> list[ShoeSequence]:
        decoded = {(s["shoe_id"], s["cards"]): s for s in self.state.recent_shoes}
        self.decoded = {key: self.decoded.get(key) or _sequence(s) for key, s in decoded.items()}
        return list(self.decoded.values())

    def certificate(self, remainder: list[str] | None) -> ShoeCertificate:
        """The current shoe's certificate from the state (``remainder``: the counted cards, if any)."""
        st = self.state
        places = st.audit_places
        in_rounds = Counter(st.counts)
        for place in (BURNED, EXPOSED, VOIDED, EXTRAS):
            in_rounds.subtract(places.get(place, ()))
        counts = CodeCounts(
            in_rounds=+in_rounds,  # (a copy moved out of a round never leaves a negative count)
            burned=Counter(places.get(BURNED, ())),
            exposed=Counter(places.get(EXPOSED, ())),
            voided=Counter(places.get(VOIDED, ())),
            extras=Counter([*places.get(EXTRAS, ()), *places.get(FOREIGN, ())]),
        )
        counted = None if remainder is None else Counter(remainder)
        assert st.shoe_id is not None
        return certify_counts(st.shoe_id, decks=self.shoe.settings.decks, counts=counts, remainder=counted)

    def _emit_certificate(
        self,
        at: float,
        source: str,
        *,
        stage: str,
        cert: ShoeCertificate,
        irregular: dict[str, object] | None,
    ) -> None:
        data: dict[str, object] = {
            "shoe_id": cert.shoe_id,
            "stage": stage,
            "reason": self.state.shoe_end_reason,
            "status": cert.status.value,
            "certificate": cert.to_dict(),
        }
        if irregular is not None:
            data["irregular"] = irregular
        self.emitter.emit(EventKind.SHOE_CERTIFICATE, at, source, data)

    # ------------------------------------------------------------------ the remainder count
    def remainder_count(self, cmd: SupervisorCommand) -> Outcome:
        """``remainder_count`` ``step: start`` (the shoe has ended and is certified) or ``finish``."""
        args_.check_keys(cmd.args, {"step"})
        step = cmd.args.get("step")
        if step not in _STEPS:
            raise args_.ArgError(f"argument 'step' must be one of {', '.join(_STEPS)}, got {step!r}")
        st = self.state
        if step == "start":
            if st.phase != Phase.OVER or st.certified is None:
                return Refused("no ended shoe to count: the remainder is counted after the shoe's end")
            if st.remainder is not None:
                return Refused(f"a remainder count is running ({len(st.remainder)} card(s) so far)")
            data = {"shoe_id": st.shoe_id, "actor": cmd.actor, "command_id": cmd.command_id}

            def start() -> None:
                self.emitter.emit(EventKind.REMAINDER_COUNT_STARTED, cmd.at, Source.SUPERVISOR, data)

            return start
        if st.remainder is None:
            return Refused("no remainder count is running: start one first")
        if self._count_rescan() is not None:
            return Refused("a card of the count could not be read: rescan it before the count finishes")
        return lambda: self._finish(cmd)

    def _finish(self, cmd: SupervisorCommand) -> None:
        st = self.state
        assert st.remainder is not None
        cert = self.certificate(list(st.remainder))
        self._emit_certificate(cmd.at, Source.SUPERVISOR, stage=REMAINDER_STAGE, cert=cert, irregular=None)
        if cert.status is Status.MISMATCH:
            self.emitter.alert(
                AlertCode.SHOE_COUNT_MISMATCH,
                cmd.at,
                Source.SUPERVISOR,
                missing=[{"card": d.card.code, "copies": d.copies} for d in cert.missing],
                extra=[{"card": d.card.code, "copies": d.copies} for d in cert.extra],
                accounted=cert.accounted,
                expected=cert.expected,
                seen=cert.seen,
                remainder=cert.remainder,
            )

    def counting(self, read: CardRead) -> bool:
        """Whether ``read`` is a card of the remainder count (a reader's card while one runs)."""
        return self.state.remainder is not None and not self.shoe.is_camera(read.source, read.device)

    def on_remainder_read(self, read: CardRead) -> None:
        """A card run through the reader during the remainder count (a re-sent one is dropped)."""
        fields = read_fields(read)
        tid = read.transmission_id
        if tid is not None:
            seen_at = self.state.recent.get((read.device, tid, read.card.code))
            if seen_at is not None and read.at - seen_at <= self.shoe.settings.duplicate_window_s:
                return
        self.emitter.emit(
            EventKind.REMAINDER_CARD, read.at, read.source, {"card": read.card.code, "read": fields}
        )
        unread = self._count_rescan()
        if unread is not None:  # the card the reader could not read, run through it again
            self.emitter.clear_alert(unread, read.at, read.source, "rescanned")

    def counting_misread(self, read: ReadFailed) -> bool:
        """Whether ``read`` is the reader failing on a card of the remainder count."""
        return self.state.remainder is not None and not self.shoe.is_camera(read.source, read.device)

    def on_remainder_misread(self, read: ReadFailed) -> None:
        """A card of the count the reader could not read: it asks for a rescan, and the count
        cannot finish before it (an unread card is never counted as missing, nor guessed)."""
        if self._count_rescan() is None:
            self.emitter.alert(
                AlertCode.RESCAN_NEEDED,
                read.at,
                read.source,
                device=read.device,
                read=read_fields(read),
                reason=read.reason,
                reader_code=read.code,
                remainder_count=True,
            )

    def _count_rescan(self) -> str | None:
        """The open rescan alert raised during this remainder count, if any."""
        alert_id = self.state.rescan_alert
        if alert_id is None:
            return None
        details = self.state.alerts[alert_id].get("details") or {}
        return alert_id if details.get("remainder_count") else None


def _sequence(shoe: RecentShoe) -> ShoeSequence:
    return ShoeSequence(
        shoe["shoe_id"], bytes.fromhex(shoe["cards"]), tuple(_WINNERS[w] for w in shoe["winners"])
    )
