"""Past one broker: tables -> site mosquitto -> bridge (QoS 1, persistent session) -> central
mosquitto -> a sharded consumer group on MQTT 5 shared subscriptions. Each table's events
arrive in seq order, signed, exactly once at the consumer (duplicates are dropped by
event_id), also across a restart of the central broker and of a site broker (its bridge)."""

from __future__ import annotations

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


def delivered(arrivals: Arrivals, tables: list[Table]) -> bool:
    return all(len(arrivals.seqs.get(t.table_id, [])) >= t.dealt for t in tables)


def assert_in_order_exactly_once(arrivals: Arrivals, tables: list[Table]) -> None:
    assert arrivals.problems == []
    for table in tables:
        assert arrivals.seqs[table.table_id] == list(range(1, table.dealt + 1)), table.table_id


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
    assert "remote_clientid bridge-site-x" in text
    assert "bridge_cafile" not in text


def test_bridged_floor_keeps_each_tables_order_through_restarts(
    tmp_path: Path, stack: dict[str, object]
) -> None:
    central: MosquittoBroker = stack["central"]  # type: ignore[assignment]
    arrivals = Arrivals()
    site_a = start_site(tmp_path / "site-a", "site-a", central)
    site_b = start_site(tmp_path / "site-b", "site-b", central)
    stack["sites"] = [site_a, site_b]
    tables = [make_table(tmp_path / f"A{n}", f"A{n}", site_a.port) for n in range(3)]
    tables += [make_table(tmp_path / f"B{n}", f"B{n}", site_b.port) for n in range(3)]
    stack["tables"] = tables
    consumers: list[ShardConsumer] = start_consumers(central, tables, SHARDS, arrivals)
    stack["consumers"] = consumers
    assert sum(len(c.filters) for c in consumers) == len(tables)

    # 1. steady state: both sites' events reach the group through their bridges
    for table in tables:
        table.deal(20)
    wait_until(lambda: delivered(arrivals, tables), 60, "the first events")
    assert_in_order_exactly_once(arrivals, tables)

    # 2. the central broker restarts while the tables keep dealing: the site bridges queue,
    #    the consumers' persistent sessions and queues are restored from the central's disk
    central.stop()
    for table in tables:
        table.deal(15)
    central.start()
    for table in tables:
        table.deal(5)
    wait_until(lambda: delivered(arrivals, tables), 90, "the events dealt around the central restart")
    assert_in_order_exactly_once(arrivals, tables)

    # 3. a site broker (its bridge) restarts: its tables reconnect and resend what it never
    #    acknowledged; what it acknowledged is in its persistent bridge queue
    for table in tables:
        table.deal(10)
    site_a.stop()
    for table in tables:
        table.deal(10)
    site_a.start()
    wait_until(lambda: delivered(arrivals, tables), 90, "the events dealt around the site restart")
    assert_in_order_exactly_once(arrivals, tables)
    for table in tables:
        journal = table.journal
        wait_until(lambda: not journal.pending(), 30, f"{table.table_id} journal drained")  # noqa: B023
    for consumer in consumers:
        for consumer_state in consumer.consumers.values():
            assert consumer_state.unexplained_gaps == []
            assert consumer_state.stats.out_of_order == 0
            assert consumer_state.stats.rejected == 0
