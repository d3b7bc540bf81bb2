"""The pit console under a floor's load: N tables dealing at a real pace on one console with P
browser pages open (Debian's headless chromium), then an hour's worth of every table's events
replayed faster to watch the console's memory.

Phase 1 (latency): the tables deal in real time (a round every ``--round-s`` seconds: betting,
4-6 cards 1.5 s apart, settling); the pages are the floor, ``P-1`` table views and they all
share the browser's one stream. Each table-view page notes when every card first appears
(MutationObserver, ``Date.now()``); the publisher notes when it published it (same clock):
card to page = appeared - published, p50/p95/p99 over every card of every watched table.

Phase 2 (memory): the same tables, events of ``--hours`` hours replayed ``--speed`` times
faster, the pages still open; the console's RSS sampled every 10% of the events.

The console runs as its own process (``baccarat-edge console --config``); everything is signed
with the tables' events key as a real table does and verified by the console. Nice it: the
machine is shared. ``--json`` prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from bench.common import cpu_seconds, percentile, report, rss_bytes
from bench.rig import Broker
from daemon.console.passwords import hash_password
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, sign
from tests.console.browser import start_chromium
from tests.support.broker import free_port

KEY_TEXT = secrets.token_hex(32)
KEY = Secret(KEY_TEXT.encode(), "events")
RANKS = "A23456789TJQK"
SUITS = "cdhs"
PASSWORD = "bench password, long enough"  # noqa: S105 - the bench's own made-up viewer
OBSERVE = """
window.__cards = {};
const seen = (root) => {
  if (!root.querySelectorAll) return;
  for (const c of root.querySelectorAll('#layout .card[data-card]')) {
    const key = c.dataset.hand + '|' + c.dataset.slot + '|' + c.dataset.card;
    if (!(key in window.__cards)) window.__cards[key] = Date.now();
  }
};
new MutationObserver((records) => { for (const r of records) for (const n of r.addedNodes) seen(n); })
  .observe(document.body, {childList: true, subtree: true});
