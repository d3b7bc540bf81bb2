"""Game variants: which bets a table offers, their payouts and hand limits, from YAML.

A variant file (``config/variants/<name>.yaml``)::

    name: standard
    description: Punto banco with 5% commission on Banker wins.
    super_round:            # only for Super 98 style games; see SuperRoundDie
      die_faces: 12
      super_faces: [8, 9]
    bets:
      - name: Banker        # the operator's name, unique in the file
        kind: banker        # a kind from daemon.rules.bets.BET_KINDS
        payout: 0.95        # payout figures, "X to 1", exact (0.95 == 19/20)
      - name: Big
        kind: big
        payout: 0.5
        max_hand: 30        # offered only on hands 1..30 of a shoe

Every key is checked (unknown keys refused); a bad file is refused with a
:class:`VariantError` naming the file, the bet and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

from common.yamlfile import DuplicateKeyError, parse_yaml
from daemon.rules.bets import BET_KINDS, Bet
from daemon.shipped import shipped_config_dir

VARIANTS_DIR: Path = shipped_config_dir() / "variants"
"""The shipped variant files (``config/variants`` in the repository)."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class VariantError(ValueError):
    """A variant file is missing, unreadable or invalid; the message names file, bet and field."""


class SuperRoundDie(BaseModel):
    """The Super 98 die (seed 002): thrown after betting closes; some faces make a super round.

    The result is an input of the round (the engine receives it); for odds, each face
    is taken as equally likely, so P(super round) = len(super_faces) / die_faces.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    die_faces: PositiveInt = Field(description="Number of faces, numbered 1..die_faces (seed 002: 12).")
    super_faces: list[PositiveInt] = Field(min_length=1, description="Faces that make a super round.")

    @model_validator(mode="after")
    def _faces_on_die(self) -> SuperRoundDie:
        bad = [f for f in self.super_faces if f > self.die_faces]
        if bad:
            raise ValueError(f"super_faces {bad} are not faces of a {self.die_faces}-sided die")
        if len(set(self.super_faces)) != len(self.super_faces):
            raise ValueError("super_faces lists a face twice")
        return self

    @property
    def probability(self) -> Fraction:
        """P(super round) with a fair die."""
        return Fraction(len(self.super_faces), self.die_faces)


class Variant(BaseModel):
    """A validated game variant: its bets in file order."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(min_length=1)
    description: str = ""
    super_round: SuperRoundDie | None = None
    bets: list[Bet] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Variant:
        seen: set[str] = set()
        for bet in self.bets:
            if bet.name in seen:
                raise ValueError(f"bet name {bet.name!r} is used twice; bet names must be unique")
            seen.add(bet.name)
        users = [bet.name for bet in self.bets if bet.uses_super_round]
        if users and self.super_round is None:
            raise ValueError(
                f"bets {users} have super-round payouts but the variant has no 'super_round' die settings"
            )
        return self

    @cached_property
    def digest(self) -> str:
        """sha256 (hex) of the pay table's canonical JSON form, stable across processes.

        The form is ``model_dump(mode="json")`` without ``description``: the name, the
        super-round die and every bet in file order with its kind, payouts (exact, as reduced
        fractions) and limits, defaults included; keys sorted, no whitespace, UTF-8. A file
        that only differs in comments, layout, key order, spelling of a number (0.95 vs 19/20)
        or description has the same digest; any payout, limit or bet change gives another.
        """
        canonical = json.dumps(
            self.model_dump(mode="json", exclude={"description"}),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def needs_super_round_die(self) -> bool:
        """Whether resolving a round needs the super-round die result."""
        return any(bet.uses_super_round for bet in self.bets)

    def offered_bets(self, hand_number: int) -> list[str]:
        """Names of the bets offered on the ``hand_number``-th hand (1-based) of a shoe."""
        if isinstance(hand_number, bool) or not isinstance(hand_number, int) or hand_number < 1:
            raise ValueError(f"hand_number must be an integer >= 1, got {hand_number!r}")
        return [bet.name for bet in self.bets if bet.max_hand is None or hand_number <= bet.max_hand]

    def bet(self, name: str) -> Bet:
        """The bet called ``name`` (KeyError if none)."""
        for bet in self.bets:
            if bet.name == name:
                return bet
        raise KeyError(name)

    def is_super_round(self, die: int | None) -> bool:
        """Whether a round with die result ``die`` is a super round; validates the die."""
        if not self.needs_super_round_die or self.super_round is None:
            return False
        if die is None:
            raise ValueError(f"variant {self.name!r} needs the super-round die result for every round")
        if isinstance(die, bool) or not isinstance(die, int) or not 1 <= die <= self.super_round.die_faces:
            raise ValueError(f"super-round die result must be 1..{self.super_round.die_faces}, got {die!r}")
        return die in self.super_round.super_faces


def load_variant(path: Path) -> Variant:
    """Load and validate a variant file; raise VariantError naming file, bet and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise VariantError(f"{path}: variant file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise VariantError(f"{path}: cannot read variant file: {exc}") from None
    try:
        raw = parse_yaml(text, str(path)).data
    except DuplicateKeyError as exc:
        raise VariantError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise VariantError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise VariantError(f"{path}: a variant file must be a mapping with 'name' and 'bets'")
    try:
        return Variant.model_validate(raw)
    except ValidationError as exc:
        raise VariantError(_describe(path, raw, exc)) from None


def load_variant_by_name(name: str) -> Variant:
    """Load ``VARIANTS_DIR/<name>.yaml`` (``"standard"``, ``"ez"``, ...)."""
    if not _NAME_RE.match(name):
        raise VariantError(f"{name!r} is not a variant name (letters, digits, '_', '-', '.')")
    return load_variant(VARIANTS_DIR / f"{name}.yaml")


def shipped_variant_names() -> list[str]:
    """Names of the variant files in VARIANTS_DIR."""
    return sorted(p.stem for p in VARIANTS_DIR.glob("*.yaml"))


def load_variant_arg(text: str) -> Variant:
    """A variant given on a command line: a file path, or the name of a shipped variant."""
    candidate = Path(text)
    if is_variant_path(text) or candidate.exists():
        return load_variant(candidate)
    return load_variant_by_name(text)


def is_variant_path(text: str) -> bool:
    """Whether a variant setting names a file (ends in .yaml/.yml or has a '/') rather than a shipped name."""
    return Path(text).suffix in (".yaml", ".yml") or "/" in text


def _describe(path: Path, raw: dict[str, Any], exc: ValidationError) -> str:
    lines = [f"{path}: invalid variant ({exc.error_count()} problem(s))"]
    for error in exc.errors():
        lines.append("  " + _describe_one(raw, error))
    return "\n".join(lines)


def _describe_one(raw: dict[str, Any], error: Any) -> str:
    loc: tuple[Any, ...] = tuple(error["loc"])
    kind = error["type"]
    message = error["msg"]
    if len(loc) >= 2 and loc[0] == "bets" and isinstance(loc[1], int):
        index = loc[1]
        bets = raw.get("bets")
        entry = bets[index] if isinstance(bets, list) and index < len(bets) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        where = f"bet {name!r} (bets[{index}])" if name is not None else f"bets[{index}]"
        rest = loc[2:]
        if kind == "union_tag_invalid":
            got = entry.get("kind") if isinstance(entry, dict) else None
            return f"{where}: field 'kind': unknown bet kind {got!r}; known kinds: {', '.join(BET_KINDS)}"
        if kind == "union_tag_not_found":
            return f"{where}: field 'kind': missing; known kinds: {', '.join(BET_KINDS)}"
        if kind in ("model_type", "model_attributes_type", "dict_type") and not rest:
            return f"{where}: each bet must be a mapping with 'name' and 'kind'"
        if rest and rest[0] in BET_KINDS:
            rest = rest[1:]  # drop the discriminator tag pydantic puts in the location
        field = ".".join(str(part) for part in rest)
        if kind == "extra_forbidden":
            return f"{where}: field {field!r}: unknown key (typo?) not allowed for this kind"
        if kind == "missing":
            return f"{where}: field {field!r}: missing (required for this kind)"
        return f"{where}: field {field!r}: {message}" if field else f"{where}: {message}"
    field = ".".join(str(part) for part in loc) or "(top level)"
    if kind == "extra_forbidden":
        return f"field {field!r}: unknown key (typo?)"
    return f"field {field!r}: {message}"
