"""Hardware fixture files: what a device sent, when, and the metadata to replay it.

A fixture is a JSON-lines file (``*.fixture.jsonl``). The first line is the
header (:class:`FixtureHeader`); every further line is one step
(:class:`FixtureStep`) with its time ``t`` in seconds from the start:

- ``{"t": 1.5, "data": "05 31 44 81 b8 03 34 36"}`` bytes from a serial device (hex);
- ``{"t": 1.5, "report": "02 00 25 00 00 00 00 00"}`` one USB HID input report (hex);
- ``{"t": 9.0, "event": "unplug"}`` / ``{"t": 11.0, "event": "replug"}`` the device goes away / comes back;
- ``{"t": 80.0, "event": "restart"}`` the edge restarts after an outage (serial fixtures): the steps of
  the outage are absent, the driver starts afresh and the engine is restored from its own events;
- ``{"t": 0.0, "supervisor": {"action": "new_shoe", "args": {}}}`` a supervisor command at that time;
- ``{"t": 99.0, "tick": true}`` a clock tick for the engine.

Beside ``name.fixture.jsonl`` lives ``name.expected.jsonl``: the engine events
replaying it must produce, one ``Event.to_dict()`` per line, volatile fields
removed (see :data:`VOLATILE_FIELDS`). Every line is validated; an error names
the file, the line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

FORMAT = "baccarat-edge-fixture"
VERSION = 1
GENERATED_PROVENANCE = "generated from PROTOCOLS.md spec, no real capture yet"
VOLATILE_FIELDS = ("event_id", "seq", "ts")
"""Top-level event fields a replay cannot reproduce (assigned by the journal or the wall clock)."""

FIXTURE_SUFFIX = ".fixture.jsonl"
EXPECTED_SUFFIX = ".expected.jsonl"


class FixtureError(ValueError):
    """A fixture file that cannot be used; the message names file, line and field."""


class UsbIdentity(BaseModel):
    """The USB identity the replay backend presents (USB fixtures only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vendor_id: int = Field(ge=0, le=0xFFFF)
    product_id: int = Field(ge=0, le=0xFFFF)
    serial_number: str = "SIM0001"


class FixtureHeader(BaseModel):
    """First line of a fixture: what made it and how to replay it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["baccarat-edge-fixture"] = "baccarat-edge-fixture"
    version: Literal[1] = 1
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    protocol: Literal["angel_eye", "ascii_lines", "usb_hid"]
    transport: Literal["serial", "usb"]
    origin: Literal["generated", "recorded"]
    provenance: str = Field(
        min_length=1, description="How it was made, e.g. the generator or the capture site."
    )
    protocol_settings: dict[str, Any] = Field(
        default_factory=dict, description="Decoder settings for replay."
    )
    table: dict[str, Any] = Field(
        default_factory=dict, description="Engine TableSettings for the golden test."
    )
    usb: UsbIdentity | None = None
    generator: dict[str, Any] = Field(
        default_factory=dict, description="Generator parameters (seed, faults)."
    )
    covers: list[str] = Field(
        default_factory=list, description="What the fixture exercises (RULES.md cases)."
    )

    @model_validator(mode="after")
    def _transport_matches(self) -> Self:
        expected = "usb" if self.protocol == "usb_hid" else "serial"
        if self.transport != expected:
            raise ValueError(f"protocol {self.protocol} is replayed over {expected}, not {self.transport}")
        if self.transport == "usb" and self.usb is None:
            raise ValueError("a USB fixture needs 'usb' (vendor_id, product_id)")
        return self


class SupervisorStep(BaseModel):
    """A supervisor (or game server) command injected at a point of the replay."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    actor: str = "fixture"
    command_id: str | None = None
    # the time the game server signed into the command (its ``ts``), on the fixture's clock; None:
    # the command carries none (a supervisor's, or a recording without it)
    issued_at: float | None = Field(default=None, allow_inf_nan=False)

    @model_validator(mode="after")
    def _game_flow_arguments(self) -> Self:
        spec = GAME_FLOW_COMMANDS.get(self.action)
        if spec is None:
            return self
        required, optional = spec
        missing = sorted(required - set(self.args))
        unknown = sorted(set(self.args) - required - optional)
        if missing or unknown:
            raise ValueError(f"{self.action}: missing {missing}, unknown {unknown} arguments")
        round_id = self.args.get("round_id")
        if "round_id" in required and not (isinstance(round_id, str) and 0 < len(round_id) <= 64):
            raise ValueError(f"{self.action}: round_id must be a text of 1-64 characters")
        closes_at = self.args.get("closes_at")
        if closes_at is not None and (isinstance(closes_at, bool) or not isinstance(closes_at, int | float)):
            raise ValueError(f"{self.action}: closes_at must be a number")
        return self


GAME_FLOW_COMMANDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "open_betting": (frozenset({"round_id"}), frozenset({"closes_at"})),
    "close_betting": (frozenset({"round_id"}), frozenset()),
    "cut_card": (frozenset(), frozenset()),
}
"""The game server's commands a fixture records: required and optional arguments.
The engine checks the rest (the round id's form and order): a fixture may hold bad commands on
purpose, but not malformed ones."""


