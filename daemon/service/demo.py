"""The first-run demo: a simulated shoe through the real daemon to an embedded broker.

Everything is real except the hardware and the broker's location: the shoe is
``drivers.simulate`` writing Angel Eye (or ASCII) bytes into a pseudo-terminal,
which the daemon's serial driver opens like ``/dev/ttyUSB0``; the engine, journal
(SQLite in a temporary state directory) and publisher are the production ones; the
broker is amqtt started in-process on a free port; the view subscribes to the
table's topics like ``baccarat-edge monitor`` does. The dealer's supervisor steps
(``new_shoe``...) go through the signed MQTT command channel.

By default the table runs ``table.game_flow: betting_window`` and the demo plays the game
server's part too: before each round it sends the signed ``open_betting`` command with the
server's round id, then ``close_betting``, and only then are the round's cards dealt
(``daemon.simulation.flow_dealer``); the shoe ends at the cut card (an Angel Eye ``C`` frame, the
line reader's ``CUT`` line). ``game_flow="cards_only"`` deals the older way, rounds told apart by
the cards and their timing (``daemon.simulation.dealer``).

Time: the simulated dealer pauses like a real one (15 s between rounds) divided by
``speed``. The engine's "card right after a round = unneeded card" window is real
time, so the demo shrinks it in proportion (a setting, like any other; ``cards_only`` only).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from common.slots import BANKER_SLOTS, PLAYER_SLOTS
from daemon.mqtt.secrets import Secret
from daemon.mqtt.supervisor_commands import CommandSender
from daemon.mqtt.topics import TableTopics
from daemon.service.config import LoadedConfig, load_config
from daemon.service.demo_broker import EmbeddedBroker
from daemon.service.demo_squeeze import DemoRevealer, squeeze_table
from daemon.service.logging import configure_logging, reset_logging
from daemon.service.runner import Daemon
from daemon.service.table_text import render
from daemon.service.table_view import TableView
from drivers.base import ReaderDriver
from drivers.pty_device import PtyDevice

EVENTS_KEY_ENV = "BACCARAT_EDGE_DEMO_EVENTS_KEY"
COMMAND_KEY_ENV = "BACCARAT_EDGE_DEMO_COMMAND_KEY"


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What the demo deals and how fast."""

    speed: float = 100.0
    hands: int | None = None
    decks: int = 8
    seed: int | None = None
    protocol: str = "angel_eye"
    faults: tuple[str, ...] = ()
    game_flow: str = "betting_window"  # or "cards_only"
    reveal: str = "open"  # or "squeeze" (betting_window only): the demo's game server reveals
    live_view: bool | None = None  # None: on a terminal only
    state_dir: Path | None = None
    delivery_timeout_s: float = 30.0


@dataclass(slots=True)
class DemoResult:
    """What happened, for the summary and for tests."""

    shoe_id: str | None = None
    hands: int = 0
    results: dict[str, int] = field(default_factory=dict)
    cards: int = 0
    bytes_written: int = 0  # by the simulated shoe
    bytes_read: int = 0  # by the daemon's reader: equal unless bytes were lost on the way
    journaled: int = 0
    received: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)
    duplicates: int = 0
    alerts: list[str] = field(default_factory=list)
    refused_commands: list[str] = field(default_factory=list)
    shoe_ended: str | None = None
    elapsed_s: float = 0.0
    state_dir: Path | None = None
    log_file: Path | None = None

    @property
    def complete(self) -> bool:
        """Every journaled event arrived, in order, and rounds were played."""
        return (
            self.hands > 0 and self.received == self.journaled and not self.gaps and not self.refused_commands
        )


