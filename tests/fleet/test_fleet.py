"""``baccarat-edge fleet`` against a real mosquitto holding 500 tables' retained topics."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.cli import main
from daemon.fleet.collect import Collected, LiveFleet, collect
from daemon.fleet.exporter import MetricsServer
from daemon.fleet.metrics import exposition
from daemon.fleet.render import render_table
from daemon.fleet.tables import Thresholds, worst_first
from daemon.mqtt.client_options import ClientOptions
from tests.fleet.promtool import promtool_check_metrics
from tests.fleet.synthetic import SyntheticTable, publish_retained, table_messages
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

TABLES = 500
STALE = ("--stale-after", "3600")
"""Health older than an hour is stale: the module's broker outlives the 60 s default."""
LIMITS = Thresholds(stale_after_s=3600)


def floor(now: float) -> tuple[list[SyntheticTable], list[tuple[str, bytes]]]:
    """500 tables: most healthy, a handful with each kind of trouble, and hostile payloads."""
    tables = [SyntheticTable(f"T{n:03d}", last_read_at=now - 5) for n in range(TABLES)]
    tables[7].online = False
    tables[11].alerts = ["reader_disconnected", "reader_error"]
    tables[11].disconnected = ["reader"]
    tables[23].backlog = 40
    tables[23].oldest_undelivered_age_s = 95.0
    tables[42].server_ack = {"enabled": True, "seq": 100, "lag_events": 12, "lag_s": 48.5}
    tables[43].server_ack = {"enabled": True, "seq": 300, "lag_events": 0, "lag_s": None}
    tables[44].alerts = ["no_shoe"]  # a warning
    tables[45].version = None  # an older table: no version, no digest
    tables[45].config_digest = None
    # T046 reports online, but its last health (and everything else) is two hours old: stale
    messages = [m for t in tables for m in table_messages(t, now if t.table_id != "T046" else now - 7200)]
    hostile = [
        ("baccarat/v1/T100/state", b"\xff\xfe not utf-8"),
        ("baccarat/v1/T101/health", b"[" * 100_000),
        ("baccarat/v1/T102/status", b'{"schema_version":1,"table_id":"T102","status":"online","ts":NaN}'),
        ("baccarat/v1/T103/status", b'{"schema_version":1,"table_id":"T999","status":"online","ts":1}'),
        ("baccarat/v1/T104/state", b'"just a string"'),
        ("baccarat/v1/T105/health", json.dumps({"schema_version": 1, "table_id": "T105"}).encode()),
        ("baccarat/v1/T106/status", b"x" * 1_100_000),
        ("baccarat/v1/T107/state", json.dumps({"a": [[[[[[[[[[[[]]]]]]]]]]]] * 3}).encode()),
    ]
    return tables, messages + hostile


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoBroker]:
    workdir: Path = tmp_path_factory.mktemp("fleet-broker")
    broker = MosquittoBroker(workdir)
    broker.start()
    now = time.time()
    _tables, messages = floor(now)
    publish_retained(broker.port, messages)
    yield broker
    broker.stop()


def options(port: int) -> ClientOptions:
    return ClientOptions(
        host="127.0.0.1",
        port=port,
        tls=None,
        username=None,
        password=None,
        mqtt5=True,
        table="",
        events_key=None,
    )


@pytest.fixture(scope="module")
def collected(broker: MosquittoBroker) -> Collected:
    """One gathering of the 500 tables, shared by the tests that only read it."""
    return collect(options(broker.port), quiet_s=0.5, timeout_s=60.0)


def test_collects_every_table_within_bounded_time(collected: Collected) -> None:
    assert len(collected.fleet) == TABLES
    assert collected.messages == TABLES * 3
    # bounded: the end of the burst ended the gathering, not the timeout (no timed assertion)
    assert collected.complete
    assert collected.seconds < 60.0


