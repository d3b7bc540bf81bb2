"""The daemon's self-attestation: the installed files against the package's signed manifest.

Checked at start (before any device starts: :mod:`daemon.service.startup_checks`) and on
the signed ``attest`` supervisor command. The engine journals the command (who asked, when:
``command_accepted``); the check itself is file I/O, so it runs here, on a thread of its own,
and the reply goes out once it is done (accepted: the files match; refused: what differs).

A mismatch journals one critical ``integrity_failed`` alert (the differences, the manifest
digest) and the publisher then holds every event journaled after it. Reads go on being
validated and journaled while the hold lasts, so nothing is lost and the journal keeps the
whole record of what the table saw; they are published, in ``seq`` order, once a supervisor's
``attest`` finds the files intact again (the alert is cleared first). Held rather than
refused: a refusal would leave the cards dealt meanwhile out of the record, which an audit
of the shoe needs. Only ``attest`` ends the alert, never a restart: a restart with the alert
open holds again from the alert on.

With ``attestation.required: false`` (source and demo runs) and no manifest, the check reports
``not_configured`` and holds nothing. With it ``true``, the daemon's own check also fails when
its interpreter could run byte code that is not compiled from the attested sources
(:mod:`daemon.attestation.byte_code`: the unit's ``PYTHONPYCACHEPREFIX`` removed, say).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypedDict

import structlog

from daemon.alerts import AlertCode, AlertEventKind
from daemon.attestation.byte_code import byte_code_problems
from daemon.attestation.manifest import AttestationError, load_public_key, manifest_digest, verify_installed
from daemon.attestation.settings import AttestationSettings
from daemon.journal.store import Journal
from daemon.mqtt.alerts import alert_cleared, alert_raised
from daemon.mqtt.command_channel import CommandAnswer, ReplyFn
from daemon.service.probes import Finding
from daemon.service.startup_checks import PublishGate

log = structlog.get_logger("baccarat_edge.attestation")

ATTEST_ACTION = "attest"
PAGE = 500


class AttestationHealth(TypedDict):
    """Health ``attestation``."""

    status: str
    """``not_configured``, ``passed`` or ``failed``: the latest check's result (``pending`` before it)."""
    required: bool
    manifest_digest: str | None
    checked_at: float | None
    problems: list[str]
    integrity_alert: str | None
    """The open ``integrity_failed`` alert: events after it are held from the broker."""
    held_after_seq: int | None


