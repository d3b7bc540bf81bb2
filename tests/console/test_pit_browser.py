"""The pit console in Debian's headless chromium, as a pit supervisor keeps it open all shift:
many pages at once, long shoes, late holds, dialogs, hostile text; at 1,366x768 and
1,920x1,080. Tables are played by the test over a real mosquitto, every message signed with
the tables' events key (the console verifies them), commands answered as a table would.
Each test failed on the console before its fix."""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.console.passwords import hash_password
from daemon.console.server import ConsoleApp
from daemon.console.settings import ConsoleSettings
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, sign
from tests.console.browser import start_chromium
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

DOCS = Path(__file__).resolve().parents[2] / "daemon" / "console" / "docs"
SIZES = ((1366, 768), (1920, 1080))
PASSWORDS = {"anna": "anna's long password", "vic": "vic's long password"}
KEY_TEXT = "the tables' events key, 32 bytes!"
EVENTS_KEY = Secret(KEY_TEXT.encode(), "events")
WAIT = 20.0
RLO = "\u202e"
EVIL = '<img src=x onerror="window.__pwned=1">'
LONG_ID = "L" * 64
HUGE_ID = "X" * 3000  # not a valid id: listed as text, never opened
CARDS = ("9s", "Kh", "4d", "Tc", "2h", "Js", "5c", "Ad", "7h", "3s", "8d", "Qc")


@dataclass
class Table:
    """One table played by the test: signed status, state and events on its topics."""

    table_id: str
    client: mqtt.Client
    seq: int = 0
    hand: int = 0
    cards: int = 0

    def publish(self, suffix: str, payload: bytes, retain: bool = False) -> None:
        self.client.publish(
            f"baccarat/v1/{self.table_id}/{suffix}", payload, qos=1, retain=retain
        ).wait_for_publish(10)

    def status(self, status: str = "online") -> None:
        body = {"table_id": self.table_id, "status": status, "ts": time.time()}
        self.publish("status", encode(signed_message(body, EVENTS_KEY)), retain=True)

    def state(self) -> None:
        """A retained state valid by the contract's schema (the console checks it)."""
        shoe = {
            "shoe_id": "s1",
            "phase": "ready",
            "decks": 8,
            "cards_out": self.cards,
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
            "hand": self.hand,
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
        body = {"table_id": self.table_id, "ts": time.time(), "last_seq": self.seq, "state": snapshot}
        self.publish("state", encode(signed_message(body, EVENTS_KEY)), retain=True)

    def event(self, kind: str, data: dict[str, Any], hand: int | None = None) -> None:
        self.seq += 1
        env: dict[str, Any] = {
            "schema_version": 1,
            "event_id": f"{self.table_id[:20]}-{self.seq}-{secrets.token_hex(3)}",
            "seq": self.seq,
            "table_id": self.table_id,
            "shoe_id": "s1",
            "hand": hand,
            "kind": kind,
            "ts": time.time(),
            "source": "reader",
            "data": data,
            "published_at": time.time(),
        }
        env["sig"] = sign(env, EVENTS_KEY, UNSIGNED_EVENT_FIELDS)
        self.publish("events", encode(env))

    def open_round(self) -> int:
        self.hand += 1
        self.event("round_opened", {"hand": self.hand, "bets": []}, self.hand)
        return self.hand

    def card(self, hand: int, slot: str, card: str) -> None:
        self.cards += 1
        self.event("card_dealt", {"slot": slot, "card": card, "round": hand, "source": "reader"}, hand)

    def complete(self, hand: int, winner: str, cards: dict[str, str]) -> None:
        player = [cards[s] for s in ("P1", "P2", "P3") if s in cards]
        banker = [cards[s] for s in ("B1", "B2", "B3") if s in cards]
        outcome = {
            "winner": winner,
            "player": {"cards": player},
            "banker": {"cards": banker},
            "player_pair": False,
            "banker_pair": False,
        }
        self.event("round_completed", {"hand": hand, "outcome": outcome}, hand)

    def play(self, winner: str, with_cards: bool = True) -> int:
        hand = self.open_round()
        cards = {slot: CARDS[(hand + i) % len(CARDS)] for i, slot in enumerate(("P1", "B1", "P2", "B2"))}
        if with_cards:
            for slot, card in cards.items():
                self.card(hand, slot, card)
        self.complete(hand, winner, cards)
        return hand


@dataclass
class Rig:
    broker: MosquittoBroker
    console: ConsoleApp
    driver: Any
    client: mqtt.Client
    tables: dict[str, Table]
    commands: list[dict[str, Any]] = field(default_factory=list)
    anna_key: Path | None = None


def _users(tmp: Path) -> Path:
    key = write_secret(tmp / "sup-anna.key", secrets.token_hex(32))
    fast = {"n": 2**14, "r": 8, "p": 1}
    path = tmp / "users.yaml"
    path.write_text(
        "users:\n"
        f"  - {{name: anna, password_hash: '{hash_password(PASSWORDS['anna'], **fast)}', role: supervisor, "
        f"key_id: sup-anna, key_file: {key}}}\n"
        f"  - {{name: vic, password_hash: '{hash_password(PASSWORDS['vic'], **fast)}', role: viewer}}\n"
    )
    return path


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("pit")
    broker = MosquittoBroker(tmp / "broker").start()
    key_file = write_secret(tmp / "events.key", KEY_TEXT)
    settings = ConsoleSettings.model_validate(
        {
            "listen": {"host": "127.0.0.1", "port": 0},
            "broker": {"host": "127.0.0.1", "port": broker.port, "tls": {"enabled": False}},
            "users_file": str(_users(tmp)),
            "reply_timeout_s": 10,
            "verify": {"keys": [{"file": str(key_file)}]},
            "limits": {"T1": "25 - 5,000", "T2": "100 - 10,000"},
        }
    )
    console = ConsoleApp(settings)
    console.start()
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"pit-{secrets.token_hex(3)}", protocol=mqtt.MQTTv5
    )
    connected = threading.Event()

    def on_connect(c: mqtt.Client, *_a: Any) -> None:
        c.subscribe("baccarat/v1/+/cmd", 1)
        connected.set()

    client.on_connect = on_connect
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    assert connected.wait(10)
    tables = {t: Table(t, client) for t in ("T1", "T2", "T3", "T4", "T5", "T6", LONG_ID, HUGE_ID)}
    rig = Rig(broker, console, None, client, tables, anna_key=tmp / "sup-anna.key")
    client.on_message = lambda _c, _u, msg: _answer(rig, msg)
    driver = None
    try:
        for table in tables.values():
            table.status()
        # T1: a 63-column shoe (every round a new big-road column); the others a few rounds
        for i in range(63):
            tables["T1"].play("banker" if i % 2 else "player", with_cards=i >= 60)
        tables["T1"].state()
        for name in ("T2", "T3", "T4", "T5", "T6", LONG_ID):
            for winner in ("banker", "banker", "player", "tie", "banker"):
                tables[name].play(winner)
            tables[name].state()
        tables["T2"].event("dealer_changed", {"dealer_id": "D-0042", "name": "Mia Chen"})
        driver = start_chromium(tmp / "chromium")
        rig.driver = driver
        yield rig
    finally:
        if driver is not None:
            driver.quit()
        console.stop()
        client.loop_stop()
        client.disconnect()
        broker.stop()


