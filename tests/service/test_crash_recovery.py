"""SIGKILL the real daemon (``baccarat-edge run``) at random points of a shoe, many trials.

A simulated Angel Eye shoe deals into a pty, a real mosquitto carries the events. For each of
:data:`SEEDS` (another shoe, other kill points) the same shoe is dealt twice: once by a daemon
left alone, once by a daemon SIGKILLed :data:`KILLS` times (no clean-up: a power cut) and
started again each time. The consumer of the killed run must see every event exactly once
after deduplication by ``event_id``, and the stream must be the uninterrupted run's: same
kinds, same data, same seq numbers. In every trial a kill must have cut a delivery short (a
redelivery the consumer dropped as a duplicate), or the trial proved nothing about dedup.

The killed daemon reaches mosquitto through :class:`tests.mqtt.puback_proxy.PubackProxy`,
which hands it everything from the broker :data:`BROKER_LATENCY_S` late: a PUBACK arrives
well after the broker passed the event on. Each seed's kills are one of each kind, at
random frames, in random order:

* ``idle``: the daemon read and handled everything and delivered it;
* ``journaled``: as soon as the last frame's event is in the log (journaled, the publisher
  just woken: its delivery is cut short, or not yet begun);
* ``unacked``: as soon as the consumer received the last frame's event, its PUBACK still on
  the way back (the daemon must send it again after the restart: the duplicate);
* ``written``: right after a frame's first copy was written into the pty, with no wait at
  all: the daemon may be reading it, deciding on it, committing it or publishing it;
* ``mid_frame``: half of a frame written (a card half-way through the reader).

After a busy kill (``written``, ``mid_frame``) the test does what a shoe cannot: it reads
the journal to see which frames the dead daemon committed, throws away what is left in the
pty and deals again from the first frame it did not commit (a frame read but not committed
dies with the process, as in any process; the dealer's card would be re-read). Everything
committed must come back exactly once: restore of the shoe in progress, redelivery of what
was journaled but not acknowledged, dedup on the consumer.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from drivers.fixtures import FixtureStep
from drivers.pty_device import PtyDevice
from drivers.simulate import VirtualShoe
from tests.mqtt.puback_proxy import PubackProxy
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

# CRASH_SEEDS=1,2,3 runs other shoes with other kill points.
SEEDS = tuple(int(s) for s in os.environ.get("CRASH_SEEDS", "11,12,13").split(","))
HANDS = 5
KILL_KINDS = ("idle", "journaled", "unacked", "written", "mid_frame")
QUIET_KINDS = ("idle", "journaled", "unacked")
BROKER_LATENCY_S = 0.3
KILLS = len(KILL_KINDS)
_DROPPED_KEYS = frozenset({"at", "ts", "since", "command_id"})  # wall-clock times; fresh command ids


@dataclass(frozen=True)
class Kill:
    step: int
    """Index of a frame step: after its last copy (quiet kinds) or at its first copy (busy)."""
    kind: str


@dataclass
class Trial:
    subscriber: TableSubscriber
    refused: list[str]
    redealt: int = 0
    """Frames dealt again after busy kills (read or half-written but not committed)."""


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
        # the game server acts on what it saw: the frames dealt before the command reach the
        # daemon's reader first (else the two runs may journal a frame and a command in either order)
        deadline = time.monotonic() + 10.0
        while pty_pending(shoe) and time.monotonic() < deadline:
            time.sleep(0.002)
        reply = subscriber.sender.send(step.action, dict(step.args))
        if reply.get("status") != "accepted":
            refused.append(f"{step.action}: {reply}")

    if steps:
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


def _wait_received(subscriber: TableSubscriber, frame: bytes, timeout: float = 20.0) -> None:
    """The consumer received the event made from ``frame``."""
    text = frame.hex(" ")
    deadline = time.monotonic() + timeout
    while not any(text in json.dumps(e) for e in subscriber.sorted_events()):
        assert time.monotonic() < deadline, f"no event from frame {text} received"
        time.sleep(0.002)


def _last_committed_frame(journal: Path) -> str:
    """The wire form (hex) of the last frame the dead daemon committed to its journal."""
    with sqlite3.connect(journal) as db:  # the daemon is dead: this also recovers the WAL
        rows = db.execute("SELECT body FROM inputs ORDER BY id DESC").fetchall()
    db.close()
    for (body,) in rows:
        raw = json.loads(body).get("raw")
        if raw:
            return str(raw)
    raise AssertionError(f"no frame committed in {journal}")


def _discard_pending(shoe: PtyDevice) -> None:
    """Throw away what the dead daemon left unread in the pty (the test holds the slave too)."""
    slave = shoe._slave
    assert slave is not None
    while pending := pty_pending(shoe):
        os.read(slave, pending)


def _resume_after(steps: list[FixtureStep], kill: Kill, committed: str) -> int:
    """The first step to deal again after a busy kill: the one after the last copy of the last
    committed frame (the restarted decoder has no repeat memory, so no copy of it goes again)."""
    wire = [step.data.hex(" ") if step.data is not None else "" for step in steps]
    last = next(i for i in range(kill.step, 0, -1) if committed in wire[i])
    resume = last + 1
    while resume < len(steps) and steps[resume].data == steps[last].data:
        resume += 1
    assert all(s.supervisor is None for s in steps[resume : kill.step + 1]), "a command would go twice"
    return resume


def _run_table(
    tmp: Path,
    port: int,
    seed: int,
    steps: list[FixtureStep],
    kills: list[Kill],
    daemon_port: int | None = None,
) -> Trial:
    """Deal ``steps``; SIGKILL and restart the daemon at each of ``kills``. The consumer uses
    the broker on ``port``, the daemon ``daemon_port`` (a proxy to it) when given."""
    tmp.mkdir()
    shoe = PtyDevice(tmp / "baccarat-shoe")
    deal, _plan, _steps = dealt_shoe(seed=seed, max_hands=HANDS)
    config, events_key, command_key = write_config(tmp, shoe.path, daemon_port or port, deal)
    trial = Trial(TableSubscriber(port, events_key, command_key).start(), [])
    subscriber = trial.subscriber
    daemon = DaemonProcess(config, tmp / "daemon-0.log")
    start = 0
    try:
        for n, kill in enumerate([*kills, None]):
            # pyserial drops what was written before it opened the pty: deal once it has;
            # a command needs the daemon subscribed to its command topic
            daemon.wait_for_log("device connected")
            assert subscriber.wait_for(lambda s: s.status[-1:] == ["online"], 30)
            wait_until_commandable(daemon)
            if kill is None:
                _deal(steps[start:], shoe, subscriber, trial.refused)
                wait_until_idle(daemon, shoe)
                break
            frame = steps[kill.step].data
            assert frame is not None
            if kill.kind in QUIET_KINDS:
                _deal(steps[start : kill.step + 1], shoe, subscriber, trial.refused)
                if kill.kind == "idle":
                    wait_until_idle(daemon, shoe)
                elif kill.kind == "journaled":
                    _wait_journaled(daemon, shoe, frame)
                else:
                    _wait_received(subscriber, frame)
                daemon.kill()
                start = kill.step + 1
            else:
                _deal(steps[start : kill.step], shoe, subscriber, trial.refused)
                shoe.write(frame if kill.kind == "written" else frame[: len(frame) // 2])
                daemon.kill()
                _discard_pending(shoe)
                start = _resume_after(steps, kill, _last_committed_frame(tmp / "state" / "journal.sqlite3"))
                trial.redealt += sum(
                    1
                    for i in range(start, kill.step + 1)
                    if steps[i].data is not None and steps[i].data != steps[i - 1].data
                )
            subscriber.status.append("killed")  # the broker's will says offline later, or not
            daemon = DaemonProcess(config, tmp / f"daemon-{n + 1}.log")
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        shoe.close()
    subscriber.stop()
    return trial


def _kill_points(seed: int, steps: list[FixtureStep]) -> list[Kill]:
    """One kill of each kind at random frames (not the first two or the last two)."""
    firsts = [
        i for i, s in enumerate(steps) if s.data is not None and (i == 0 or steps[i - 1].data != s.data)
    ]
    lasts = [i for i, s in enumerate(steps[:-1]) if s.data is not None and steps[i + 1].data != s.data]
    rng = random.Random(seed)
    kinds = list(KILL_KINDS)
    rng.shuffle(kinds)
    # one kill per slice of the shoe, so the kills are spread and in order
    bounds = [firsts[2] + (firsts[-3] - firsts[2]) * n // KILLS for n in range(KILLS + 1)]
    kills = []
    for kind, low, high in zip(kinds, bounds, bounds[1:], strict=False):
        pool = [i for i in (lasts if kind in QUIET_KINDS else firsts) if low < i < high]
        kills.append(Kill(rng.choice(pool), kind))
    return kills


def test_sigkill_at_random_points_loses_and_duplicates_nothing(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    duplicates: dict[int, int] = {}
    for seed in SEEDS:
        _deal_settings, plan, steps = dealt_shoe(seed=seed, max_hands=HANDS)
        kills = _kill_points(seed, steps)
        calm = _run_table(tmp_path / f"calm-{seed}", mosquitto.port, seed, steps, [])
        proxy = PubackProxy(mosquitto.port, broker_latency_s=BROKER_LATENCY_S)
        try:
            killed = _run_table(tmp_path / f"killed-{seed}", mosquitto.port, seed, steps, kills, proxy.port)
        finally:
            proxy.close()
        duplicates[seed] = killed.subscriber.consumer.stats.duplicates
        redelivered = f"{killed.redealt} frames dealt again, {duplicates[seed]} duplicates dropped"
        print(f"seed {seed}: kills {kills}; {redelivered}")

        assert calm.refused == []
        assert killed.refused == []
        for trial in (calm, killed):
            assert trial.subscriber.rejected == []
            assert trial.subscriber.consumer.unexplained_gaps == []
        calm_events, killed_events = calm.subscriber.sorted_events(), killed.subscriber.sorted_events()
        # exactly once after dedup by event_id, gapless from seq 1
        assert len({e["event_id"] for e in killed_events}) == len(killed_events)
        assert [e["seq"] for e in killed_events] == list(range(1, len(killed_events) + 1))
        # the shoe was dealt as planned in both runs
        assert received_cards(calm_events) == expected_cards(plan)
        assert received_winners(calm_events) == expected_winners(plan)
        # and the killed run's stream is the uninterrupted one
        assert _comparable(killed_events) == _comparable(calm_events)
        assert len(list((tmp_path / f"killed-{seed}").glob("daemon-*.log"))) == KILLS + 1
    # in every trial a kill cut a delivery short: the restarted daemon sent an event again,
    # which the consumer dropped by its event_id
    assert all(count > 0 for count in duplicates.values()), duplicates
