"""The squeeze reveal check (``daemon.mqtt.reveal_check``): each rule with an event stream."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from daemon.mqtt.reveal_check import (
    SCHEME,
    RevealChecker,
    RevealProblem,
    RevealStatus,
    commitment,
)

TABLE, SHOE = "T7", "shoe-1"
NONCE = "00112233445566778899aabbccddeeff"
VECTOR = "c0aeac71caa09ce80a2491bcbf4188552779c403359fe6df7bca91432242e0e2"
"""The commitment of 8s in P1 of round 3 of shoe-1 on T7 with NONCE (also checked in the
browser by tests/console/test_squeeze_browser.py)."""


def _env(kind: str, data: dict[str, Any], shoe_id: str = SHOE, table_id: str = TABLE) -> dict[str, Any]:
    return {"table_id": table_id, "shoe_id": shoe_id, "kind": kind, "data": data}


def _dealt(slot: str, card: str, round_: int = 3, nonce: str = NONCE) -> dict[str, Any]:
    digest = commitment(TABLE, SHOE, round_, slot, card=card, nonce=nonce)
    return _env(
        "card_dealt",
        {"slot": slot, "round": round_, "source": "reader", "commitment": digest, "scheme": SCHEME},
    )


def _revealed(
    slot: str, card: str, round_: int = 3, nonce: str = NONCE, digest: str | None = None
) -> dict[str, Any]:
    data = {
        "slot": slot,
        "round": round_,
        "card": card,
        "nonce": nonce,
        "commitment": digest or commitment(TABLE, SHOE, round_, slot, card=card, nonce=nonce),
        "scheme": SCHEME,
        "revealed_by": {"source": "server", "actor": "game_server", "command_id": "c1"},
    }
    return _env("card_revealed", data)


def test_the_commitment_is_the_documented_sha256_of_the_documented_text() -> None:
    text = f"baccarat-edge card commitment v1\n{TABLE}\n{SHOE}\n3\nP1\n8s\n{NONCE}".encode()
    assert (
        commitment(TABLE, SHOE, 3, "P1", card="8s", nonce=NONCE) == hashlib.sha256(text).hexdigest() == VECTOR
    )


def test_a_reveal_of_the_committed_card_verifies() -> None:
    checker = RevealChecker(TABLE)
    checker.observe(_env("round_opened", {"hand": 3}))
    assert checker.observe(_dealt("P1", "8s")) is None
    verdict = checker.observe(_revealed("P1", "8s"))
    assert verdict is not None
    assert verdict.status is RevealStatus.VERIFIED
    assert verdict.ok
    assert (checker.verified, checker.problems) == (1, [])


def test_another_card_than_the_committed_one_is_a_named_mismatch() -> None:
    checker = RevealChecker(TABLE)
    checker.observe(_dealt("P1", "8s"))
    # the reveal names the deal's commitment, but shows a 9 of spades
    verdict = checker.observe(
        _revealed("P1", "9s", digest=commitment(TABLE, SHOE, 3, "P1", card="8s", nonce=NONCE))
    )
    assert verdict is not None
    assert verdict.problem is RevealProblem.MISMATCH
    assert "reveal_mismatch: shoe shoe-1 round 3 slot P1: card 9s" in verdict.describe()
    assert checker.problems == [verdict]


def test_a_wrong_nonce_is_a_mismatch_too() -> None:
    checker = RevealChecker(TABLE)
    checker.observe(_dealt("B1", "Td"))
    other = "f" * 32
    verdict = checker.observe(
        _revealed("B1", "Td", nonce=other, digest=commitment(TABLE, SHOE, 3, "B1", card="Td", nonce=NONCE))
    )
    assert verdict is not None
    assert verdict.problem is RevealProblem.MISMATCH


def test_a_reveal_naming_another_commitment_than_the_deal_is_refused() -> None:
    checker = RevealChecker(TABLE)
    checker.observe(_dealt("P1", "8s"))
    # self-consistent, but not what was committed at the deal
    verdict = checker.observe(_revealed("P1", "9s"))
    assert verdict is not None
    assert verdict.problem is RevealProblem.COMMITMENT_CHANGED


def test_the_commitment_is_bound_to_the_slot_round_shoe_and_table() -> None:
    digest = commitment(TABLE, SHOE, 3, "P1", card="8s", nonce=NONCE)
    assert digest != commitment(TABLE, SHOE, 3, "B1", card="8s", nonce=NONCE)
    assert digest != commitment(TABLE, SHOE, 4, "P1", card="8s", nonce=NONCE)
    assert digest != commitment(TABLE, "shoe-2", 3, "P1", card="8s", nonce=NONCE)
    assert digest != commitment("T8", SHOE, 3, "P1", card="8s", nonce=NONCE)
    checker = RevealChecker(TABLE)
    checker.observe(_dealt("P1", "8s"))
    moved = _revealed("P1", "8s")
    moved["data"]["slot"] = "B1"  # the P1 card shown as B1: no commitment for B1 in a round not seen opened
    verdict = checker.observe(moved)
    assert verdict is not None
    assert verdict.problem is RevealProblem.MISMATCH


def test_a_reveal_of_a_slot_not_dealt_in_a_round_seen_whole_is_named() -> None:
    checker = RevealChecker(TABLE)
    checker.observe(_env("round_opened", {"hand": 3}))
    checker.observe(_dealt("P1", "8s"))
    verdict = checker.observe(_revealed("P3", "2c"))
    assert verdict is not None
    assert verdict.problem is RevealProblem.NOT_DEALT


def test_a_consumer_that_joined_late_says_unchecked_not_verified() -> None:
    checker = RevealChecker(TABLE)
    verdict = checker.observe(_revealed("P2", "Ah"))
    assert verdict is not None
    assert verdict.status is RevealStatus.UNCHECKED
    assert verdict.ok
    assert checker.unchecked == 1


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("card", "1s", "data.card"),
        ("card", None, "data.card"),
        ("nonce", "ABC", "data.nonce"),
        ("commitment", "x" * 64, "data.commitment"),
        ("slot", "P4", "data.slot"),
        ("round", "3", "data.round"),
        ("round", True, "data.round"),
    ],
)
def test_a_malformed_reveal_is_named_not_a_crash(field: str, value: Any, words: str) -> None:
    checker = RevealChecker(TABLE)
    env = _revealed("P1", "8s")
    env["data"][field] = value
    verdict = checker.observe(env)
    assert verdict is not None
    assert verdict.problem is RevealProblem.MALFORMED
    assert words in verdict.detail


def test_an_unknown_scheme_cannot_be_checked() -> None:
    env = _revealed("P1", "8s")
    env["data"]["scheme"] = "md5-v0"
    verdict = RevealChecker(TABLE).observe(env)
    assert verdict is not None
    assert verdict.problem is RevealProblem.UNKNOWN_SCHEME


def test_memory_is_bounded_oldest_first() -> None:
    checker = RevealChecker(TABLE, remember=2)
    for round_ in (1, 2, 3):
        checker.observe(_dealt("P1", "8s", round_=round_))
    assert checker.committed(SHOE, 1, "P1") is None
    assert checker.committed(SHOE, 3, "P1") == commitment(TABLE, SHOE, 3, "P1", card="8s", nonce=NONCE)


def test_an_open_tables_card_dealt_is_not_a_commitment() -> None:
    checker = RevealChecker(TABLE)
    assert checker.observe(_env("card_dealt", {"slot": "P1", "card": "8s", "round": 3})) is None
    assert checker.committed(SHOE, 3, "P1") is None