class Attestation:
    """Runs the check, keeps its result and the ``integrity_failed`` alert (any thread)."""

    def __init__(
        self,
        settings: AttestationSettings,
        journal: Journal,
        gate: PublishGate,
        *,
        clock: Callable[[], float],
        notify: Callable[[], None],
    ) -> None:
        self.settings = settings
        self._journal = journal
        self._gate = gate
        self._clock = clock
        self._notify = notify
        self._checking = threading.Lock()  # one check at a time (seconds: never held by health)
        self._lock = threading.Lock()  # guards the fields below
        self.status = "pending"
        self.problems: list[str] = []
        self.checked_at: float | None = None
        self.digest = self._read_digest()
        self.alert_id: str | None = journal.open_delivery_alerts().get(AlertCode.INTEGRITY_FAILED)
        self._held_after: int | None = None

    def _read_digest(self) -> str | None:
        try:
            return manifest_digest(self.settings.manifest_file.read_bytes())
        except OSError:
            return None

    # -- the check ------------------------------------------------------------------------

    def check_at_start(self) -> bool:
        """The start-up check (the gate's ``attestation`` stage); True when it passed (or is not
        configured). An alert left open by an earlier run holds the events after it again,
        whatever this check finds."""
        self._gate.begin("attestation")
        if self.alert_id is not None:
            self._hold(self._raise_seq(self.alert_id))
        ok = self.check()
        (self._gate.passed if ok else self._gate.fail)("attestation")
        return ok

    def check(self) -> bool:
        """Check now; raise the alert on a failure (none while one is open). True: passed or
        not configured, and no alert open."""
        with self._checking:
            status, problems = self._check_and_keep("start")
            if status == "failed" and self.alert_id is None:
                self._raise(problems)
            return status != "failed" and self.alert_id is None

    def _check_and_keep(self, actor: str) -> tuple[str, list[str]]:
        status, problems, digest = self._verify()
        with self._lock:
            self.status, self.problems, self.checked_at = status, problems, self._clock()
            self.digest = digest or self.digest
        log.info("attestation", status=status, actor=actor, manifest_digest=self.digest, problems=problems)
        return status, problems

    def _verify(self) -> tuple[str, list[str], str | None]:
        return verify_settings(self.settings, running=True)

    def _raise(self, problems: list[str]) -> None:
        log.error("integrity_failed", problems=problems, manifest_digest=self.digest)
        self.alert_id, event = alert_raised(
            AlertCode.INTEGRITY_FAILED,
            "the installed files differ from the package's signed manifest: " + "; ".join(problems[:3]),
            {"manifest_digest": self.digest, "problems": problems},
            self._clock(),
        )
        self._hold(self._journal.append_delivery_event(event).seq)
        self._notify()

    def _clear(self, actor: str) -> None:
        assert self.alert_id is not None
        self._journal.append_delivery_event(
            alert_cleared(
                self.alert_id,
                AlertCode.INTEGRITY_FAILED,
                f"the installed files match the signed manifest again (attest by {actor})",
                self._clock(),
            )
        )
        log.info("integrity_restored", alert_id=self.alert_id, actor=actor)
        self.alert_id = None
        self._hold(None)
        self._notify()

    def _hold(self, after_seq: int | None) -> None:
        self._held_after = after_seq
        self._gate.hold_integrity(after_seq)

    def _raise_seq(self, alert_id: str) -> int:
        """The seq to hold after for an alert left open: its raise when still undelivered,
        else the last event the broker acknowledged (everything undelivered stays held)."""
        after = 0
        first_pending: int | None = None
        while page := self._journal.pending(after_seq=after, limit=PAGE):
            first_pending = page[0].seq if first_pending is None else first_pending
            for event in page:
                if event.kind == AlertEventKind.RAISED and event.data.get("alert_id") == alert_id:
                    return event.seq
            after = page[-1].seq
        return self._journal.last_seq() if first_pending is None else first_pending - 1

    # -- the attest command ---------------------------------------------------------------

    def on_command(self, actor: str, reply: ReplyFn) -> ReplyFn:
        """The reply function to hand the engine for an ``attest`` command: once the engine
        journaled it as accepted, the check runs on a thread and its result is the reply."""

        def after_engine(answer: CommandAnswer) -> None:
            if not answer["accepted"]:
                reply(answer)
                return
            threading.Thread(
                target=self._attest, args=(actor, answer, reply), name="attest", daemon=True
            ).start()

        return after_engine

    def _attest(self, actor: str, answer: CommandAnswer, reply: ReplyFn) -> None:
        try:
            with self._checking:
                status, problems = self._check_and_keep(actor)
                if status == "not_configured" and self.alert_id is not None:
                    # a manifest that was there when the alert was raised: its removal never clears it
                    status, problems = "failed", [f"missing: {self.settings.manifest_file}"]
                if status == "failed":
                    if self.alert_id is None:
                        self._raise(problems)
                    reason = "attestation failed: " + "; ".join(problems[:5])
                    reply(CommandAnswer(accepted=False, reason=reason))
                    return
                if self.alert_id is not None:
                    self._clear(actor)
            what = f"manifest {self.digest}" if self.digest else f"no {self.settings.manifest_file}"
            done = CommandAnswer(accepted=True, reason=f"attestation {status}: {what}")
            if "event_id" in answer:
                done["event_id"] = answer["event_id"]
            if "seq" in answer:
                done["seq"] = answer["seq"]
            reply(done)
        except Exception as exc:  # a failing journal must still answer the supervisor
            log.exception("attest failed")
            reply(CommandAnswer(accepted=False, reason=f"attest could not be carried out: {exc}"))

    # -- health ---------------------------------------------------------------------------

    def health(self) -> AttestationHealth:
        with self._lock:
            return AttestationHealth(
                status=self.status,
                required=self.settings.required,
                manifest_digest=self.digest,
                checked_at=self.checked_at,
                problems=list(self.problems),
                integrity_alert=self.alert_id,
                held_after_seq=self._held_after,
            )


def birth_fields(attestation: Attestation | None) -> dict[str, str]:
    """The birth (retained ``status``) message's ``manifest_digest``, when there is a manifest."""
    if attestation is None or attestation.digest is None:
        return {}
    return {"manifest_digest": attestation.digest}


def health_sections(gate: PublishGate, attestation: Attestation | None) -> dict[str, Any]:
    """Health ``startup`` and ``attestation``."""
    sections: dict[str, Any] = {"startup": gate.health()}
    if attestation is not None:
        sections["attestation"] = attestation.health()
    return sections


def verify_settings(cfg: AttestationSettings, *, running: bool = False) -> tuple[str, list[str], str | None]:
    """Check the installed files as ``cfg`` says: (status, problems, manifest digest); status
    ``not_configured``, ``passed`` or ``failed``. ``running``: the daemon's own check, which with
    ``cfg.required`` also checks where this interpreter reads byte code (``sys.pycache_prefix``)."""
    if not cfg.required and not cfg.manifest_file.exists():
        return "not_configured", [], None
    digest: str | None = None
    try:
        manifest = cfg.manifest_file.read_bytes()
        digest = manifest_digest(manifest)
        key = load_public_key(cfg.public_key_file.read_bytes(), str(cfg.public_key_file))
        verdict = verify_installed(manifest, cfg.signature_file.read_bytes(), key)
    except OSError as exc:
        return "failed", [f"{exc.filename}: {exc.strerror}"], digest
    except AttestationError as exc:
        return "failed", [str(exc)], digest
    problems = verdict.problems()
    if running and cfg.required:
        problems += byte_code_problems(sys.pycache_prefix, verdict.owned_dirs)
    return ("failed" if problems else "passed"), problems, verdict.digest


def attestation_finding(cfg: AttestationSettings) -> Finding:
    """What ``check-config`` says of the installed files (the daemon's start-up check)."""
    status, problems, digest = verify_settings(cfg)
    if status == "not_configured":
        return Finding("attestation", True, f"not configured: no {cfg.manifest_file} (a source or demo run)")
    if status == "passed":
        return Finding("attestation", True, f"the installed files match the signed manifest {digest}")
    detail = "; ".join(problems[:5]) + " (the daemon would raise integrity_failed)"
    return Finding("attestation", False, detail)
