"""The console in a real headless chromium, against a real daemon on a simulated shoe and a
real mosquitto. One browser, one daemon and one shoe serve the module's tests, in order:
the shoe deals round 1, an unneeded card, and round 2 (held by it); while the dealer waits
for the supervisor, the tests look at the page, try to act without the role, and resolve
the hold from the page; the unneeded cards after rounds 4 and 7 hold rounds 5 and 8, which
the supervisor corrects (a card's suit) and acknowledges from the page; then the shoe is
dealt to its end and the roads are compared. The console verifies the table's events with
its events key: a forged card is refused, never shown.
"""

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

from daemon.alerts import AlertCode
from daemon.console.passwords import hash_password
from daemon.console.roads import all_roads
from daemon.console.server import ConsoleApp
from daemon.console.settings import ConsoleSettings
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import sign
from daemon.mqtt.supervisor_commands import CommandSender
from daemon.mqtt.topics import TableTopics
from daemon.service.config import load_config
from daemon.service.runner import Daemon
from daemon.simulation.dealer import DealSettings, FaultSpec, plan_shoe
from drivers.fixtures import SupervisorStep
from drivers.pty_device import PtyDevice
from drivers.simulate import VirtualShoe, encode_plan
from tests.console.browser import start_chromium
from tests.service.harness import TABLE_ID, expected_winners, write_config
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

SCREENSHOT = Path(__file__).resolve().parents[2] / "daemon" / "console" / "docs" / "table-view.png"
HANDS = 10
SPEED = 10.0
PASSWORDS = {"anna": "anna's long password", "bo": "bo's long password!", "vic": "vic's long password"}
EVIL = '<img src=x onerror="window.__pwned=1">'
WAIT = 30.0
UNNEEDED = AlertCode.UNNEEDED_CARD.value

# Every card element of the layout the page ever shows, with when it first appeared (ms).
OBSERVE_CARDS = """
window.__cards = {};
const seen = (root) => {
  if (!root.querySelectorAll) return;
  for (const c of root.querySelectorAll('#layout .card[data-card]')) {
    const key = c.dataset.hand + '|' + c.dataset.slot + '|' + c.dataset.card;
    if (!(key in window.__cards)) window.__cards[key] = Date.now();
  }
};
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) seen(n);
}).observe(document.body, {childList: true, subtree: true});
seen(document.body);
"""


@dataclass
class Recorder:
    """The test's own view of the table: when each card_dealt arrived, replies for its sender."""

    cards: dict[str, float] = field(default_factory=dict)
    kinds: list[str] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def wait(self, predicate: Any, timeout: float = WAIT) -> bool:
        with self.cond:
            return bool(self.cond.wait_for(predicate, timeout))


@dataclass
class Rig:
    tmp: Path
    broker: MosquittoBroker
    daemon: Daemon
    console: ConsoleApp
    driver: Any
    recorder: Recorder
    winners: list[str]
    shoe: VirtualShoe
    """Deals round 1, the unneeded card and round 2, up to the supervisor's resolve_hold."""
    later: list[VirtualShoe]
    """The rest of the shoe up to each of the next holds, and after the last: each part
    started once the page resolved the hold before it."""
    refused: list[str]


def _keyring(config: Path, keys: dict[str, tuple[str, Path]]) -> None:
    """The test's keyring (no legacy key) and the demo's unneeded-card window for SPEED."""
    data = json.loads(config.read_text())
    # as the demo does: the simulated unneeded card comes ~1/15 of a round gap after the round
    data["table"]["unneeded_card_window_s"] = 15.0 / SPEED * 0.25
    signing = data["broker"]["signing"]
    signing.pop("command_key", None)
    signing["command_keys"] = [
        {"key_id": key_id, "role": role, "secret": {"file": str(path)}}
        for key_id, (role, path) in keys.items()
    ]
    config.write_text(json.dumps(data, indent=1))


