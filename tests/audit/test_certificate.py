"""The shoe certificate: a clean shoe, a missing card, a foreign card, a remainder count.

Each case is checked by hand-stated counts and against a golden file of its canonical JSON
and its text (regenerate with ``AUDIT_REGENERATE=1`` only when the format is meant to change).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from daemon.audit.certificate import ClassifiedCards, ShoeCertificate, Status, certify
from daemon.audit.null_model import burn_count
from daemon.rules.outcome import play_round

GOLDEN = Path(__file__).parent / "golden"


def dealt_shoe(
    seed: int, *, decks: int = 8, cut_card_from_end: int = 16
) -> tuple[ClassifiedCards, list[Card]]:
    """A fair shoe dealt to its cut card: the classified cards, and the undealt cards."""
    shoe = list(ALL_CARDS) * decks
    random.Random(seed).shuffle(shoe)
    burn_end = 1 + burn_count(shoe[0])
    pos = burn_end
    while pos <= len(shoe) - cut_card_from_end:
        pos += play_round(shoe[pos : pos + 6])[1]
    return ClassifiedCards(in_rounds=tuple(shoe[burn_end:pos]), burned=tuple(shoe[:burn_end])), shoe[pos:]


def check_golden(name: str, cert: ShoeCertificate) -> None:
    json_path, text_path = GOLDEN / f"{name}.json", GOLDEN / f"{name}.txt"
    if os.environ.get("AUDIT_REGENERATE"):
        json_path.write_text(cert.canonical_json() + "\n", encoding="utf-8")
        text_path.write_text(cert.text(), encoding="utf-8")
    assert json_path.read_text(encoding="utf-8") == cert.canonical_json() + "\n"
    assert text_path.read_text(encoding="utf-8") == cert.text()


def test_clean_shoe_without_a_remainder_count() -> None:
    cards, undealt = dealt_shoe(1)
    cert = certify("clean", decks=8, cards=cards)
    assert cert.status is Status.NOT_COUNTED
    assert (cert.expected, cert.seen, cert.left) == (416, 416 - len(undealt), len(undealt))
    assert cert.missing == ()
    assert cert.extra == ()
    assert cert.remainder is None
    assert len(cert.faces) == 52
    assert all(f.expected == 8 and f.over == 0 for f in cert.faces)
    check_golden("clean_shoe", cert)


def test_remainder_count_accounts_for_every_card() -> None:
    cards, undealt = dealt_shoe(1)
    cert = certify("counted", decks=8, cards=cards, remainder=undealt)
    assert cert.status is Status.BALANCED
    assert (cert.remainder, cert.accounted) == (len(undealt), 416)
    assert "accounted for 416 of 416" in cert.text()
    check_golden("remainder_count", cert)


def test_a_missing_card_is_named() -> None:
    cards, undealt = dealt_shoe(2)
    lost = undealt.pop(3)
    cert = certify("missing", decks=8, cards=cards, remainder=undealt)
    assert cert.status is Status.MISMATCH
    assert [(d.card, d.copies) for d in cert.missing] == [(lost, 1)]
    assert cert.extra == ()
    assert cert.accounted == 415
    assert f"MISSING {lost.code} x1" in cert.text()
    check_golden("missing_card", cert)


def test_a_foreign_card_is_named_before_and_after_the_remainder_count() -> None:
    cards, undealt = dealt_shoe(3)
    foreign = cards.in_rounds[0]  # a ninth copy of a face the shoe already held eight of
    with_foreign = ClassifiedCards(in_rounds=cards.in_rounds, burned=cards.burned, extras=(foreign,))
    before = certify("foreign", decks=8, cards=with_foreign)
    assert before.status is Status.MISMATCH
    assert [(d.card, d.copies) for d in before.extra] == [(foreign, 1)]
    after = certify("foreign", decks=8, cards=with_foreign, remainder=undealt)
    assert [(d.card, d.copies) for d in after.extra] == [(foreign, 1)]
    assert after.missing == ()
    assert after.seen + (after.remainder or 0) == 417
    check_golden("foreign_card", after)


def test_every_place_is_counted() -> None:
    c = Card.parse
    cards = ClassifiedCards(
        in_rounds=(c("As"),),
        burned=(c("As"),),
        exposed=(c("2d"),),
        voided=(c("2d"), c("3h")),
        extras=(c("Kc"),),
    )
    cert = certify("places", decks=1, cards=cards)
    by_card = {f.card.code: f for f in cert.faces}
    assert (by_card["As"].in_rounds, by_card["As"].burned, by_card["As"].over) == (1, 1, 1)
    assert (by_card["2d"].exposed, by_card["2d"].voided, by_card["2d"].over) == (1, 1, 1)
    assert (by_card["3h"].voided, by_card["Kc"].extras, by_card["Kc"].left) == (1, 1, 0)
    assert cert.seen == 6
    assert cert.left == 52 - 4
    assert json.loads(cert.canonical_json())["extra"] == [
        {"card": "2d", "copies": 1},
        {"card": "As", "copies": 1},
    ]


def test_bad_decks_is_refused() -> None:
    with pytest.raises(ValueError, match="decks"):
        certify("x", decks=0, cards=ClassifiedCards())


@given(
    st.randoms(use_true_random=False),
    st.integers(min_value=1, max_value=3),
    st.integers(min_value=0, max_value=5),
)
def test_any_split_of_a_whole_shoe_balances_and_a_lost_card_is_named(
    rnd: random.Random, decks: int, lose: int
) -> None:
    """Cards split at random between the five places and the remainder: every card accounted for."""
    shoe = list(ALL_CARDS) * decks
    rnd.shuffle(shoe)
    cuts = sorted(rnd.randrange(len(shoe) + 1) for _ in range(5))
    parts = [shoe[a:b] for a, b in zip([0, *cuts], [*cuts, len(shoe)], strict=True)]
    cards = ClassifiedCards(*(tuple(p) for p in parts[:5]))
    remainder = parts[5]
    balanced = certify("split", decks=decks, cards=cards, remainder=remainder)
    assert balanced.status is Status.BALANCED
    assert balanced.accounted == 52 * decks
    assert balanced.seen + len(remainder) == 52 * decks
    lost = remainder[: min(lose, len(remainder))]
    short = certify("short", decks=decks, cards=cards, remainder=remainder[len(lost) :])
    assert sum(d.copies for d in short.missing) == len(lost)
    assert short.status is (Status.MISMATCH if lost else Status.BALANCED)