def test_json_lists_worst_first_with_every_figure(
    broker: MosquittoBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["fleet", "--broker", f"mqtt://127.0.0.1:{broker.port}", "--json", *STALE])
    out = capsys.readouterr().out
    assert rc == 1  # some tables are not ok
    doc = json.loads(out)
    rows = doc["table_summaries"]
    assert doc["tables"] == TABLES == len(rows)
    by_id = {r["table_id"]: r for r in rows}
    order = [r["table_id"] for r in rows]
    levels = [r["level"] for r in rows]
    assert levels == sorted(levels, key=["critical", "warning", "ok"].index)
    # every hostile payload is shown as invalid, with the topic and why
    for table in ("T100", "T101", "T102", "T103", "T104", "T105", "T106", "T107"):
        assert by_id[table]["level"] == "critical", table
        assert by_id[table]["invalid"], table
    assert "not JSON" in by_id["T100"]["invalid"]["state"]
    assert "nested" in by_id["T101"]["invalid"]["health"]
    assert "NaN" in by_id["T102"]["invalid"]["status"]
    assert "T999" in by_id["T103"]["invalid"]["status"]
    assert "not a JSON object" in by_id["T104"]["invalid"]["state"]
    assert "required" in by_id["T105"]["invalid"]["health"]
    assert "limit" in by_id["T106"]["invalid"]["status"]
    # the table with the reader down and a critical alert comes before warnings and ok tables
    t11 = by_id["T011"]
    assert t11["alerts"] == {"critical": 1, "warning": 1}
    assert t11["readers_disconnected"] == ["reader"]
    assert order.index("T011") < order.index("T044") < order.index("T000")
    assert by_id["T007"]["status"] == "offline"
    assert by_id["T007"]["level"] == "critical"
    assert by_id["T023"]["backlog"] == 40
    assert by_id["T023"]["level"] == "warning"
    assert by_id["T042"]["ack"] == {"enabled": True, "seq": 100, "lag_events": 12, "lag_s": 48.5}
    assert by_id["T042"]["level"] == "warning"
    # ``delivery`` is an additive member: ignored (listed) by a contract that does not know it yet
    assert by_id["T042"]["ignored_fields"] in ({"health": ["delivery"]}, {})
    assert by_id["T043"]["ack"]["lag_events"] == 0
    assert by_id["T043"]["level"] == "ok"
    assert by_id["T045"]["version"] is None
    assert by_id["T045"]["level"] == "ok"
    assert by_id["T046"]["status"] == "stale"
    assert by_id["T046"]["level"] == "critical"
    healthy = by_id["T000"]
    assert healthy["level"] == "ok"
    assert healthy["status"] == "online"
    assert healthy["version"] == "0.1.0"
    assert healthy["config_digest"] == "ab" * 32
    assert healthy["variant"] == "standard"
    assert healthy["shoe_id"] == "S1"
    assert healthy["hand"] == 12
    assert healthy["ack"] is None  # an older table: no server acknowledgement reported
    assert 0 <= healthy["last_card_age_s"] < 300
    assert order[-1] == "T499"  # ok tables last, by id


def test_terminal_view(collected: Collected) -> None:
    now = time.time()
    out = render_table(worst_first(collected.fleet.records(), now, LIMITS), now, colour=False, limit=20)
    lines = out.splitlines()
    assert lines[0].startswith(f"{TABLES} tables: ")
    assert lines[1].split()[:3] == ["TABLE", "STATUS", "VERSION"]
    assert "... 480 more tables" in out
    assert "T011" in "\n".join(lines[2:22])
    assert "reader disconnected: reader" in out
    assert "\x1b" not in out  # hostile bytes and colours never reach the terminal


def test_metrics_pass_promtool(collected: Collected) -> None:
    summaries = worst_first(collected.fleet.records(), time.time(), LIMITS)
    text = exposition(summaries, collected.messages, True, collected.fleet.ignored_topics)
    promtool_check_metrics(text)
    assert text.count("baccarat_table_up{") == TABLES
    assert 'baccarat_table_up{table="T007"} 0' in text
    assert 'baccarat_table_server_ack_lag_events{table="T042"} 12' in text
    assert 'baccarat_table_open_alerts{table="T011",severity="critical"} 1' in text
    assert 'baccarat_table_payload_valid{table="T100",topic="state"} 0' in text
    assert 'baccarat_table_readers_disconnected{table="T011"} 1' in text


def test_summaries_are_stable_across_collections(broker: MosquittoBroker, collected: Collected) -> None:
    again = collect(options(broker.port)).fleet
    now = time.time()
    assert [s.table_id for s in worst_first(collected.fleet.records(), now, LIMITS)] == [
        s.table_id for s in worst_first(again.records(), now, LIMITS)
    ]


def test_unreachable_broker_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.broker import free_port

    rc = main(["fleet", "--broker", f"mqtt://127.0.0.1:{free_port()}", "--timeout", "2"])
    assert rc == 2
    assert "cannot connect" in capsys.readouterr().err


def test_collects_on_the_quiet_period_when_the_acl_refuses_the_marker(tmp_path: Path) -> None:
    acl = tmp_path / "acl"
    acl.write_text("topic readwrite baccarat/v1/#\n")  # anonymous: no access to the marker topic
    with MosquittoBroker(tmp_path / "broker", extra_config=f"acl_file {acl}") as broker:
        tables = [SyntheticTable(f"Q{n}") for n in range(20)]
        publish_retained(broker.port, [m for t in tables for m in table_messages(t, time.time())])
        got = collect(options(broker.port), quiet_s=1.0, timeout_s=60.0)
    assert got.complete
    assert len(got.fleet) == 20
    assert got.messages == 60


def test_exporter_serves_the_500_tables(broker: MosquittoBroker) -> None:
    live = LiveFleet(options(broker.port))
    live.start()
    server = MetricsServer(live, ("127.0.0.1", 0), LIMITS)
    server.start()
    try:
        deadline = time.monotonic() + 60
        while live.messages < TABLES * 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=30) as response:
            text = response.read().decode()
    finally:
        server.stop()
        live.stop()
    promtool_check_metrics(text)
    assert text.count("baccarat_table_up{") == TABLES
    assert f"baccarat_fleet_tables {TABLES}" in text
    assert 'baccarat_table_up{table="T046"} 0' in text  # stale
    assert 'baccarat_table_server_ack_lag_seconds{table="T042"} 48.5' in text
