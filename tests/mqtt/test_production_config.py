"""The shipped config/mosquitto/mosquitto.conf starts a real mosquitto (paths pointed at a
generated PKI and a temporary store) and a table's daemon publishes through it."""

from __future__ import annotations

import getpass
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from daemon.journal import Journal, JournalSettings
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.settings import BrokerSettings, DeliverySettings, TlsSettings
from tests.conftest import REPO_ROOT
from tests.mqtt.conftest import card_event
from tests.support.broker import free_port, mosquitto_binary

pytestmark = pytest.mark.mosquitto

CONFIG = REPO_ROOT / "config" / "mosquitto"


def localised_config(tmp_path: Path, pki: Path, port: int) -> Path:
    text = (CONFIG / "mosquitto.conf").read_text()
    store = tmp_path / "store"
    store.mkdir()
    replacements = {
        "/etc/mosquitto/pki/": f"{pki}/",
        "/etc/mosquitto/acl": str(CONFIG / "acl"),
        "/var/lib/mosquitto/": f"{store}/",
        "log_dest syslog": f"log_dest file {tmp_path / 'mosquitto.log'}",
    }
    for old, new in replacements.items():
        assert old in text, f"{old} no longer in the production config"
        text = text.replace(old, new)
    text, count = re.subn(r"^listener 8883$", f"listener {port} 127.0.0.1", text, flags=re.M)
    assert count == 1
    text += f"\nuser {getpass.getuser()}\n"
    path = tmp_path / "mosquitto.conf"
    path.write_text(text)
    return path


def test_production_config_runs_and_serves_a_table(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    subprocess.run(
        ["bash", str(CONFIG / "make-pki.sh"), str(pki), "127.0.0.1", "T1", "game-server"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    conf = localised_config(tmp_path, pki, port)
    proc = subprocess.Popen([mosquitto_binary(), "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "production config did not listen"
                time.sleep(0.05)
        journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
        journal.append([], [card_event(n) for n in range(5)])
        settings = BrokerSettings(
            host="127.0.0.1",
            port=port,
            tls=TlsSettings(ca_file=pki / "ca.crt", cert_file=pki / "T1.crt", key_file=pki / "T1.key"),
            delivery=DeliverySettings(backoff_initial_s=0.05, backoff_max_s=0.2),
        )
        publisher = Publisher(settings, "T1", journal)
        publisher.start()
        try:
            deadline = time.monotonic() + 20
            while journal.pending():
                assert time.monotonic() < deadline, f"not delivered: {publisher.health()['last_error']}"
                time.sleep(0.02)
        finally:
            publisher.stop()
            journal.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()
