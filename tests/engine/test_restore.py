"""Restoring the engine under a configuration that changed mid-shoe (decks, variant).

A shoe is dealt to its end with the decks and variant its ``shoe_started`` event recorded
(its pay table and composition limit); the configured ones take effect at the next shoe,
and the difference is alerted once. A recorded variant that cannot be loaded holds the
shoe's rounds: never settled under another pay table.
"""

from __future__ import annotations

from pathlib import Path

from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.variants import Variant, VariantError, load_variant
from tests.engine.support import alerts, cmd, engine, feed, of_kind, read, roundtrip, start_shoe, variant

COW_COW_ONE_DECK = TableSettings(decks=1, variant="cow-cow")


def _resolver(name: str) -> Variant:
    return variant(name)


def _standard_eight_decks_mid_round() -> tuple[Engine, list[Event]]:
    eng = engine("standard", decks=8)
    events = start_shoe(eng)
    # Round 1 in progress: 9s 9s (two of the same card: legal in 8 decks, not in 1) ...
    events += feed(eng, [read("9s", 100), read("9s", 101), read("8h", 102)])
    return eng, events


def test_restored_under_another_variant_and_decks_the_open_shoe_settles_as_recorded() -> None:
    live, events = _standard_eight_decks_mid_round()
    restored = Engine.restore(COW_COW_ONE_DECK, variant("cow-cow"), roundtrip(events), _resolver)
    assert restored.state.comparable() == live.state.comparable()
    assert restored.snapshot()["variant"] == "standard"
    assert restored.snapshot()["shoe"]["decks"] == 8
    # B2 is a third 9s... of an 8-deck shoe: accepted (a 1-deck limit would refuse it).
    out = restored.handle(read("9s", 103))
    notice, *_ = alerts(out)
    assert notice.data["code"] == "shoe_settings_differ"
    assert notice.data["holds"] is None
    assert notice.data["details"] == {
        "shoe": {"decks": 8, "variant": "standard", "variant_digest": variant("standard").digest},
        "configured": {"decks": 1, "variant": "cow-cow", "variant_digest": variant("cow-cow").digest},
        "variant_available": True,
        "pay_table_changed": False,
    }
    assert not alerts(out, "over_composition")
    (done,) = of_kind(out, "round_completed")
    assert done.data["cards"] == {"P1": "9s", "B1": "9s", "P2": "8h", "B2": "9s"}
    assert sorted(done.data["bets"]) == sorted(variant("standard").offered_bets(1))
    assert done.data["bets"]["Banker"]["multiplier"] == "19/20"  # standard's commission, not Cow Cow's
    assert [e.data for e in out if e.kind != "alert_raised"] == [e.data for e in live.handle(read("9s", 103))]
    # Once per shoe: a second restart under the same configuration alerts no more.
    again = Engine.restore(COW_COW_ONE_DECK, variant("cow-cow"), roundtrip(events + out), _resolver)
    assert not alerts(again.handle(read("2c", 130)), "shoe_settings_differ")


def test_the_next_shoe_uses_the_configured_decks_and_variant() -> None:
    _, events = _standard_eight_decks_mid_round()
    restored = Engine.restore(COW_COW_ONE_DECK, variant("cow-cow"), roundtrip(events), _resolver)
    events = events + restored.handle(read("9s", 103))
    events += restored.handle(cmd("new_shoe", 200, "n2", shoe_id="S2"))
    (started,) = of_kind(events, "shoe_started")[-1:]
    assert (started.data["decks"], started.data["variant"]) == (1, "cow-cow")
    events += feed(restored, [read("2c", 201), read("Kd", 202), read("Kh", 203), read("9s", 204)])
    assert restored.snapshot()["variant"] == "cow-cow"
    out = restored.handle(read("9s", 205))  # a second 9s in a 1-deck shoe
    assert alerts(out, "over_composition")
    (opened,) = of_kind(events, "round_opened")[-1:]
    assert opened.data["bets"] == variant("cow-cow").offered_bets(1)


def test_a_recorded_variant_that_cannot_be_loaded_holds_the_rounds() -> None:
    _, events = _standard_eight_decks_mid_round()

    def no_such_file(name: str) -> Variant:
        raise VariantError(f"{name}.yaml: variant file not found")

    restored = Engine.restore(COW_COW_ONE_DECK, variant("cow-cow"), roundtrip(events), no_such_file)
    out = restored.handle(read("9s", 103))
    (notice,) = alerts(out, "shoe_settings_differ")
    assert notice.data["details"]["variant_available"] is False
    assert not of_kind(out, "round_completed")
    (held,) = of_kind(out, "round_held")
    assert "'standard' cannot be loaded" in held.data["blocked_by"][0]
    refused = restored.handle(cmd("resolve_hold", 110, "r"))
    assert refused[0].kind == "command_refused"
    voided = restored.handle(cmd("void_round", 111, "v", hand=1, reason="pay table unavailable"))
    assert of_kind(voided, "round_voided")
    # Without a resolver the engine cannot load another variant either: the same hold.
    blind = Engine.restore(COW_COW_ONE_DECK, variant("cow-cow"), roundtrip(events))
    assert of_kind(blind.handle(read("9s", 103)), "round_held")


