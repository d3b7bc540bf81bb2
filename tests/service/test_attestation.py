"""Self-attestation in a running daemon: a changed file raises ``integrity_failed`` and holds
every event journaled after it from the broker; the restored file and a supervisor's ``attest``
clear it and the held events go out in order. In-process daemon, real pty and mosquitto."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.attestation.manifest import build_manifest, sign_manifest
from daemon.service.config import load_config
from daemon.service.runner import Daemon
from drivers.pty_device import PtyDevice
from tests.attestation.keys import new_key
from tests.service.harness import TableSubscriber, contract_violations, dealt_shoe, play, write_config
from tests.support.broker import MosquittoBroker

CARD_KINDS = {"card_dealt", "card_burned", "round_completed"}


@pytest.fixture(autouse=True)
def _byte_code_as_the_unit_sets_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A required attestation also wants the interpreter's byte code outside the attested
    files: the prefix the systemd unit gives the daemon (PYTHONPYCACHEPREFIX)."""
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "run/pycache"))


def _installed_package(tmp: Path) -> dict[str, Any]:
    """A small installed tree with its signed manifest: the config's ``attestation`` section."""
    tree = tmp / "installed"
    (tree / "opt/pkg/lib").mkdir(parents=True)
    (tree / "opt/pkg/lib/engine.py").write_text("RULES = 'standard'\n")
    (tree / "opt/pkg/README").write_text("the package\n")
    private, public = new_key()
    manifest = build_manifest(
        tree, package="pkg", version="1", install_root=str(tree), owned_dirs=[str(tree / "opt/pkg")]
    )
    (tmp / "manifest.json").write_bytes(manifest)
    (tmp / "manifest.json.sig").write_bytes(sign_manifest(manifest, private))
    (tmp / "build.pub").write_bytes(public)
    return {
        "required": True,
        "manifest_file": str(tmp / "manifest.json"),
        "public_key_file": str(tmp / "build.pub"),
    }


def _daemon(tmp: Path, broker: MosquittoBroker, hands: int) -> tuple[Daemon, TableSubscriber, PtyDevice, Any]:
    deal, _plan, steps = dealt_shoe(seed=5, max_hands=hands)
    shoe = PtyDevice(tmp / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp, shoe.path, broker.port, deal)
    body = json.loads(config.read_text())
    body["attestation"] = _installed_package(tmp)
    config.write_text(json.dumps(body))
    daemon = Daemon(load_config(config, environ={}))
    subscriber = TableSubscriber(broker.port, events_key, command_key).start()
    return daemon, subscriber, shoe, steps


def _health_caught_up(daemon: Daemon, subscriber: TableSubscriber, since: float = 0.0) -> dict[str, Any]:
    """A health report (of a daemon started after ``since``) published after the start-up
    checks and after the drain saw every journaled event (the drain publishes health after its
    publishing step)."""
    assert daemon.journal is not None
    assert daemon.wait_until_processed(10)
    last = daemon.journal.last_seq()
    assert subscriber.wait_for(
        lambda s: (
            s.health is not None
            and s.health["ts"] >= since
            and s.health["last_seq"] >= last
            and s.health["startup"]["stage"] == "done"
        ),
        20,
    )
    assert subscriber.health is not None
    return subscriber.health