def _answer(rig: Rig, msg: mqtt.MQTTMessage) -> None:
    """A table's answer to a console command: accepted, signed; an acknowledge clears the alert."""
    command = json.loads(msg.payload)
    table_id = msg.topic.split("/")[2]
    rig.commands.append(command)
    reply = {
        "table_id": table_id,
        "command_id": command.get("command_id"),
        "action": command.get("action"),
        "status": "accepted",
        "code": None,
        "reason": None,
        "ts": time.time(),
    }
    threading.Thread(target=_reply, args=(rig, table_id, command, reply), daemon=True).start()


def _reply(rig: Rig, table_id: str, command: dict[str, Any], reply: dict[str, Any]) -> None:
    table = rig.tables[table_id]
    actor = f"supervisor:{command.get('key_id', '?')}"
    if command.get("action") == "acknowledge_alert":
        alert_id = command.get("args", {}).get("alert_id")
        table.event(
            "alert_cleared",
            {
                "alert_id": alert_id,
                "code": "unneeded_card",
                "reason": "acknowledged",
                "actor": actor,
                "command_id": command.get("command_id"),
            },
        )
    if command.get("action") == "dealer_changed":
        args = command.get("args", {})
        table.event(
            "dealer_changed", {"dealer_id": args.get("dealer_id"), "name": args.get("name"), "actor": actor}
        )
    table.publish("cmd/reply", encode(signed_message(reply, EVENTS_KEY)))


