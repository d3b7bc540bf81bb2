"""``baccarat-edge consume``: one group member as a command. End to end against a real
mosquitto and real tables (journal, publisher, the game server's acknowledgement on), the
command run as its own process and SIGKILLed while the tables deal: every event in the
output files once, in seq order per table; and the ledger's crash points one by one."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.commands.consume import parse_shard, read_tables
from daemon.fleet.ledger import FileSink, Ledger, LedgerError
from daemon.fleet.shards import shard_of
from tests.conftest import REPO_ROOT
from tests.fleet.bridged import Table, make_table, wait_until
from tests.fleet.test_exactly_once import Dealer
from tests.support.broker import MosquittoBroker, free_port
from tests.support.secrets import write_secret

TABLES = ["T0", "T1", "T2", "T3"]


@pytest.fixture
def floor(tmp_path: Path) -> Iterator[tuple[MosquittoBroker, list[Table], Path]]:
    broker = MosquittoBroker(tmp_path / "broker", persistent=True).start()
    gs_key = write_secret(tmp_path / "gs-1.key", "the game server's key, long enough\n")
    keys = tmp_path / "events-keys"
    keys.mkdir()
    tables = [make_table(tmp_path / t, t, broker.port, gs_key) for t in TABLES]
    for table in tables:
        write_secret(keys / f"{table.table_id}.key", (tmp_path / table.table_id / "events.key").read_text())
    (tmp_path / "tables.txt").write_text("# the floor\n" + "\n".join(TABLES) + "\n")
    try:
        yield broker, tables, gs_key
    finally:
        for table in tables:
            if table.publisher is not None:
                table.publisher.stop(timeout=2.0)
            table.journal.close()
        broker.stop()


def consume(tmp_path: Path, port: int, gs_key: Path, shard: str, *sink: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "daemon.cli", "consume", "--broker", f"mqtt://127.0.0.1:{port}"]
    command += ["--shard", shard, "--tables", str(tmp_path / "tables.txt")]
    command += ["--events-keys", str(tmp_path / "events-keys"), "--key-id", "gs-1"]
    command += ["--command-key-file", str(gs_key)]
    command += ["--checkpoint-dir", str(tmp_path / f"shard-{shard.replace('/', '-of-')}"), *sink]
    return subprocess.Popen(command, cwd=REPO_ROOT, stderr=subprocess.PIPE)


def lines(*paths: Path) -> dict[str, list[int]]:
    """Each table's seqs as the output files hold them, in file order."""
    seqs: dict[str, list[int]] = {}
    for path in paths:
        if path.exists():
            # the last line may be half written while the command or the member writes it
            for line in path.read_text().split("\n")[:-1]:
                event = json.loads(line)
                seqs.setdefault(event["table_id"], []).append(event["seq"])
    return seqs


