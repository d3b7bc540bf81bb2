"""The simulated reader device: a script of timed device actions, spoken in a reader's protocol.

A :class:`ShoePlan` is what a dealer did at the shoe, as :class:`Action` s in time
order (the virtual dealer that deals one by the rules is
``daemon.simulation.dealer.plan_shoe``); :func:`encode_plan` turns it into timed
fixture steps for one protocol; :class:`VirtualShoe` writes them into a
pseudo-terminal (or any fd) at a chosen speed, which is how the first-run demo
feeds the daemon without hardware.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from common.cards import Card
from common.inputs import DeviceTarget
from drivers.fixtures import FixtureStep, SupervisorStep
from drivers.protocols.angel_eye_codec import encode_card, encode_frame, encode_target
from drivers.protocols.hid_wedge import type_text
from drivers.pty_device import PtyDevice

PROTOCOLS = ("angel_eye", "ascii_lines", "usb_hid")
SIM_VENDOR_ID, SIM_PRODUCT_ID = 0x1209, 0xBACC  # pid.codes test range style ids for the virtual wedge


@dataclass(frozen=True, slots=True)
class Action:
    """One physical happening at the shoe, before any protocol encoding."""

    t: float
    kind: str  # start, draw, outside, cut, verdict, misread, garbage, unplug, supervisor, + SIGNAL_ACTIONS
    card: Card | None = None
    target: DeviceTarget | None = None
    index: int = 1
    hand: int | None = None
    verdict: tuple[str, bool, bool] | None = None
    supervisor: dict[str, Any] | None = None
    resend: int = 0  # extra transmissions beyond the protocol's usual
    corrupt_first: bool = False
    corrupt_all: bool = False


@dataclass
class ShoePlan:
    """A dealt shoe: actions in time order, plus what was dealt (for checks)."""

    actions: list[Action] = field(default_factory=list)
    hands: int = 0
    cut_hand: int | None = None
    cards_used: int = 0
    ended_by_cut_card: bool = False  # False: stopped at max_hands or ran out of cards first
    remaining: tuple[Card, ...] = ()  # the cards left in the shoe, in order (a remainder count's)


SIGNAL_ACTIONS = ("button_close", "button_open", "lock", "unlock", "burn_start", "burn_end", "shoe_end")
"""Actions that are signals rather than cards: the dealer button (line, HID), the shoe's lock state
(Angel Eye ``L`` frame) and the shoe marks a slotless reader sends (drivers/protocols/signals.py)."""

SIM_LINE_SIGNALS: dict[str, list[str]] = {
    "cut_card": ["CUT"],
    "burn_started": ["BURN"],
    "burn_ended": ["BURN END"],
    "shoe_ended": ["SHOE END"],
    "betting_closed": ["NO MORE BETS"],
    "betting_opened": ["PLACE BETS"],
}
"""The signal lines the simulated line reader sends (its fixtures' ``protocol_settings.signals``)."""

SIM_HID_SIGNALS: dict[str, list[str]] = {
    "cut_card": ["CUT"],
    "burn_started": ["BURN"],
    "burn_ended": ["BURNEND"],
    "shoe_ended": ["SHOEEND"],
}
SIM_HID_KEYS: dict[str, int] = {"betting_closed": 0x3A, "betting_opened": 0x3B}  # F1, F2
"""The simulated keyboard wedge's signal codes and dealer-button keys (its ``protocol_settings``)."""

_SIGNAL_OF_ACTION = {
    "cut": "cut_card",
    "burn_start": "burn_started",
    "burn_end": "burn_ended",
    "shoe_end": "shoe_ended",
    "button_close": "betting_closed",
    "button_open": "betting_opened",
}


def simulated_signal_settings(protocol: str) -> dict[str, Any]:
    """The ``protocol_settings`` a fixture of ``protocol`` needs to decode the simulator's signals."""
    if protocol == "ascii_lines":
        return {"signals": SIM_LINE_SIGNALS}
    if protocol == "usb_hid":
        return {"signals": SIM_HID_SIGNALS, "signal_keys": SIM_HID_KEYS}
    return {"lock_is_betting_window": True}


# -- protocol encoders ------------------------------------------------------------------

_SEQ_MARKS = b"123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_VERDICT_BITS = {"player": 1, "tie": 2, "banker": 4, "forced_quit": 7}
_LINE_SUIT = {"s": "S", "h": "H", "c": "C", "d": "D"}


class _AngelEyeEncoder:
    repeats = 3
    repeat_gap = 0.02

    def __init__(self, rng: random.Random) -> None:
        self._seq = 0
        self._rng = rng

    def _frame(self, code: str, data: bytes = b"") -> bytes:
        seq = _SEQ_MARKS[self._seq % len(_SEQ_MARKS)]
        self._seq += 1
        return encode_frame(seq, code, data)

    def _sent(self, t: float, frame: bytes, action: Action | None = None) -> list[FixtureStep]:
        count = self.repeats + (action.resend if action else 0)
        steps = []
        for i in range(count):
            payload = frame
            if action is not None and (action.corrupt_all or (i == 0 and action.corrupt_first)):
                payload = frame[:-1] + (b"0" if frame[-1:] != b"0" else b"1")
            steps.append(FixtureStep(t=t + i * self.repeat_gap, data=payload))
        return steps

    def encode(self, action: Action) -> list[FixtureStep]:
        t = action.t
        if action.kind == "start":
            return self._sent(t, self._frame("S"))
        if action.kind == "cut":
            return self._sent(t, self._frame("C"))
        if action.kind in ("lock", "unlock"):
            return self._sent(t, self._frame("L", b"1" if action.kind == "lock" else b"0"))
        if action.kind == "verdict":
            assert action.verdict is not None
            winner, ppair, bpair = action.verdict
            byte = 0x80 | _VERDICT_BITS[winner] << 4 | (1 if ppair else 0) | (2 if bpair else 0)
            return self._sent(t, self._frame("G", bytes([byte])))
        if action.kind == "outside":
            assert action.card is not None
            return self._sent(t, self._frame("d", bytes([0x80, encode_card(action.card)])))  # mode 0: lock
        if action.kind == "misread":
            raised = self._sent(t, self._frame("E", b"\xc1"))
            return raised + self._sent(t + 1.2, self._frame("e", b"\x81"))
        if action.kind == "garbage":
            noise = bytes(
                self._rng.choice([b for b in range(256) if b not in (0x05, 0x06, 0x15)]) for _ in range(12)
            )
            return [FixtureStep(t=t, data=noise, note="line noise")]
        if action.kind in ("draw", "unplug"):
            assert action.card is not None
            assert action.target is not None
            frame = self._frame(
                "D", bytes([encode_target(action.target, action.index), encode_card(action.card)])
            )
            if action.kind == "draw":
                return self._sent(t, frame, action)
            self._seq -= 1  # the resend after the replug is the same frame
            return _unplug_steps(t, [frame[:4]])
        return []


class _LineEncoder:
    def __init__(self, rng: random.Random, signals: bool = False) -> None:
        self._rng = rng
        self._signals = signals

    @staticmethod
    def line(card: Card) -> bytes:
        return f"{_LINE_SUIT[card.suit.value]}{int(card.rank):02d}\r\n".encode("ascii")

    def encode(self, action: Action) -> list[FixtureStep]:
        if action.kind == "draw":
            assert action.card is not None
            return [FixtureStep(t=action.t, data=self.line(action.card))]
        if action.kind == "misread":
            return [FixtureStep(t=action.t, data=b"S?8\r\n", note="smudged card: unreadable line")]
        signal = _SIGNAL_OF_ACTION.get(action.kind) if self._signals else None
        if signal is not None:
            text = SIM_LINE_SIGNALS[signal][0]
            return [FixtureStep(t=action.t, data=text.encode("ascii") + b"\r\n", note=f"signal {signal}")]
        if action.kind == "garbage":
            return [FixtureStep(t=action.t, data=b"#\x7f~!\r\n", note="line noise")]
        if action.kind == "unplug":
            assert action.card is not None
            return _unplug_steps(action.t, [self.line(action.card)[:2]])
        return []


class _HidEncoder:
    gap = 0.008

    def __init__(self, rng: random.Random, signals: bool = False) -> None:
        self._rng = rng
        self._signals = signals

    def _typed(self, t: float, text: str) -> list[FixtureStep]:
        return [FixtureStep(t=t + i * self.gap, report=r) for i, r in enumerate(type_text(text))]

    def encode(self, action: Action) -> list[FixtureStep]:
        if action.kind == "draw":
            assert action.card is not None
            return self._typed(action.t, action.card.code.upper())
        if action.kind == "misread":
            return self._typed(action.t, "??")
        signal = _SIGNAL_OF_ACTION.get(action.kind) if self._signals else None
        if signal in SIM_HID_KEYS:
            press = bytes([0, 0, SIM_HID_KEYS[signal], 0, 0, 0, 0, 0])
            release = FixtureStep(t=action.t + self.gap, report=bytes(8))
            return [FixtureStep(t=action.t, report=press), release]
        if signal is not None:
            return self._typed(action.t, SIM_HID_SIGNALS[signal][0])
        if action.kind == "garbage":
            return self._typed(action.t, "X9")
        if action.kind == "unplug":
            assert action.card is not None
            return _unplug_steps(action.t, type_text(action.card.code.upper())[:2], report=True)
        return []


def _unplug_steps(t: float, partial: Sequence[bytes], *, report: bool = False) -> list[FixtureStep]:
    steps = [
        FixtureStep(t=t + i * 0.008, report=p) if report else FixtureStep(t=t + i * 0.008, data=p)
        for i, p in enumerate(partial)
    ]
    steps.append(FixtureStep(t=t + 0.1, event="unplug", note="cable pulled mid-frame"))
    steps.append(FixtureStep(t=t + 2.0, event="replug"))
    return steps


def encode_plan(plan: ShoePlan, protocol: str, seed: int = 1, *, signals: bool = False) -> list[FixtureStep]:
    """Timed fixture steps of ``plan`` as ``protocol`` would send them.

    A line or HID reader sends no signal (cut card, dealer button, burn and shoe marks) unless
    ``signals``: then it sends the :func:`simulated_signal_settings` texts and keys, which the
    decoder must be configured with.
    """
    rng = random.Random(seed ^ 0x5EED)
    encoder: _AngelEyeEncoder | _LineEncoder | _HidEncoder
    if protocol == "angel_eye":
        encoder = _AngelEyeEncoder(rng)
    elif protocol == "ascii_lines":
        encoder = _LineEncoder(rng, signals)
    elif protocol == "usb_hid":
        encoder = _HidEncoder(rng, signals)
    else:
        raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    steps: list[FixtureStep] = []
    for action in plan.actions:
        if action.kind == "supervisor":
            assert action.supervisor is not None
            n = sum(1 for s in steps if s.supervisor is not None) + 1
            command = SupervisorStep(
                action=action.supervisor["action"], args=action.supervisor["args"], command_id=f"sim-{n}"
            )
            steps.append(FixtureStep(t=action.t, supervisor=command))
        elif action.kind == "tick":
            steps.append(FixtureStep(t=action.t, tick=True))
        else:
            steps += encoder.encode(action)
    steps.sort(key=lambda s: s.t)  # stable: same-time steps keep their order
    # times as a fixture file stores them (µs), so a saved fixture replays exactly like this one
    return [s.model_copy(update={"t": round(s.t, 6)}) for s in steps]


class VirtualShoe:
    """Plays fixture steps into a serial pty (or a raw fd) in real time, scaled by ``speed``.

    ``on_supervisor`` receives supervisor steps (the demo turns them into
    commands); unplug/replug need a :class:`PtyDevice`; ``ready`` is polled
    before the first byte. ``run()`` blocks; ``start()`` runs it in a thread;
    ``stop()`` ends it early.
    """

    def __init__(
        self,
        steps: Sequence[FixtureStep],
        device: PtyDevice | int,
        *,
        speed: float = 1.0,
        on_supervisor: Callable[[SupervisorStep, float], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        ready: Callable[[], bool] | None = None,
        ready_timeout: float = 30.0,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.steps = list(steps)
        self.device = device
        self.speed = speed
        self.on_supervisor = on_supervisor
        self.on_progress = on_progress
        self.ready = ready
        self.ready_timeout = ready_timeout
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.done = threading.Event()

    def _write(self, data: bytes) -> None:
        if isinstance(self.device, PtyDevice):
            self.device.write(data)
        else:
            view = memoryview(data)
            while view:
                view = view[os.write(self.device, view) :]

    def run(self) -> None:
        """Play every step; first wait (up to ``ready_timeout``) for ``ready()``, e.g. the reader's
        ``health()["connected"]``: pyserial flushes what was written before it opened the port."""
        if self.ready is not None:
            deadline = time.monotonic() + self.ready_timeout
            while not self.ready() and time.monotonic() < deadline:
                if self._stop.wait(0.02):
                    self.done.set()
                    return
        start = time.monotonic()
        origin = self.steps[0].t if self.steps else 0.0
        try:
            for n, step in enumerate(self.steps, start=1):
                delay = start + (step.t - origin) / self.speed - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    return
                if self._stop.is_set():
                    return
                if step.data is not None:
                    self._write(step.data)
                elif step.report is not None:
                    raise ValueError("HID reports cannot be written to a serial device; replay them over USB")
                elif step.event in ("unplug", "replug") and isinstance(self.device, PtyDevice):
                    (self.device.unplug if step.event == "unplug" else self.device.plug)()
                elif step.supervisor is not None and self.on_supervisor is not None:
                    self.on_supervisor(step.supervisor, step.t)
                if self.on_progress is not None:
                    self.on_progress(n, len(self.steps))
        finally:
            self.done.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="virtual-shoe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
