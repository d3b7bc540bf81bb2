"""A shoe's certificate from the journal (``baccarat-edge journal shoe-report [SHOE_ID]``).

The journal holds each ``shoe_certificate`` event the engine emitted: one at the shoe's end
(``stage: end``, with the irregular-shoe detectors' findings) and one after each remainder count
(``stage: remainder``). The report is the shoe's latest certificate, with the end stage's
findings; without a shoe id, the last shoe certified. The file is opened read-only (the daemon
may be running). A journal keeps a shoe's events until compaction drops the shoes before the
current one, so an old shoe's certificate may be gone (the error lists the shoes it holds).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.audit.certificate import ShoeCertificate
from daemon.engine.squeeze import unsealed
from daemon.journal.errors import JournalError
from daemon.journal.export import open_read_only

CERTIFICATE_KIND = "shoe_certificate"


class UnknownShoe(JournalError):
    """The journal holds no certificate of the shoe asked for."""


@dataclass(frozen=True, slots=True)
class ShoeReport:
    """One shoe's latest certificate and where it came from."""

    seq: int
    at: float
    stage: str
    reason: str | None
    certificate: ShoeCertificate
    irregular: dict[str, Any] | None
    stages: list[str] = field(default_factory=list)
    """Every certificate stage the journal holds for the shoe, in order (``end``, ``remainder``…)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "shoe_id": self.certificate.shoe_id,
            "seq": self.seq,
            "at": self.at,
            "stage": self.stage,
            "stages": self.stages,
            "reason": self.reason,
            "status": self.certificate.status.value,
            "digest": self.digest,  # (computed here: the event carries the certificate itself)
            "certificate": self.certificate.to_dict(),
            "irregular": self.irregular,
        }

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the certificate's canonical JSON (keys sorted, no whitespace)."""
        return hashlib.sha256(self.certificate.canonical_json().encode()).hexdigest()

    def text(self) -> str:
        """The report for people: where it comes from, the certificate, the detectors' findings."""
        head = (
            f"certificate of shoe {self.certificate.shoe_id} (stage {self.stage}, journal seq {self.seq}; "
            f"shoe ended: {self.reason or 'unknown'})\n"
            f"  sha-256 of its canonical JSON: {self.digest}\n"
        )
        lines = [head + self.certificate.text().rstrip("\n")]
        irregular = self.irregular
        if irregular is None:
            lines.append("irregular-shoe detectors: no result recorded")
        elif not irregular.get("checked"):
            lines.append(f"irregular-shoe detectors: not run ({irregular.get('reason')})")
        elif not irregular.get("findings"):
            lines.append("irregular-shoe detectors: nothing found")
        else:
            lines.append("irregular-shoe detectors: IRREGULAR")
            for f in irregular["findings"]:
                cards = " ".join(f.get("cards") or [])
                lines.append(
                    f"  {f['detector']}: run of {f['length']} (threshold {f['threshold']}) from "
                    f"{f['first']}, p <= {f['probability']:.3g} ({f['probability_kind']})"
                    + (f"; cards {cards}" if cards else "")
                    + (f"; winner {f['winner']}" if f.get("winner") else "")
                    + (
                        f"; as in shoe {f['earlier_shoe_id']} from {f['earlier_first']}"
                        if f.get("earlier_shoe_id")
                        else ""
                    )
                )
        return "\n".join(lines) + "\n"


def shoe_report(path: Path, shoe_id: str | None = None) -> ShoeReport:
    """The latest certificate of ``shoe_id`` (default: the last shoe certified) in the journal
    at ``path``. Raises :class:`UnknownShoe` when it holds none, :class:`JournalError` when the
    file cannot be read."""
    db = open_read_only(path)
    try:
        rows = db.execute(
            "SELECT seq, body FROM events WHERE body LIKE ? ORDER BY seq",
            (f'%"{CERTIFICATE_KIND}"%',),
        ).fetchall()
    except sqlite3.Error as exc:
        raise JournalError(f"journal {path} cannot be read: {exc}") from None
    finally:
        db.close()
    by_shoe: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for seq, body in rows:
        event = json.loads(body)
        if event.get("kind") != CERTIFICATE_KIND:
            continue
        # a squeeze table's certificate keeps its card faces in the sealed member: whole here
        event["data"] = unsealed(event["data"])
        by_shoe.setdefault(event["data"]["shoe_id"], []).append((seq, event))
    if not by_shoe:
        raise UnknownShoe(f"journal {path} holds no shoe certificate (no shoe has ended in it)")
    if shoe_id is None:
        shoe_id = max(by_shoe, key=lambda s: by_shoe[s][-1][0])
    found = by_shoe.get(shoe_id)
    if found is None:
        known = ", ".join(sorted(by_shoe, key=lambda s: by_shoe[s][0][0]))
        raise UnknownShoe(f"journal {path} holds no certificate of shoe {shoe_id!r}; it has: {known}")
    seq, last = found[-1]
    ends = [e for _, e in found if e["data"]["stage"] == "end"]
    data = last["data"]
    return ShoeReport(
        seq=seq,
        at=float(last["at"]),
        stage=data["stage"],
        reason=data.get("reason"),
        certificate=ShoeCertificate.from_dict(data["certificate"]),
        irregular=ends[-1]["data"].get("irregular") if ends else None,
        stages=[e["data"]["stage"] for _, e in found],
    )
