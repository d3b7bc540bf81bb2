"""The shoe certificate: every card of the shoe's decks accounted for, face by face.

At the end of a shoe the table knows what the shoe held (``decks`` full decks of 52) and
where each card it read went: dealt in a completed round, burned, exposed, dealt in a
round that was voided, or drawn outside all of these (an unneeded card, a card the
supervisor set aside). The certificate counts, for each of the 52 faces, the copies
expected, the copies seen in each of those places, the copies over the composition (extra
cards: a copy more than the decks hold, so a card that does not belong to this shoe), and
the copies still in the shoe.

When the dealer then runs the undealt cards through the reader (the remainder count), the
certificate balances: for each face, seen plus counted in the remainder must equal the
copies expected. Any face short is named as missing, any face over as extra, with the
number of copies; a balanced shoe accounts for every card (416 of 416 with eight decks).

The result is a frozen value with a canonical JSON form (keys sorted, no spaces, integers
only, so the bytes are the same wherever it is computed and can be signed) and a text form
for people.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from common.cards import ALL_CARDS, Card


@dataclass(frozen=True, slots=True)
class ClassifiedCards:
    """Where each card read from the shoe went (each card in exactly one place)."""

    in_rounds: tuple[Card, ...] = ()
    burned: tuple[Card, ...] = ()
    exposed: tuple[Card, ...] = ()
    voided: tuple[Card, ...] = ()
    extras: tuple[Card, ...] = ()
    """Drawn outside rounds, burns and voided rounds: unneeded cards, cards set aside."""


@dataclass(frozen=True, slots=True)
class FaceCount:
    """One face's copies: expected in the shoe, seen in each place, over, left, in the remainder."""

    card: Card
    expected: int
    in_rounds: int
    burned: int
    exposed: int
    voided: int
    extras: int
    remainder: int | None

    @property
    def seen(self) -> int:
        """Copies read out of the shoe, wherever they went."""
        return self.in_rounds + self.burned + self.exposed + self.voided + self.extras

    @property
    def over(self) -> int:
        """Copies seen beyond what the shoe held."""
        return max(0, self.seen - self.expected)

    @property
    def left(self) -> int:
        """Copies the shoe should still hold."""
        return max(0, self.expected - self.seen)

    @property
    def balance(self) -> int | None:
        """Seen plus remainder minus expected (0 balances; None without a remainder count)."""
        return None if self.remainder is None else self.seen + self.remainder - self.expected


class Status(StrEnum):
    NOT_COUNTED = "not_counted"
    """No remainder count: the certificate says what is left, not that it is there."""
    BALANCED = "balanced"
    """The remainder count accounts for every card, and no face is over."""
    MISMATCH = "mismatch"
    """A face is missing or extra."""


@dataclass(frozen=True, slots=True)
class Discrepancy:
    """``copies`` of ``card`` missing from, or extra to, the shoe's composition."""

    card: Card
    copies: int


