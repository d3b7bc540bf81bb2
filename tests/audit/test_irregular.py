"""The irregular-shoe detectors on fair shoes and on planted patterns, and their settings."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from common.cards import ALL_CARDS, Card
from daemon.audit.factory_order import FACTORY_ORDER
from daemon.audit.irregular import Detector, ProbabilityKind, ShoeSequence, detect, thresholds
from daemon.audit.null_model import deal_shoe
from daemon.audit.settings import IrregularSettings
from daemon.rules.outcome import Winner

SETTINGS = IrregularSettings()


def fair_shoe(seed: int, shoe_id: str | None = None) -> ShoeSequence:
    cards = list(ALL_CARDS) * 8
    random.Random(seed).shuffle(cards)
    dealt = deal_shoe(cards, cut_card_from_end=16)
    return ShoeSequence.of(shoe_id or f"shoe-{seed}", dealt.cards, dealt.winners)


def with_cards(shoe: ShoeSequence, at: int, block: list[Card]) -> ShoeSequence:
    cards = list(shoe.cards)
    cards[at : at + len(block)] = block
    return ShoeSequence.of(shoe.shoe_id, cards, shoe.winners)


def test_fair_shoes_raise_nothing() -> None:
    history: list[ShoeSequence] = []
    for seed in range(1, 11):
        shoe = fair_shoe(seed)
        assert detect(shoe, history, SETTINGS) == ()
        history.append(shoe)


def test_a_stretch_copied_from_the_last_shoe_is_found_with_its_evidence() -> None:
    earlier, now = fair_shoe(1, "prev"), fair_shoe(2, "now")
    copied = list(earlier.cards[100:110])
    findings = detect(with_cards(now, 200, copied), [fair_shoe(3, "older"), earlier], SETTINGS)
    (slug,) = [f for f in findings if f.detector is Detector.REPEATED_STRETCH]
    assert slug.length >= 10
    assert slug.first <= 201
    assert slug.earlier_shoe_id == "prev"
    assert list(slug.cards[201 - slug.first : 211 - slug.first]) == copied
    assert slug.earlier_first is not None
    assert slug.earlier_first <= 101
    assert slug.probability_kind is ProbabilityKind.EXACT_BOUND
    assert slug.probability < 1e-9


def test_no_history_no_repeat_detector() -> None:
    now = fair_shoe(2)
    assert detect(with_cards(now, 50, list(now.cards[0:30])), [], SETTINGS) == ()


def test_a_deck_in_factory_order_is_found() -> None:
    findings = detect(with_cards(fair_shoe(4), 60, list(FACTORY_ORDER)), [], SETTINGS)
    (factory,) = [f for f in findings if f.detector is Detector.FACTORY_ORDER]
    assert factory.length >= 52
    assert factory.first <= 61
    assert factory.cards[61 - factory.first].code == "As"


def test_a_reversed_factory_deck_is_found() -> None:
    findings = detect(with_cards(fair_shoe(4), 60, list(reversed(FACTORY_ORDER))), [], SETTINGS)
    assert any(f.detector is Detector.FACTORY_ORDER and f.length >= 52 for f in findings)


def test_same_rank_and_same_suit_streaks() -> None:
    limits = thresholds(SETTINGS)
    sevens = [Card.parse(s) for s in ("7c", "7d", "7h", "7s")] * 2
    spades = [Card.parse(s + "s") for s in "A23456789TJQK"]
    shoe = with_cards(
        with_cards(fair_shoe(5), 30, sevens[: limits.same_rank]), 150, spades[: limits.same_suit]
    )
    found = {f.detector: f for f in detect(shoe, [], SETTINGS)}
    assert found[Detector.SAME_RANK].first <= 31
    assert found[Detector.SAME_RANK].length >= limits.same_rank
    assert found[Detector.SAME_SUIT].first <= 151
    assert found[Detector.SAME_SUIT].length >= limits.same_suit
    for finding in found.values():
        assert 0 < finding.probability <= SETTINGS.alpha


def test_a_run_of_one_outcome_names_the_winner_and_the_first_round() -> None:
    limits = thresholds(SETTINGS)
    n = limits.outcome_run[Winner.TIE]
    shoe = fair_shoe(6)
    winners = list(shoe.winners)
    winners[10 : 10 + n + 2] = [Winner.BANKER] + [Winner.TIE] * n + [Winner.PLAYER]
    findings = detect(ShoeSequence(shoe.shoe_id, shoe.codes, tuple(winners)), [], SETTINGS)
    (tie,) = [f for f in findings if f.detector is Detector.OUTCOME_RUN]
    assert (tie.winner, tie.first, tie.length, tie.cards) == (Winner.TIE, 12, n, ())
    assert tie.probability <= SETTINGS.alpha / 3


def test_thresholds_grow_as_alpha_shrinks() -> None:
    loose, strict = thresholds(IrregularSettings(alpha=0.05), 5), thresholds(SETTINGS, 5)
    assert loose.same_suit <= strict.same_suit
    assert loose.factory_order <= strict.factory_order
    assert loose.repeated_stretch <= strict.repeated_stretch
    assert all(loose.outcome_run[w] <= strict.outcome_run[w] for w in Winner)


def test_disabled_detectors_find_nothing() -> None:
    shoe = with_cards(fair_shoe(4), 60, list(FACTORY_ORDER))
    assert detect(shoe, [], IrregularSettings(enabled=False)) == ()


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1e-6}, "alpha"),
        ({"decks": 3}, "decks"),
        ({"cut_card_from_end": 4}, "cut_card_from_end"),
        ({"recent_shoes": -1}, "recent_shoes"),
        ({"alfa": 0.01}, "alfa"),
    ],
)
def test_bad_settings_name_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        IrregularSettings.model_validate(fields)