def stop(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    return err.decode()


@pytest.mark.mosquitto
def test_consume_to_files_through_kills_writes_each_event_once_in_order(
    tmp_path: Path, floor: tuple[MosquittoBroker, list[Table], Path]
) -> None:
    broker, tables, gs_key = floor
    outputs = [tmp_path / "shard0.jsonl", tmp_path / "shard1.jsonl"]

    def members() -> list[subprocess.Popen[bytes]]:
        return [
            consume(tmp_path, broker.port, gs_key, f"{k}/2", "--output", str(outputs[k])) for k in range(2)
        ]

    with Dealer(tables, every_s=0.03):
        for wait_s in (1.0, 1.7, 0.6, 2.3):
            running = members()
            time.sleep(wait_s)
            for proc in running:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
    running = members()
    try:
        wait_until(
            lambda: all(
                t.journal.server_ack().seq == t.journal.last_seq() <= len(lines(*outputs).get(t.table_id, []))
                for t in tables
            ),
            120,
            "every event in the files and acknowledged",
        )
    finally:
        reports = [stop(proc) for proc in running]
    assert all("0 rejected, 0 conflicts, 0 rollbacks" in r for r in reports), reports
    seqs = lines(*outputs)
    for table in tables:
        assert table.dealt > 40
        assert seqs[table.table_id] == list(range(1, table.dealt + 1)), table.table_id
        # a table's events are in its shard's file only
        assert table.table_id in lines(outputs[shard_of(table.table_id, 2)])


@pytest.mark.mosquitto
def test_consume_to_a_command_through_kills_applies_each_event_once_in_order(
    tmp_path: Path, floor: tuple[MosquittoBroker, list[Table], Path]
) -> None:
    broker, tables, gs_key = floor
    applied = tmp_path / "applied.jsonl"
    command = f"{shlex.quote(sys.executable)} -m tests.fleet.apply_events {shlex.quote(str(applied))}"
    with Dealer(tables, every_s=0.03):
        for wait_s in (1.3, 0.8):
            proc = consume(tmp_path, broker.port, gs_key, "0/1", "--exec", command)
            time.sleep(wait_s)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
    proc = consume(tmp_path, broker.port, gs_key, "0/1", "--exec", command)
    try:
        wait_until(
            lambda: all(
                t.journal.server_ack().seq == t.journal.last_seq() <= len(lines(applied).get(t.table_id, []))
                for t in tables
            ),
            120,
            "every event applied and acknowledged",
        )
    finally:
        report = stop(proc)
    assert "0 rejected, 0 conflicts, 0 rollbacks" in report
    for table in tables:
        assert table.dealt > 20
        assert lines(applied)[table.table_id] == list(range(1, table.dealt + 1)), table.table_id


@pytest.mark.mosquitto
def test_consume_stops_and_fails_when_its_command_ends(
    tmp_path: Path, floor: tuple[MosquittoBroker, list[Table], Path]
) -> None:
    broker, tables, gs_key = floor
    proc = consume(tmp_path, broker.port, gs_key, "0/1", "--exec", "true")
    for table in tables:
        table.deal(5)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "consume: stopped:" in err.decode()
    # nothing was acknowledged past what the command may have missed
    assert all(t.journal.server_ack().seq == 0 for t in tables)


def event(table: str, seq: int) -> dict[str, object]:
    return {"table_id": table, "seq": seq, "event_id": f"{table}-{seq}", "kind": "card_dealt"}


def test_ledger_cuts_what_a_dead_run_wrote_and_skips_what_it_committed(tmp_path: Path) -> None:
    out, db = tmp_path / "out.jsonl", tmp_path / "ledger.sqlite3"
    ledger = Ledger(db, FileSink(out))
    for seq in (1, 2):
        assert ledger.take("A", event("A", seq))
    ledger.commit()
    committed = out.read_bytes()
    # killed after the lines reached the file, before the ledger committed them
    assert ledger.take("A", event("A", 3))
    ledger.sink.flush()
    assert out.read_bytes() != committed
    ledger = Ledger(db, FileSink(out))  # the next run
    assert out.read_bytes() == committed  # the uncommitted line is cut
    # the checkpoint had not committed either: 2 and 3 come again; 2 is a repeat
    assert not ledger.take("A", event("A", 2))
    assert ledger.take("A", event("A", 3))
    ledger.commit()
    # killed after the ledger committed, before the checkpoint did: 3 comes again, skipped
    ledger = Ledger(db, FileSink(out))
    assert not ledger.take("A", event("A", 3))
    assert ledger.take("B", event("B", 1))
    ledger.commit()
    # a table whose journal was rolled back to seq 1 deals seq 2 again, as another event
    rolled_back = {**event("A", 2), "event_id": "A-2-after-the-rollback"}
    assert ledger.take("A", rolled_back)
    assert not ledger.take("A", rolled_back)
    ledger.commit()
    ledger.close()
    assert lines(out) == {"A": [1, 2, 3, 2], "B": [1]}


def test_ledger_refuses_a_file_it_did_not_write_or_one_cut_shorter(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"someone": "else"}\n')
    with pytest.raises(LedgerError, match="never wrote"):
        Ledger(tmp_path / "a.sqlite3", FileSink(out))
    out.unlink()
    ledger = Ledger(tmp_path / "b.sqlite3", FileSink(out))
    ledger.take("A", event("A", 1))
    ledger.commit()
    ledger.close()
    out.write_text("")
    with pytest.raises(LedgerError, match="shorter"):
        Ledger(tmp_path / "b.sqlite3", FileSink(out))
    with pytest.raises(LedgerError, match="belongs to"):
        Ledger(tmp_path / "b.sqlite3", FileSink(tmp_path / "other.jsonl"))


def test_shard_and_tables_arguments_are_validated(tmp_path: Path) -> None:
    assert parse_shard("2/3") == (2, 3)
    for bad in ("3/3", "1", "a/2", "-1/2", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)
    listing = tmp_path / "tables.txt"
    listing.write_text("T01  # first\n\nT02\nbad/id\n")
    with pytest.raises(ValueError, match=r"tables.txt:4"):
        read_tables(listing)
    listing.write_text("# nothing\n")
    with pytest.raises(ValueError, match="no table id"):
        read_tables(listing)
    listing.write_text("T01  # first\n\nT02\n")
    assert read_tables(listing) == ["T01", "T02"]


def test_consume_exit_codes_for_usage_and_an_unreachable_broker(tmp_path: Path) -> None:
    (tmp_path / "events-keys").mkdir()
    (tmp_path / "tables.txt").write_text("T0\n")
    write_secret(tmp_path / "events-keys" / "T0.key", "events-key-of-T0-long-enough\n")
    gs_key = write_secret(tmp_path / "gs-1.key", "the game server's key, long enough\n")
    nobody = free_port()  # nothing listens there

    def exit_code(*sink: str, shard: str = "0/1") -> tuple[int, str]:
        proc = consume(tmp_path, nobody, gs_key, shard, *sink)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err.decode()

    assert exit_code("--output", str(tmp_path / "out.jsonl"), shard="1/1")[0] == 2
    code, said = exit_code("--exec", "")
    assert (code, "--exec: no command" in said) == (2, True)
    code, said = exit_code("--output", str(tmp_path / "out.jsonl"))
    assert (code, "cannot reach the broker" in said) == (3, True)
