"""The Prometheus side: the live exporter's scrapes pass ``promtool check metrics`` and follow
the tables; the example alert rules pass ``promtool check rules`` and their unit tests."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from daemon.fleet.collect import LiveFleet
from daemon.fleet.exporter import MetricsServer, parse_address
from daemon.fleet.tables import Thresholds
from daemon.mqtt.client_options import ClientOptions
from tests.conftest import REPO_ROOT
from tests.fleet.promtool import promtool_check_metrics, promtool_run
from tests.fleet.synthetic import SyntheticTable, publish_retained, table_messages
from tests.support.broker import MosquittoBroker, free_port

pytestmark = pytest.mark.mosquitto

RULES = REPO_ROOT / "config" / "prometheus" / "baccarat-edge-rules.yml"


def scrape(port: int, path: str = "/metrics") -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def wait_for(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_rules_pass_promtool_check_and_unit_tests() -> None:
    assert "SUCCESS: 7 rules found" in promtool_run("check", "rules", RULES)
    assert "SUCCESS" in promtool_run("test", "rules", Path(__file__).parent / "rules_test.yml")


def test_live_exporter_follows_the_tables(mosquitto: MosquittoBroker) -> None:
    now = time.time()
    tables = [SyntheticTable(f"T{n}", last_read_at=now - 3) for n in range(3)]
    tables[1].server_ack = {"enabled": True, "seq": 9, "lag_events": 3, "lag_s": 4.25}
    publish_retained(mosquitto.port, [m for t in tables for m in table_messages(t, now)])
    live = LiveFleet(
        ClientOptions(
            host="127.0.0.1",
            port=mosquitto.port,
            tls=None,
            username=None,
            password=None,
            mqtt5=True,
            table="",
            events_key=None,
        )
    )
    live.start()
    server = MetricsServer(live, ("127.0.0.1", 0), Thresholds())
    server.start()
    try:
        wait_for(lambda: len(live.fleet) == 3 and live.messages >= 9)
        code, content_type, text = scrape(server.port)
        assert code == 200
        assert content_type.startswith("text/plain; version=0.0.4")
        promtool_check_metrics(text)
        assert 'baccarat_table_up{table="T0"} 1' in text
        assert 'baccarat_table_server_ack_lag_seconds{table="T1"} 4.25' in text
        assert 'baccarat_table_server_ack_lag_seconds{table="T0"}' not in text  # older table: no sample
        assert "baccarat_fleet_tables 3" in text
        # a table goes offline (its Last Will): the next scrape says so
        tables[2].online = False
        publish_retained(mosquitto.port, [("baccarat/v1/T2/status", tables[2].status(time.time()))])
        wait_for(lambda: 'baccarat_table_up{table="T2"} 0' in scrape(server.port)[2])
        # a hostile payload replaces a valid one: shown as invalid, the exporter goes on
        publish_retained(mosquitto.port, [("baccarat/v1/T0/state", b"{not json")])
        wait_for(lambda: 'baccarat_table_payload_valid{table="T0",topic="state"} 0' in scrape(server.port)[2])
        promtool_check_metrics(scrape(server.port)[2])
        assert scrape(server.port, "/healthz")[0] == 200
        assert scrape(server.port, "/nothing")[0] == 404
        # the broker goes away: /healthz says so and the exporter still answers scrapes
        mosquitto.stop()
        wait_for(lambda: scrape(server.port, "/healthz")[0] == 503)
        code, _type, text = scrape(server.port)
        assert code == 200
        assert "baccarat_fleet_broker_connected 0" in text
    finally:
        server.stop()
        live.stop()


def test_serve_metrics_command_runs_as_an_exporter(mosquitto: MosquittoBroker) -> None:
    publish_retained(mosquitto.port, table_messages(SyntheticTable("T9"), time.time()))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "fleet",
            "--broker",
            f"mqtt://127.0.0.1:{mosquitto.port}",
            "--serve-metrics",
            f"127.0.0.1:{port}",
        ],
        stderr=subprocess.PIPE,
    )
    try:

        def served() -> bool:
            try:
                return 'baccarat_table_up{table="T9"} 1' in scrape(port)[2]
            except OSError:
                return False

        wait_for(served, timeout=30)
        promtool_check_metrics(scrape(port)[2])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:9108", ("127.0.0.1", 9108)), (":9108", ("127.0.0.1", 9108)), ("[::1]:80", ("::1", 80))],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["9108", "host:", "host:http", "host:70000"])
def test_parse_address_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address(text)


def test_an_empty_broker_is_not_an_all_clear(
    mosquitto: MosquittoBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    from daemon.cli import main

    assert main(["fleet", "--broker", f"mqtt://127.0.0.1:{mosquitto.port}"]) == 1
    assert "no table on this broker" in capsys.readouterr().err


def test_the_exporter_serves_while_the_broker_is_down_and_connects_when_it_comes(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")  # its port: nothing listens there yet
    port = free_port()
    command = [sys.executable, "-m", "daemon.cli", "fleet", "--broker", f"mqtt://127.0.0.1:{broker.port}"]
    proc = subprocess.Popen(
        [*command, "--serve-metrics", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE,
    )
    try:

        def answers(path: str) -> tuple[int, str, str] | None:
            try:
                return scrape(port, path)
            except OSError:
                return None

        wait_for(lambda: answers("/metrics") is not None, timeout=30)
        assert "baccarat_fleet_broker_connected 0" in scrape(port)[2]
        assert scrape(port, "/healthz")[0] == 503
        assert proc.poll() is None
        broker.start()
        publish_retained(broker.port, table_messages(SyntheticTable("T9"), time.time()))
        wait_for(lambda: 'baccarat_table_up{table="T9"} 1' in scrape(port)[2], timeout=60)
        assert "baccarat_fleet_broker_connected 1" in scrape(port)[2]
        assert scrape(port, "/healthz")[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        broker.stop()
        assert proc.stderr is not None
        said = proc.stderr.read().decode()
        proc.stderr.close()
    assert "retrying; serving meanwhile" in said