def _until(rig: Rig, condition: Any, what: str, timeout: float = WAIT) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        wait = WebDriverWait(
            rig.driver, timeout, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
        )
        return wait.until(condition)
    except TimeoutException:
        page = rig.driver.execute_script("return document.body ? document.body.innerText : '';")
        raise AssertionError(f"waiting for {what}; the page shows:\n{page[:3000]}") from None


def _js(rig: Rig, script: str, *args: Any) -> Any:
    return rig.driver.execute_script(script, *args)


def _log_in(rig: Rig, name: str) -> None:
    from selenium.webdriver.common.by import By

    rig.driver.get(rig.console.url + "/login")
    rig.driver.find_element(By.ID, "name").send_keys(name)
    rig.driver.find_element(By.ID, "password").send_keys(PASSWORDS[name])
    rig.driver.find_element(By.ID, "login").click()
    _until(rig, lambda d: d.find_elements(By.ID, "floor"), "the floor after log-in")


def _size(rig: Rig, width: int, height: int) -> None:
    rig.driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def _shot(rig: Rig, name: str) -> None:
    """The page as a small PNG in the docs with BACCARAT_EDGE_UPDATE_SCREENSHOT=1 (else nowhere)."""
    if os.environ.get("BACCARAT_EDGE_UPDATE_SCREENSHOT") != "1":
        return
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(rig.driver.get_screenshot_as_png())).convert("RGB")
    image.quantize(colors=64).save(DOCS / f"{name}.png", optimize=True)


NO_SIDEWAYS = "return [document.documentElement.scrollWidth, window.innerWidth];"
NEWEST = """
const cells = Array.from(document.querySelectorAll('#road-' + arguments[0] + ' .cell'));
const newest = cells.reduce((a, c) => (+c.dataset.col > +a.dataset.col ? c : a));
const r = newest.getBoundingClientRect(), box = newest.closest('.scroller').getBoundingClientRect();
return [+newest.dataset.col, r.left, r.right, box.left, box.right, window.innerWidth];
"""


def test_log_in_and_the_floor_shows_every_table(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    _log_in(rig, "anna")
    _until(
        rig,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#floor [data-table]")) == len(rig.tables),
        "every table on the floor",
    )


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_nothing_runs_off_screen_and_roads_show_their_newest_column(
    rig: Rig, width: int, height: int
) -> None:
    """A 63-column shoe ended at 2,724 px in a 1,400 px window; a long table id pushed the
    floor's columns 90,000 px right."""
    from selenium.webdriver.common.by import By

    _size(rig, width, height)
    rig.driver.get(rig.console.url + "/")
    _until(
        rig,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#floor [data-table]")) == len(rig.tables),
        "floor",
    )
    scroll, inner = _js(rig, NO_SIDEWAYS)
    assert scroll <= inner, f"the floor scrolls sideways: {scroll} px in {inner}"
    tile = rig.driver.find_element(By.CSS_SELECTOR, "#floor [data-table='T2']")
    assert "Mia Chen" in tile.text
    assert "25" not in tile.find_element(By.CSS_SELECTOR, "dd[data-figure='Limits']").text
    assert tile.find_element(By.CSS_SELECTOR, "dd[data-figure='Limits']").text == "100 - 10,000"
    assert tile.find_element(By.CSS_SELECTOR, "dd[data-figure='Cards left']").text == str(8 * 52 - 20)
    assert tile.find_element(By.CSS_SELECTOR, ".status .shape").text == "✔"
    assert tile.find_elements(By.CSS_SELECTOR, ".grid.mini .cell")
    _shot(rig, f"floor-{width}")
    rig.driver.get(rig.console.url + "/table/T1")
    _until(rig, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#road-big_road .cell")) == 63, "the big road")
    scroll, inner = _js(rig, NO_SIDEWAYS)
    assert scroll <= inner, f"the table view scrolls sideways: {scroll} px in {inner}"
    for road in ("big_road", "bead_plate"):
        col, left, right, box_left, box_right, inner = _js(rig, NEWEST, road)
        assert col >= 10
        where = (road, left, right, box_left, box_right, inner)
        assert box_left - 1 <= left, where
        assert right <= box_right + 1, where
        assert right <= inner, where
    # colour plus shape: a Banker cell is square-cornered, a Player cell round
    radii = _js(
        rig,
        """return ['P', 'B'].map((k) => getComputedStyle(
        document.querySelector('#road-big_road .cell.' + k)).borderTopLeftRadius);""",
    )
    assert radii[0] != radii[1]
    _shot(rig, f"table-{width}")
    rig.driver.get(rig.console.url + "/dealer/T1")
    _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, ".dealer #layout .card"), "the dealer layout")
    scroll, inner = _js(rig, NO_SIDEWAYS)
    assert scroll <= inner
    _shot(rig, f"dealer-{width}")
    rig.driver.get(rig.console.url + "/tables/T1,T2,T3,T4")
    _until(
        rig, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#panes .pane")) == 4, "four tables on one screen"
    )
    scroll, inner = _js(rig, NO_SIDEWAYS)
    assert scroll <= inner
    _js(rig, "return 1;")


