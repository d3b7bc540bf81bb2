"""A squeeze table in the pit console, in Debian's headless chromium: cards dealt face down show
their backs (no face, no total, anywhere on the page) until revealed; each reveal is checked in
the page (``static/reveal-check.js``, WebCrypto SHA-256) against the commitment published at
the deal, and a card revealed as another than the one committed is a named problem on the table
view and the dealer display. The table is played by the test over a real mosquitto, every
message signed with the table's events key (the console verifies them)."""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.console.server import ConsoleApp
from daemon.console.settings import ConsoleSettings
from daemon.mqtt.reveal_check import SCHEME, commitment
from tests.console.browser import start_chromium
from tests.console.test_pit_browser import KEY_TEXT, PASSWORDS, Table, _users
from tests.mqtt.test_reveal_check import NONCE, VECTOR
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

WAIT = 20.0
DEALT = {"P1": "8s", "B1": "Kd", "P2": "Qh", "B2": "7c"}
FACES = re.compile(r"(?:10|[2-9JQKA])[♣♦♥♠]")


@dataclass
class SqueezeRig:
    broker: MosquittoBroker
    console: ConsoleApp
    driver: Any
    client: mqtt.Client
    table: Table


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqueezeRig]:
    tmp = tmp_path_factory.mktemp("squeeze")
    broker = MosquittoBroker(tmp / "broker").start()
    key_file = write_secret(tmp / "events.key", KEY_TEXT)
    settings = ConsoleSettings.model_validate(
        {
            "listen": {"host": "127.0.0.1", "port": 0},
            "broker": {"host": "127.0.0.1", "port": broker.port, "tls": {"enabled": False}},
            "users_file": str(_users(tmp)),
            "verify": {"keys": [{"file": str(key_file)}]},
        }
    )
    console = ConsoleApp(settings)
    console.start()
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"sq-{secrets.token_hex(3)}", protocol=mqtt.MQTTv5
    )
    connected = threading.Event()
    client.on_connect = lambda *_a: connected.set()
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    assert connected.wait(10)
    table = Table("SQ1", client)
    driver = None
    try:
        table.status()
        table.state()
        driver = start_chromium(tmp / "chromium")
        yield SqueezeRig(broker, console, driver, client, table)
    finally:
        if driver is not None:
            driver.quit()
        console.stop()
        client.loop_stop()
        client.disconnect()
        broker.stop()


def _until(rig: SqueezeRig, condition: Any, what: str) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        wait = WebDriverWait(
            rig.driver, WAIT, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
        )
        return wait.until(condition)
    except TimeoutException:
        page = rig.driver.execute_script("return document.body ? document.body.innerText : '';")
        raise AssertionError(f"waiting for {what}; the page shows:\n{page[:3000]}") from None


def _open(rig: SqueezeRig, path: str) -> None:
    from selenium.webdriver.common.by import By

    if not rig.driver.find_elements(By.ID, "logout") and "/dealer/" not in rig.driver.current_url:
        rig.driver.get(rig.console.url + "/login")
        rig.driver.find_element(By.ID, "name").send_keys("vic")
        rig.driver.find_element(By.ID, "password").send_keys(PASSWORDS["vic"])
        rig.driver.find_element(By.ID, "login").click()
        _until(rig, lambda d: d.find_elements(By.ID, "floor"), "the floor after log-in")
    rig.driver.get(rig.console.url + path)


def _digest(hand: int, slot: str, card: str) -> str:
    return commitment("SQ1", "s1", hand, slot, card=card, nonce=NONCE)


def _deal_face_down(table: Table, hand: int) -> None:
    for slot, card in DEALT.items():
        table.cards += 1
        data = {
            "slot": slot,
            "round": hand,
            "source": "reader",
            "commitment": _digest(hand, slot, card),
            "scheme": SCHEME,
        }
        table.event("card_dealt", data, hand)


def _reveal(table: Table, hand: int, slot: str, card: str, digest: str | None = None) -> None:
    by = {"source": "server", "actor": "game_server", "command_id": f"rv-{hand}-{slot}"}
    data = {"slot": slot, "round": hand, "card": card, "nonce": NONCE, "scheme": SCHEME,
            "commitment": digest or _digest(hand, slot, card), "revealed_by": by}  # fmt: skip
    table.event("card_revealed", data, hand)


