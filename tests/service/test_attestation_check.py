"""The service's attestation on a real journal: not configured, a key that is missing, the
alert and its hold, and what ends it (only a passing check, never the manifest's removal)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.attestation.manifest import build_manifest, sign_manifest
from daemon.attestation.settings import AttestationSettings
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from daemon.mqtt.command_channel import CommandAnswer
from daemon.service.attestation import Attestation, attestation_finding
from daemon.service.startup_checks import PublishGate
from tests.attestation.keys import new_key


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    store = Journal(JournalSettings(path=tmp_path / "journal.sqlite3"), "T7")
    yield store
    store.close()


def _package(tmp: Path, *, required: bool) -> AttestationSettings:
    tree = tmp / "installed"
    (tree / "opt/pkg").mkdir(parents=True)
    (tree / "opt/pkg/code.py").write_text("SAFE = True\n")
    private, public = new_key()
    manifest = build_manifest(
        tree, package="pkg", version="1", install_root=str(tree), owned_dirs=[str(tree)]
    )
    (tmp / "manifest.json").write_bytes(manifest)
    (tmp / "manifest.json.sig").write_bytes(sign_manifest(manifest, private))
    (tmp / "build.pub").write_bytes(public)
    return AttestationSettings(
        required=required, manifest_file=tmp / "manifest.json", public_key_file=tmp / "build.pub"
    )


def _attest(attestation: Attestation) -> CommandAnswer:
    """The ``attest`` command as the engine hands it on once journaled, and its reply."""
    replies: list[CommandAnswer] = []
    done = threading.Event()

    def reply(answer: CommandAnswer) -> None:
        replies.append(answer)
        done.set()

    attestation.on_command("supervisor:anna", reply)(CommandAnswer(accepted=True, event_id="e-1", seq=1))
    assert done.wait(10)
    return replies[0]


def test_a_source_run_without_a_manifest_is_not_configured_and_holds_nothing(
    tmp_path: Path, journal: Journal
) -> None:
    settings = AttestationSettings(
        manifest_file=tmp_path / "none.json", public_key_file=tmp_path / "none.pub"
    )
    gate = PublishGate()
    attestation = Attestation(settings, journal, gate, clock=time.time, notify=lambda: None)
    assert attestation.check_at_start()
    assert attestation.health()["status"] == "not_configured"
    assert attestation.digest is None
    assert gate.health()["passed"] == ["attestation"]
    assert journal.last_seq() == 0  # no alert
    assert attestation_finding(settings).ok
    assert _attest(attestation)["reason"] == f"attestation not_configured: no {tmp_path / 'none.json'}"


def test_a_required_attestation_without_its_public_key_fails(tmp_path: Path, journal: Journal) -> None:
    settings = _package(tmp_path, required=True)
    (tmp_path / "build.pub").unlink()
    gate = PublishGate()
    attestation = Attestation(settings, journal, gate, clock=time.time, notify=lambda: None)
    assert not attestation.check_at_start()
    assert attestation.health()["problems"] == [f"{tmp_path / 'build.pub'}: No such file or directory"]
    assert gate.held_after() == journal.last_seq() == 1  # the alert goes out, nothing after it
    finding = attestation_finding(settings)
    assert not finding.ok
    assert "build.pub" in finding.detail


def test_removing_the_manifest_never_clears_the_alert_a_passing_check_does(
    tmp_path: Path, journal: Journal
) -> None:
    settings = _package(tmp_path, required=False)
    gate = PublishGate()
    attestation = Attestation(settings, journal, gate, clock=time.time, notify=lambda: None)
    code = tmp_path / "installed/opt/pkg/code.py"
    code.write_text("SAFE = False\n")
    assert not attestation.check_at_start()
    gate.startup_done()
    alert_id = attestation.alert_id
    assert alert_id is not None
    assert gate.held_after() == 1

    manifest = settings.manifest_file.read_bytes()
    settings.manifest_file.unlink()  # with required: false, no manifest would be "not configured"
    reply = _attest(attestation)
    assert reply == {"accepted": False, "reason": f"attestation failed: missing: {settings.manifest_file}"}
    assert attestation.alert_id == alert_id
    assert gate.held_after() == 1

    settings.manifest_file.write_bytes(manifest)
    code.write_text("SAFE = True\n")
    reply = _attest(attestation)
    assert reply["accepted"]
    assert (reply["event_id"], reply["seq"]) == ("e-1", 1)  # the engine's journaled command_accepted
    assert attestation.alert_id is None
    assert gate.held_after() is None
    kinds = [(e.kind, e.data["alert_id"]) for e in journal.events(origin=None)]
    assert kinds == [("alert_raised", alert_id), ("alert_cleared", alert_id)]