"""


class FloorPublisher:
    """N tables on one MQTT connection, each dealing on its own schedule."""

    def __init__(self, port: int, tables: int) -> None:
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"bench-floor-{secrets.token_hex(3)}", protocol=mqtt.MQTTv5
        )
        self.client.max_queued_messages_set(0)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        self.ids = [f"T{n:02d}" for n in range(1, tables + 1)]
        self.seq = dict.fromkeys(self.ids, 0)
        self.hand = dict.fromkeys(self.ids, 0)
        self.published: dict[str, float] = {}  # "table|hand|slot|card" -> publish time
        self.events = 0
        self.lock = threading.Lock()

    def _send(self, table: str, suffix: str, payload: bytes, retain: bool = False) -> None:
        self.client.publish(f"baccarat/v1/{table}/{suffix}", payload, qos=1, retain=retain)

    def status(self) -> None:
        for table in self.ids:
            body = {"table_id": table, "status": "online", "ts": time.time()}
            self._send(table, "status", encode(signed_message(body, KEY)), retain=True)

    def event(self, table: str, kind: str, data: dict[str, Any], hand: int | None) -> None:
        with self.lock:
            self.seq[table] += 1
            seq = self.seq[table]
            self.events += 1
        env: dict[str, Any] = {
            "schema_version": 1,
            "event_id": f"{table}-{seq}",
            "seq": seq,
            "table_id": table,
            "shoe_id": "bench",
            "hand": hand,
            "kind": kind,
            "ts": time.time(),
            "source": "reader",
            "data": data,
            "published_at": time.time(),
        }
        env["sig"] = sign(env, KEY, UNSIGNED_EVENT_FIELDS)
        self._send(table, "events", encode(env))

    def state(self, table: str, cards_out: int) -> None:
        """A retained state valid by the contract's schema (the console checks it)."""
        shoe = {
            "shoe_id": "bench",
            "phase": "ready",
            "decks": 8,
            "cards_out": cards_out,
            "burn_remaining": 0,
            "round_burn_remaining": 0,
            "cut_card_seen": False,
            "last_hand": None,
            "end_reason": None,
        }
        flow = {
            "phase": "waiting",
            "round_id": None,
            "closes_at": None,
            "last_round_id": None,
            "burn_signalled": False,
        }
        snapshot = {
            "shoe": shoe,
            "variant": "standard",
            "hand": self.hand[table],
            "round": None,
            "offered_bets": {"hand": None, "bets": []},
            "alerts": [],
            "held_rounds": [],
            "rescan_needed": False,
            "disconnected_devices": [],
            "storage": {"full": False, "detail": None, "refused_cards": 0},
            "reads_waiting_in_pull": 0,
            "game_flow": flow,
            "results": [],
        }
        body = {"table_id": table, "ts": time.time(), "last_seq": self.seq[table], "state": snapshot}
        self._send(table, "state", encode(signed_message(body, KEY)), retain=True)

    def deal(
        self, table: str, stop: threading.Event, round_s: float, speed: float, rounds: int | None
    ) -> None:
        """Rounds back to back: betting 40%, cards 1.5 s apart, the rest settling."""
        rng = random.Random(table)
        cards_out = 0
        dealt = 0
        stop.wait(rng.uniform(0, round_s) / speed)
        while not stop.is_set() and (rounds is None or dealt < rounds):
            if self.hand[table] >= 80:
                self.hand[table] = 0
                cards_out = 0
                self.event(table, "shoe_started", {}, None)
            self.hand[table] += 1
            hand = self.hand[table]
            self.event(table, "betting_opened", {"phase": "betting", "round_id": None}, None)
            stop.wait(round_s * 0.4 / speed)
            self.event(table, "betting_closed", {"phase": "dealing", "round_id": None}, None)
            self.event(table, "round_opened", {"hand": hand, "bets": []}, hand)
            slots = (
                ["P1", "B1", "P2", "B2"]
                + (["P3"] if rng.random() < 0.5 else [])
                + (["B3"] if rng.random() < 0.4 else [])
            )
            for slot in slots:
                if stop.is_set():
                    # the phase ends: stop mid-round. Dealing on would publish every table's
                    # remaining cards at the same instant, a burst no floor ever makes (it
                    # was the whole p95 tail of card to stream: queued behind ~100 cards)
                    return
                card = rng.choice(RANKS) + rng.choice(SUITS)
                with self.lock:
                    self.published.setdefault(f"{table}|{hand}|{slot}|{card}", time.time())
                self.event(table, "card_dealt", {"slot": slot, "card": card, "round": hand}, hand)
                cards_out += 1
                stop.wait(1.5 / speed)
            winner = rng.choice(["player", "banker", "banker", "tie"])
            self.event(table, "round_completed", {"hand": hand, "outcome": {"winner": winner}}, hand)
            self.state(table, cards_out)
            dealt += 1
            stop.wait(max(0.0, round_s * 0.6 - 1.5 * len(slots)) / speed)

    def run(self, seconds: float | None, round_s: float, speed: float, rounds: int | None = None) -> None:
        stop = threading.Event()
        threads = [
            threading.Thread(target=self.deal, args=(t, stop, round_s, speed, rounds), daemon=True)
            for t in self.ids
        ]
        for thread in threads:
            thread.start()
        if seconds is not None:
            stop.wait(seconds)
            stop.set()
        for thread in threads:
            thread.join()

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _console(tmp: Path, broker_port: int) -> tuple[subprocess.Popen[bytes], int]:
    key = tmp / "events.key"
    key.write_text(KEY_TEXT + "\n")
    key.chmod(0o600)
    users = tmp / "users.yaml"
    users.write_text(
        f"users:\n  - {{name: pit, password_hash: '{hash_password(PASSWORD, n=2**14)}', role: viewer}}\n"
    )
    port = free_port()
    config = tmp / "console.yaml"
    config.write_text(
        json.dumps(
            {
                "listen": {"host": "127.0.0.1", "port": port},
                "broker": {"host": "127.0.0.1", "port": broker_port, "tls": {"enabled": False}},
                "users_file": str(users),
                "verify": {"keys": [{"file": str(key)}]},
            }
        )
    )
    log = open(tmp / "console.log", "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "console", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    _wait_listening(port, process)
    return process, port


def _wait_listening(port: int, process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Until the console accepts connections (a loaded machine starts it slowly)."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the console exited ({process.returncode}) before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the console did not listen on {port} within {timeout:g} s")


def _pages(driver: Any, base: str, tables: list[str], pages: int) -> list[str]:
    """Log in, open the floor and ``pages - 1`` table views (one tab each); their handles."""
    from selenium.webdriver.common.by import By

    driver.get(base + "/login")
    driver.find_element(By.ID, "name").send_keys("pit")
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.ID, "login").click()
    time.sleep(1)
    handles = [driver.current_window_handle]
    for table in tables[: pages - 1]:
        driver.switch_to.new_window("tab")
        driver.get(f"{base}/table/{table}")
        driver.execute_script(OBSERVE)
        handles.append(driver.current_window_handle)
    return handles


