"""Past one broker: tables -> site mosquitto -> bridge (QoS 1, persistent session) -> central
mosquitto -> a sharded consumer group on MQTT 5 shared subscriptions, the checkpointed
reference consumer acknowledging to the tables (issue #13). Every table's events are
processed once, in seq order, signed, across clean restarts and SIGKILLs of the central
broker and of a site broker (its bridge): 0 lost at the consumer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.fleet.shards import ShardConsumer, group_name, shard_filters, shard_of
from tests.fleet.bridged import (
    Arrivals,
    Table,
    make_table,
    site_config,
    start_consumers,
    start_site,
    wait_until,
)
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

SHARDS = 2


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, object]]:
    central = MosquittoBroker(tmp_path / "central", persistent=True, extra_config=_central()).start()
    parts: dict[str, object] = {"central": central, "sites": [], "tables": [], "consumers": []}
    try:
        yield parts
    finally:
        for table in parts["tables"]:  # type: ignore[attr-defined]
            if table.publisher is not None:
                table.publisher.stop(timeout=2.0)
            table.journal.close()
        for consumer in parts["consumers"]:  # type: ignore[attr-defined]
            consumer.stop()
        for site in parts["sites"]:  # type: ignore[attr-defined]
            site.stop()
        central.stop()


def _central() -> str:
    from tests.fleet.bridged import central_config

    return central_config()


def caught_up(arrivals: Arrivals, tables: list[Table]) -> bool:
    """Every journaled event processed by the group and acknowledged back to its table."""
    return all(
        len(arrivals.seqs.get(t.table_id, [])) >= t.journal.last_seq()
        and t.journal.server_ack().seq == t.journal.last_seq()
        for t in tables
    )


def assert_every_event_once_in_order(
    arrivals: Arrivals, tables: list[Table], consumers: list[ShardConsumer]
) -> None:
    for table in tables:
        last = table.journal.last_seq()
        assert last == table.dealt
        assert arrivals.seqs[table.table_id] == list(range(1, last + 1)), table.table_id
    for consumer in consumers:
        for ordered in consumer.consumers.values():
            assert ordered.stats.conflicts == 0
            assert ordered.stats.rejected == 0


def kill(broker: MosquittoBroker) -> None:
    """SIGKILL: no clean stop, no save (these brokers save only at a clean stop)."""
    assert broker.proc is not None
    broker.proc.kill()
    broker.proc.wait(10)
    broker.stop()


def test_shards_partition_the_tables() -> None:
    tables = [f"T{n:03d}" for n in range(500)]
    shards = [shard_of(t, 8) for t in tables]
    assert sorted(set(shards)) == list(range(8))  # every shard gets tables
    assert max(shards.count(k) for k in range(8)) < 2 * 500 / 8  # roughly even
    filters = [f for k in range(8) for f in shard_filters(tables, k, 8)]
    assert len(filters) == len(set(filters)) == 500  # each table in exactly one shard
    assert shard_filters(["T001"], shard_of("T001", 8), 8) == [
        f"$share/{group_name(shard_of('T001', 8), 8)}/baccarat/v1/T001/events"
    ]


def test_site_config_is_the_example_with_local_addresses() -> None:
    text = site_config("site-x", 1884)
    assert "address 127.0.0.1:1884" in text
    assert "cleansession false" in text
    assert "bridge_protocol_version mqttv50" in text
    assert "topic baccarat/v1/+/events out 1" in text
    assert "topic baccarat/v1/+/ack in 1" in text
    assert "remote_clientid bridge-site-x" in text
    assert "bridge_cafile" not in text


@pytest.mark.slow
@pytest.mark.restarts
def test_bridged_floor_loses_nothing_through_restarts_and_crashes(
    tmp_path: Path, stack: dict[str, object]
) -> None:
    central: MosquittoBroker = stack["central"]  # type: ignore[assignment]
    gs_key = write_secret(tmp_path / "gs-1.key", "the game server's key, long enough\n")
    arrivals = Arrivals()
    site_a = start_site(tmp_path / "site-a", "site-a", central)
    site_b = start_site(tmp_path / "site-b", "site-b", central)
    stack["sites"] = [site_a, site_b]
    tables = [make_table(tmp_path / f"A{n}", f"A{n}", site_a.port, gs_key) for n in range(3)]
    tables += [make_table(tmp_path / f"B{n}", f"B{n}", site_b.port, gs_key) for n in range(3)]
    stack["tables"] = tables
    consumers = start_consumers(central, tables, SHARDS, arrivals, tmp_path / "checkpoints", gs_key)
    stack["consumers"] = consumers
    assert sum(len(c.filters) for c in consumers) == len(tables)

    def deal(count: int) -> None:
        for table in tables:
            table.deal(count)

    # 1. steady state: both sites' events reach the group through their bridges, and the
    #    group's signed acknowledgements reach the tables back through them
    deal(20)
    wait_until(lambda: caught_up(arrivals, tables), 60, "the first events processed and acknowledged")
    assert_every_event_once_in_order(arrivals, tables, consumers)

    # 2. clean restart of the central broker while the tables deal: the site bridges queue,
    #    the consumers' sessions and queues come back from the central's disk
    central.stop()
    deal(15)
    central.start()
    deal(5)
    wait_until(lambda: caught_up(arrivals, tables), 90, "the events around the central restart")

    # 3. clean restart of a site broker (its bridge): its tables reconnect and resend
    deal(10)
    site_a.stop()
    deal(10)
    site_a.start()
    wait_until(lambda: caught_up(arrivals, tables), 90, "the events around the site restart")
    assert_every_event_once_in_order(arrivals, tables, consumers)

    # 4. the central broker crashes (SIGKILL: these brokers save only at a clean stop) while it
    #    holds events queued for the group, which is away: they are gone everywhere but in
    #    the tables' journals. The group comes back from its checkpoints, finds the gaps
    #    (later events, the tables' retained last_seq) and asks for them with signed resends
    #    that the bridges carry to the tables.
    for consumer in consumers:
        consumer.stop()
    deal(20)
    wait_until(lambda: all(not t.journal.pending() for t in tables), 60, "the site brokers took the events")
    time.sleep(1.0)  # the bridges forward them to the central broker's queues
    kill(central)
    central.start()
    consumers = start_consumers(central, tables, SHARDS, arrivals, tmp_path / "checkpoints", gs_key)
    stack["consumers"] = consumers
    deal(5)
    wait_until(lambda: caught_up(arrivals, tables), 120, "the events lost in the central crash")
    assert_every_event_once_in_order(arrivals, tables, consumers)
    assert any(c.resends_asked for c in consumers), "the crash lost nothing: the test proved nothing"

    # 5. a site broker crashes while its bridge is down (the central broker stopped): what it
    #    had acknowledged to its tables sat in its bridge queue, in memory, and is gone. Its
    #    tables reconnect and publish again every event the game server has not acknowledged.
    central.stop()
    deal(15)
    wait_until(lambda: all(not t.journal.pending() for t in tables), 60, "the site brokers took the events")
    kill(site_b)
    site_b.start()
    central.start()
    deal(5)
    wait_until(lambda: caught_up(arrivals, tables), 120, "the events lost in the site crash")
    assert_every_event_once_in_order(arrivals, tables, consumers)
