"""USB HID driver through the real pyusb stack, fed by a backend replaying recorded reports."""

from __future__ import annotations

import random
import threading
import time

import usb.core

from common.inputs import CardRead, DeviceConnection, ReadFailed
from drivers.protocols.hid_wedge import type_text
from drivers.settings import UsbHidReaderSettings
from drivers.usb_hid import UsbHidReader
from drivers.usb_replay import ReplayUsbBackend, UsbStep
from tests.drivers.collect import Collector, clock

VID, PID = 0x0C2E, 0x0B61
FAST = {"initial_delay": 0.01, "max_delay": 0.05, "jitter": 0.5}


def steps_for(*codes: str, t0: float = 0.0) -> list[UsbStep]:
    reports = [r for code in codes for r in type_text(code)]
    return [UsbStep(t=t0 + i * 0.001, report=r) for i, r in enumerate(reports)]


def reader_for(backend: ReplayUsbBackend, sink: Collector, **extra: object) -> UsbHidReader:
    settings = UsbHidReaderSettings.model_validate(
        {"vendor_id": f"{VID:04x}", "product_id": PID, "reconnect": FAST, "read_timeout_ms": 20, **extra}
    )
    return UsbHidReader(settings, sink, clock, backend=backend, rng=random.Random(2))


def total_bytes(steps: list[UsbStep]) -> int:
    return sum(len(s.report or b"") for s in steps)


def test_the_replay_backend_is_a_real_pyusb_device() -> None:
    backend = ReplayUsbBackend([], vendor_id=VID, product_id=PID, serial_number="SHOE-7")
    dev = usb.core.find(idVendor=VID, idProduct=PID, backend=backend)
    assert dev is not None
    assert dev.serial_number == "SHOE-7"
    assert dev.product == "Virtual card reader"
    assert usb.core.find(idVendor=VID, idProduct=PID + 1, backend=backend) is None


def test_reads_cards_detaching_the_kernel_driver_and_claiming() -> None:
    steps = steps_for("8S", "8S", "KH", "XX")
    backend = ReplayUsbBackend(steps, vendor_id=VID, product_id=PID)
    sink = Collector()
    reader = reader_for(backend, sink)
    reader.start()
    try:
        assert reader.wait_until_received(total_bytes(steps), 10)
    finally:
        reader.stop()
    assert sink.cards() == ["8s", "8s", "Kh"]
    assert sum(isinstance(i, ReadFailed) for i in sink.items) == 1
    assert backend.detach_calls == 1
    assert backend.claim_calls == 1
    health = reader.health()
    assert health["frames"] == 4
    assert health["connected"] is True


def test_unplug_mid_code_and_replug() -> None:
    first = steps_for("9D")
    cut = steps_for("QC", t0=1)[:3]  # "Q" typed, then the cable is pulled
    after = steps_for("QC", t0=3)
    steps = [*first, *cut, UsbStep(t=2, event="unplug"), UsbStep(t=2.5, event="replug"), *after]
    backend = ReplayUsbBackend(steps, vendor_id=VID, product_id=PID)
    sink = Collector()
    reader = reader_for(backend, sink)
    reader.start()
    try:
        assert reader.wait_until_received(total_bytes(steps), 10)
    finally:
        reader.stop()
    assert sink.cards() == ["9d", "Qc"]
    assert sink.connections() == [True, False, True]
    away = next(i for i in sink.items if isinstance(i, DeviceConnection) and not i.connected)
    assert "No such device" in (away.detail or "")
    health = reader.health()
    assert health["reconnects"] == 1
    assert health["discarded_partials"] == 1
    assert backend.detach_calls == 2  # the kernel grabbed the replugged keyboard again


def test_serial_number_selects_the_unit() -> None:
    backend = ReplayUsbBackend(steps_for("AS"), vendor_id=VID, product_id=PID, serial_number="A1")
    sink = Collector()
    reader = reader_for(backend, sink, serial_number="B2")
    reader.start()
    try:
        assert reader.wait_until_connected(False, 10)
    finally:
        reader.stop()
    assert sink.cards() == []
    assert "no USB device 0c2e:0b61 serial B2" in (sink.items[0].detail or "")  # type: ignore[union-attr]
    reader = reader_for(backend, sink, serial_number="A1")
    reader.start()
    try:
        assert sink.wait_for(lambda items: any(isinstance(i, CardRead) for i in items))
    finally:
        reader.stop()
    assert sink.cards() == ["As"]


def test_realtime_replay_serves_reports_at_their_offsets() -> None:
    steps = steps_for("2H")
    backend = ReplayUsbBackend(steps, vendor_id=VID, product_id=PID, realtime=True)
    sink = Collector()
    reader = reader_for(backend, sink)
    reader.start()
    try:
        assert reader.wait_until_received(total_bytes(steps), 10)
    finally:
        reader.stop()
    assert sink.cards() == ["2h"]


def test_record_usb_reports_with_unplug_then_replay_the_recording() -> None:
    from drivers.fixtures import UsbIdentity
    from drivers.record import Recorder, attach
    from drivers.replay import replay_fixture

    steps = [
        *steps_for("9D"),
        UsbStep(t=1, event="unplug"),
        UsbStep(t=2, event="replug"),
        *steps_for("TS", t0=3),
    ]
    backend = ReplayUsbBackend(steps, vendor_id=VID, product_id=PID)
    recorder = Recorder(transport="usb")
    live = Collector()
    settings = UsbHidReaderSettings.model_validate({"vendor_id": VID, "product_id": PID, "reconnect": FAST})
    reader = UsbHidReader(settings, lambda item: recorder.sink(item, live), clock, backend=backend)
    attach(reader, recorder)
    reader.start()
    try:
        assert reader.wait_until_received(total_bytes(steps), 10)
    finally:
        reader.stop()
    fixture = recorder.fixture(name="wedge", protocol="usb_hid", provenance="test recording",
                               usb=UsbIdentity(vendor_id=VID, product_id=PID))  # fmt: skip
    assert [s.report for s in fixture.steps if s.report is not None] == [s.report for s in steps if s.report]
    assert [s.event for s in fixture.steps if s.event is not None] == ["unplug", "replug"]
    replayed = Collector()
    replay_fixture(fixture, replayed, final_tick=False)
    assert replayed.cards() == live.cards() == ["9d", "Ts"]
    assert replayed.connections() == live.connections() == [True, False, True]


def test_last_progress_advances_on_read_timeouts_and_while_the_unit_is_missing() -> None:
    """The watchdog's view: an idle reader (interrupt read timeouts) and a search for a missing
    unit with a long backoff both keep the loop's last turn moving."""
    for serial_number, reconnect in ((None, FAST), ("NOT-PLUGGED", {"initial_delay": 30.0, "jitter": 0.0})):
        backend = ReplayUsbBackend([], vendor_id=VID, product_id=PID, serial_number="A1")
        reader = reader_for(backend, Collector(), serial_number=serial_number, reconnect=reconnect)
        assert reader.last_progress() is None
        reader.start()
        try:
            assert reader.wait_until_connected(serial_number is None, 10)
            seen: list[float] = []
            waiting = threading.Event()
            deadline = time.monotonic() + 10
            while len(set(seen)) < 3:  # three distinct turns
                assert time.monotonic() < deadline, seen
                last = reader.last_progress()
                assert last is not None
                seen.append(last)
                waiting.wait(0.05)
        finally:
            reader.stop()
        assert reader.last_progress() is None
