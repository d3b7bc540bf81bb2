"""The reference dealer's expected ``shoe_certificate``: the shoe's cards classified by the dealer
itself (what it burned, what it dealt into rounds, in what order), not by the engine's fold."""

from __future__ import annotations

from typing import Any

from common.cards import Card
from daemon.alerts import ALERTS, AlertCode
from daemon.audit.certificate import ClassifiedCards, certify
from daemon.audit.irregular import ShoeSequence, detect
from daemon.engine.settings import TableSettings
from daemon.rules.outcome import Winner


def expected_certificate(
    settings: TableSettings,
    shoe_id: str,
    out_of_shoe: list[Card],
    burned: list[Card],
    rounds: list[list[tuple[str, Card]]],
    winners: list[str],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The data of the certificate a clean shoe dealt to its cut card must get at its end, and of
    the ``shoe_irregular`` alert that follows it when a detector fires (None when none does)."""
    in_rounds = [card for dealt in rounds for _, card in dealt]
    assert sorted(map(str, burned + in_rounds)) == sorted(map(str, out_of_shoe))
    cert = certify(
        shoe_id, decks=settings.decks, cards=ClassifiedCards(in_rounds=tuple(in_rounds), burned=tuple(burned))
    )
    audit = settings.audit.irregular.for_decks(settings.decks)
    if audit is None or not audit.enabled:
        reason = "disabled" if audit is not None else "no simulated null table for this many decks"
        irregular: dict[str, Any] = {"checked": False, "reason": reason, "findings": []}
    else:
        shoe = ShoeSequence.of(shoe_id, out_of_shoe, [Winner(w) for w in winners])
        findings = [f.to_dict() for f in detect(shoe, [], audit)]
        irregular = {"checked": True, "reason": None, "findings": findings}
    alert = None
    if irregular["findings"]:
        assert audit is not None
        alert = {
            "alert_id": f"{shoe_id}:a1",  # a clean shoe's first alert
            "code": AlertCode.SHOE_IRREGULAR,
            "message": ALERTS[AlertCode.SHOE_IRREGULAR].summary,
            "hand": None,
            "holds": None,
            "device": None,
            "details": {"findings": irregular["findings"], "alpha": audit.alpha, "recent_shoes": 0},
        }
    return {
        "shoe_id": shoe_id,
        "stage": "end",
        "reason": "cut_card",
        "status": "not_counted",
        "certificate": cert.to_dict(),
        "irregular": irregular,
    }, alert
