"""Generated tables for the fleet tests and the scale benchmark: retained ``status``,
``health`` and ``state`` payloads and signed events, built the way the daemon builds them
(``signed_message``, ``event_payload``) so they are valid against the contract schemas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daemon.journal.records import JournaledEvent
from daemon.journal.appending import event_id_for
from daemon.mqtt.envelope import encode, event_payload, signed_message
from daemon.mqtt.secrets import Secret

DIGEST = "ab" * 32

SLOTS = ("P1", "B1", "P2", "B2")


@dataclass
class SyntheticTable:
    """One generated table: its id, its key, and what it reports."""

    table_id: str
    key: Secret | None = None
    online: bool = True
    version: str | None = "0.1.0"
    config_digest: str | None = DIGEST
    variant: str = "standard"
    shoe_id: str = "S1"
    hand: int = 12
    backlog: int = 0
    oldest_undelivered_age_s: float | None = None
    alerts: list[str] = field(default_factory=list)
    disconnected: list[str] = field(default_factory=list)
    server_ack: dict[str, Any] | None = None
    last_read_at: float | None = None
    journal_id: str = "j-bench"
    seq: int = 0
    cards_in_round: int = 0

    def status(self, ts: float) -> bytes:
        body: dict[str, Any] = {
            "table_id": self.table_id,
            "status": "online" if self.online else "offline",
            "ts": ts,
        }
        if self.version is not None:
            body["version"] = self.version
        if self.config_digest is not None:
            body["config_digest"] = self.config_digest
        return encode(signed_message(body, self.key))

    def health(self, ts: float) -> bytes:
        reader = {
            "connected": "reader" not in self.disconnected,
            "last_read_at": self.last_read_at,
            "reconnects": 0,
            "last_error": None,
            "driver": "angel_eye",
            "device": "/dev/ttyUSB0",
            "running": True,
            "bytes": 1234,
        }
        body: dict[str, Any] = {
            "table_id": self.table_id,
            "ts": ts,
            "running": True,
            "connected": True,
            "last_error": None,
            "queue_depth": self.backlog,
            "inflight": 0,
            "oldest_undelivered_age_s": self.oldest_undelivered_age_s,
            "last_seq": self.seq,
            "counters": {
                name: 0
                for name in (
                    "published",
                    "acknowledged",
                    "dead_lettered",
                    "connects",
                    "connection_failures",
                    "delivery_retries",
                    "commands_accepted",
                    "commands_refused",
                )
            },
            "journal": {
                "size_bytes": 4096,
                "max_bytes": 1 << 30,
                "full": False,
                "reason": None,
                "admits_new_round": True,
            },
            "devices": {"reader": reader},
        }
        if self.server_ack is not None:
            body["delivery"] = {"server_ack": self.server_ack}
        return encode(signed_message(body, self.key))

    def state(self, ts: float) -> bytes:
        alerts: list[dict[str, Any]] = [
            {
                "alert_id": f"{self.shoe_id}:a{n}",
                "code": code,
                "message": code.replace("_", " "),
                "hand": self.hand,
                "holds": None,
                "device": None,
                "details": {},
            }
            for n, code in enumerate(self.alerts, start=1)
        ]
        snapshot = {
            "shoe": {
                "shoe_id": self.shoe_id,
                "phase": "ready",
                "decks": 8,
                "cards_out": self.hand * 5,
                "burn_remaining": 0,
                "round_burn_remaining": 0,
                "cut_card_seen": False,
                "last_hand": None,
                "end_reason": None,
            },
            "variant": self.variant,
            "hand": self.hand,
            "round": None,
            "offered_bets": {"hand": None, "bets": []},
            "alerts": alerts,
            "held_rounds": [],
            "rescan_needed": False,
            "disconnected_devices": list(self.disconnected),
            "storage": {"full": False, "detail": None, "refused_cards": 0},
            "reads_waiting_in_pull": 0,
            "game_flow": {
                "phase": "waiting",
                "round_id": None,
                "closes_at": None,
                "last_round_id": None,
                "burn_signalled": False,
            },
            "results": [],
        }
        body = {"table_id": self.table_id, "ts": ts, "last_seq": self.seq, "state": snapshot}
        return encode(signed_message(body, self.key))

    def next_event(self, kind: str, data: dict[str, Any], at: float, published_at: float) -> bytes:
        """The wire bytes of the table's next event (signed with ``key``, as the daemon signs)."""
        self.seq += 1
        event = JournaledEvent(
            seq=self.seq,
            event_id=event_id_for(self.journal_id, self.table_id, self.seq),
            kind=kind,
            at=at,
            shoe_id=self.shoe_id,
            hand=self.hand,
            source="reader" if kind == "card_dealt" else "system",
            data=data,
            origin="engine",
            journaled_at=at,
        )
        return event_payload(event, self.table_id, published_at, self.key)

    def deal_card(self, now: float) -> list[tuple[str, bytes, bool]]:
        """One card of a four-card round as the daemon publishes it: (topic, payload, retain).

        A round is ``round_opened``, ``bets_offered`` and the first card; two cards; the last
        card, ``verdict_checked``, ``round_completed`` and the retained ``state`` (the
        daemon sends it after each round boundary): 8 events and a state per 4 cards."""
        base = f"baccarat/v1/{self.table_id}"
        card = self.cards_in_round
        out: list[tuple[str, bytes, bool]] = []
        if card == 0:
            self.hand += 1
            out.append(
                (
                    f"{base}/events",
                    self.next_event("round_opened", {"hand": self.hand, "bets": []}, now, now),
                    False,
                )
            )
            offered = {"hand": self.hand, "bets": ["player", "banker", "tie"]}
            out.append((f"{base}/events", self.next_event("bets_offered", offered, now, now), False))
        dealt = {"card": "8s", "slot": SLOTS[card]}
        out.append((f"{base}/events", self.next_event("card_dealt", dealt, now, now), False))
        self.cards_in_round = (card + 1) % len(SLOTS)
        if self.cards_in_round == 0:
            verdict = {"hand": self.hand, "agrees": True, "verdict": {"outcome": "banker"}}
            out.append((f"{base}/events", self.next_event("verdict_checked", verdict, now, now), False))
            completed = {
                "hand": self.hand,
                "cards": {slot: "8s" for slot in SLOTS},
                "outcome": {"winner": "tie"},
                "bets": {},
            }
            out.append((f"{base}/events", self.next_event("round_completed", completed, now, now), False))
            out.append((f"{base}/state", self.state(now), True))
        return out


def publish_retained(port: int, messages: list[tuple[str, bytes]], timeout: float = 30.0) -> None:
    """Publish ``messages`` retained at QoS 1 and return once the broker acknowledged them all."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.max_inflight_messages_set(200)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        infos = [client.publish(topic, payload, qos=1, retain=True) for topic, payload in messages]
        for info in infos:
            info.wait_for_publish(timeout)
            if not info.is_published():
                raise AssertionError(f"broker did not acknowledge a retained message within {timeout}s")
    finally:
        client.disconnect()
        client.loop_stop()


def table_messages(table: SyntheticTable, ts: float) -> list[tuple[str, bytes]]:
    """The three retained messages of one table."""
    base = f"baccarat/v1/{table.table_id}"
    return [
        (f"{base}/status", table.status(ts)),
        (f"{base}/health", table.health(ts)),
        (f"{base}/state", table.state(ts)),
    ]