def demo_config(
    state_dir: Path,
    device: str,
    broker_port: int,
    options: DemoOptions,
    table: dict[str, Any],
    reader_protocol: dict[str, Any] | None = None,
) -> LoadedConfig:
    """The embedded defaults with the demo's device, broker, state dir and dealer settings
    (``reader_protocol``: the reader's ``protocol`` settings, e.g. its signal lines)."""
    round_gap_s = 15.0 / options.speed
    overrides: dict[tuple[str | int, ...], Any] = {
        ("state_dir",): str(state_dir),
        ("broker", "port"): broker_port,
        ("log", "level"): "info",
        ("log", "format"): "json",
        # the simulated unneeded card comes ~1/15 of a round gap after the round, the next
        # round's first card one gap after: a quarter of the gap separates them with margin
        ("table", "unneeded_card_window_s"): round(min(1.5, round_gap_s * 0.25), 4),
    }
    for key, value in table.items():
        overrides[("table", key)] = value
    loaded = load_config(None, environ=os.environ, overrides=overrides)
    from drivers.registry import load

    protocol_driver = {"angel_eye": "angel_eye", "ascii_lines": "ascii_lines"}[options.protocol]
    reader = load(protocol_driver).settings.model_validate(
        {"url": device, "device_name": "reader", "protocol": reader_protocol or {}}
    )
    section = loaded.config.readers[0].model_copy(update={"driver": protocol_driver})
    cfg = loaded.config.model_copy(update={"readers": [section]})
    return LoadedConfig(cfg, [reader], None, loaded.source, loaded.variant)


def parse_flow_fault(text: str) -> Any:
    """``"late_unneeded@3"`` → that fault in round 3 (``betting_window`` demo); ValueError says why not."""
    from daemon.simulation.flow_dealer import FLOW_FAULTS, FlowFault

    kind, sep, round_no = text.partition("@")
    # Not the outage (the demo's daemon does not stop mid-shoe), a misread dealt on (its round is
    # held for a supervisor's correction, which the demo does not play) nor the shoe's last card
    # misread (it ends the shoe early). The reader unplugged mid-round unplugs the pty.
    usable = [f for f in FLOW_FAULTS if f not in ("outage", "misread_deal_on", "last_card_misread")]
    if kind not in usable:
        raise ValueError(f"unknown fault {kind!r} (known with betting_window: {', '.join(usable)})")
    if not sep or not round_no.isdigit() or int(round_no) < 1:
        raise ValueError(f"fault {text!r}: expected KIND@ROUND with ROUND a positive round number")
    # a card never scanned: the round's last (the next round's betting holds the round a card short)
    # an empty window: no card for 90 s (the demo's empty_window_s is 60 s, scaled like the dealer)
    delay = 90.0 if kind == "empty_window" else 5.0
    return FlowFault(kind, int(round_no), card_index=-1 if kind == "unscanned" else 0, delay=delay)


