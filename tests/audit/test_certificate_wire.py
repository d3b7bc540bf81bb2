"""The shoe certificate outside the engine: journaled, published signed to its retained topic
(a real mosquitto), and reported from the journal by ``baccarat-edge journal shoe-report``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from daemon.cli import main
from daemon.engine.events import Event, EventKind
from daemon.engine.squeeze import public_data, unsealed
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, verify
from daemon.simulation.golden import engine_events
from drivers.fixtures import load_fixture
from tests.audit.test_shoe_audit import count_remainder, deal_shoe, shuffled
from tests.engine.support import engine
from tests.mqtt.conftest import TABLE, make_settings
from tests.mqtt.support import Subscriber, validate_payload
from tests.support.broker import MosquittoBroker


def two_shoes() -> tuple[list[Event], list[str]]:
    """Shoe S1 dealt and counted short of one card, then shoe S2 dealt (not counted)."""
    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    events += count_remainder(eng, left[1:], at)
    more, _, _ = deal_shoe(eng, shuffled(1, seed=4), shoe_id="S2", at=at + 1000)
    return events + more, left


def test_the_last_certificate_is_retained_signed_for_a_late_subscriber(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    events_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    events, _ = two_shoes()
    journal.append([], events)
    publisher = make_publisher(make_settings(mosquitto.port, keys), TABLE, journal)
    publisher.notify()
    early = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/shoe_certificate"])
    early.wait_for(lambda msgs: len(msgs) >= 3)
    early.close()
    late = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/shoe_certificate"], protocol=mqtt.MQTTv311)
    (message,) = late.wait_for(lambda msgs: len(msgs) >= 1)
    late.close()
    assert message.retain
    body = validate_payload(message.topic, message.payload)
    assert verify(body, events_key, UNSIGNED_EVENT_FIELDS)
    assert (body["kind"], body["shoe_id"], body["data"]["stage"]) == ("shoe_certificate", "S2", "end")


def test_shoe_report_shows_a_shoe_from_the_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, left = two_shoes()
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), TABLE)
    try:
        journal.append([], events)
    finally:
        journal.close()

    assert main(["journal", "shoe-report", "S1", "--journal", str(path)]) == 0
    text = capsys.readouterr().out
    assert "certificate of shoe S1 (stage remainder" in text
    assert "accounted for 51 of 52" in text
    assert f"MISSING {left[0]} x1" in text
    assert "irregular-shoe detectors: not run (no simulated null table for this many decks)" in text

    assert main(["journal", "shoe-report", "--journal", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["shoe_id"], report["stage"], report["status"]) == ("S2", "end", "not_counted")
    last = [e for e in events if e.kind == EventKind.SHOE_CERTIFICATE][-1]
    assert report["certificate"] == last.data["certificate"]
    canonical = json.dumps(last.data["certificate"], sort_keys=True, separators=(",", ":"))
    assert report["digest"] == hashlib.sha256(canonical.encode()).hexdigest()

    assert main(["journal", "shoe-report", "S1", "--json", "--journal", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stages"] == ["end", "remainder"]
    assert report["certificate"]["missing"] == [{"card": left[0], "copies": 1}]


def test_shoe_report_names_an_unknown_shoe_and_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, _ = two_shoes()
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), TABLE)
    try:
        journal.append([], events)
    finally:
        journal.close()
    assert main(["journal", "shoe-report", "S9", "--journal", str(path)]) == 1
    err = capsys.readouterr().err
    assert "no certificate of shoe 'S9'" in err
    assert "it has: S1, S2" in err
    assert main(["journal", "shoe-report", "--journal", str(tmp_path / "none.sqlite3")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_shoe_report_finds_the_journal_from_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, _ = two_shoes()
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), TABLE)
    try:
        journal.append([], events)
    finally:
        journal.close()
    config = tmp_path / "table.yaml"
    config.write_text(
        f"table_id: {TABLE}\nstate_dir: {tmp_path}\njournal:\n  path: {path}\n"
        "readers:\n  - driver: ascii_lines\n    settings: {url: /dev/null}\n"
        "broker:\n  host: 127.0.0.1\n  tls: {enabled: false}\n",
        encoding="utf-8",
    )
    status = main(["journal", "shoe-report", "--config", str(config), "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert json.loads(captured.out)["shoe_id"] == "S2"
    assert main(["journal", "shoe-report", "--config", str(config), "--journal", str(path)]) == 2
    assert "not both" in capsys.readouterr().err


def test_shoe_report_shows_a_squeeze_tables_sealed_certificate_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a squeeze table the certificate's faces are sealed (never published); the journal keeps
    them and the report on the table PC shows them."""
    fixture = tmp_path / "squeeze.fixture.jsonl"
    source = Path(__file__).parents[2] / "hw-fixtures" / "ascii_lines-squeeze-clean.fixture.jsonl"
    step = {"supervisor": {"action": "new_shoe", "actor": "t", "args": {"shoe_id": "S2"}, "command_id": "n"}}
    fixture.write_text(source.read_text().rstrip("\n") + "\n" + json.dumps({**step, "t": 100.0}) + "\n")
    raw, _ = engine_events(load_fixture(fixture))
    events = [Event.from_dict(e) for e in raw]
    (certificate,) = [e for e in events if e.kind == EventKind.SHOE_CERTIFICATE]
    assert "certificate" not in public_data(certificate.data)
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), TABLE)
    try:
        journal.append([], events)
    finally:
        journal.close()

    capsys.readouterr()  # (the replay's log lines)
    assert main(["journal", "shoe-report", "--journal", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["certificate"] == unsealed(certificate.data)["certificate"]
    assert report["certificate"]["totals"]["seen"] == 32  # every card dealt, burns included
