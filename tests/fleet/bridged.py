"""The bridged topology of config/mosquitto/site.conf and central.conf, with real brokers:
tables (real publishers and journals) -> site mosquitto -> bridge -> central mosquitto ->
the sharded consumer group. The blocks of the example configs marked "tested" are used as
they are; only the address, the bridge's client ids and its TLS lines are replaced (the
TLS set-up of a bridge is mosquitto's own and is tested by the TLS tests' certificates)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.fleet.shards import ShardConsumer
from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.roles import Role
from daemon.mqtt.secrets import Secret, SecretSource
from daemon.mqtt.settings import (
    BrokerSettings,
    CommandKeySettings,
    DeliverySettings,
    ServerAckSettings,
    SigningSettings,
    TlsSettings,
)
from tests.conftest import REPO_ROOT
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

CONFIG = REPO_ROOT / "config" / "mosquitto"

# Set by MosquittoBroker(persistent=True) itself, with the test's own directory.
_OWN_LINES = re.compile(r"^(persistence|persistence_location|autosave_interval)\b")
_BRIDGE_TLS = re.compile(r"^bridge_(cafile|certfile|keyfile|tls_version|insecure)\b")


def tested_block(path: Path, name: str) -> list[str]:
    """The lines of ``# --- <name> (tested) ---`` .. ``# --- end <name> ---`` in an example config."""
    lines = path.read_text().splitlines()
    start = lines.index(f"# --- {name} (tested) ---")
    end = lines.index(f"# --- end {name} ---")
    return [line for line in lines[start + 1 : end] if line.strip() and not line.startswith("#")]


def central_config() -> str:
    return "\n".join(
        line for line in tested_block(CONFIG / "central.conf", "durability") if not _OWN_LINES.match(line)
    )


def site_config(name: str, central_port: int) -> str:
    lines = [line for line in tested_block(CONFIG / "site.conf", "durability") if not _OWN_LINES.match(line)]
    for line in tested_block(CONFIG / "site.conf", "bridge"):
        if _BRIDGE_TLS.match(line):
            continue
        line = re.sub(r"^address .*", f"address 127.0.0.1:{central_port}", line)
        line = line.replace("bridge-site-a", f"bridge-{name}")
        lines.append(line)
    return "\n".join(lines)


@dataclass
class Table:
    """One table: a real journal and publisher connected to its site broker."""

    table_id: str
    journal: Journal
    key: Secret
    publisher: Publisher | None = None
    dealt: int = 0

    def deal(self, count: int) -> None:
        events = [
            DeliveryEvent(
                kind="card_dealt",
                at=1_764_400_000.0 + self.dealt + n,
                data={"card": "8s", "slot": "P1", "n": self.dealt + n},
                shoe_id="S1",
                hand=1 + (self.dealt + n) // 6,
                source="reader",
            )
            for n in range(count)
        ]
        self.journal.append([], events)
        self.dealt += count


GS_KEY_ID = "gs-1"


def make_table(workdir: Path, table_id: str, site_port: int, gs_key_file: Path) -> Table:
    """A table with the game server's acknowledgement on (issue #13): it keeps and resends
    every event the game server has not acknowledged, and obeys its signed ``resend``."""
    workdir.mkdir(parents=True, exist_ok=True)
    key_file = workdir / "events.key"
    write_secret(key_file, f"events-key-of-{table_id}\n")
    journal = Journal(JournalSettings(path=workdir / "journal.sqlite3"), table_id)
    settings = BrokerSettings(
        host="127.0.0.1",
        port=site_port,
        protocol="mqtt5",  # type: ignore[arg-type]
        client_id=f"edge-{table_id}",
        tls=TlsSettings(enabled=False),
        signing=SigningSettings(
            events_key=SecretSource(file=key_file),
            command_keys=(
                CommandKeySettings(
                    key_id=GS_KEY_ID, role=Role.GAME_SERVER, secret=SecretSource(file=gs_key_file)
                ),
            ),
        ),
        delivery=DeliverySettings(
            health_interval_s=0.5,
            backoff_initial_s=0.05,
            backoff_max_s=0.5,
            server_ack=ServerAckSettings(enabled=True),
        ),
    )
    table = Table(table_id, journal, SecretSource(file=key_file).load())
    table.publisher = Publisher(settings, table_id, journal)
    table.publisher.start()
    return table


@dataclass
class Arrivals:
    """Every event each table's consumer processed, in the order it was processed."""

    seqs: dict[str, list[int]] = field(default_factory=dict)

    def on_processed(self, table: str, envelope: dict[str, Any]) -> None:
        self.seqs.setdefault(table, []).append(envelope["seq"])


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start_site(workdir: Path, name: str, central: MosquittoBroker) -> MosquittoBroker:
    return MosquittoBroker(workdir, extra_config=site_config(name, central.port), persistent=True).start()


def start_consumers(
    central: MosquittoBroker,
    tables: list[Table],
    shards: int,
    arrivals: Arrivals,
    checkpoints: Path,
    gs_key_file: Path,
) -> list[ShardConsumer]:
    keys = {t.table_id: t.key for t in tables}
    gs_key = SecretSource(file=gs_key_file).load()
    consumers = []
    for shard in range(shards):
        directory = checkpoints / f"shard-{shard}"
        directory.mkdir(parents=True, exist_ok=True)
        consumers.append(
            ShardConsumer(
                "127.0.0.1",
                central.port,
                list(keys),
                shard,
                shards,
                keys=keys,
                checkpoint_dir=directory,
                ack_key_id=GS_KEY_ID,
                ack_key=gs_key,
                on_processed=arrivals.on_processed,
            )
        )
    for consumer in consumers:
        consumer.start()
    for consumer in consumers:
        wait_until(consumer.subscribed.is_set, 20, "the consumer group's subscriptions")
    return consumers