def _flow_shoe(
    opts: DemoOptions, seed: int
) -> tuple[Any, dict[str, Any], dict[str, Any], list[tuple[float, float]], dict[str, float]]:
    """The flow game's plan as the reader sends it, the table settings, the reader's protocol,
    when the reader is unplugged (``unplug_mid_round``) and the plan time each late command was
    issued at (``late_close``: ``"close:<round_id>"``)."""
    from dataclasses import replace

    from daemon.simulation.flow_dealer import FlowFault, plan_flow_game
    from daemon.simulation.flow_library import as_sent
    from drivers.simulate import simulated_signal_settings

    faults = [parse_flow_fault(f) for f in opts.faults]
    # A full shoe: as many rounds as the cards surely allow (at most 6 cards a round, up to 11
    # burned), the last one drawing the cut card.
    rounds = opts.hands or max(1, (opts.decks * 52 - 11 - 6) // 6)
    if opts.hands is None and not any(f.kind == "cut_card" for f in faults):
        faults.append(FlowFault("cut_card", rounds))
    faults = [f for f in faults if f.round_no <= rounds]
    game = plan_flow_game(seed, opts.protocol, rounds, tuple(faults), decks=opts.decks)
    line_reader = opts.protocol == "ascii_lines"
    actions = [as_sent(a, "server", reader_signals=line_reader) for a in game.plan.actions]
    # a card this soon after a decision is its round's unneeded card even if betting reopened: the
    # dealer's 1.5 s, sped up like the dealer; an empty window's 60 s sped up the same way
    unneeded = round(min(1.5, 1.5 / opts.speed), 4)
    table = {
        "decks": opts.decks,
        "game_flow": "betting_window",
        "betting": {"source": "server", "unneeded_window_s": unneeded, "empty_window_s": 60.0 / opts.speed},
    }
    reader = simulated_signal_settings("ascii_lines") if line_reader else {}
    return replace(game.plan, actions=actions), table, reader, game.reader_outages, game.issued_at


class _WatchedPty(PtyDevice):
    """The demo's shoe: unplugging waits until the daemon's reader took every byte written before
    (the cards read before the cable is pulled), and both wait until the reader saw the change, so
    a sped-up outage is not shorter than the driver's reconnection (what it reads after reconnecting
    is what the dealer deals after the replug, nothing flushed)."""

    readers: list[Any]
    written: int

    def __init__(self, link: Path) -> None:
        self.readers = []
        self.written = 0
        super().__init__(link)

    def write(self, data: bytes) -> None:
        super().write(data)
        self.written += len(data)

    def unplug(self) -> None:
        for reader in self.readers:
            reader.wait_until_received(self.written, 5.0)
        super().unplug()
        for reader in self.readers:
            reader.wait_until_connected(False, 10.0)

    def plug(self) -> None:
        super().plug()
        for reader in self.readers:
            reader.wait_until_connected(True, 30.0)


class DemoRun:
    """One demo: broker, pty shoe, daemon and view; ``run()`` returns the result."""

    def __init__(self, options: DemoOptions, out: TextIO = sys.stdout) -> None:
        self.options = options
        self.out = out
        self.live = options.live_view if options.live_view is not None else out.isatty()
        self.result = DemoResult()
        self._view: TableView | None = None
        self._view_lock = threading.Lock()
        self._printed_rounds = 0

    def run(self) -> DemoResult:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="baccarat-edge-demo-") as tmp:
            state_dir = self.options.state_dir or Path(tmp)
            state_dir.mkdir(parents=True, exist_ok=True)
            self.result.state_dir = state_dir
            try:
                self._run_in(state_dir)
            finally:
                self.result.elapsed_s = time.monotonic() - started
        return self.result

    def _run_in(self, state_dir: Path) -> None:
        from daemon.simulation.dealer import DealSettings, FaultSpec, plan_shoe
        from daemon.simulation.flow_library import with_reader_outages
        from drivers.simulate import VirtualShoe, encode_plan

        opts = self.options
        seed = opts.seed if opts.seed is not None else secrets.randbelow(1_000_000)
        reader_protocol: dict[str, Any] = {}
        issued_at: dict[str, float] = {}
        if opts.game_flow == "betting_window":
            plan, table, reader_protocol, unplugged, issued_at = _flow_shoe(opts, seed)
            steps = with_reader_outages(encode_plan(plan, opts.protocol, seed=seed, signals=True), unplugged)
        else:
            deal = DealSettings(decks=opts.decks, seed=seed, max_hands=opts.hands, shoe_id=f"demo-{seed}")
            plan = plan_shoe(deal, [FaultSpec.parse(f) for f in opts.faults])
            steps = encode_plan(plan, opts.protocol, seed=seed)
            table = deal.table_settings()
        if opts.reveal == "squeeze":
            table = {**table, "reveal": squeeze_table()}
        events_key, command_key = secrets.token_hex(32), secrets.token_hex(32)
        os.environ[EVENTS_KEY_ENV] = events_key
        os.environ[COMMAND_KEY_ENV] = command_key
        log_file = state_dir / "daemon.log"
        self.result.log_file = log_file
        with (
            EmbeddedBroker() as broker,
            open(log_file, "a", encoding="utf-8") as log_stream,
        ):
            shoe = _WatchedPty(state_dir / "baccarat-shoe")
            loaded = demo_config(state_dir, shoe.path, broker.port, opts, table, reader_protocol)
            configure_logging("info", "json", stream=log_stream)
            daemon = Daemon(loaded)
            view = TableView(loaded.config.table_id)
            self._view = view
            client, sender = self._subscribe(broker.port, loaded.config.table_id, command_key.encode())
            daemon.start()
            assert daemon.journal is not None
            first_seq = daemon.journal.last_seq()
            try:
                self._say(
                    f"demo: table {loaded.config.table_id}, {opts.decks} decks, seed {seed}, "
                    f"{opts.protocol} shoe on {shoe.slave_name}, embedded broker on 127.0.0.1:{broker.port}, "
                    f"speed x{opts.speed:g}, {opts.game_flow}"
                    + (
                        " (the demo plays the game server: signed open/close betting)"
                        if opts.game_flow == "betting_window"
                        else ""
                    )
                    + "\n"
                    f"  watch from another terminal: baccarat-edge monitor --table {loaded.config.table_id} "
                    f"--broker mqtt://127.0.0.1:{broker.port} --mqtt 3.1.1"
                )

                readers = [d for d in daemon.drivers.values() if isinstance(d, ReaderDriver)]
                shoe.readers = readers
                written_before = _bytes_before_each_command(steps)
                revealer = self._revealer(daemon, sender, loaded) if opts.reveal == "squeeze" else None

                def on_supervisor(step: Any, step_t: float) -> None:
                    # A command and the bytes dealt just before it reach the engine by two paths
                    # (MQTT, the pty): the game server acts on what it saw, so the command waits
                    # until the reader has taken those bytes (bounded), keeping the dealt order.
                    wanted = written_before.pop(0) if written_before else 0
                    deadline = time.monotonic() + 5.0
                    while sum(d.health()["bytes"] for d in readers) < wanted and time.monotonic() < deadline:
                        time.sleep(0.002)
                    if revealer is not None and step.action == "open_betting":
                        revealer.reveal_all()  # the last round's cards, one by one, before the next
                    # a late close is signed with the time the server issued it (before the
                    # round's first card), as a real server's delayed command would be
                    issued = (
                        issued_at.get(f"close:{step.args.get('round_id')}")
                        if step.action == "close_betting"
                        else None
                    )
                    ts = None if issued is None else time.time() - (step_t - issued) / opts.speed
                    reply = sender.send(step.action, dict(step.args), ts=ts)
                    if reply.get("status") != "accepted":
                        self.result.refused_commands.append(f"{step.action}: {reply.get('reason')}")

                self._await_online(daemon, timeout=15.0)
                reader_open = self._await_readers(daemon, timeout=15.0)
                virtual = VirtualShoe(
                    steps, shoe, speed=opts.speed, on_supervisor=on_supervisor, ready=reader_open
                )
                virtual.start()
                self._follow(lambda: virtual.done.is_set(), daemon)
                if revealer is not None:
                    revealer.reveal_all()  # the shoe's last round
                    self.result.refused_commands.extend(revealer.refused)
                self.result.bytes_written = sum(len(step.data) for step in steps if step.data is not None)
                self._await_delivery(daemon)
                self.result.journaled = daemon.journal.last_seq() - first_seq
            finally:
                daemon.stop()
                client.loop_stop()
                client.disconnect()
                shoe.close()
                reset_logging()
            self._collect(daemon)

    def _revealer(self, daemon: Daemon, sender: CommandSender, loaded: LoadedConfig) -> DemoRevealer:
        """The game server's reveals (``--reveal squeeze``), from the table's public state."""

        def public_state() -> dict[str, Any]:
            daemon.wait_until_processed(5.0)  # every card read so far is in the state
            return daemon.engine.snapshot()

        return DemoRevealer(
            public_state,
            lambda action, args: sender.send(action, args),
            loaded.config.table.reveal.order,
            pause_s=15.0 / self.options.speed / 8,
        )

    # ------------------------------------------------------------------ MQTT side
    def _subscribe(self, port: int, table_id: str, command_key: bytes) -> tuple[mqtt.Client, CommandSender]:
        topics = TableTopics(table_id)
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"demo-view-{os.getpid()}",
                             protocol=mqtt.MQTTv311)  # fmt: skip
        sender = CommandSender(client, table_id, Secret(command_key, "demo"))
        subscribed = threading.Event()

        def on_connect(c: mqtt.Client, _u: object, _f: object, _r: object, _p: object = None) -> None:
            c.subscribe(topics.all, qos=1)

        def on_subscribe(*_args: object) -> None:
            subscribed.set()

        def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
            payload = bytes(msg.payload)
            if msg.topic == sender.reply_topic:
                sender.on_reply(payload)
                return
            with self._view_lock:
                assert self._view is not None
                self._view.apply(msg.topic, payload)

        client.on_connect = on_connect
        client.on_subscribe = on_subscribe
        client.on_message = on_message
        client.connect("127.0.0.1", port, keepalive=30)
        client.loop_start()
        if not subscribed.wait(10):
            raise RuntimeError("the demo view could not subscribe to the embedded broker")
        return client, sender

    # ------------------------------------------------------------------ display
    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _follow(self, finished: Callable[[], bool], daemon: Daemon) -> None:
        """Show the table while the shoe is dealt: live screen on a TTY, one line per round else."""
        while not finished():
            time.sleep(0.2)
            if daemon.engine_done.is_set():
                raise RuntimeError(f"the daemon's engine thread stopped; see {self.result.log_file}")
            with self._view_lock:
                assert self._view is not None
                if self.live:
                    self.out.write("\x1b[H\x1b[2J" + render(self._view, colour=True))
                    self.out.flush()
                else:
                    self._print_new_rounds(self._view)

    def _print_new_rounds(self, view: TableView) -> None:
        rounds = list(view.last_rounds)
        new = len(view.results) - self._printed_rounds
        for rnd in reversed(rounds[: max(0, new)]):
            player = " ".join(rnd.cards[s] for s in PLAYER_SLOTS if s in rnd.cards)
            banker = " ".join(rnd.cards[s] for s in BANKER_SLOTS if s in rnd.cards)
            self._say(
                f"hand {rnd.hand:>3}: {rnd.winner.upper():<6} player {rnd.player_total} [{player}]"
                f"  banker {rnd.banker_total} [{banker}]  ({view.events_seen} events received)"
            )
        self._printed_rounds = len(view.results)

    def _await_online(self, daemon: Daemon, timeout: float) -> None:
        """The view saw ``online`` and the broker acknowledged the daemon's command subscription
        (``online`` comes first: a command sent on it alone could be dropped by the broker)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._view_lock:
                assert self._view is not None
                online = self._view.status == "online"
            if online and daemon.publisher.subscribed.wait(max(0.0, deadline - time.monotonic())):
                return
            time.sleep(0.05)
        raise RuntimeError(f"the daemon did not come online on the embedded broker within {timeout:.0f} s")

    def _await_readers(self, daemon: Daemon, timeout: float) -> Callable[[], bool]:
        """Wait until every reader has opened its device, and return that check for the shoe.

        pyserial flushes its input when it opens a port: bytes the virtual shoe wrote
        before would be lost, so the shoe starts only once the reader is connected.
        """
        readers = [d for d in daemon.drivers.values() if hasattr(d, "wait_until_connected")]

        def reader_open() -> bool:
            return all(bool(d.health().get("connected")) for d in readers)

        deadline = time.monotonic() + timeout
        while not reader_open():
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the reader did not open the simulated shoe within {timeout:.0f} s")
            time.sleep(0.02)
        return reader_open

    def _await_delivery(self, daemon: Daemon) -> None:
        """Wait until the view has every journaled event and that stays so for 0.3 s (bounded): a
        reader may still hold the shoe's last bytes when the queue is momentarily empty."""
        assert daemon.journal is not None
        deadline = time.monotonic() + self.options.delivery_timeout_s
        settled = 0
        while time.monotonic() < deadline and settled < 3:
            last = daemon.journal.last_seq()
            with self._view_lock:
                assert self._view is not None
                caught_up = last > 0 and self._view.last_seq == last and daemon.queue.empty()
            settled = settled + 1 if caught_up else 0
            time.sleep(0.1)
        with self._view_lock:
            assert self._view is not None
            if self.live:
                self.out.write("\x1b[H\x1b[2J" + render(self._view, colour=True))
            else:
                self._print_new_rounds(self._view)

    def _collect(self, daemon: Daemon) -> None:
        view = self._view
        assert view is not None
        r = self.result
        r.shoe_id = view.shoe_id
        r.hands = len(view.results)
        r.results = {k: view.results.count(k) for k in ("player", "banker", "tie")}
        r.cards = view.cards_in_shoe
        r.received = view.events_seen
        r.gaps = list(view.gaps)
        r.duplicates = view.duplicates
        r.alerts = list(view.recent_alerts)
        r.shoe_ended = view.shoe_ended
        readers = [d for d in daemon.drivers.values() if isinstance(d, ReaderDriver)]
        r.bytes_read = sum(d.health()["bytes"] for d in readers)