@pytest.mark.mosquitto
def test_a_changed_file_holds_card_events_until_attest_finds_it_restored(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    daemon, subscriber, shoe, steps = _daemon(tmp_path, mosquitto, hands=2)
    changed = tmp_path / "installed/opt/pkg/lib/engine.py"
    try:
        daemon.start()
        health = _health_caught_up(daemon, subscriber)
        assert health["startup"] == {
            "stage": "done",
            "passed": ["config", "journal_tail", "attestation", "device_probe"],
            "failed": [],
        }
        assert health["attestation"]["status"] == "passed"
        digest = health["attestation"]["manifest_digest"]
        assert digest.startswith("sha256:")
        assert [p for name, p in subscriber.payloads if name == "status"][-1]["manifest_digest"] == digest

        changed.write_text("RULES = 'stacked'\n")
        reply = subscriber.sender.send("attest")
        assert reply["status"] == "refused"
        assert f"changed: {changed}" in reply["reason"]
        assert subscriber.wait_for(lambda s: "alert_raised" in s.kinds(), 20)
        [alert] = [e for e in subscriber.events if e["kind"] == "alert_raised"]
        assert alert["data"]["code"] == "integrity_failed"
        assert alert["data"]["severity"] == "critical"
        assert alert["data"]["problems"] == [f"changed: {changed}"]
        assert alert["data"]["manifest_digest"] == digest

        refused: list[str] = []
        play(steps, shoe, subscriber, refused)  # the shoe is dealt meanwhile: read and journaled
        assert refused == []
        health = _health_caught_up(daemon, subscriber)
        assert daemon.journal is not None
        journaled = daemon.journal.events()
        held = [e for e in journaled if e.seq > alert["seq"]]
        assert {"card_dealt", "round_completed"} <= {e.kind for e in held}
        assert not [e for e in subscriber.events if e["seq"] > alert["seq"]]  # nothing after the alert
        assert health["attestation"]["integrity_alert"] == alert["data"]["alert_id"]
        assert health["attestation"]["held_after_seq"] == alert["seq"]
        assert health["queue_depth"] >= len(held)

        reply = subscriber.sender.send("attest")
        assert reply["status"] == "refused"  # still changed: the alert stays, nothing is released
        changed.write_text("RULES = 'standard'\n")
        reply = subscriber.sender.send("attest")
        assert reply["status"] == "accepted", reply
        assert reply["reason"] == f"attestation passed: manifest {digest}"
        last = daemon.journal.last_seq()
        assert subscriber.wait_for(lambda s: {e["seq"] for e in s.events} >= set(range(1, last + 1)), 30)
        health = _health_caught_up(daemon, subscriber)
    finally:
        daemon.stop()
        subscriber.stop()
        shoe.close()
    received = subscriber.sorted_events()
    assert [e["seq"] for e in received] == list(range(1, received[-1]["seq"] + 1))
    [cleared] = [e for e in received if e["kind"] == "alert_cleared"]
    assert cleared["data"]["alert_id"] == alert["data"]["alert_id"]
    assert {e["kind"] for e in received if e["seq"] > alert["seq"]} >= CARD_KINDS - {"card_burned"}
    assert health["attestation"]["integrity_alert"] is None
    assert health["attestation"]["held_after_seq"] is None
    assert contract_violations(subscriber.payloads) == []


@pytest.mark.mosquitto
def test_a_file_changed_before_start_fails_the_start_check_and_a_restart_keeps_the_hold(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    daemon, subscriber, shoe, steps = _daemon(tmp_path, mosquitto, hands=1)
    (tmp_path / "installed/opt/pkg/lib/extra.py").write_text("")
    (tmp_path / "installed/opt/pkg/README").unlink()
    try:
        daemon.start()
        health = _health_caught_up(daemon, subscriber)
        assert health["startup"]["failed"] == ["attestation"]
        assert health["startup"]["stage"] == "done"
        assert health["attestation"]["status"] == "failed"
        assert health["attestation"]["problems"] == [
            f"missing: {tmp_path}/installed/opt/pkg/README",
            f"extra: {tmp_path}/installed/opt/pkg/lib/extra.py",
        ]
        refused: list[str] = []
        play(steps, shoe, subscriber, refused)
        _health_caught_up(daemon, subscriber)
    finally:
        daemon.stop()
    assert [e["data"]["code"] for e in subscriber.events] == ["integrity_failed"]
    alert = subscriber.events[0]
    # the files are put back, but only a supervisor's attest ends the alert: a restart holds again
    (tmp_path / "installed/opt/pkg/lib/extra.py").unlink()
    (tmp_path / "installed/opt/pkg/README").write_text("the package\n")
    again = Daemon(daemon.loaded)
    try:
        restarted = time.time()
        again.start()
        health = _health_caught_up(again, subscriber, since=restarted)
        assert health["attestation"]["status"] == "passed"
        assert health["attestation"]["integrity_alert"] == alert["data"]["alert_id"]
        assert health["attestation"]["held_after_seq"] == alert["seq"]
        assert [e["seq"] for e in subscriber.events] == [alert["seq"]]
        assert subscriber.sender.send("attest")["status"] == "accepted"
        assert again.journal is not None
        last = again.journal.last_seq()
        assert subscriber.wait_for(lambda s: {e["seq"] for e in s.events} >= set(range(1, last + 1)), 30)
    finally:
        again.stop()
        subscriber.stop()
        shoe.close()
    assert contract_violations(subscriber.payloads) == []
