"""The shoe's own decks and variant: what the shoe being dealt is dealt with.

``shoe_started`` records the decks and variant a shoe was started with, and the engine keeps using
them for that shoe (e.g. when restored under a changed configuration); the configured ones (the
engine's arguments) start every new shoe (``README.md``, "A shoe keeps its own decks and variant").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.inputs import Source
from daemon.engine.payloads import ShoeDifference, ShoeRecord
from daemon.engine.phases import Phase
from daemon.engine.rounds import RoundState
from daemon.engine.settings import TableSettings
from daemon.engine.settle import Settler
from daemon.engine.state import TableState
from daemon.rules.variants import Variant

_CAMERA = Source.CAMERA  # bound once: checked for every read (an Enum attribute costs ~0.1 µs)

VariantResolver = Callable[[str], Variant]
"""Loads a variant by the name a ``shoe_started`` event recorded (the caller's I/O, not the engine's)."""


class ShoeSetup:
    """The shoe's settings and variant (``settings``/``variant``), the configured ones, and what
    follows from them (the settler, whether a round needs the super-round die, the cameras)."""

    configured_settings: TableSettings
    configured_variant: Variant
    settings: TableSettings
    variant: Variant
    variant_missing: str | None
    """A recorded variant that could not be loaded, or whose pay table (digest) changed since the
    shoe started: the shoe's rounds are held."""
    variant_changed: bool
    """``variant_missing`` because no pay table has the recorded digest."""
    shoe_variant_digest: str | None
    """The digest ``shoe_started`` recorded (None: a journal from before digests were recorded)."""
    settler: Settler
    needs_die: bool
    camera_devices: frozenset[str]

    def __init__(
        self, settings: TableSettings, variant: Variant, resolve_variant: VariantResolver | None = None
    ) -> None:
        self.configured_settings = settings
        self.configured_variant = variant
        self.settings = settings
        self.variant = variant
        self.variant_missing = None
        self.variant_changed = False
        self.shoe_variant_digest = None
        self._resolve_variant = resolve_variant
        self._resolved: dict[str, Variant | None] = {}
        self.settler = Settler(variant)
        self.needs_die = variant.needs_super_round_die
        self.camera_devices = frozenset(settings.camera.devices)

    def is_camera(self, source: str, device: str) -> bool:
        """Whether a read comes from a camera (by its source or its device's name)."""
        return source is _CAMERA or device in self.camera_devices

    def use(self, data: dict[str, Any]) -> None:
        """Deal the shoe a ``shoe_started`` event's ``data`` describes with its own decks and variant."""
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
            self.settler = Settler(variant)
            self.needs_die = variant.needs_super_round_die

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

    def record(self) -> ShoeRecord:
        """What the current shoe's ``shoe_started`` told the engine."""
        return {
            "decks": self.settings.decks,
            "variant": self.variant_missing or self.variant.name,
            "variant_digest": self.shoe_variant_digest,
        }

    def differs(self, state: TableState) -> ShoeDifference | None:
        """How the shoe being dealt differs from the configuration (None: it does not, or no
        shoe is being dealt), for the ``shoe_settings_differ`` alert."""
        if state.phase == Phase.NO_SHOE or (state.phase == Phase.OVER and not state.held):
            return None
        recorded: dict[str, object] = {
            "decks": self.settings.decks,
            "variant": self.variant_missing or self.variant.name,
        }
        configured: dict[str, object] = {
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

    def over_composition_text(self, seen: int) -> str:
        """Why a card seen ``seen`` times already is not counted against the shoe."""
        decks = self.settings.decks
        return (
            f"this exact card has already appeared {seen} time(s) in a {decks}-deck shoe: "
            "misread or foreign card"
        )

    def blockers(self, rnd: RoundState) -> list[str]:
        """What keeps a decided round from completing (empty: nothing)."""
        reasons = [f"alert {a}" for a in rnd.holds]
        if rnd.awaiting_verdict:
            reasons.append("awaiting the reader's verdict")
        if self.needs_die and rnd.die is None:
            reasons.append("awaiting the super-round die")
        if self.variant_missing is not None:
            reasons.append(self.variant_missing_text())
        return reasons

    def variant_missing_text(self) -> str:
        """Why the shoe's rounds are held for their variant."""
        if self.variant_changed:
            return (
                f"this shoe's variant {self.variant_missing!r} pay table changed since the shoe started "
                f"(recorded digest {self.shoe_variant_digest}): not settled under another pay table"
            )
        return f"this shoe's variant {self.variant_missing!r} cannot be loaded (no other pay table)"