def test_eight_pages_share_one_stream_and_an_action_still_goes_through(rig: Rig) -> None:
    """Each page held a stream; the browser allows six connections per host and the session
    six streams: with six pages open, a seventh never loaded and a Confirm hung."""
    from selenium.webdriver.common.by import By

    _size(rig, 1366, 768)
    driver = rig.driver
    first = driver.current_window_handle
    t6 = rig.tables["T6"]
    hand = t6.hand
    t6.event(
        "alert_raised",
        {
            "alert_id": "a-t6",
            "code": "unneeded_card",
            "severity": "critical",
            "message": "card after round",
            "hand": hand,
            "holds": "next_round",
        },
    )
    pages = [
        "/",
        "/table/T1",
        "/table/T2",
        "/table/T3",
        "/dealer/T1",
        "/dealer/T2",
        "/tables/T4,T5",
        "/table/T6",
    ]
    handles = []
    for path in pages:
        driver.switch_to.new_window("tab")
        handles.append(driver.current_window_handle)
        driver.get(rig.console.url + path)
        _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, "#app > *:nth-child(2)"), f"the page {path}")
    session = driver.get_cookie("console_session")["value"]
    # one stream for all eight (a new page's views reopen it: the old one ends within a second)
    _until(rig, lambda _d: rig.console.streams.open_count(session) == 1, "a single stream")
    # the eighth page acts: its Confirm reaches the table and the reply comes back
    ack = ".alert[data-alert-id='a-t6'] button[data-action='acknowledge_alert']"
    _until(
        rig,
        lambda d: d.find_element(By.CSS_SELECTOR, ack).is_enabled() and d.find_element(By.CSS_SELECTOR, ack),
        "ack",
    )
    driver.find_element(By.CSS_SELECTOR, ack).click()
    _until(rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    driver.find_element(By.ID, "confirm-send").click()
    reply = _until(
        rig, lambda d: d.find_element(By.CSS_SELECTOR, "#reply[data-status='accepted']").text, "reply"
    )
    assert "acknowledge_alert: accepted" in reply
    history = _until(
        rig,
        lambda d: "acknowledged by" in (t := d.find_element(By.ID, "alert-history").text) and t,
        "history",
    )
    assert "supervisor:sup-anna" in history
    for handle in handles:
        driver.switch_to.window(handle)
        driver.close()
    driver.switch_to.window(first)


def test_the_view_keeps_updating_under_an_open_dialog(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    t3 = rig.tables["T3"]
    t3.event(
        "alert_raised",
        {
            "alert_id": "a-t3",
            "code": "reader_error",
            "severity": "warning",
            "message": "read error",
            "hand": None,
            "holds": None,
        },
    )
    rig.driver.get(rig.console.url + "/table/T3")
    ack = ".alert[data-alert-id='a-t3'] button[data-action='acknowledge_alert']"
    _until(rig, lambda d: d.find_element(By.CSS_SELECTOR, ack), "the alert").click()
    _until(rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    hand = t3.open_round()
    t3.card(hand, "P1", "Qh")
    _until(
        rig,
        lambda d: d.find_elements(By.CSS_SELECTOR, f"#layout .card[data-hand='{hand}'][data-card='Qh']"),
        "the card dealt while the dialog is open",
    )
    assert rig.driver.find_element(By.ID, "confirm").get_attribute("open") is not None
    rig.driver.find_element(By.ID, "confirm-cancel").click()


def test_a_late_hold_keeps_the_current_result_and_clears_the_dealer_alert(rig: Rig) -> None:
    """Once a held round was resolved after later rounds, the views lost the current round's
    result and the dealer display kept showing the resolved alert."""
    from selenium.webdriver.common.by import By

    t4 = rig.tables["T4"]
    held = t4.open_round()
    cards = {"P1": "9s", "B1": "2c", "P2": "Kd", "B2": "3h"}
    for slot, card in cards.items():
        t4.card(held, slot, card)
    t4.event("round_held", {"hand": held, "cards": cards, "blocked_by": ["unneeded_card"]}, held)
    t4.event(
        "alert_raised",
        {
            "alert_id": "a-t4",
            "code": "unneeded_card",
            "severity": "critical",
            "message": "unneeded card",
            "hand": held,
            "holds": held,
        },
        held,
    )
    later = t4.play("banker")
    rig.driver.get(rig.console.url + "/dealer/T4")
    _until(
        rig,
        lambda d: "unneeded card" in d.find_element(By.ID, "last-alert").text,
        "the alert on the dealer display",
    )
    t4.event("hold_resolved", {"hand": held, "actor": "supervisor:sup-anna", "command_id": "c1"}, held)
    t4.complete(held, "player", cards)
    t4.event(
        "alert_cleared",
        {
            "alert_id": "a-t4",
            "code": "unneeded_card",
            "reason": "hold_resolved",
            "actor": "supervisor:sup-anna",
        },
        held,
    )
    _until(rig, lambda d: d.find_element(By.ID, "last-alert").text == "", "the resolved alert to go")
    assert rig.driver.find_element(By.CSS_SELECTOR, ".round-title").text == f"Round {later}"
    assert rig.driver.find_element(By.ID, "result").text == "■ Banker wins"
    rig.driver.get(rig.console.url + "/table/T4")
    assert _until(rig, lambda d: d.find_element(By.ID, "result").text, "the result") == "■ Banker wins"
    rounds = rig.driver.find_element(By.ID, "last-rounds").text
    assert f"{held} Player wins" in rounds
    assert f"{later} Banker wins" in rounds


def test_a_new_hold_flashes_in_the_pits_words_and_the_keyboard_can_act(rig: Rig) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    t5 = rig.tables["T5"]
    rig.driver.get(rig.console.url + "/table/T5")
    _until(rig, lambda d: d.find_elements(By.ID, "holds"), "the table view")
    t5.event(
        "alert_raised",
        {
            "alert_id": "a-t5",
            "code": "unneeded_card",
            "severity": "critical",
            "message": "card 7h after round",
            "hand": t5.hand,
            "holds": "next_round",
        },
    )
    alert = _until(
        rig, lambda d: d.find_element(By.CSS_SELECTOR, ".alert.flash[data-alert-id='a-t5']"), "a flash"
    )
    assert (
        alert.find_element(By.CSS_SELECTOR, "h3").text
        == "▲ A card was drawn that the tableau did not call for"
    )
    assert "critical" in alert.text
    assert "open " in alert.text
    body = rig.driver.find_element(By.TAG_NAME, "body")
    body.click()
    for _ in range(80):  # Tab through the page to the alert's Acknowledge button
        rig.driver.switch_to.active_element.send_keys(Keys.TAB)
        active = rig.driver.switch_to.active_element
        if active.get_attribute("data-focus-key") == "acknowledge_alert:a-t5":
            break
    else:
        raise AssertionError("Tab never reached the Acknowledge button")
    active.send_keys(Keys.ENTER)
    _until(rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    rig.driver.switch_to.active_element.send_keys(Keys.TAB)
    assert rig.driver.switch_to.active_element.get_attribute("id") == "confirm-send"
    rig.driver.switch_to.active_element.send_keys(Keys.ENTER)
    _until(rig, lambda d: d.find_element(By.CSS_SELECTOR, "#reply[data-status='accepted']"), "the reply")


def test_hostile_text_in_every_new_field_stays_isolated_text(rig: Rig) -> None:
    """Right-to-left override characters reordered the words around a table's text."""
    from selenium.webdriver.common.by import By

    t5 = rig.tables["T5"]
    t5.event("dealer_changed", {"dealer_id": EVIL + RLO, "name": RLO + EVIL})
    t5.event(
        "alert_raised",
        {
            "alert_id": "a-evil" + RLO,
            "code": EVIL + RLO,
            "severity": "critical",
            "message": RLO + "gnp.exe " + EVIL,
            "hand": None,
            "holds": None,
        },
    )
    for path in ("/", "/table/T5", "/dealer/T5", "/tables/T5"):
        rig.driver.get(rig.console.url + path)
        _until(rig, lambda d: RLO in d.find_element(By.ID, "app").text, f"the hostile text on {path}")
        unisolated = _js(
            rig,
            """
            const out = [];
            const walk = document.createTreeWalker(document.getElementById('app'), NodeFilter.SHOW_TEXT);
            while (walk.nextNode()) {
              const n = walk.currentNode;
              const parent = n.parentElement;
              if (n.data.includes('\\u202e') && parent.tagName !== 'BDI') out.push(parent.outerHTML);
            }
            return out;""",
        )
        assert unisolated == [], (path, unisolated)
        assert rig.driver.find_elements(By.TAG_NAME, "img") == []
        assert _js(rig, "return window.__pwned === undefined;")


def test_the_dealer_on_record_and_their_pace_per_dealer(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    t2 = rig.tables["T2"]
    for winner in ("banker", "player"):
        t2.play(winner)
    t2.event(
        "alert_raised",
        {
            "alert_id": "a-t2",
            "code": "unneeded_card",
            "severity": "critical",
            "message": "unneeded",
            "hand": t2.hand,
            "holds": "next_round",
        },
    )
    rig.driver.get(rig.console.url + "/table/T2")
    row = _until(
        rig, lambda d: d.find_element(By.CSS_SELECTOR, "#pace tr[data-dealer='D-0042']"), "the pace row"
    )
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[0] == "D-0042"
    assert cells[1] == "2"
    assert cells[6] == "unneeded card 50"
    assert rig.driver.find_element(By.CSS_SELECTOR, "dd[data-figure='Dealer']").text == "Mia Chen"
    table_row = rig.driver.find_element(By.CSS_SELECTOR, "#pace tr[data-dealer='Table']")
    assert table_row.find_elements(By.TAG_NAME, "td")[1].text == "7"  # 5 before the dealer was named


def test_a_dealer_change_from_the_table_view_is_signed_with_the_persons_key(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    from daemon.mqtt.secrets import SigningKeySource
    from daemon.mqtt.signing import verify

    rig.driver.get(rig.console.url + "/table/T4")
    button = "#dealer-change button[data-action='dealer_changed']"
    _until(rig, lambda d: d.find_element(By.CSS_SELECTOR, button).is_enabled(), "the dealer change button")
    sent = len(rig.commands)
    for dealer_id, name in (("D-7", "  "), ("D-8", "Ola Berg")):
        rig.driver.find_element(By.CSS_SELECTOR, button).click()
        _until(
            rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog"
        )
        rig.driver.find_element(By.ID, "field-dealer_id").send_keys(dealer_id)
        rig.driver.find_element(By.ID, "field-name").send_keys(name)
        rig.driver.find_element(By.ID, "confirm-send").click()
        reply = _until(
            rig,
            lambda d, i=dealer_id: (
                len(rig.commands) > sent and i in json.dumps(rig.commands[-1])
                and d.find_element(By.CSS_SELECTOR, "#reply[data-status='accepted']").text
            ),
            "the reply",
        )  # fmt: skip
        assert "dealer_changed: accepted" in reply
    first, second = rig.commands[sent:]
    assert (first["action"], first["args"]) == ("dealer_changed", {"dealer_id": "D-7"})  # empty name left out
    assert second["args"] == {"dealer_id": "D-8", "name": "Ola Berg"}
    assert rig.anna_key is not None
    key = SigningKeySource(file=rig.anna_key).load()
    for command in (first, second):
        assert command["key_id"] == "sup-anna"
        assert verify(command, key)
    shown = _until(
        rig,
        lambda d: (t := d.find_element(By.CSS_SELECTOR, "dd[data-figure='Dealer']").text) == "Ola Berg" and t,
        "the new dealer",
    )
    assert shown == "Ola Berg"


def test_a_table_online_but_without_a_card_for_five_minutes_reads_silent(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    rig.driver.get(rig.console.url + "/")
    tile = "#floor [data-table='T3'] .status"
    assert (
        _until(rig, lambda d: d.find_element(By.CSS_SELECTOR, tile).get_attribute("data-status"), "T3")
        == "online"
    )
    # the page's clock five minutes on (the console's own "last card" time stays)
    _js(rig, "const now = Date.now.bind(Date); Date.now = () => now() + 301000;")
    rig.tables["T3"].open_round()  # an update of the floor redraws it
    _until(
        rig,
        lambda d: d.find_element(By.CSS_SELECTOR, tile).get_attribute("data-status") == "silent",
        "silent",
    )
    assert rig.driver.find_element(By.CSS_SELECTOR, tile).text == "◷ silent"
    age = rig.driver.find_element(
        By.CSS_SELECTOR, "#floor [data-table='T3'] dd[data-figure='Last card']"
    ).text
    assert " min " in age  # five minutes and more