class FixtureStep(BaseModel):
    """One moment of a fixture: exactly one of data, report, event, supervisor, tick."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    t: float = Field(ge=0)
    data: bytes | None = None
    report: bytes | None = None
    event: Literal["unplug", "replug", "restart"] | None = None
    supervisor: SupervisorStep | None = None
    tick: bool | None = None
    note: str | None = Field(default=None, description="Free text for people reading the file.")

    @field_validator("data", "report", mode="before")
    @classmethod
    def _from_hex(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return bytes.fromhex(value)
            except ValueError:
                raise ValueError("must be hex bytes like '05 31 44'") from None
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        present = [
            k for k in ("data", "report", "event", "supervisor", "tick") if getattr(self, k) is not None
        ]
        if len(present) != 1:
            raise ValueError(
                f"a step needs exactly one of data, report, event, supervisor, tick; got {present}"
            )
        return self

    def to_json(self) -> str:
        out: dict[str, Any] = {"t": round(self.t, 6)}
        if self.data is not None:
            out["data"] = self.data.hex(" ")
        elif self.report is not None:
            out["report"] = self.report.hex(" ")
        elif self.event is not None:
            out["event"] = self.event
        elif self.supervisor is not None:
            out["supervisor"] = self.supervisor.model_dump(exclude_none=True)
        else:
            out["tick"] = True
        if self.note:
            out["note"] = self.note
        return json.dumps(out, sort_keys=True)


@dataclass(frozen=True, slots=True)
class Fixture:
    """A loaded fixture."""

    header: FixtureHeader
    steps: tuple[FixtureStep, ...]
    path: Path | None = None

    @property
    def expected_path(self) -> Path | None:
        if self.path is None:
            return None
        return expected_path_for(self.path)

    def save(self, path: Path) -> None:
        """Write the fixture as JSON lines."""
        lines = [json.dumps(self.header.model_dump(exclude_none=True), sort_keys=True)]
        lines += [step.to_json() for step in self.steps]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def expected_path_for(fixture_path: Path) -> Path:
    name = fixture_path.name.removesuffix(FIXTURE_SUFFIX).removesuffix(".jsonl")
    return fixture_path.with_name(name + EXPECTED_SUFFIX)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(line)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def load_fixture(path: Path) -> Fixture:
    """Read and validate a fixture file; raise :class:`FixtureError` naming file, line and field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureError(f"{path}: cannot read: {exc}") from None
    return parse_fixture(text, path)


def is_fixture_header(line: bytes | str) -> bool:
    """Whether one line is a fixture header (a JSON object naming the fixture format)."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(record, dict) and record.get("format") == FORMAT


def parse_fixture(text: str, path: Path | str) -> Fixture:
    """Validate fixture text read from ``path`` (a file, or a name such as "<stdin>" for messages)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise FixtureError(f"{path}: empty file, expected a header line")
    records: list[tuple[int, dict[str, Any]]] = []
    for number, line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FixtureError(f"{path}:{number}: not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise FixtureError(f"{path}:{number}: expected a JSON object")
        records.append((number, record))
    number, first = records[0]
    try:
        header = FixtureHeader.model_validate(first)
    except ValidationError as exc:
        raise FixtureError(f"{path}:{number}: header: {_describe(exc)}") from None
    problem = _protocol_settings_problem(header)
    if problem is not None:
        raise FixtureError(f"{path}:{number}: header: protocol_settings: {problem}")
    steps: list[FixtureStep] = []
    previous = 0.0
    for number, record in records[1:]:
        try:
            step = FixtureStep.model_validate(record)
        except ValidationError as exc:
            raise FixtureError(f"{path}:{number}: {_describe(exc)}") from None
        if step.t < previous:
            raise FixtureError(
                f"{path}:{number}: t: {step.t} goes back in time (previous step at {previous})"
            )
        if header.transport == "serial" and step.report is not None:
            raise FixtureError(f"{path}:{number}: report: a serial fixture carries 'data', not HID reports")
        if header.transport == "usb" and step.event == "restart":
            raise FixtureError(f"{path}:{number}: event: 'restart' is replayed for serial fixtures only")
        if header.transport == "usb" and step.data is not None:
            raise FixtureError(
                f"{path}:{number}: data: a USB fixture carries HID 'report's, not serial bytes"
            )
        previous = step.t
        steps.append(step)
    return Fixture(header=header, steps=tuple(steps), path=path if isinstance(path, Path) else None)


def _protocol_settings_problem(header: FixtureHeader) -> str | None:
    """Why the header's decoder settings would be refused at replay (signals included), or None."""
    from drivers.protocols import DECODERS

    try:
        DECODERS[header.protocol].settings.model_validate(header.protocol_settings)
    except ValidationError as exc:
        return _describe(exc)
    return None


def strip_volatile(event: dict[str, Any]) -> dict[str, Any]:
    """An event dict without the fields a replay cannot reproduce."""
    return {k: v for k, v in event.items() if k not in VOLATILE_FIELDS}


def write_expected(path: Path, events: Iterable[dict[str, Any]]) -> None:
    """Write the expected event stream, one JSON object per line (stable key order)."""
    lines = [json.dumps(strip_volatile(e), sort_keys=True) for e in events]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def load_expected(path: Path) -> list[dict[str, Any]]:
    """Read an expected event stream; raise :class:`FixtureError` naming the line."""
    out: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FixtureError(f"{path}:{number}: not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise FixtureError(f"{path}:{number}: expected a JSON object")
        out.append(record)
    return out
