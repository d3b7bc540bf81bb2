"""Sites as configuration: ``make-pki.sh site`` adds a site in one step (bridge account,
its central ACL entry, its certificates, its site.conf), and two sites made so bridge to a
central broker over TLS with client certificates: a table at each site (TLS, its own
certificate) publishes signed events, ``baccarat-edge consume`` on the central broker (TLS,
the game server's certificate) writes each once, and its acknowledgements cross the bridges
back to the tables."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.mqtt.secrets import SecretSource
from daemon.mqtt.settings import TlsSettings
from daemon.mqtt.tls import tls_context
from tests.conftest import REPO_ROOT
from tests.fleet.bridged import wait_until
from tests.fleet.sites import add_site, make_pki, start_central, start_site_broker
from tests.fleet.synthetic import SyntheticTable
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

SITES = {"site-a": "A1", "site-b": "B1"}


class TlsTable:
    """A table's connection to its site broker: its certificate, its signed events, its acks."""

    def __init__(self, pki: Path, site: MosquittoBroker, table: SyntheticTable) -> None:
        self.table = table
        self.acked = 0
        self.lock = threading.Lock()
        cn = table.table_id
        tls = TlsSettings(ca_file=pki / "ca.crt", cert_file=pki / f"{cn}.crt", key_file=pki / f"{cn}.key")
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"edge-{cn}", protocol=mqtt.MQTTv5)
        self.client.tls_set_context(tls_context(tls))
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", site.port)
        self.client.subscribe(f"baccarat/v1/{cn}/ack", qos=1)
        self.client.loop_start()

    def _on_message(self, _c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.acked = max(self.acked, int(json.loads(message.payload)["seq"]))

    def deal(self, cards: int) -> None:
        for _ in range(cards):
            for topic, payload, retain in self.table.deal_card(time.time()):
                self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_make_pki_site_is_one_step_and_idempotent(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", "game-server")
    acl = tmp_path / "central-acl"
    acl.write_text((REPO_ROOT / "config/mosquitto/central-acl").read_text())
    said = add_site(pki, "site-b", 8883, acl)
    assert "bridge-site-b added" in said
    conf = (pki / "site-site-b" / "site.conf").read_text()
    assert "remote_clientid bridge-site-b\n" in conf
    assert "bridge_certfile /etc/mosquitto/pki/bridge-site-b.crt" in conf
    assert "address 127.0.0.1:8883\n" in conf
    assert "site-a" not in conf
    for name in ("site-broker.crt", "site-broker.key", "bridge-site-b.crt", "bridge-site-b.key", "ca.crt"):
        assert (pki / "site-site-b" / name).stat().st_size > 0
    subject = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-in", str(pki / "site-site-b" / "bridge-site-b.crt")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "CN = bridge-site-b" in subject or "CN=bridge-site-b" in subject
    before = acl.read_text()
    assert before.count("user bridge-site-b\n") == 1
    assert "already grants" in add_site(pki, "site-b", 8883, acl)
    assert acl.read_text() == before
    refused = subprocess.run(
        [
            "bash",
            str(REPO_ROOT / "config/mosquitto/make-pki.sh"),
            "site",
            str(pki),
            "bad site",
            "h",
            "c:1",
            str(acl),
        ],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert "letters, digits" in refused.stderr


def test_two_sites_bridge_over_tls_and_the_group_consumes_each_event_once(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", "game-server", *SITES.values())
    central, acl = start_central(tmp_path / "central", pki)
    sites: list[MosquittoBroker] = []
    tables: list[TlsTable] = []
    proc: subprocess.Popen[bytes] | None = None
    try:
        for site in SITES:
            add_site(pki, site, central.port, acl)
        central.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]  # reread the ACL
        keys = tmp_path / "events-keys"
        keys.mkdir()
        for site, table_id in SITES.items():
            key_file = write_secret(keys / f"{table_id}.key", f"events-key-of-{table_id}-long-enough\n")
            sites.append(start_site_broker(tmp_path / site, pki, site))
            simulated = SyntheticTable(table_id, key=SecretSource(file=key_file).load())
            tables.append(TlsTable(pki, sites[-1], simulated))
        (tmp_path / "tables.txt").write_text("\n".join(SITES.values()) + "\n")
        gs_key = write_secret(tmp_path / "gs.key", "the game server's key, long enough\n")
        output = tmp_path / "events.jsonl"
        command = [
            sys.executable,
            "-m",
            "daemon.cli",
            "consume",
            "--broker",
            f"mqtts://127.0.0.1:{central.port}",
        ]
        command += ["--ca-file", str(pki / "ca.crt"), "--cert-file", str(pki / "game-server.crt")]
        command += ["--key-file", str(pki / "game-server.key"), "--shard", "0/1"]
        command += ["--tables", str(tmp_path / "tables.txt"), "--events-keys", str(keys)]
        command += ["--key-id", "gs-1", "--command-key-file", str(gs_key)]
        command += ["--checkpoint-dir", str(tmp_path / "checkpoints"), "--output", str(output)]
        proc = subprocess.Popen(command, cwd=REPO_ROOT, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        # subscribed (its first session): from now on the central broker keeps its events
        assert b"consume: shard 0/1" in proc.stderr.readline()
        for table in tables:
            table.deal(12)  # 3 rounds: 24 events each
        wait_until(
            lambda: all(t.acked == t.table.seq == 24 for t in tables), 60, "events consumed and acknowledged"
        )
    finally:
        report = ""
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            report = proc.communicate(timeout=30)[1].decode()
        for table in tables:
            table.close()
        for broker in sites:
            broker.stop()
        central.stop()
    assert proc.returncode == 0, report
    seqs: dict[str, list[int]] = {}
    for line in output.read_text().splitlines():
        event = json.loads(line)
        seqs.setdefault(event["table_id"], []).append(event["seq"])
    assert seqs == {"A1": list(range(1, 25)), "B1": list(range(1, 25))}
    assert "48 events handed on" in report
