"""Engine core: emitting events, placing a card by the shoe procedure and draw order,
deciding rounds, starting and ending shoes, and the snapshot.

The input handlers (``sequencer``, ``signals``, ``supervisor``) build on this class;
``table.Engine`` puts them together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.inputs import (
    DeviceTarget,
    SupervisorCommand,
)
from daemon.alerts import ALERTS, AlertCode, engine_alert_id
from daemon.engine.events import Event, EventKind
from daemon.engine.settings import TableSettings
from daemon.engine.settle import RANKS, Settler
from daemon.engine.state import (
    ROUND_SLOTS,
    Phase,
    RoundState,
    TableState,
)
from daemon.rules.variants import Variant

# Which device targets agree with which engine slot.
TARGET_AGREES: dict[str, frozenset[DeviceTarget]] = {
    "indicator": frozenset({DeviceTarget.FIRST_CARD}),
    "burn": frozenset({DeviceTarget.BURN, DeviceTarget.BURN_COUNT}),
    **{slot: frozenset({DeviceTarget(slot)}) for slot in ROUND_SLOTS},
}


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the engine puts the next card."""

    slot: str
    burn: str | None = None  # opening / round / unneeded, for burn cards
    opens_round: bool = False
    unneeded: int = 0  # 1 or 2: RULES.md dealing mistakes 1 and 2


Effect = Callable[[], None]

_INDICATOR = Placement("indicator")
_OPENING_BURN = Placement("burn", burn="opening")
_ROUND_BURN = Placement("burn", burn="round")
_UNNEEDED_BURN = Placement("burn", burn="unneeded", unneeded=1)
_UNNEEDED_P1 = Placement("P1", opens_round=True, unneeded=2)
_NEW_ROUND = Placement("P1", opens_round=True)
_IN_ROUND = {slot: Placement(slot) for slot in ROUND_SLOTS}


VariantResolver = Callable[[str], Variant]
"""Loads a variant by the name a ``shoe_started`` event recorded (the caller's I/O, not the engine's)."""