def _bytes_before_each_command(steps: list[Any]) -> list[int]:
    """For each supervisor step in order, how many bytes the shoe has written before it."""
    out: list[int] = []
    written = 0
    for step in steps:
        if step.data is not None:
            written += len(step.data)
        elif step.supervisor is not None:
            out.append(written)
    return out


def summary(result: DemoResult) -> str:
    """The closing text of the demo."""
    counts = result.results
    lines = [
        "",
        f"Demo {'finished' if result.complete else 'INCOMPLETE'} in {result.elapsed_s:.1f} s: "
        f"shoe {result.shoe_id or '-'}, {result.hands} hands "
        f"(player {counts.get('player', 0)}, banker {counts.get('banker', 0)}, tie {counts.get('tie', 0)}), "
        f"{result.cards} cards" + (f", shoe ended ({result.shoe_ended})" if result.shoe_ended else ""),
        f"Events: {result.journaled} journaled, {result.received} received over MQTT in order "
        f"({len(result.gaps)} gaps, {result.duplicates} duplicates ignored), {len(result.alerts)} alerts",
    ]
    if result.refused_commands:
        lines.append("Refused commands: " + "; ".join(result.refused_commands))
    if result.alerts:
        lines.extend(f"  alert: {a}" for a in result.alerts)
    lines.append(
        "Next: run it on a table — write /etc/baccarat-edge/table.yaml from config/table.example.yaml "
        "(reader device, broker, TLS, keys), check it with `baccarat-edge check-config FILE`, "
        "watch it with `baccarat-edge monitor --config FILE`; install guide: systemd/README.md"
    )
    return "\n".join(lines) + "\n"


def summary_json(result: DemoResult) -> str:
    return json.dumps(
        {
            "complete": result.complete,
            "shoe_id": result.shoe_id,
            "hands": result.hands,
            "results": result.results,
            "cards": result.cards,
            "bytes_written": result.bytes_written,
            "bytes_read": result.bytes_read,
            "journaled": result.journaled,
            "received": result.received,
            "gaps": result.gaps,
            "duplicates": result.duplicates,
            "alerts": result.alerts,
            "refused_commands": result.refused_commands,
            "shoe_ended": result.shoe_ended,
            "elapsed_s": round(result.elapsed_s, 3),
        }
    )