@dataclass(frozen=True, slots=True)
class ShoeCertificate:
    """The accounting of one shoe; see the module docstring."""

    shoe_id: str
    decks: int
    faces: tuple[FaceCount, ...]
    status: Status
    missing: tuple[Discrepancy, ...]
    extra: tuple[Discrepancy, ...]

    @property
    def expected(self) -> int:
        return sum(f.expected for f in self.faces)

    @property
    def seen(self) -> int:
        return sum(f.seen for f in self.faces)

    @property
    def left(self) -> int:
        """Cards the shoe should still hold."""
        return sum(f.left for f in self.faces)

    @property
    def remainder(self) -> int | None:
        counted = [f.remainder for f in self.faces]
        return None if any(r is None for r in counted) else sum(r for r in counted if r is not None)

    @property
    def accounted(self) -> int | None:
        """Cards seen or counted in the remainder, up to each face's expected copies."""
        if self.remainder is None:
            return None
        return sum(min(f.expected, f.seen + (f.remainder or 0)) for f in self.faces)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form (integers and strings only)."""
        faces: list[dict[str, object]] = []
        left = 0
        for f in self.faces:  # one pass (the engine builds this at every shoe's end)
            seen = f.in_rounds + f.burned + f.exposed + f.voided + f.extras
            left += max(0, f.expected - seen)
            faces.append(
                {
                    "card": f.card.code,
                    "expected": f.expected,
                    "in_rounds": f.in_rounds,
                    "burned": f.burned,
                    "exposed": f.exposed,
                    "voided": f.voided,
                    "extras": f.extras,
                    "over": max(0, seen - f.expected),
                    "left": max(0, f.expected - seen),
                    "remainder": f.remainder,
                }
            )
        remainder = self.remainder
        return {
            "shoe_id": self.shoe_id,
            "decks": self.decks,
            "status": self.status.value,
            "totals": {
                "expected": self.expected,
                "seen": self.seen,
                "left": left,
                "remainder": remainder,
                "accounted": None if remainder is None else self.accounted,
            },
            "faces": faces,
            "missing": [{"card": d.card.code, "copies": d.copies} for d in self.missing],
            "extra": [{"card": d.card.code, "copies": d.copies} for d in self.extra],
        }

    @staticmethod
    def from_dict(raw: object) -> ShoeCertificate:
        """Rebuild a certificate from :meth:`to_dict` output (e.g. a journaled event's); raise
        ValueError naming what is wrong. The derived figures are recomputed, never trusted."""
        try:
            if not isinstance(raw, dict):
                raise TypeError("a certificate must be an object")
            faces = tuple(
                FaceCount(
                    card=Card.parse(f["card"]),
                    expected=int(f["expected"]),
                    in_rounds=int(f["in_rounds"]),
                    burned=int(f["burned"]),
                    exposed=int(f["exposed"]),
                    voided=int(f["voided"]),
                    extras=int(f["extras"]),
                    remainder=None if f["remainder"] is None else int(f["remainder"]),
                )
                for f in raw["faces"]
            )
            return ShoeCertificate(
                shoe_id=str(raw["shoe_id"]),
                decks=int(raw["decks"]),
                faces=faces,
                status=Status(raw["status"]),
                missing=tuple(Discrepancy(Card.parse(d["card"]), int(d["copies"])) for d in raw["missing"]),
                extra=tuple(Discrepancy(Card.parse(d["card"]), int(d["copies"])) for d in raw["extra"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a shoe certificate: {exc}") from None

    def canonical_json(self) -> str:
        """The canonical JSON text: keys sorted, no whitespace, UTF-8 safe (what is signed)."""
        return canonical_json(self.to_dict())

    def text(self) -> str:
        """A report for people: totals, named discrepancies, then one line per face."""
        lines = [
            f"Shoe {self.shoe_id}: {self.decks} deck(s), {self.expected} cards",
            f"  seen {self.seen}, left in the shoe {self.left}"
            + ("" if self.remainder is None else f", remainder counted {self.remainder}"),
        ]
        if self.accounted is not None:
            lines.append(f"  accounted for {self.accounted} of {self.expected}")
        lines.append(f"  status: {self.status.value}")
        for d in self.missing:
            lines.append(f"  MISSING {d.card.code} x{d.copies}")
        for d in self.extra:
            lines.append(f"  EXTRA   {d.card.code} x{d.copies}")
        lines.append("  card  expected  rounds  burned  exposed  voided  other  over  left  remainder")
        for f in self.faces:
            rem = "-" if f.remainder is None else str(f.remainder)
            lines.append(
                f"  {f.card.code:<4}  {f.expected:>8}  {f.in_rounds:>6}  {f.burned:>6}  {f.exposed:>7}  "
                f"{f.voided:>6}  {f.extras:>5}  {f.over:>4}  {f.left:>4}  {rem:>9}"
            )
        return "\n".join(lines) + "\n"


def certify(
    shoe_id: str, *, decks: int, cards: ClassifiedCards, remainder: Sequence[Card] | None = None
) -> ShoeCertificate:
    """Account for the shoe's cards; ``remainder`` is the count of the undealt cards, if one was made."""
    return certify_counts(
        shoe_id,
        decks=decks,
        counts=CodeCounts(
            in_rounds=_code_counts(cards.in_rounds),
            burned=_code_counts(cards.burned),
            exposed=_code_counts(cards.exposed),
            voided=_code_counts(cards.voided),
            extras=_code_counts(cards.extras),
        ),
        remainder=None if remainder is None else _code_counts(remainder),
    )


@dataclass(frozen=True, slots=True)
class CodeCounts:
    """:class:`ClassifiedCards` as copies per card code ("8s"), the form the engine keeps them in."""

    in_rounds: Mapping[str, int]
    burned: Mapping[str, int]
    exposed: Mapping[str, int]
    voided: Mapping[str, int]
    extras: Mapping[str, int]


_FACES = tuple((card, card.code) for card in ALL_CARDS)


def _code_counts(cards: Sequence[Card]) -> Counter[str]:
    return Counter(card.code for card in cards)


def certify_counts(
    shoe_id: str, *, decks: int, counts: CodeCounts, remainder: Mapping[str, int] | None = None
) -> ShoeCertificate:
    """:func:`certify` from copies per card code (no card objects to hash: the engine's way)."""
    if decks < 1:
        raise ValueError(f"decks must be at least 1, got {decks}")
    in_rounds, burned, exposed = counts.in_rounds, counts.burned, counts.exposed
    voided, extras = counts.voided, counts.extras
    faces = tuple(
        FaceCount(
            card=card,
            expected=decks,
            in_rounds=in_rounds.get(code, 0),
            burned=burned.get(code, 0),
            exposed=exposed.get(code, 0),
            voided=voided.get(code, 0),
            extras=extras.get(code, 0),
            remainder=None if remainder is None else remainder.get(code, 0),
        )
        for card, code in _FACES
    )
    extra = tuple(
        Discrepancy(f.card, f.over if f.balance is None else max(f.over, f.balance))
        for f in faces
        if f.over or (f.balance is not None and f.balance > 0)
    )
    missing = tuple(Discrepancy(f.card, -f.balance) for f in faces if f.balance is not None and f.balance < 0)
    if extra or missing:
        status = Status.MISMATCH
    else:
        status = Status.NOT_COUNTED if remainder is None else Status.BALANCED
    return ShoeCertificate(shoe_id, decks, faces, status, missing, extra)


def canonical_json(certificate: Mapping[str, object]) -> str:
    """:meth:`ShoeCertificate.canonical_json` of its :meth:`~ShoeCertificate.to_dict` form."""
    return json.dumps(certificate, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
