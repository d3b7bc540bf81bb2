"""SIGKILL the real daemon (``baccarat-edge run``) at random points of one shoe.

A simulated Angel Eye shoe deals into a pty, a real mosquitto carries the events. The same
shoe is dealt twice: once by a daemon left alone, once by a daemon SIGKILLed at random
points (no clean-up: a power cut) and started again each time. The consumer of the killed
run must see every event exactly once after deduplication by ``event_id``, and the stream
must be the uninterrupted run's: same kinds, same data, same seq numbers.

Kills happen once the daemon has read every byte dealt so far (the pty is drained) and
journaled the inputs: an input still in the daemon's memory dies with it, as it would in
any process. Half the kills wait until the daemon is idle (everything delivered), half
strike as soon as the last frame's event is in the log (journaled, the publisher just
woken: its delivery is cut short). What is tested is everything after the journal:
restore of the shoe in progress, redelivery of what was journaled but not acknowledged,
dedup on the consumer.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from drivers.fixtures import FixtureStep
from drivers.pty_device import PtyDevice
from drivers.simulate import VirtualShoe
from tests.service.harness import (
    SPEED,
    DaemonProcess,
    TableSubscriber,
    dealt_shoe,
    expected_cards,
    expected_winners,
    pty_pending,
    received_cards,
    received_winners,
    wait_until_commandable,
    wait_until_idle,
    write_config,
)
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

SEED = int(os.environ.get("CRASH_SEED", "11"))  # another seed: another shoe, other kill points
HANDS = 14
KILLS = 4
_DROPPED_KEYS = frozenset({"at", "ts", "since", "command_id"})  # wall-clock times; fresh command ids


def _timeless(value: Any) -> Any:
    """Event data without wall-clock times (the two runs deal at different moments)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in _DROPPED_KEYS and not k.endswith("_at")}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _comparable(events: list[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    return [(e["seq"], e["kind"], _timeless(e["data"])) for e in events]


def _deal(steps: list[FixtureStep], shoe: PtyDevice, subscriber: TableSubscriber, refused: list[str]) -> None:
    def on_supervisor(step: Any, _t: float) -> None:
        reply = subscriber.sender.send(step.action, dict(step.args))
        if reply.get("status") != "accepted":
            refused.append(f"{step.action}: {reply}")

    VirtualShoe(steps, shoe, speed=SPEED, on_supervisor=on_supervisor).run()


def _wait_journaled(daemon: DaemonProcess, shoe: PtyDevice, frame: bytes, timeout: float = 20.0) -> None:
    """The daemon logged an event made from ``frame`` (logged after the journal commit)."""
    deadline = time.monotonic() + timeout
    while pty_pending(shoe):
        assert time.monotonic() < deadline, "the daemon does not read the shoe"
        time.sleep(0.005)
    text = frame.hex(" ")
    while text not in daemon.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no event from frame {text} in {daemon.log_path}"
        time.sleep(0.005)


def _run_table(
    tmp: Path, port: int, steps: list[FixtureStep], kill_after: list[int]
) -> tuple[TableSubscriber, list[str], int]:
    """Deal ``steps``; SIGKILL and restart the daemon after each step index in ``kill_after``."""
    tmp.mkdir()
    shoe = PtyDevice(tmp / "baccarat-shoe")
    deal, _plan, _steps = dealt_shoe(seed=SEED, max_hands=HANDS)
    config, events_key, command_key = write_config(tmp, shoe.path, port, deal)
    subscriber = TableSubscriber(port, events_key, command_key).start()
    refused: list[str] = []
    bounds = [0, *(k + 1 for k in kill_after), len(steps)]
    daemon = DaemonProcess(config, tmp / "daemon-0.log")
    try:
        for part, (start, end) in enumerate(itertools.pairwise(bounds)):
            # pyserial drops what was written before it opened the pty: deal once it has;
            # a command needs the daemon subscribed to its command topic
            daemon.wait_for_log("device connected")
            assert subscriber.wait_for(lambda s: s.status[-1:] == ["online"], 30)
            wait_until_commandable(daemon)
            _deal(steps[start:end], shoe, subscriber, refused)
            last = steps[end - 1]
            if part % 2 == 1 and last.data is not None:
                _wait_journaled(daemon, shoe, last.data)
            else:
                wait_until_idle(daemon, shoe)
            if part < len(bounds) - 2:
                daemon.kill()
                subscriber.status.append("killed")  # the broker's will says offline later, or not
                daemon = DaemonProcess(config, tmp / f"daemon-{part + 1}.log")
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        shoe.close()
    subscriber.stop()
    return subscriber, refused, subscriber.consumer.stats.duplicates


def test_sigkill_at_random_points_loses_and_duplicates_nothing(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    _deal_settings, plan, steps = dealt_shoe(seed=SEED, max_hands=HANDS)
    # the shoe sends every frame three times 20 ms apart: a kill goes after the last copy
    # (a real restart takes far longer than 40 ms; the copies it misses are flushed on open)
    frame_ends = [i for i, s in enumerate(steps[:-1]) if s.data is not None and steps[i + 1].data != s.data]
    rng = random.Random(SEED)
    kill_after = sorted(rng.sample(frame_ends[2:-2], KILLS))

    calm, calm_refused, _ = _run_table(tmp_path / "calm", mosquitto.port, steps, [])
    killed, killed_refused, duplicates = _run_table(tmp_path / "killed", mosquitto.port, steps, kill_after)
    print(f"kills after steps {kill_after} of {len(steps)}: {duplicates} duplicate deliveries dropped")

    assert calm_refused == []
    assert killed_refused == []
    for subscriber in (calm, killed):
        assert subscriber.rejected == []
        assert subscriber.consumer.unexplained_gaps == []
    calm_events, killed_events = calm.sorted_events(), killed.sorted_events()
    # exactly once after dedup by event_id, gapless from seq 1
    assert len({e["event_id"] for e in killed_events}) == len(killed_events)
    assert [e["seq"] for e in killed_events] == list(range(1, len(killed_events) + 1))
    # the shoe was dealt as planned in both runs
    assert received_cards(calm_events) == expected_cards(plan)
    assert received_winners(calm_events) == expected_winners(plan)
    # and the killed run's stream is the uninterrupted one
    import json
    import os

    if os.environ.get("DUMP"):
        Path("/tmp/f1_calm.txt").write_text("\n".join(json.dumps(x) for x in _comparable(calm_events)))
        Path("/tmp/f1_killed.txt").write_text("\n".join(json.dumps(x) for x in _comparable(killed_events)))
    assert _comparable(killed_events) == _comparable(calm_events)
    assert len(list((tmp_path / "killed").glob("daemon-*.log"))) == KILLS + 1
