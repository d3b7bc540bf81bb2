"""The console verifies what tables publish with their events keys: a forged or unsigned
message is refused (counted, never shown); without a key a table is shown marked unverified."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from pydantic import ValidationError

from daemon.console.feed import BrokerFeed
from daemon.console.floor import Floor
from daemon.console.settings import ConsoleBrokerSettings, ConsoleSettings
from daemon.console.verification import MessageVerifier, Trust, VerifySettings
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.secrets import Secret, SecretError
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, sign
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

KEY = Secret(b"the table's events key, 32 bytes", "test")
FORGER = Secret(b"someone else's key of some length", "forger")
BASE = "baccarat/v1/T1/"


def _event(seq: int, kind: str, data: dict[str, Any], key: Secret | None, hand: int | None = 1) -> bytes:
    envelope: dict[str, Any] = {"schema_version": 1, "event_id": f"e{seq}", "seq": seq, "table_id": "T1",
                                "shoe_id": "s1", "hand": hand, "kind": kind, "ts": 1.0 + seq,
                                "source": "reader", "data": data, "published_at": 2.0}  # fmt: skip
    if key is not None:
        envelope["sig"] = sign(envelope, key, UNSIGNED_EVENT_FIELDS)
    return encode(envelope)


def _card(seq: int, slot: str, card: str, key: Secret | None) -> bytes:
    return _event(seq, "card_dealt", {"slot": slot, "card": card, "round": 1}, key)


def _shown_cards(floor: Floor) -> dict[str, str]:
    model = floor.table_model("T1")
    assert model is not None
    return dict(model["round"]["cards"])


def test_a_forged_event_is_not_shown_as_a_card() -> None:
    floor = Floor(verifier=MessageVerifier(per_table={"T1": (KEY,)}))
    status = {"table_id": "T1", "status": "online", "ts": 1.0}
    floor.apply(BASE + "status", encode(signed_message(status, KEY)))
    floor.apply(BASE + "events", _event(1, "round_opened", {"hand": 1}, KEY))
    floor.apply(BASE + "events", _card(2, "P1", "9s", KEY))
    # the same card slot forged three ways: another key, no signature, a signed event altered
    floor.apply(BASE + "events", _card(3, "B1", "Kh", FORGER))
    floor.apply(BASE + "events", _card(3, "B1", "Kh", None))
    altered = json.loads(_card(3, "B1", "2c", KEY))
    altered["data"]["card"] = "Kh"
    floor.apply(BASE + "events", encode(altered))
    assert _shown_cards(floor) == {"P1": "9s"}
    model = floor.table_model("T1")
    assert model is not None
    assert model["trust"] == "verified"
    assert model["refused"]["count"] == 3
    assert model["refused"]["last"]["reason"] == "signature does not verify"
    # a forged status, alert or state changes nothing either
    floor.apply(BASE + "status", encode(signed_message({**status, "status": "offline"}, FORGER)))
    floor.apply(BASE + "status", b'{"table_id": "T1", "status": "offline"}')
    alert = {
        "alert_id": "a1",
        "code": "reader_disconnected",
        "message": "forged",
        "hand": None,
        "holds": None,
    }
    floor.apply(BASE + "events", _event(4, "alert_raised", alert, FORGER, None))
    row = floor.floor_model()["tables"][0]
    assert (row["status"], row["open_alerts"], row["refused"], row["trust"]) == ("online", 0, 6, "verified")
    # the real next card still arrives
    floor.apply(BASE + "events", _card(3, "B1", "2c", KEY))
    assert _shown_cards(floor) == {"P1": "9s", "B1": "2c"}


def test_a_status_of_another_table_replayed_on_this_topic_is_refused() -> None:
    verifier = MessageVerifier(default=(KEY,))  # one key for all tables
    other = encode(signed_message({"table_id": "T2", "status": "offline", "ts": 1.0}, KEY))
    checked = verifier.check("T1", "status", other)
    assert (checked.trust, checked.reason) == (Trust.REFUSED, "table_id 'T2' is not 'T1'")
    reply = encode(signed_message({"table_id": "T1", "command_id": "c1", "status": "accepted"}, KEY))
    assert verifier.check("T1", "cmd/reply", reply).trust is Trust.VERIFIED
    assert verifier.check("T1", "cmd/reply", b"not json").trust is Trust.REFUSED


def test_a_second_key_verifies_during_a_rotation_and_tables_without_a_key_are_unverified() -> None:
    verifier = MessageVerifier(per_table={"T1": (FORGER, KEY)})
    assert verifier.check("T1", "events", _card(1, "P1", "9s", KEY)).trust is Trust.VERIFIED
    assert verifier.check("T9", "events", b"anything at all").trust is Trust.UNVERIFIED
    floor = Floor(verifier=verifier)
    floor.apply("baccarat/v1/T9/status", b'{"status": "online"}')
    assert floor.floor_model()["tables"][0]["trust"] == "unverified"


def test_the_keys_come_from_the_settings_and_are_read_at_start(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "t1.key", "a" * 32)
    settings = ConsoleSettings.model_validate(
        {
            "users_file": "u.yaml",
            "verify": {"keys": [{"file": str(key)}], "tables": {"T1": [{"file": str(key)}]}},
        }
    )
    verifier = MessageVerifier.from_settings(settings.verify)
    assert verifier.trust_of("T1") is Trust.VERIFIED
    assert verifier.trust_of("T2") is Trust.VERIFIED  # the default key
    with pytest.raises(ValidationError, match="table id"):
        VerifySettings.model_validate({"tables": {"bad/id": [{"file": str(key)}]}})
    with pytest.raises(ValidationError, match="1 to 4 keys"):
        VerifySettings.model_validate({"tables": {"T1": []}})
    short = write_secret(tmp_path / "short.key", "short")
    with pytest.raises(SecretError, match="at least 16"):
        MessageVerifier.from_settings(VerifySettings.model_validate({"keys": [{"file": str(short)}]}))


@pytest.mark.mosquitto
def test_a_forged_reply_is_refused_and_only_the_tables_reply_is_taken(mosquitto: MosquittoBroker) -> None:
    verifier = MessageVerifier(per_table={"T1": (KEY,)})
    floor = Floor(verifier=verifier)
    settings = ConsoleBrokerSettings.model_validate(
        {"host": "127.0.0.1", "port": mosquitto.port, "tls": {"enabled": False}}
    )
    feed = BrokerFeed(settings, floor, [], verifier)
    signer = {"key": FORGER}
    responder = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="test-responder", protocol=mqtt.MQTTv5)
    subscribed = threading.Event()

    def answer(client: mqtt.Client, _u: Any, message: mqtt.MQTTMessage) -> None:
        command_id = json.loads(message.payload)["command_id"]
        body = {"table_id": "T1", "command_id": command_id, "action": "lock", "status": "accepted",
                "code": None, "reason": None, "ts": 1.0}  # fmt: skip
        client.publish("baccarat/v1/T1/cmd/reply", encode({"schema_version": 1, **body}), qos=1)  # unsigned
        client.publish("baccarat/v1/T1/cmd/reply", encode(signed_message(body, signer["key"])), qos=1)

    responder.on_connect = lambda c, *_a: c.subscribe("baccarat/v1/T1/cmd", 1)
    responder.on_subscribe = lambda *_a: subscribed.set()
    responder.on_message = answer
    responder.connect("127.0.0.1", mosquitto.port)
    responder.loop_start()
    feed.start()
    try:
        assert subscribed.wait(10)
        assert feed.subscribed.wait(10)
        # the table is on the floor (its signed status): refusals are counted on its entry
        floor.apply(
            BASE + "status", encode(signed_message({"table_id": "T1", "status": "online", "ts": 1.0}, KEY))
        )
        # only forgeries answer: the command gets no reply (the page says so), both counted
        assert feed.send("baccarat/v1/T1/cmd", {"command_id": "c1", "action": "lock"}, timeout=2) is None
        deadline = time.monotonic() + 10
        while (model := floor.table_model("T1")) is None or model["refused"]["count"] < 2:
            assert time.monotonic() < deadline, model
            time.sleep(0.02)
        assert model["refused"]["count"] == 2
        assert model["refused"]["last"]["topic"] == "cmd/reply"
        # the table's own signed reply is taken, as verified
        signer["key"] = KEY
        answer_ = feed.send("baccarat/v1/T1/cmd", {"command_id": "c2", "action": "lock"}, timeout=10)
        assert answer_ is not None
        reply, trust = answer_
        assert (reply["command_id"], reply["status"], trust) == ("c2", "accepted", Trust.VERIFIED)
    finally:
        feed.stop()
        responder.loop_stop()
        responder.disconnect()
