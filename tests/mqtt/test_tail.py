"""``baccarat-edge tail`` as a subprocess against a real mosquitto and the real publisher."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.journal import Journal
from daemon.mqtt.publisher import Publisher
from tests.conftest import REPO_ROOT
from tests.mqtt.conftest import TABLE, card_event, make_settings
from tests.mqtt.support import Subscriber, topic_count
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto


def start_tail(port: int, keys: dict[str, Path], *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "tail",
            "--table",
            TABLE,
            "--broker",
            f"mqtt://127.0.0.1:{port}",
            "--events-key-file",
            str(keys["events"]),
            "--json",
            *extra,
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # events are not retained: wait until the tail listens
    assert first.startswith("tail: subscribed to"), first
    return proc


def test_tail_prints_verified_events_once_and_reports_gaps_and_forgeries(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    probe = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/events"])
    tail = start_tail(mosquitto.port, keys, "--count", "13", "--timeout", "60")
    journal.append([], [card_event(n) for n in range(12)])
    make_publisher(make_settings(mosquitto.port, keys), TABLE, journal)
    messages = probe.wait_for(topic_count("events", 12))

    injector = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="injector")
    injector.connect("127.0.0.1", mosquitto.port)
    injector.loop_start()
    topic = f"baccarat/v1/{TABLE}/events"
    original = json.loads(messages[3].payload)
    injector.publish(topic, messages[3].payload, qos=1).wait_for_publish(5)  # a redelivery
    forged = {**original, "data": {"card": "As"}}  # tampered, old signature kept
    injector.publish(topic, json.dumps(forged), qos=1).wait_for_publish(5)
    injector.disconnect()
    injector.loop_stop()
    journal.append([], [card_event(99)])  # seq 13 through the publisher as usual

    out, err = tail.communicate(timeout=30)
    probe.close()
    printed = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in printed] == list(range(1, 14))
    assert "REJECTED event: signature does not verify" in err
    assert "13 events" in err
    assert "1 duplicates dropped" in err
    assert "1 rejected" in err
    assert tail.returncode == 1  # a forged event was seen


def test_tail_reports_a_gap_and_exits_clean_only_without_one(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    tail = start_tail(mosquitto.port, keys, "--count", "5", "--timeout", "60")
    events = journal.append([], [card_event(n) for n in range(6)])
    # Seq 2 vanishes before publishing (as if lost upstream): the tail must say so.
    journal.mark_delivered([events[1].seq])
    make_publisher(make_settings(mosquitto.port, keys), TABLE, journal)
    out, err = tail.communicate(timeout=30)
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [1, 3, 4, 5, 6]
    assert "GAP: missing seq 2" in err
    assert "unexplained gaps: 2" in err
    assert tail.returncode == 1


def test_tail_usage_errors(keys: dict[str, Path]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "tail", "--table", "a/b", "--broker", "mqtt://127.0.0.1:1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "not usable in a topic" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "tail", "--table", "T1", "--events-key-env", "NO_SUCH_VAR_X"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "NO_SUCH_VAR_X" in result.stderr
    short_key = keys["events"].parent / "short.key"
    write_secret(short_key, "0123456789abcde\n")
    result = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "tail", "--table", "T1", "--events-key-file", str(short_key)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert f"signing key from file {short_key} is 15 bytes; at least 16 are required" in result.stderr
    assert "0123456789abcde" not in result.stderr


def test_tail_human_output_with_all_topics(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "tail",
            "--table",
            TABLE,
            "--broker",
            f"127.0.0.1:{mosquitto.port}",
            "--events-key-file",
            str(keys["events"]),
            "--all",
            "--count",
            "3",
            "--timeout",
            "60",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("tail: subscribed to baccarat/v1/T1/#")
    journal.append([], [card_event(n) for n in range(3)])
    make_publisher(make_settings(mosquitto.port, keys), TABLE, journal)
    out, err = proc.communicate(timeout=60)
    lines = out.splitlines()
    assert any(line.startswith("[status]") and '"online"' in line for line in lines)
    events = [line for line in lines if " seq=" in line]
    assert len(events) == 3
    assert all("card_dealt [reader, signature verified]" in line for line in events)
    assert proc.returncode == 0
    assert "no unexplained gap" in err


def test_tail_with_a_checkpoint_acknowledges_and_resumes_where_it_stopped(
    mosquitto: MosquittoBroker, tmp_path: Path, journal: Journal, make_publisher: Callable[..., Publisher]
) -> None:
    from tests.mqtt.ack_support import ack_settings, key_files, wait_until

    files = key_files(tmp_path)
    keys = {"events": files["events"]}
    checkpoint = tmp_path / "checkpoint.sqlite3"
    consumer = ("--checkpoint", str(checkpoint), "--key-id", "gs-1", "--command-key-file", str(files["gs-1"]))
    tail = start_tail(mosquitto.port, keys, *consumer, "--count", "8", "--timeout", "60")
    journal.append([], [card_event(n) for n in range(8)])
    make_publisher(ack_settings(mosquitto.port, files), TABLE, journal)
    out, err = tail.communicate(timeout=60)
    assert tail.returncode == 0, err
    assert [json.loads(line)["seq"] for line in out.splitlines()] == list(range(1, 9))
    assert "8 events processed in order; position 8" in err
    wait_until(lambda: journal.server_ack().seq == 8, what="the acknowledgement it sent")
    # a second run resumes from the checkpoint: nothing printed twice
    journal.append([], [card_event(9)])
    tail = start_tail(mosquitto.port, keys, *consumer, "--count", "1", "--timeout", "60")
    out, err = tail.communicate(timeout=60)
    assert tail.returncode == 0, err
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [9]