def _users_file(tmp: Path, keys: dict[str, Path]) -> Path:
    fast = {"n": 2**14, "r": 8, "p": 1}
    lines = ["users:"]
    for name, role, key_id in (("anna", "supervisor", "sup-anna"), ("bo", "technician", "tech-bo")):
        lines.append(
            f"  - {{name: {name}, password_hash: '{hash_password(PASSWORDS[name], **fast)}', "
            f"role: {role}, key_id: {key_id}, key_file: {keys[key_id]}}}"
        )
    lines.append(
        f"  - {{name: vic, password_hash: '{hash_password(PASSWORDS['vic'], **fast)}', role: viewer}}"
    )
    path = tmp / "console-users.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _recorder_client(port: int, recorder: Recorder, game_key: Secret) -> tuple[mqtt.Client, CommandSender]:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"test-rec-{secrets.token_hex(3)}",
                         protocol=mqtt.MQTTv5)  # fmt: skip
    topics = TableTopics(TABLE_ID)
    sender = CommandSender(client, TABLE_ID, game_key, key_id="gs-test")
    subscribed = threading.Event()

    def on_message(_c: Any, _u: Any, msg: mqtt.MQTTMessage) -> None:
        arrived = time.time()
        if msg.topic == topics.cmd_reply:
            sender.on_reply(bytes(msg.payload))
            return
        env = json.loads(msg.payload)
        with recorder.cond:
            recorder.kinds.append(env["kind"])
            if env["kind"] == "card_dealt" and env["data"].get("round") is not None:
                d = env["data"]
                recorder.cards.setdefault(f"{d['round']}|{d['slot']}|{d['card']}", arrived)
            recorder.cond.notify_all()

    client.on_connect = lambda c, *_a: c.subscribe([(topics.events, 1), (topics.cmd_reply, 1)])
    client.on_subscribe = lambda *_a: subscribed.set()
    client.on_message = on_message
    client.connect("127.0.0.1", port)
    client.loop_start()
    assert subscribed.wait(10)
    return client, sender


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("console")
    broker = MosquittoBroker(tmp / "broker").start()
    deal = DealSettings(decks=8, seed=11, max_hands=HANDS, shoe_id="console-11")
    plan = plan_shoe(deal, [FaultSpec.parse(f"unneeded_card@{hand}") for hand in (1, 4, 7)])
    steps = encode_plan(plan, "angel_eye", seed=11)
    shoe_device = PtyDevice(tmp / "baccarat-shoe")
    config, _events_key, _legacy = write_config(tmp, shoe_device.path, broker.port, deal)
    keys = {
        "gs-test": write_secret(tmp / "gs.key", secrets.token_hex(32)),
        "sup-anna": write_secret(tmp / "sup-anna.key", secrets.token_hex(32)),
        "tech-bo": write_secret(tmp / "tech-bo.key", secrets.token_hex(32)),
    }
    roles = {"gs-test": "game_server", "sup-anna": "supervisor", "tech-bo": "technician"}
    _keyring(config, {key_id: (role, keys[key_id]) for key_id, role in roles.items()})
    daemon = Daemon(load_config(config, environ={}))
    settings = ConsoleSettings.model_validate(
        {
            "listen": {"host": "127.0.0.1", "port": 0},
            "broker": {"host": "127.0.0.1", "port": broker.port, "tls": {"enabled": False}},
            "users_file": str(_users_file(tmp, keys)),
            "reply_timeout_s": 15,
            "verify": {"tables": {TABLE_ID: [{"file": str(tmp / "events.key")}]}},
        }
    )
    console = ConsoleApp(settings)
    recorder = Recorder()
    client, sender = _recorder_client(
        broker.port, recorder, Secret(keys["gs-test"].read_bytes().strip(), "gs")
    )
    refused: list[str] = []
    # the supervisor's actions on the holds are the test's, from the page: the shoe stops there
    holds = [
        i for i, step in enumerate(steps) if step.supervisor and step.supervisor.action == "resolve_hold"
    ]
    assert len(holds) == 3, holds

    def on_supervisor(step: SupervisorStep, _t: float) -> None:
        reply = sender.send(step.action, dict(step.args))
        if reply.get("status") != "accepted":
            refused.append(f"{step.action}: {reply}")

    driver = None
    shoes: list[VirtualShoe] = []
    daemon.start()
    try:
        console.start()
        assert console.feed.subscribed.wait(10), "the console did not subscribe"
        assert daemon.publisher.subscribed.wait(15), "the daemon did not subscribe to its commands"
        driver = start_chromium(tmp / "chromium-profile")
        driver.set_page_load_timeout(30)
        readers = [d for d in daemon.drivers.values() if hasattr(d, "wait_until_connected")]
        shoes = [
            VirtualShoe(part, shoe_device, speed=SPEED, on_supervisor=on_supervisor,
                        ready=lambda: all(bool(d.health().get("connected")) for d in readers))
            for part in (steps[: holds[0]], steps[holds[0] + 1 : holds[1]], steps[holds[1] + 1 : holds[2]],
                         steps[holds[2] + 1 :])
        ]  # fmt: skip
        yield Rig(tmp, broker, daemon, console, driver, recorder,
                  [w for _h, w in expected_winners(plan)], shoes[0], shoes[1:], refused)  # fmt: skip
    finally:
        for shoe in shoes:
            shoe.stop()
        if driver is not None:
            driver.quit()
        console.stop()
        daemon.stop()
        client.loop_stop()
        client.disconnect()
        shoe_device.close()
        broker.stop()


