"""``run`` starts with insecure broker settings (a lab bench may need them) but never silently:
each setting check-config would refuse is logged at start-up and shown in health."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import structlog

from daemon.service.config import load_config
from daemon.service.logging import reset_logging
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.service.harness import TABLE_ID, dealt_shoe, write_config
from tests.support.secrets import write_secret


def _daemon(tmp_path: Path, shoe: PtyDevice, broker: dict[str, object]) -> Daemon:
    deal, _plan, _steps = dealt_shoe(seed=4, max_hands=1)
    config, _ek, _ck = write_config(tmp_path, shoe.path, 1, deal)
    data = json.loads(config.read_text())
    data["broker"].update(broker)
    data["service"]["shutdown_timeout_s"] = 1
    config.write_text(json.dumps(data, indent=1))
    return Daemon(load_config(config, environ={}), notifier=SystemdNotifier({}), config_path=config)


def _start_and_capture(daemon: Daemon) -> list[MutableMapping[str, Any]]:
    with structlog.testing.capture_logs() as logs:
        daemon.start()
    return logs


def test_run_warns_at_start_about_each_insecure_broker_setting(tmp_path: Path) -> None:
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    # plain MQTT to a remote host (TEST-NET-1, never answers), no login, no events key
    daemon = _daemon(tmp_path, shoe, {"host": "192.0.2.1", "signing": {}})
    try:
        logs = _start_and_capture(daemon)
        warned = [str(line["problem"]) for line in logs if line["event"] == "insecure_broker_setting"]
        assert len(warned) == 3, warned
        assert any("tls.enabled is false with the remote host '192.0.2.1'" in w for w in warned)
        assert any("no broker.auth" in w for w in warned)
        assert any("no broker.signing.events_key" in w for w in warned)
        assert all(
            line["log_level"] == "warning" for line in logs if line["event"] == "insecure_broker_setting"
        )
        assert daemon.health()["engine"]["insecure_broker_settings"] == warned
        assert daemon.publisher.health()["devices"]["engine"]["insecure_broker_settings"] == warned
    finally:
        daemon.stop()
        shoe.close()
        reset_logging()


def test_run_is_quiet_about_a_secure_loopback_broker(tmp_path: Path) -> None:
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    password = tmp_path / "broker.password"
    write_secret(password, "a password\n")
    daemon = _daemon(
        tmp_path,
        shoe,
        {"host": "127.0.0.1", "auth": {"username": TABLE_ID, "password": {"file": str(password)}}},
    )
    try:
        logs = _start_and_capture(daemon)
        assert [line for line in logs if line["event"] == "insecure_broker_setting"] == []
        assert daemon.health()["engine"]["insecure_broker_settings"] == []
    finally:
        daemon.stop()
        shoe.close()
        reset_logging()
