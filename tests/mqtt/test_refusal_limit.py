"""The refusal limiter, time passed in: the first refusals of a window are journaled one by
one, the rest counted by code and summarised once the window has passed; and a flood of
15 kB junk commands through a real broker journals a bounded number of events."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.journal import Journal
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.refusal_limit import RefusalLimiter, RefusalSummary
from daemon.mqtt.settings import SigningSettings
from daemon.mqtt.topics import TableTopics
from tests.mqtt.conftest import TABLE, make_settings
from tests.support.broker import MosquittoBroker


def test_the_first_refusals_of_a_window_are_journaled_the_rest_counted() -> None:
    limiter = RefusalLimiter(per_window=3, window_s=10.0)
    admitted = [limiter.admit(100.0 + k, code, 5000.0 + k) for k, code in enumerate("aabbbc")]
    assert admitted == [True, True, True, False, False, False]
    assert limiter.take_summary(109.9) is None  # the window has not passed
    assert limiter.take_summary(110.0) == RefusalSummary(
        count=3, codes={"b": 2, "c": 1}, first_at=5003.0, last_at=5005.0
    )
    assert limiter.take_summary(130.0) is None  # closed: nothing more to say
    assert limiter.admit(131.0, "a", 5031.0)  # a new window starts with the next refusal


def test_a_window_that_stayed_under_the_limit_has_no_summary() -> None:
    limiter = RefusalLimiter(per_window=3, window_s=10.0)
    assert limiter.admit(0.0, "a", 0.0)
    assert limiter.admit(1.0, "a", 1.0)
    assert limiter.take_summary(20.0) is None


def test_a_flood_of_junk_commands_journals_a_bounded_number_of_events(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    settings = make_settings(mosquitto.port, keys)
    signing = SigningSettings.model_validate(
        {**settings.signing.model_dump(), "refusals_journaled_per_window": 5, "refusal_window_s": 1.0}
    )
    publisher = make_publisher(settings.model_copy(update={"signing": signing}), TABLE, journal)
    assert publisher.subscribed.wait(10)
    flooder = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="flooder", protocol=mqtt.MQTTv5)
    flooder.connect("127.0.0.1", mosquitto.port)
    flooder.loop_start()
    junk = [json.dumps({"command_id": f"junk-{k}", "pad": os.urandom(7000).hex()}).encode() for k in range(4)]
    assert len(junk[0]) > 14_000
    sent = 400
    size_before = journal.size_bytes()
    for k in range(sent):
        flooder.publish(TableTopics(TABLE).cmd, junk[k % 4], qos=1).wait_for_publish(5)
    flooder.loop_stop()
    flooder.disconnect()

    def refused() -> list[dict[str, object]]:
        return [e.data for e in journal.events(origin=None) if e.kind == "command_refused"]

    deadline = time.monotonic() + 20
    while sum(int(d.get("aggregated", 1)) for d in refused()) < sent:  # type: ignore[call-overload]
        assert time.monotonic() < deadline, f"only {len(refused())} refusal events journaled"
        time.sleep(0.1)

    events = refused()
    one_by_one = [d for d in events if "aggregated" not in d]
    summaries = [d for d in events if "aggregated" in d]
    assert summaries, "the flood was never summarised"
    assert len(one_by_one) + sum(int(d["aggregated"]) for d in summaries) == sent  # type: ignore[call-overload]
    assert len(events) < 60  # 400 refusals, a few seconds of windows of 5 + 1 summary each
    assert {d["code"] for d in one_by_one} == {"malformed"}
    assert all(len(str(d["command_id"])) < 160 for d in one_by_one)
    assert summaries[0]["codes"] == {"malformed": summaries[0]["aggregated"]}
    assert journal.size_bytes() - size_before < 1_000_000  # 400 x 15 kB = 6 MB were sent


def test_a_young_window_is_closed_when_the_channel_stops() -> None:
    limiter = RefusalLimiter(per_window=1, window_s=10.0)
    limiter.admit(0.0, "a", 100.0)
    limiter.admit(1.0, "b", 101.0)
    assert limiter.take_summary(2.0) is None
    assert limiter.take_summary(math.inf) == RefusalSummary(
        count=1, codes={"b": 1}, first_at=101.0, last_at=101.0
    )