def _log_in(rig: Rig, name: str) -> None:
    from selenium.webdriver.common.by import By

    driver = rig.driver
    driver.get(rig.console.url + "/login")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(PASSWORDS[name])
    driver.find_element(By.ID, "login").click()
    _until(rig, lambda d: d.find_elements(By.ID, "logout"), "the floor after log-in")


def _log_out(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    rig.driver.find_element(By.ID, "logout").click()
    _until(rig, lambda d: d.find_elements(By.ID, "login-form"), "the log-in page")


def _until(rig: Rig, condition: Any, what: str, timeout: float = WAIT) -> Any:
    """Wait for `condition`; the page re-renders on every update, so a stale element is retried."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        wait = WebDriverWait(
            rig.driver, timeout, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
        )
        return wait.until(condition)
    except TimeoutException:
        page = rig.driver.execute_script("return document.body ? document.body.innerText : '';")
        raise AssertionError(f"waiting for {what}; the page shows:\n{page}") from None


def _click(rig: Rig, selector: str, what: str) -> None:
    """Click the element at CSS `selector` once it is enabled, whichever render of it is current."""
    from selenium.webdriver.common.by import By

    def clicked(driver: Any) -> bool:
        button = driver.find_element(By.CSS_SELECTOR, selector)
        if not button.is_enabled():
            return False
        button.click()
        return True

    _until(rig, clicked, what)


def _text(rig: Rig, selector: str, what: str) -> str:
    """The text of the element at CSS `selector`, read from whichever render of it is current."""
    from selenium.webdriver.common.by import By

    return str(_until(rig, lambda d: d.find_element(By.CSS_SELECTOR, selector).text, what))


def _attribute(rig: Rig, selector: str, name: str, what: str) -> str:
    """The attribute `name` of the element at CSS `selector`, from whichever render of it is current."""
    from selenium.webdriver.common.by import By

    return str(
        _until(rig, lambda d: d.find_element(By.CSS_SELECTOR, selector).get_attribute(name) or "", what)
    )


def test_dealt_cards_appear_on_the_table_view_within_a_second(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    _log_in(rig, "anna")
    rig.driver.get(f"{rig.console.url}/table/{TABLE_ID}")
    _until(rig, lambda d: d.find_elements(By.ID, "layout"), "the table layout")
    rig.driver.execute_script(OBSERVE_CARDS)
    rig.shoe.start()
    assert rig.shoe.done.wait(WAIT * 2), f"the shoe never reached the held round; refused: {rig.refused}"
    # the round held by the unneeded card is on the layout, all its cards dealt
    _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, f".alert[data-code='{UNNEEDED}']"), "the alert")
    with rig.recorder.cond:
        arrived = dict(rig.recorder.cards)
    shown: dict[str, int] = rig.driver.execute_script("return window.__cards;")
    assert len(arrived) >= 8, arrived  # rounds 1 and 2: at least 4 cards each
    late = {key: (shown[key] / 1000 - at) if key in shown else None for key, at in arrived.items()}
    assert {k: v for k, v in late.items() if v is None or v > 1.0} == {}, late
    delays = sorted(v for v in late.values() if v is not None)
    median, worst = delays[len(delays) // 2], delays[-1]
    print(f"MQTT arrival to page: {len(delays)} cards, median {median:.3f} s, max {worst:.3f} s")
    assert not rig.refused


def test_a_person_without_the_role_cannot_act(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    _log_out(rig)
    _log_in(rig, "bo")  # a technician: resolve_hold is a supervisor's
    rig.driver.get(f"{rig.console.url}/table/{TABLE_ID}")
    button = _until(
        rig,
        lambda d: d.find_element(
            By.CSS_SELECTOR, f".alert[data-code='{UNNEEDED}'] button[data-action='resolve_hold']"
        ),
        "the resolve button",
    )
    assert not button.is_enabled()
    # the request the page would send, sent anyway with a valid session and CSRF token
    status, body = rig.driver.execute_async_script(
        """const done = arguments[arguments.length - 1];
        fetch('/api/command', {method: 'POST', headers: {'Content-Type': 'application/json',
          'X-CSRF-Token': document.querySelector('meta[name="csrf-token"]').content},
          body: JSON.stringify({table_id: arguments[0], action: 'resolve_hold', args: {}})})
        .then(r => r.json().then(b => done([r.status, b])));""",
        TABLE_ID,
    )
    assert (status, body) == (403, {"error": "bo (technician) may not resolve_hold"})
    # and without the CSRF token, even a supervisor's session could not
    status, body = rig.driver.execute_async_script(
        """const done = arguments[arguments.length - 1];
        fetch('/api/command', {method: 'POST', headers: {'Content-Type': 'application/json'},
          body: JSON.stringify({table_id: arguments[0], action: 'lock', args: {}})})
        .then(r => r.json().then(b => done([r.status, b])));""",
        TABLE_ID,
    )
    assert status == 403
    assert "CSRF" in body["error"]
    _log_out(rig)


def test_a_supervisor_resolves_the_hold_from_the_page(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    _log_in(rig, "anna")
    rig.driver.get(f"{rig.console.url}/table/{TABLE_ID}")
    # first a correction the table refuses: its reason is shown, nothing changes
    correct = f".alert[data-code='{UNNEEDED}'] button[data-action='rearrange']"
    _click(rig, correct, "the correct button")
    _until(rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    rig.driver.find_element(By.ID, "field-card").send_keys("Zz")
    assert '"P1":"Zz"' in rig.driver.find_element(By.ID, "confirm-text").text
    rig.driver.find_element(By.ID, "confirm-send").click()
    shown = "#reply[data-status='refused']"
    refused = _text(rig, shown, "the refusal")
    assert "rearrange: refused (refused_by_table): " in refused
    assert "Zz" in refused
    selector = f".alert[data-code='{UNNEEDED}'] button[data-action='resolve_hold']"
    _click(rig, selector, "the resolve button")
    _until(
        rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the confirmation"
    )
    # the unneeded card came after round 1: the round it holds is round 2
    assert rig.driver.find_element(By.ID, "confirm-text").text == 'resolve_hold {"hand":2}'
    rig.driver.find_element(By.ID, "confirm-send").click()
    reply = _text(rig, "#reply[data-status='accepted']", "the reply")
    assert reply.startswith("✔ Table's reply\nresolve_hold: accepted")
    _until(rig, lambda d: not d.find_elements(By.CSS_SELECTOR, f".alert[data-code='{UNNEEDED}'], .hold"),
           "the hold to disappear")  # fmt: skip
    history = _text(rig, "#history", "the history")
    assert "supervisor:sup-anna resolve_hold: accepted" in history
    rig.later[0].start()


def test_a_supervisor_corrects_a_card_and_acknowledges_an_alert_from_the_page(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    # round 5, held by the unneeded card after round 4: its P1 card corrected to another suit
    # (the same rank: the result, and so the roads, stay as the rules give them)
    assert rig.later[0].done.wait(WAIT * 2), f"the shoe never reached round 5's hold; refused: {rig.refused}"
    p1 = ".hold[data-hand='5'] .card[data-slot='P1']"
    dealt = str(
        _until(rig, lambda d: d.find_element(By.CSS_SELECTOR, p1).get_attribute("data-card"), "held round 5")
    )
    corrected = dealt[:-1] + next(suit for suit in "shdc" if suit != dealt[-1])
    correct = ".hold[data-hand='5'] button[data-action='rearrange']"
    _click(rig, correct, "the correct button")
    _until(rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    rig.driver.find_element(By.ID, "field-card").send_keys(corrected)
    assert f'"P1":"{corrected}"' in rig.driver.find_element(By.ID, "confirm-text").text
    rig.driver.find_element(By.ID, "confirm-send").click()
    reply = _text(rig, "#reply[data-status='accepted']", "the reply")
    assert reply.startswith("✔ Table's reply\nrearrange: accepted")
    assert "unverified" not in reply  # the reply verified with the table's events key
    _until(rig, lambda d: not d.find_elements(By.CSS_SELECTOR, ".hold"), "round 5 to complete")
    rig.later[1].start()
    # round 8, held by the unneeded card after round 7: the alert acknowledged (the engine's
    # reading accepted), which lets the round complete
    assert rig.later[1].done.wait(WAIT * 2), f"the shoe never reached round 8's hold; refused: {rig.refused}"
    _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, ".hold[data-hand='8']"), "held round 8")
    acknowledge = f".alert[data-code='{UNNEEDED}'] button[data-action='acknowledge_alert']"
    _click(rig, acknowledge, "the acknowledge button")
    _until(rig, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    assert rig.driver.find_element(By.ID, "confirm-text").text.startswith('acknowledge_alert {"alert_id":')
    rig.driver.find_element(By.ID, "confirm-send").click()
    _until(
        rig,
        lambda d: d.find_element(By.CSS_SELECTOR, "#reply[data-status='accepted']").text.startswith(
            "✔ Table's reply\nacknowledge_alert: accepted"
        ),
        "the acknowledge reply",
    )
    _until(rig, lambda d: not d.find_elements(By.CSS_SELECTOR, ".hold, .alert"), "round 8 to complete")
    # who did what: each action with the supervisor's own key id, as the table journaled it
    history = _until(
        rig,
        lambda d: (text := d.find_element(By.ID, "history").text).count("supervisor:sup-anna") >= 3 and text,
        "the history",
    )
    assert "supervisor:sup-anna rearrange: accepted" in history
    assert "supervisor:sup-anna acknowledge_alert: accepted" in history
    assert _attribute(rig, "#trust", "data-trust", "the trust mark") == "verified"
    rig.later[2].start()


def test_the_roads_match_the_rules_and_the_screenshot_is_taken(rig: Rig, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    assert rig.later[-1].done.wait(WAIT * 2), "the shoe did not finish"
    assert rig.recorder.wait(lambda: rig.recorder.kinds.count("round_completed") == HANDS), str(
        rig.recorder.kinds
    )
    expected = all_roads(rig.winners)
    _until(
        rig,
        lambda d: d.find_element(By.CSS_SELECTOR, "dd[data-figure='Hands']").text == str(HANDS),
        "all hands",
    )

    def cells(name: str) -> list[tuple[int, int, str]]:
        def read(driver: Any) -> list[tuple[int, int, str]]:
            found = driver.find_elements(By.CSS_SELECTOR, f"#road-{name} .cell")
            return sorted(
                (int(c.get_attribute("data-col")), int(c.get_attribute("data-row")), c.get_attribute("class"))
                for c in found
            )

        return list(_until(rig, read, f"the {name} road"))

    assert cells("bead_plate") == sorted(
        (c["col"], c["row"], f"cell {c['result']}") for c in expected["bead_plate"]
    )
    assert cells("big_road") == sorted(
        (
            c["col"],
            c["row"],
            "cell " + ("P" if c["winner"] == "player" else "B") + (" ties" if c["ties"] else ""),
        )
        for c in expected["big_road"]["cells"]
    )
    for name in ("big_eye_boy", "small_road", "cockroach_pig"):
        assert cells(name) == sorted((c["col"], c["row"], f"cell {c['colour']}") for c in expected[name]), (
            name
        )
    assert expected["cockroach_pig"], "the shoe is long enough for every derived road"
    # The README's picture is rewritten only on request, so a test run leaves the tree clean.
    target = (
        SCREENSHOT
        if os.environ.get("BACCARAT_EDGE_UPDATE_SCREENSHOT") == "1"
        else tmp_path / "table-view.png"
    )
    target.parent.mkdir(exist_ok=True)
    rig.driver.save_screenshot(str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_dealer_display_shows_the_round_and_no_actions(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    rig.driver.get(f"{rig.console.url}/dealer/{TABLE_ID}")
    _until(rig, lambda d: d.find_elements(By.CSS_SELECTOR, ".dealer #layout .card"), "the dealer layout")
    assert rig.driver.find_elements(By.CSS_SELECTOR, "button.action") == []
    assert rig.driver.find_elements(By.ID, "logout") == []


def test_a_hostile_table_id_and_alert_text_render_as_text(rig: Rig) -> None:
    from selenium.webdriver.common.by import By

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="test-evil", protocol=mqtt.MQTTv5)
    client.connect("127.0.0.1", rig.broker.port)
    client.loop_start()
    try:
        status = json.dumps({"schema_version": 1, "table_id": EVIL, "status": "online", "ts": time.time()})
        client.publish(f"baccarat/v1/{EVIL}/status", status, qos=1, retain=True).wait_for_publish(10)
        alert: dict[str, Any] = {"alert_id": "a-evil", "code": "reader_disconnected", "message": EVIL,
                                 "hand": None, "holds": None, "device": EVIL, "details": {}}  # fmt: skip
        event = {"schema_version": 1, "event_id": "e-evil", "seq": 1, "table_id": "evil",
                 "kind": "alert_raised", "ts": time.time(), "data": alert}  # fmt: skip
        client.publish("baccarat/v1/evil/events", json.dumps(event), qos=1).wait_for_publish(10)
        # a card on the real table's topic, signed with a key that is not the table's
        forged: dict[str, Any] = {"schema_version": 1, "event_id": "e-forged", "seq": 10_000,
                                  "table_id": TABLE_ID, "shoe_id": "console-11", "hand": 99,
                                  "kind": "card_dealt", "ts": time.time(), "source": "reader",
                                  "data": {"slot": "P1", "card": "Ac", "round": 99}}  # fmt: skip
        forged["sig"] = sign(forged, Secret(b"not the table's events key at all", "forger"))
        client.publish(TableTopics(TABLE_ID).events, json.dumps(forged), qos=1).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()
    rig.driver.get(rig.console.url + "/")
    assert _text(rig, "#floor .invalid-id", "the hostile row") == EVIL
    # the floor: the real table online at its last hand; worst first (evil: no status, an alert)
    rows = _until(
        rig,
        lambda d: [
            (row.get_attribute("data-table"), row.text)
            for row in d.find_elements(By.CSS_SELECTOR, "#floor [data-table]")
        ],
        "the floor rows",
    )
    by_id = dict(rows)
    assert by_id[TABLE_ID].startswith(f"{TABLE_ID}\n✔ online\nHand\n{HANDS}\n")
    assert rows[0][0] == "evil"
    rig.driver.get(f"{rig.console.url}/table/{TABLE_ID}")
    assert _attribute(rig, "#refused", "data-count", "the refused count") == "1"
    assert "(last: events, signature does not verify)" in _text(rig, "#refused", "the refused count")
    assert rig.driver.find_elements(By.CSS_SELECTOR, ".card[data-hand='99']") == []
    assert _attribute(rig, "#trust", "data-trust", "the trust mark") == "verified"
    rig.driver.get(rig.console.url + "/table/evil")
    assert _text(rig, ".alert .message", "the hostile alert") == EVIL
    assert _attribute(rig, "#trust", "data-trust", "the trust mark") == "unverified"
    rig.driver.get(rig.console.url + "/table/" + EVIL.replace('"', "%22").replace(" ", "%20"))
    _until(rig, lambda d: d.find_elements(By.ID, "connection"), "the page of the hostile id")
    assert rig.driver.find_elements(By.TAG_NAME, "img") == []
    assert rig.driver.execute_script("return window.__pwned === undefined;")