def test_a_restore_under_the_same_configuration_raises_nothing() -> None:
    live, events = _standard_eight_decks_mid_round()
    restored = Engine.restore(live.configured_settings, live.configured_variant, roundtrip(events))
    assert [e.to_dict() for e in restored.handle(read("9s", 103))] == [
        e.to_dict() for e in live.handle(read("9s", 103))
    ]


HOUSE = """\
name: house
bets:
  - name: Player
    kind: player
    payout: 1
  - name: Banker
    kind: banker
    payout: 0.95
  - name: Tie
    kind: tie
    payout: 8
"""

# Same pay table, another file: a comment, flow style, 19/20 for 0.95.
HOUSE_REFORMATTED = """\
# reviewed 2026-11 -- no payout changed
name: house
bets:
  - {name: Player, kind: player, payout: 1}
  - {name: Banker, kind: banker, payout: 19/20}   # 5% commission
  - {name: Tie, kind: tie, payout: 8}
"""

HOUSE_EDITED = HOUSE.replace("payout: 0.95", "payout: 0.9")


def _house(tmp_path: Path, text: str, file: str) -> Variant:
    path = tmp_path / file
    path.write_text(text)
    return load_variant(path)


def _house_mid_round(tmp_path: Path) -> tuple[Engine, list[Event]]:
    house = _house(tmp_path, HOUSE, "house.yaml")
    eng = Engine(TableSettings(decks=8, variant="house.yaml"), house)
    events = start_shoe(eng)
    events += feed(eng, [read("9s", 100), read("9s", 101), read("8h", 102)])
    return eng, events


def test_shoe_started_records_the_pay_table_digest(tmp_path: Path) -> None:
    eng, events = _house_mid_round(tmp_path)
    (started,) = of_kind(events, "shoe_started")
    assert started.data["variant"] == "house"
    assert started.data["variant_digest"] == eng.configured_variant.digest


def test_a_pay_table_edited_under_the_same_name_holds_the_shoe_and_alerts(tmp_path: Path) -> None:
    _, events = _house_mid_round(tmp_path)
    edited = _house(tmp_path, HOUSE_EDITED, "house-edited.yaml")
    settings = TableSettings(decks=8, variant="house.yaml")
    # The resolver finds only the edited file too: no pay table has the recorded digest.
    restored = Engine.restore(settings, edited, roundtrip(events), lambda name: edited)
    out = restored.handle(read("9s", 103))
    (notice,) = alerts(out, "shoe_settings_differ")
    details = notice.data["details"]
    assert details["variant_available"] is False
    assert details["pay_table_changed"] is True
    assert details["shoe"]["variant"] == details["configured"]["variant"] == "house"
    assert details["shoe"]["variant_digest"] != details["configured"]["variant_digest"] == edited.digest
    assert not of_kind(out, "round_completed")
    (held,) = of_kind(out, "round_held")
    assert "pay table changed" in held.data["blocked_by"][0]
    refused = restored.handle(cmd("resolve_hold", 110, "r"))
    assert refused[0].kind == "command_refused"
    assert "pay table changed" in refused[0].data["reason"]
    voided = restored.handle(cmd("void_round", 111, "v", hand=1, reason="pay table changed"))
    assert of_kind(voided, "round_voided")


def test_an_edited_configured_pay_table_defers_to_the_recorded_one_found_by_name(tmp_path: Path) -> None:
    live, events = _house_mid_round(tmp_path)
    edited = _house(tmp_path, HOUSE_EDITED, "house-edited.yaml")
    original = live.configured_variant
    restored = Engine.restore(TableSettings(decks=8), edited, roundtrip(events), lambda name: original)
    out = restored.handle(read("9s", 103))
    assert alerts(out, "shoe_settings_differ")[0].data["details"]["variant_available"] is True
    (done,) = of_kind(out, "round_completed")
    assert done.data["bets"]["Banker"]["multiplier"] == "19/20"  # the recorded table, not 9/10


def test_an_unchanged_pay_table_in_a_reformatted_file_resumes_normally(tmp_path: Path) -> None:
    live, events = _house_mid_round(tmp_path)
    same = _house(tmp_path, HOUSE_REFORMATTED, "house-reformatted.yaml")
    restored = Engine.restore(live.configured_settings, same, roundtrip(events))
    assert [e.to_dict() for e in restored.handle(read("9s", 103))] == [
        e.to_dict() for e in live.handle(read("9s", 103))
    ]


def test_a_journal_without_a_digest_resumes_by_name_as_before(tmp_path: Path) -> None:
    live, events = _house_mid_round(tmp_path)
    old = [
        Event.from_dict({**e.to_dict(), "data": {k: v for k, v in e.data.items() if k != "variant_digest"}})
        for e in roundtrip(events)
    ]
    assert "variant_digest" not in of_kind(old, "shoe_started")[0].data
    edited = _house(tmp_path, HOUSE_EDITED, "house-edited.yaml")
    restored = Engine.restore(live.configured_settings, edited, old)
    out = restored.handle(read("9s", 103))
    assert not alerts(out, "shoe_settings_differ")
    (done,) = of_kind(out, "round_completed")
    assert done.data["bets"]["Banker"]["multiplier"] == "9/10"  # today's behaviour: the name's table