class EngineCore:
    """The state, the emission discipline (decide, apply, return) and the round procedure.

    ``settings``/``variant`` are those of the shoe being dealt: the ``shoe_started`` event records
    the decks and variant a shoe was started with, and the engine keeps using them for that shoe
    (e.g. when restored under a changed configuration); ``configured_settings`` /
    ``configured_variant`` (the arguments) start every new shoe.
    """

    def __init__(
        self, settings: TableSettings, variant: Variant, resolve_variant: VariantResolver | None = None
    ) -> None:
        self.configured_settings = settings
        self.configured_variant = variant
        self.settings = settings
        self.variant = variant
        # A recorded variant that could not be loaded, or whose pay table (digest) changed since
        # the shoe started: the shoe's rounds are held.
        self.variant_missing: str | None = None
        self.variant_changed = False  # variant_missing because no pay table has the recorded digest
        # The digest shoe_started recorded (None: a journal from before digests were recorded).
        self.shoe_variant_digest: str | None = None
        self._resolve_variant = resolve_variant
        self._resolved: dict[str, Variant | None] = {}
        self.state = TableState(settings)
        self._settler = Settler(variant)
        self._camera_devices = frozenset(settings.camera.devices)
        self._needs_die = variant.needs_super_round_die
        self._out: list[Event] = []
        self._now = 0.0
        self._pull_gap_raised = False  # within one ``handle``: a pull's gap opened a rescan

    def _use_shoe(self, data: dict[str, Any]) -> None:
        """Deal the shoe a ``shoe_started`` event describes with its own decks and variant."""
        configured = self.configured_settings
        decks = data.get("decks", configured.decks)
        if decks == configured.decks:
            self.settings = configured
        elif decks != self.settings.decks:
            self.settings = configured.model_copy(update={"decks": decks})
        name = data.get("variant", self.configured_variant.name)
        digest = data.get("variant_digest")
        self.shoe_variant_digest = digest if isinstance(digest, str) else None
        candidates = self._variants_named(name)
        if self.shoe_variant_digest is None:
            variant = candidates[0] if candidates else None
        else:
            variant = next((v for v in candidates if v.digest == self.shoe_variant_digest), None)
        self.variant_missing = None if variant is not None else name
        self.variant_changed = variant is None and bool(candidates)
        variant = variant or self.configured_variant  # (bets offered only: its rounds are held)
        if variant is not self.variant:
            self.variant = variant
            self._settler = Settler(variant)
            self._needs_die = variant.needs_super_round_die

    def _variants_named(self, name: str) -> list[Variant]:
        """The variants called ``name`` the engine can use: the configured one first, then the
        resolver's (asked only when the configured one is not called so, or has another digest)."""
        configured = self.configured_variant
        found = [configured] if configured.name == name else []
        if found and (self.shoe_variant_digest is None or configured.digest == self.shoe_variant_digest):
            return found
        if name not in self._resolved:
            resolved: Variant | None = None
            if self._resolve_variant is not None:
                try:
                    resolved = self._resolve_variant(name)
                except (ValueError, OSError, LookupError):
                    resolved = None
            self._resolved[name] = resolved if resolved is not None and resolved.name == name else None
        resolved = self._resolved[name]
        if resolved is not None and resolved is not configured:
            found.append(resolved)
        return found

    def _shoe_differs(self) -> dict[str, Any] | None:
        """How the shoe being dealt differs from the configuration (None: it does not, or no
        shoe is being dealt), for the ``shoe_settings_differ`` alert."""
        st = self.state
        if st.phase == Phase.NO_SHOE or (st.phase == Phase.OVER and not st.held):
            return None
        recorded: dict[str, Any] = {
            "decks": self.settings.decks,
            "variant": self.variant_missing or self.variant.name,
        }
        configured: dict[str, Any] = {
            "decks": self.configured_settings.decks,
            "variant": self.configured_variant.name,
        }
        if self.shoe_variant_digest is not None:  # (journals from before digests: compared by name)
            recorded["variant_digest"] = self.shoe_variant_digest
            configured["variant_digest"] = self.configured_variant.digest
        if recorded == configured:
            return None
        return {
            "shoe": recorded,
            "configured": configured,
            "variant_available": self.variant_missing is None,
            "pay_table_changed": self.variant_changed,
        }

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready current state (the publisher retains it)."""
        st = self.state
        rnd = st.round
        return {
            "shoe": {
                "shoe_id": st.shoe_id,
                "phase": st.phase,
                "decks": self.settings.decks,
                "cards_out": st.cards_out,
                "burn_remaining": st.burn_remaining,
                "round_burn_remaining": st.round_burn_remaining,
                "cut_card_seen": st.cut_card_seen,
                "last_hand": st.last_hand,
                "end_reason": st.shoe_end_reason,
            },
            "variant": self.variant.name,
            "hand": st.hand,
            "round": None if rnd is None else self._round_view(rnd),
            "offered_bets": {"hand": st.offered_hand, "bets": list(st.offered_bets)},
            "alerts": [dict(a) for a in st.alerts.values()],
            "held_rounds": [self._round_view(r) for _, r in sorted(st.held.items())],
            "rescan_needed": st.rescan_alert is not None,
            "disconnected_devices": list(st.disconnected),
            "storage": {
                "full": st.storage_full,
                "detail": st.storage_detail,
                "refused_cards": st.storage_refused,
            },
            "reads_waiting_in_pull": len(st.held_reads),
            "results": [
                {
                    "hand": r["hand"],
                    "winner": r["winner"],
                    "totals": list(r["totals"]),
                    "pairs": list(r["pairs"]),
                    "naturals": list(r["naturals"]),
                }
                for r in st.results
            ],
        }

    def _emit(
        self,
        kind: EventKind,
        at: float,
        source: str,
        data: dict[str, Any],
        hand: int | None = None,
        shoe_id: str | None = None,
    ) -> Event:
        event = Event(kind, at, shoe_id or self.state.shoe_id, hand, source, data)
        self.state.apply(event)
        if kind == EventKind.SHOE_STARTED:
            self._use_shoe(data)
        self._out.append(event)
        return event

    def _alert(
        self,
        code: AlertCode,
        at: float,
        source: str,
        *,
        hand: int | None = None,
        holds: int | str | None = None,
        device: str | None = None,
        read: dict[str, Any] | None = None,
        **details: Any,
    ) -> str:
        alert_id = engine_alert_id(self.state.shoe_id, self.state.alert_counter + 1)
        data: dict[str, Any] = {
            "alert_id": alert_id,
            "code": code.value,
            "message": ALERTS[code].summary,
            "hand": hand,
            "holds": holds,
            "device": device,
            "details": details,
        }
        if read is not None:
            data["read"] = read
        self._emit(EventKind.ALERT_RAISED, at, source, data, hand=hand)
        return alert_id

    def _clear_alert(
        self,
        alert_id: str,
        at: float,
        source: str,
        reason: str,
        cmd: SupervisorCommand | None = None,
        **extra: Any,
    ) -> None:
        alert = self.state.alerts[alert_id]
        data: dict[str, Any] = {"alert_id": alert_id, "code": alert["code"], "reason": reason, **extra}
        if cmd is not None:
            data.update(actor=cmd.actor, command_id=cmd.command_id)
        self._emit(EventKind.ALERT_CLEARED, at, source, data, hand=alert.get("hand"))

    def _refuse_outside_shoe(self, at: float, source: str, fields: dict[str, Any]) -> None:
        st = self.state
        if st.phase == Phase.OVER and st.shoe_end_reason == "cut_card":
            self._alert(AlertCode.CARD_AFTER_LAST_ROUND, at, source, device=fields["device"], read=fields)
        else:
            self._alert(AlertCode.NO_SHOE, at, source, device=fields["device"], read=fields)

    def _refuse_for_storage(self, code: str, at: float, source: str, fields: dict[str, Any]) -> None:
        """The journal is full and this card would open a round: refuse it, never place it.

        It physically left the shoe, so it counts against the composition (unless it is
        already over it: a misread or foreign card); one alert counts every refused card.
        """
        st = self.state
        seen = st.counts.get(code, 0)
        counted = seen < self.settings.decks
        refused = st.storage_refused + 1 if st.storage_alert is not None else 1
        alert_id = st.storage_alert
        if alert_id is None:
            alert_id = self._alert(
                AlertCode.JOURNAL_FULL_CARD_REFUSED,
                at,
                source,
                device=fields.get("device"),
                detail=st.storage_detail,
                refused=1,
            )
        data: dict[str, Any] = {
            "card": code,
            "reason": "journal_full",
            "counted": counted,
            "refused": refused,
            "alert_id": alert_id,
            "read": fields,
        }
        if not counted:
            data["not_counted_because"] = (
                f"this exact card has already appeared {seen} time(s) in a {self.settings.decks}-deck shoe: "
                "misread or foreign card"
            )
        self._emit(EventKind.CARD_REFUSED, at, source, data)
        if st.rescan_alert is not None:  # the unread card was read: refused, but no longer unknown
            self._clear_alert(st.rescan_alert, at, source, "rescanned, refused (journal full)")

    def _composition_ok(
        self,
        code: str,
        at: float,
        source: str,
        fields: dict[str, Any],
        *,
        holds: int | str | None = None,
    ) -> bool:
        """Whether another ``code`` fits in the shoe; if not, raise ``over_composition``
        (holding ``holds``: a hand, ``"next_round"``, or nothing)."""
        seen = self.state.counts.get(code, 0)
        if seen < self.settings.decks:
            return True
        self._alert(
            AlertCode.OVER_COMPOSITION,
            at,
            source,
            hand=self.state.round.hand if self.state.round is not None else None,
            holds=holds,
            device=fields.get("device"),
            read=fields,
            card=code,
            already_seen=seen,
            decks=self.settings.decks,
        )
        return False

    def _refuse_over_composition(self, code: str, at: float, source: str, fields: dict[str, Any]) -> None:
        """A reader's card over the shoe's composition (misread or foreign card).

        It physically occupies the slot the draw order gives it, so taking the next card in
        its place would shift the round (RULES.md: never accepted silently). Like a misread,
        the slot waits for a valid rescan (``rescan_needed``: no card is accepted meanwhile),
        and the alert holds the round (or the next one, between rounds) for a supervisor.
        """
        st = self.state
        hand = st.round.hand if st.round is not None else None
        self._composition_ok(code, at, source, fields, holds=hand if hand is not None else "next_round")
        if st.rescan_alert is None:
            self._alert(
                AlertCode.RESCAN_NEEDED,
                at,
                source,
                hand=hand,
                device=fields.get("device"),
                read=fields,
                reason="over_composition",
                reader_code=None,
            )

    def _plan(self, at: float, *, detect_unneeded: bool = True) -> Placement:
        """Where the next card goes, by the shoe procedure and draw order alone."""
        st = self.state
        phase = st.phase
        if phase == Phase.ROUND:
            assert st.round is not None
            slot = st.round.next_slot()
            assert slot is not None, "a decided round never stays in progress"
            return _IN_ROUND[slot]
        if phase == Phase.INDICATOR:
            return _INDICATOR
        if phase == Phase.BURNING:
            return _OPENING_BURN
        window = self.settings.unneeded_card_window_s
        recent = detect_unneeded and window > 0 and st.decided_at is not None and at - st.decided_at <= window
        if recent and st.unneeded_count == 0:
            return _UNNEEDED_BURN
        if recent and st.unneeded_count == 1:
            return _UNNEEDED_P1
        if st.round_burn_remaining > 0:
            return _ROUND_BURN
        return _NEW_ROUND

    def _place(
        self,
        plan: Placement,
        code: str,
        at: float,
        source: str,
        *,
        read: dict[str, Any] | None = None,
        target: DeviceTarget | None = None,
        cmd: SupervisorCommand | None = None,
        hand: int | None = None,
    ) -> None:
        """Emit a card's events: round opening, the card, its alerts, and what it decides."""
        st = self.state
        if plan.opens_round:
            next_hand = st.hand + 1
            self._emit(
                EventKind.ROUND_OPENED,
                at,
                source,
                {"hand": next_hand, "bets": self._settler.offered(next_hand)},
                hand=next_hand,
            )
        data: dict[str, Any] = {"card": code, "slot": plan.slot, "source": source}
        round_hand: int | None = None
        if plan.slot == "indicator":
            data["burn_count"] = self.settings.burn_count(RANKS[code])
        elif plan.slot == "burn":
            data["burn"] = plan.burn
        else:
            round_hand = hand if hand is not None else st.hand
            data["round"] = round_hand
            if plan.unneeded:
                data["unneeded"] = True
            if source == "camera" and st.rescan_alert is not None:
                data["fills_rescan"] = True
        if read is not None:
            data["read"] = read
        if cmd is not None:
            data.update(actor=cmd.actor, command_id=cmd.command_id)
        self._emit(EventKind.CARD_DEALT, at, source, data, hand=round_hand)
        device = None if read is None else read["device"]
        if plan.unneeded:
            became = "the next round's burn card" if plan.unneeded == 1 else "the next round's Player 1"
            # Told from the next round's Player 1 by time only: the round it opens (or, for a
            # burn, the next one) is held until a supervisor accepts or corrects the reading.
            self._alert(
                AlertCode.UNNEEDED_CARD,
                at,
                source,
                hand=st.hand if plan.unneeded == 1 else round_hand,
                holds="next_round" if plan.unneeded == 1 else round_hand,
                device=device,
                card=code,
                became=became,
                rule=f"RULES.md dealing mistake {plan.unneeded}",
            )
        if target is not None and target not in TARGET_AGREES[plan.slot]:
            self._alert(
                AlertCode.DEVICE_DISAGREEMENT,
                at,
                source,
                hand=round_hand,
                holds=round_hand if round_hand is not None else "next_round",
                device=device,
                card=code,
                engine_slot=plan.slot,
                device_target=target.value,
            )
        if st.rescan_alert is not None:
            reason = {"camera": "camera_filled", "supervisor": "assigned"}.get(source, "rescanned")
            self._clear_alert(st.rescan_alert, at, source, reason, cmd)
        if plan.slot in ("indicator", "burn") and plan.burn in (None, "opening") and st.phase == Phase.READY:
            self._offer(st.hand + 1, at, source)
        elif round_hand is not None:
            rnd = st.round_for(round_hand)
            assert rnd is not None
            if rnd.next_slot() is None:
                decided_at = at if read is None else read["read_at"]
                if rnd is st.round:
                    self._decide(rnd, at, source, decided_at)
                else:
                    self._try_complete_held(rnd, at, source)

    def _offer(self, hand: int, at: float, source: str) -> None:
        self._emit(
            EventKind.BETS_OFFERED, at, source, {"hand": hand, "bets": self._settler.offered(hand)}, hand=hand
        )

    def _blockers(self, rnd: RoundState) -> list[str]:
        reasons = [f"alert {a}" for a in rnd.holds]
        if rnd.awaiting_verdict:
            reasons.append("awaiting the reader's verdict")
        if self._needs_die and rnd.die is None:
            reasons.append("awaiting the super-round die")
        if self.variant_missing is not None:
            reasons.append(self._variant_missing_text())
        return reasons

    def _variant_missing_text(self) -> str:
        if self.variant_changed:
            return (
                f"this shoe's variant {self.variant_missing!r} pay table changed since the shoe started "
                f"(recorded digest {self.shoe_variant_digest}): not settled under another pay table"
            )
        return f"this shoe's variant {self.variant_missing!r} cannot be loaded (no other pay table)"

    def _decide(self, rnd: RoundState, at: float, source: str, decided_at: float) -> None:
        """The round in progress is decided: complete it, or hold it while something blocks it."""
        blockers = self._blockers(rnd)
        if self.settings.await_device_verdict:
            blockers.append("awaiting the reader's verdict")
        if blockers:
            self._emit(
                EventKind.ROUND_HELD,
                at,
                source,
                {
                    "hand": rnd.hand,
                    "cards": dict(rnd.cards),
                    "blocked_by": blockers,
                    "awaiting_verdict": self.settings.await_device_verdict,
                    "decided_at": decided_at,
                },
                hand=rnd.hand,
            )
        else:
            self._complete(rnd, at, source, decided_at)
        self._after_round(rnd.hand, at, source)

    def _after_round(self, hand: int, at: float, source: str) -> None:
        st = self.state
        if st.last_hand is not None and hand >= st.last_hand:
            self._end_shoe(at, source, "cut_card")
        else:
            self._offer(hand + 1, at, source)

    def _end_shoe(self, at: float, source: str, reason: str) -> None:
        st = self.state
        self._emit(
            EventKind.SHOE_ENDED,
            at,
            source,
            {"shoe_id": st.shoe_id, "reason": reason, "hands": st.hand, "cards_out": st.cards_out},
        )

    def _complete(self, rnd: RoundState, at: float, source: str, decided_at: float | None) -> None:
        outcome, bets = self._settler.settle(*rnd.codes(), rnd.hand, rnd.die)
        self._emit(
            EventKind.ROUND_COMPLETED,
            at,
            source,
            {
                "hand": rnd.hand,
                "cards": dict(rnd.cards),
                "sources": dict(rnd.sources),
                "outcome": outcome,
                "bets": bets,
                "super_round_die": rnd.die,
                "corrected": rnd.corrected,
                "decided_at": decided_at,
            },
            hand=rnd.hand,
        )

    def _try_complete_held(self, rnd: RoundState, at: float, source: str) -> None:
        if rnd.hand in self.state.held and rnd.next_slot() is None and not self._blockers(rnd):
            self._complete(rnd, at, source, None)

    def _start_shoe(self, at: float, shoe_id: str | None, cmd: SupervisorCommand | None, source: str) -> None:
        st = self.state
        if st.phase not in (Phase.NO_SHOE, Phase.OVER):
            self._end_shoe(at, source, "replaced")
        new_id = shoe_id or f"shoe-{st.shoes_started + 1}-{round(at * 1000)}"
        data: dict[str, Any] = {
            "shoe_id": new_id,
            "decks": self.configured_settings.decks,
            "variant": self.configured_variant.name,
            "variant_digest": self.configured_variant.digest,
            "started_by": "device" if cmd is None else "supervisor",
            "actor": None if cmd is None else cmd.actor,
            "command_id": None if cmd is None else cmd.command_id,
        }
        self._emit(EventKind.SHOE_STARTED, at, source, data, shoe_id=new_id)

    def _round_view(self, rnd: RoundState) -> dict[str, Any]:
        view = rnd.to_dict()
        player, banker = rnd.sides()
        view["player_total"] = sum(c.points for c in player) % 10
        view["banker_total"] = sum(c.points for c in banker) % 10
        view["next_slot"] = rnd.next_slot()
        view["blocked_by"] = self._blockers(rnd)
        return view