def _page_text(rig: SqueezeRig) -> str:
    """The page's text with all white space taken out (a card's rank and suit are two lines)."""
    text = str(rig.driver.execute_script("return document.getElementById('app').innerText;"))
    return re.sub(r"\s+", "", text)


def test_the_pages_commitment_is_the_contracts(rig: SqueezeRig) -> None:
    _open(rig, "/table/SQ1")
    _until(rig, lambda d: d.execute_script("return !!self.BaccaratRevealCheck;"), "the reveal check loaded")
    got = rig.driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "self.BaccaratRevealCheck.commitment('T7', 'shoe-1', 3, 'P1', '8s', arguments[0]).then(done);",
        NONCE,
    )
    assert got == VECTOR


def test_face_down_cards_show_their_backs_until_revealed_then_each_reveal_is_checked(rig: SqueezeRig) -> None:
    from selenium.webdriver.common.by import By

    table = rig.table
    hand = table.open_round()
    _deal_face_down(table, hand)
    _open(rig, "/table/SQ1")
    _until(
        rig,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#layout .card.face-down")) == 4,
        "four cards face down",
    )
    assert rig.driver.find_elements(By.CSS_SELECTOR, "#layout [data-card]") == []
    text = _page_text(rig)
    assert FACES.findall(text) == [], text  # no face anywhere on the page
    assert [t.text for t in rig.driver.find_elements(By.CSS_SELECTOR, "#layout .total")] == ["–", "–"]
    assert "waiting for the reveal" in rig.driver.find_element(By.ID, "next-card").text

    _reveal(table, hand, "P1", "8s")
    good = '#layout [data-card="8s"][data-slot="P1"][data-reveal="verified"]'
    _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, good), "P1 revealed and verified")
    assert len(rig.driver.find_elements(By.CSS_SELECTOR, "#layout .card.face-down")) == 3
    assert FACES.findall(_page_text(rig)) == ["8♠"]

    # B1 was committed as the king of diamonds; the reveal shows a nine of hearts
    _reveal(table, hand, "B1", "9h", digest=_digest(hand, "B1", "Kd"))
    problem = '#reveal-problems [data-problem="reveal_mismatch"][data-slot="B1"]'
    shown = _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, problem), "the mismatch named on the page")
    assert "does not match its commitment" in rig.driver.find_element(By.ID, "reveal-problems").text
    assert "card shown 9h" in shown[0].text
    bad = rig.driver.find_elements(By.CSS_SELECTOR, '#layout [data-slot="B1"][data-reveal="failed"]')
    assert len(bad) == 1

    _open(rig, "/dealer/SQ1")  # the dealer display checks the reveals itself
    _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, problem), "the mismatch on the dealer display")
    assert len(rig.driver.find_elements(By.CSS_SELECTOR, "#layout .card.face-down")) == 2


def test_a_held_squeeze_round_shows_its_backs_and_offers_no_correction(rig: SqueezeRig) -> None:
    """A round held with cards face down (``null`` in the event's map): backs in the holds, and no
    "Correct a card" (it sends every card of the round, which the page does not know)."""
    from selenium.webdriver.common.by import By

    table = rig.table
    hand = table.open_round()
    _deal_face_down(table, hand)
    _reveal(table, hand, "P1", "8s")
    cards = {"P1": "8s", "B1": None, "P2": None, "B2": None}
    table.event("round_held", {"hand": hand, "cards": cards, "blocked_by": ["card_before_reveal"]}, hand)
    _open(rig, "/table/SQ1")
    held = f'#holds .hold[data-hand="{hand}"]'
    _until(
        rig, lambda d: len(d.find_elements(By.CSS_SELECTOR, held + " .card.face-down")) == 3, "the held backs"
    )
    assert [
        c.get_attribute("data-card") for c in rig.driver.find_elements(By.CSS_SELECTOR, held + " [data-card]")
    ] == ["8s"]
    actions = [
        b.get_attribute("data-action") for b in rig.driver.find_elements(By.CSS_SELECTOR, held + " button")
    ]
    assert "rearrange" not in actions
    assert {"resolve_hold", "void_round"} <= set(actions)
    assert set(FACES.findall(_page_text(rig))) == {"8♠"}  # the face up one (layout, hold), no other
