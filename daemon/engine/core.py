"""Engine core: the state, the shoe's own decks and variant, and the emission discipline.

Every event is decided from the state, applied to it at once (``TableState.apply``) and
collected for ``handle`` to return; alerts are numbered and worded by the alert catalogue
(``daemon/alerts.py``). ``dealing.Dealing`` builds the shoe procedure on this class, the
input handlers (``sequencer``, ``signals``, ``supervisor``) build on that, and
``table.Engine`` puts them together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.inputs import SupervisorCommand
from daemon.alerts import ALERTS, AlertCode, engine_alert_id
from daemon.engine.events import Event, EventKind
from daemon.engine.settings import TableSettings
from daemon.engine.settle import Settler
from daemon.engine.state import Phase, TableState
from daemon.rules.variants import Variant

_NO_ROUND_ID = frozenset({EventKind.ALERT_RAISED, EventKind.ALERT_CLEARED})
"""Event kinds whose data is fixed by a catalogue (alerts): no ``round_id`` added."""

VariantResolver = Callable[[str], Variant]
"""Loads a variant by the name a ``shoe_started`` event recorded (the caller's I/O, not the engine's)."""


class EngineCore:
    """The state, the shoe's settings and variant, and the emission discipline (decide, apply, return).

    ``settings``/``variant`` are those of the shoe being dealt: the ``shoe_started`` event records
    the decks and variant a shoe was started with, and the engine keeps using them for that shoe
    (e.g. when restored under a changed configuration); ``configured_settings`` /
    ``configured_variant`` (the arguments) start every new shoe.
    """

    # Set by a command handler that refuses: an alert the floor must see too, raised after the
    # refusal (game flow: a round id out of sequence).
    _refusal_alert: Callable[[], None] | None = None

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

    def _emit(
        self,
        kind: EventKind,
        at: float,
        source: str,
        data: dict[str, Any],
        hand: int | None = None,
        shoe_id: str | None = None,
    ) -> Event:
        round_ids = self.state.round_ids
        if round_ids and hand is not None and hand in round_ids and kind not in _NO_ROUND_ID:
            # game_flow betting_window: every event of a round carries the server's round id
            data = {**data, "round_id": round_ids[hand]}
        event = Event(kind, at, shoe_id or self.state.shoe_id, hand, source, data)
        self.state.apply(event)
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
            "code": code,
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
