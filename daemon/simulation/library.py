"""The committed fixture library in ``hw-fixtures/``: how each file is generated.

Every fixture here is generated from the protocol specification by the
simulator (``origin: generated``; no real capture exists yet), with its
expected engine event stream beside it. ``baccarat-edge simulate --library DIR``
rewrites them; the golden tests replay each one and also check that the files
still match what this module generates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from daemon.simulation.audit_library import AUDIT_LIBRARY, AuditEntry
from daemon.simulation.dealer import DealSettings, Fault, FaultSpec, make_fixture
from daemon.simulation.flow_library import FLOW_LIBRARY, FlowEntry
from daemon.simulation.squeeze_library import SQUEEZE_LIBRARY, SqueezeEntry
from daemon.simulation.timed_library import TIMED_LIBRARY, TimedEntry
from drivers.fixtures import EXPECTED_SUFFIX, FIXTURE_SUFFIX, Fixture, load_fixture, write_expected


@dataclass(frozen=True, slots=True)
class LibraryEntry:
    name: str
    protocol: str
    description: str
    covers: tuple[str, ...]
    deal: DealSettings = field(default_factory=lambda: DealSettings(seed=11, max_hands=5))
    faults: tuple[FaultSpec, ...] = ()

    def fixture(self) -> Fixture:
        return make_fixture(
            self.name, self.protocol, self.deal, self.faults, description=self.description, covers=self.covers
        )


def _f(kind: Fault, hand: int = 2) -> tuple[FaultSpec, ...]:
    return (FaultSpec(kind, hand),)


_SMALL = DealSettings(seed=11, max_hands=5)
_CUT_MID_ROUND = DealSettings(seed=23, decks=1, cut_card_from_end=36)

LIBRARY: tuple[LibraryEntry, ...] = (
    LibraryEntry("angel_eye-clean", "angel_eye", "Five clean hands: start, burn, rounds, verdicts.",
                 ("normal dealing", "repeats x3", "shoe verdict agrees")),
    LibraryEntry("angel_eye-misread", "angel_eye", "Hand 2: Banker 1 unreadable (E code 1), then the rescan.",
                 ("RULES.md mistake 6: scanner could not read a card",), faults=_f(Fault.MISREAD)),
    LibraryEntry("angel_eye-unneeded-card", "angel_eye", "Hand 2: one card drawn after the round was over.",
                 ("RULES.md mistake 1: one unneeded card",), faults=_f(Fault.UNNEEDED_CARD)),
    LibraryEntry("angel_eye-two-unneeded-cards", "angel_eye",
                 "Hand 2: two cards drawn after the round was decided; the second is hand 3's Player 1.",
                 ("RULES.md mistake 2: two unneeded cards",), faults=_f(Fault.TWO_UNNEEDED_CARDS)),
    LibraryEntry("angel_eye-double-pull", "angel_eye",
                 "Hand 2: Player 2 and Banker 2 pulled together; the shoe reports the lower card first.",
                 ("RULES.md mistake 3: cards pulled out together",), faults=_f(Fault.DOUBLE_PULL)),
    LibraryEntry("angel_eye-missing-card", "angel_eye",
                 "Hand 2: Banker 1 never scanned; a supervisor assigns it.",
                 ("RULES.md mistake 5: a card not scanned",), faults=_f(Fault.MISSING_CARD)),
    LibraryEntry("angel_eye-card-exposed", "angel_eye",
                 "Hand 2: a card exposed; the supervisor voids the round and the shoe force-quits it.",
                 ("RULES.md mistake 7: card exposed, round void",), faults=_f(Fault.CARD_EXPOSED)),
    LibraryEntry("angel_eye-card-outside-game", "angel_eye",
                 "Betting before hand 2: a card leaves the locked shoe ('d' frame, lock mode); alerted and "
                 "counted, never dealt; the game goes on.",
                 ("RULES.md mistake 7: card exposed during betting (reader 'd' frame)",),
                 faults=_f(Fault.OUTSIDE_GAME_CARD)),
    LibraryEntry("angel_eye-foreign-card", "angel_eye",
                 "One-deck shoe; hand 2 starts with a second copy of the indicator card.",
                 ("deck composition: a card over the shoe's count",),
                 deal=DealSettings(seed=11, decks=1, max_hands=4), faults=_f(Fault.FOREIGN_CARD)),
    LibraryEntry("angel_eye-bad-checksum", "angel_eye",
                 "Hand 2: the first transmission of every frame has a bad BCC; the resends are good.",
                 ("bad checksums",), faults=_f(Fault.BAD_CHECKSUM)),
    LibraryEntry("angel_eye-corrupt-card-frame", "angel_eye",
                 "Hand 2: every transmission of Banker 1's frame has a bad BCC: the card never arrives; "
                 "the engine asks for a rescan and a supervisor assigns the card.",
                 ("bad checksums", "a card frame lost on the line: rescan, never a silent gap"),
                 faults=_f(Fault.CORRUPT_CARD_FRAME)),
    LibraryEntry("angel_eye-garbage", "angel_eye", "Hand 2: line noise before the round.",
                 ("garbage and resynchronisation",), faults=_f(Fault.GARBAGE)),
    LibraryEntry("angel_eye-repeats", "angel_eye", "Hand 2: every frame sent six times.",
                 ("repeat suppression",), faults=_f(Fault.REPEATS)),
    LibraryEntry("angel_eye-unplug", "angel_eye",
                 "Hand 2: the cable is pulled in the middle of Banker 1's frame and plugged back.",
                 ("device unplugged mid-frame and back",), faults=_f(Fault.UNPLUG)),
    LibraryEntry("angel_eye-cut-card-finish-round", "angel_eye",
                 "One-deck shoe; the cut card comes out during hand 3: that round is the last.",
                 ("cut card during a round", "last round", "shoe end"), deal=_CUT_MID_ROUND),
    LibraryEntry("angel_eye-cut-card-one-more-round", "angel_eye",
                 "As above with the one_more_round policy: hand 4 is the last.",
                 ("cut card policy one_more_round",),
                 deal=DealSettings(seed=23, decks=1, cut_card_from_end=36, cut_card_policy="one_more_round")),
    LibraryEntry("angel_eye-cut-card-between-rounds", "angel_eye",
                 "One-deck shoe; the cut card comes out between hands 3 and 4: hand 4 is the last.",
                 ("cut card between rounds",), deal=DealSettings(seed=23, decks=1, cut_card_from_end=34)),
    LibraryEntry("angel_eye-round-burn", "angel_eye", "A table burning one card before every round.",
                 ("burn before each round",),
                 deal=DealSettings(seed=11, max_hands=4, burn_before_each_round=True)),
    LibraryEntry("ascii_lines-clean", "ascii_lines", "Five clean hands from a line reader (CR LF).",
                 ("normal dealing", "no positions: engine assigns order")),
    LibraryEntry("ascii_lines-misread", "ascii_lines", "Hand 2: an unreadable line, then the rescan.",
                 ("RULES.md mistake 6",), faults=_f(Fault.MISREAD)),
    LibraryEntry("ascii_lines-unneeded-card", "ascii_lines",
                 "Hand 2: one card drawn after the round was over.",
                 ("RULES.md mistake 1: one unneeded card",), faults=_f(Fault.UNNEEDED_CARD)),
    LibraryEntry("ascii_lines-two-unneeded-cards", "ascii_lines", "Hand 2: two unneeded cards.",
                 ("RULES.md mistake 2",), faults=_f(Fault.TWO_UNNEEDED_CARDS)),
    LibraryEntry("ascii_lines-missing-card", "ascii_lines", "Hand 2: Banker 1 not scanned, then assigned.",
                 ("RULES.md mistake 5",), faults=_f(Fault.MISSING_CARD)),
    LibraryEntry("ascii_lines-card-exposed", "ascii_lines",
                 "Hand 2: a card exposed after two cards; the supervisor voids the round.",
                 ("RULES.md mistake 7: card exposed, round void",), faults=_f(Fault.CARD_EXPOSED)),
    LibraryEntry("ascii_lines-garbage", "ascii_lines",
                 "Hand 2: a line of noise before the round: an unreadable read, cleared by the next card.",
                 ("garbage: an unreadable line asks for a rescan",), faults=_f(Fault.GARBAGE)),
    LibraryEntry("ascii_lines-unplug", "ascii_lines", "Hand 2: unplugged in the middle of a line and back.",
                 ("device unplugged mid-frame and back",), faults=_f(Fault.UNPLUG)),
    LibraryEntry("usb_hid-clean", "usb_hid", "Five clean hands typed by a keyboard-wedge reader.",
                 ("normal dealing", "Shift and key release")),
    LibraryEntry("usb_hid-misread", "usb_hid", "Hand 2: an unmappable code, then the rescan.",
                 ("RULES.md mistake 6",), faults=_f(Fault.MISREAD)),
    LibraryEntry("usb_hid-unneeded-card", "usb_hid", "Hand 2: one unneeded card.",
                 ("RULES.md mistake 1",), faults=_f(Fault.UNNEEDED_CARD)),
    LibraryEntry("usb_hid-two-unneeded-cards", "usb_hid",
                 "Hand 2: two cards drawn after the round was decided; the second is hand 3's Player 1.",
                 ("RULES.md mistake 2: two unneeded cards",), faults=_f(Fault.TWO_UNNEEDED_CARDS)),
    LibraryEntry("usb_hid-missing-card", "usb_hid",
                 "Hand 2: Banker 1 never scanned; a supervisor assigns it.",
                 ("RULES.md mistake 5: a card not scanned",), faults=_f(Fault.MISSING_CARD)),
    LibraryEntry("usb_hid-card-exposed", "usb_hid",
                 "Hand 2: a card exposed after two cards; the supervisor voids the round.",
                 ("RULES.md mistake 7: card exposed, round void",), faults=_f(Fault.CARD_EXPOSED)),
    LibraryEntry("usb_hid-garbage", "usb_hid",
                 "Hand 2: a stray code typed before the round: an unreadable read, cleared by the next card.",
                 ("garbage: an unmappable code asks for a rescan",), faults=_f(Fault.GARBAGE)),
    LibraryEntry("usb_hid-unplug", "usb_hid", "Hand 2: unplugged half-way through a code and replugged.",
                 ("device unplugged mid-frame and back",), faults=_f(Fault.UNPLUG)),
)  # fmt: skip

FULL_SHOES: tuple[LibraryEntry, ...] = tuple(
    LibraryEntry(f"{protocol}-full-8-deck-shoe", protocol, "A whole 8-deck shoe, dealt to the cut card.",
                 ("full 8-deck shoe",), deal=DealSettings(seed=8, decks=8))
    for protocol in ("angel_eye", "ascii_lines", "usb_hid")
)  # fmt: skip
"""Too big to commit: generated by the tests (and by ``simulate --fixture``) from these specs."""


def expected_json(events: list[dict[str, object]]) -> list[dict[str, object]]:
    """Events as they read back from a JSON-lines file (tuples become lists)."""
    loaded: list[dict[str, object]] = [json.loads(json.dumps(e, sort_keys=True)) for e in events]
    return loaded


def write_entry(
    entry: LibraryEntry | FlowEntry | TimedEntry | SqueezeEntry | AuditEntry, directory: Path
) -> tuple[Path, int]:
    """Generate one fixture and its expected stream into ``directory``; return the path and event count."""
    from daemon.simulation.golden import engine_events

    path = directory / f"{entry.name}{FIXTURE_SUFFIX}"
    entry.fixture().save(path)
    events, _ = engine_events(load_fixture(path))  # exactly what the file says, as the golden test reads it
    write_expected(directory / f"{entry.name}{EXPECTED_SUFFIX}", events)
    return path, len(events)


def write_library(directory: Path) -> list[tuple[Path, int]]:
    """Regenerate every committed fixture and expected stream (the game-flow and squeeze ones included)."""
    directory.mkdir(parents=True, exist_ok=True)
    entries: tuple[LibraryEntry | FlowEntry | TimedEntry | SqueezeEntry | AuditEntry, ...] = (
        *LIBRARY,
        *FLOW_LIBRARY,
        *TIMED_LIBRARY,
        *SQUEEZE_LIBRARY,
        *AUDIT_LIBRARY,
    )
    return [write_entry(entry, directory) for entry in entries]