class MqttWatcher:
    """A plain MQTT subscriber beside the console: when each card event reaches a client of
    the broker at all (the same-run baseline: publisher, broker and this machine's load)."""

    def __init__(self, port: int) -> None:
        self.seen: dict[str, float] = {}
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"bench-watch-{secrets.token_hex(3)}", protocol=mqtt.MQTTv5
        )
        self.client.on_message = self._message
        self.client.on_connect = lambda c, *_a: c.subscribe("baccarat/v1/+/events", 1)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        now = time.time()
        env = json.loads(msg.payload)
        if env.get("kind") == "card_dealt":
            d = env["data"]
            self.seen.setdefault(f"{env['table_id']}|{d['round']}|{d['slot']}|{d['card']}", now)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class StreamWatcher:
    """A plain HTTP client on the console's stream for the watched tables (the session's
    cookie): when each card first appears in a model, to split the latency into the console's
    part (card to stream) and the browser's (stream to page)."""

    def __init__(self, port: int, cookie: str, tables: list[str]) -> None:
        self.port, self.cookie, self.tables = port, cookie, tables
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import http.client

        query = "&".join(f"v=table:{t}" for t in self.tables)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("GET", f"/stream?{query}", headers={"Cookie": f"console_session={self.cookie}"})
        response = conn.getresponse()
        while not self.stop.is_set():
            line = response.readline()
            if not line:
                return
            if not line.startswith(b"data: "):
                continue
            now = time.time()
            message = json.loads(line[6:])
            table = message["view"].split(":", 1)[1]
            rnd = message["model"].get("round") or {}
            for slot, card in (rnd.get("cards") or {}).items():
                self.seen.setdefault(f"{table}|{rnd.get('hand')}|{slot}|{card}", now)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--latency-s", type=float, default=180.0, help="phase 1 length (real time)")
    parser.add_argument("--round-s", type=float, default=25.0, help="one round, betting to next betting")
    parser.add_argument("--hours", type=float, default=1.0, help="phase 2: hours of events replayed")
    parser.add_argument("--speed", type=float, default=12.0, help="phase 2: replay speed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as name:
        tmp = Path(name)
        broker = Broker(tmp / "broker").start()
        console, port = _console(tmp, broker.port)
        floor = FloorPublisher(broker.port, args.tables)
        driver = None
        try:
            time.sleep(3)
            floor.status()
            driver = start_chromium(tmp / "chromium")
            handles = _pages(driver, f"http://127.0.0.1:{port}", floor.ids, args.pages)
            cookie = driver.get_cookie("console_session")["value"]
            watcher = StreamWatcher(port, cookie, floor.ids[: args.pages - 1])
            watcher.thread.start()
            mqtt_watcher = MqttWatcher(broker.port)
            rss_start, cpu_start = rss_bytes(console.pid), cpu_seconds(console.pid)
            floor.run(args.latency_s, args.round_s, 1.0)
            time.sleep(2)
            cpu_phase1 = cpu_seconds(console.pid) - cpu_start
            delays: list[float] = []
            for handle in handles[1:]:
                driver.switch_to.window(handle)
                shown: dict[str, int] = driver.execute_script("return window.__cards || {};")
                table = driver.current_url.rsplit("/", 1)[-1]
                for key, at_ms in shown.items():
                    published = floor.published.get(f"{table}|{key}")
                    if published is not None:
                        delays.append(at_ms / 1000.0 - published)
            watcher.stop.set()
            mqtt_watcher.close()
            to_mqtt = [at - floor.published[k] for k, at in mqtt_watcher.seen.items() if k in floor.published]
            to_stream = [at - floor.published[k] for k, at in watcher.seen.items() if k in floor.published]
            watched = sum(1 for k in floor.published if k.split("|")[0] in floor.ids[: args.pages - 1])
            rss_after_latency = rss_bytes(console.pid)
            # phase 2: an hour's worth of events, faster
            rounds = int(args.hours * 3600 / args.round_s)
            samples: list[tuple[int, int]] = []
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.wait(5.0):
                    samples.append((floor.events, rss_bytes(console.pid)))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            floor.run(None, args.round_s, args.speed, rounds)
            replay_s = time.monotonic() - started
            sampling.set()
            sampler.join()
            mib = [round(r / 2**20, 1) for _, r in samples]
            tenth = max(1, len(mib) // 10)
            figures = {
                "tables": args.tables,
                "pages": args.pages,
                "round_s": args.round_s,
                "phase1_s": args.latency_s,
                "cards_watched_published": watched,
                "cards_seen_on_pages": len(delays),
                "card_to_page_ms": {
                    "p50": round(percentile(delays, 50) * 1000, 1) if delays else None,
                    "p95": round(percentile(delays, 95) * 1000, 1) if delays else None,
                    "p99": round(percentile(delays, 99) * 1000, 1) if delays else None,
                    "max": round(max(delays) * 1000, 1) if delays else None,
                },
                "card_to_mqtt_subscriber_ms (baseline)": {
                    "p50": round(percentile(to_mqtt, 50) * 1000, 1) if to_mqtt else None,
                    "p95": round(percentile(to_mqtt, 95) * 1000, 1) if to_mqtt else None,
                    "p99": round(percentile(to_mqtt, 99) * 1000, 1) if to_mqtt else None,
                    "n": len(to_mqtt),
                },
                "card_to_stream_ms": {
                    "p50": round(percentile(to_stream, 50) * 1000, 1) if to_stream else None,
                    "p95": round(percentile(to_stream, 95) * 1000, 1) if to_stream else None,
                    "p99": round(percentile(to_stream, 99) * 1000, 1) if to_stream else None,
                    "n": len(to_stream),
                },
                "console_cpu_share_phase1": round(cpu_phase1 / args.latency_s, 3),
                "rss_mib": {
                    "start": round(rss_start / 2**20, 1),
                    "after_phase1": round(rss_after_latency / 2**20, 1),
                    "replay_every_10pct": mib[::tenth],
                    "end": mib[-1] if mib else None,
                },
                "replay": {
                    "hours": args.hours,
                    "speed": args.speed,
                    "rounds_per_table": rounds,
                    "events": floor.events,
                    "seconds": round(replay_s, 1),
                },
            }
            report("pit console: 50 tables, 20 pages", figures, args.json)
        finally:
            if driver is not None:
                driver.quit()
            floor.close()
            console.terminate()
            console.wait(20)
            broker.stop()
    return 0


if __name__ == "__main__":
    os.nice(10)
    sys.exit(main())
