"""``baccarat-edge record``: capture a live reader into a fixture, through the daemon's own driver.

Serial: ``baccarat-edge record --driver angel_eye --url /dev/baccarat-shoe --out shoe.fixture.jsonl``.
USB: ``baccarat-edge record --driver usb_hid --vid 0c2e --pid 0b61 --out wedge.fixture.jsonl``.
Every raw chunk is kept with its time (even what the decoder rejects); unplug and
replug are recorded. Stops after ``--duration`` seconds or on Ctrl-C, then writes
the file; decoded inputs are echoed to stderr while recording.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "record",
        help="capture a live reader into a fixture file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--driver", required=True, choices=["angel_eye", "ascii_lines", "usb_hid"])
    parser.add_argument("--url", help="serial device path or pyserial URL (serial drivers)")
    parser.add_argument("--baudrate", type=int, help="line speed (default per protocol)")
    parser.add_argument("--vid", help="USB vendor id, hex (usb_hid)")
    parser.add_argument("--pid", help="USB product id, hex (usb_hid)")
    parser.add_argument("--serial-number", help="USB serial number (usb_hid)")
    parser.add_argument("--out", type=Path, required=True, help="fixture file to write (*.fixture.jsonl)")
    parser.add_argument("--duration", type=float, help="stop after this many seconds (default: Ctrl-C)")
    parser.add_argument("--site", default="", help="where/what was recorded, for the fixture's provenance")
    parser.add_argument("--description", default="")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from drivers.base import log_to_stderr
    from drivers.fixtures import FIXTURE_SUFFIX, UsbIdentity
    from drivers.record import Recorder, attach
    from drivers.registry import load

    log_to_stderr()
    settings: dict[str, Any]
    if args.driver == "usb_hid":
        if not (args.vid and args.pid):
            print("error: usb_hid needs --vid and --pid", file=sys.stderr)
            return 2
        settings = {"vendor_id": args.vid, "product_id": args.pid, "serial_number": args.serial_number}
    else:
        if not args.url:
            print(f"error: {args.driver} needs --url", file=sys.stderr)
            return 2
        settings = {"url": args.url, "baudrate": args.baudrate}
    driver_class = load(args.driver)
    try:
        validated = driver_class.validate({k: v for k, v in settings.items() if v is not None})
    except ValidationError as exc:
        for error in exc.errors():
            print(f"error: {'.'.join(str(p) for p in error['loc'])}: {error['msg']}", file=sys.stderr)
        return 2
    recorder = Recorder(transport="usb" if args.driver == "usb_hid" else "serial")

    def echo(item: Any) -> None:
        print(f"  {type(item).__name__}: {item}", file=sys.stderr, flush=True)

    driver = driver_class.driver(validated, lambda item: recorder.sink(item, echo), time.monotonic)
    attach(driver, recorder)
    done = threading.Event()
    print(f"recording {args.driver} into {args.out}; Ctrl-C to stop", file=sys.stderr, flush=True)
    driver.start()
    try:
        done.wait(args.duration)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends the recording; the file is still written
    finally:
        driver.stop()
    dumped = validated.model_dump()
    usb = None
    if args.driver == "usb_hid":
        serial_number = dumped.get("serial_number") or "unknown"
        usb = UsbIdentity(
            vendor_id=dumped["vendor_id"], product_id=dumped["product_id"], serial_number=serial_number
        )
    name = args.out.name.removesuffix(FIXTURE_SUFFIX).removesuffix(".jsonl")
    fixture = recorder.fixture(
        name=name,
        protocol=args.driver,
        provenance=f"recorded live with baccarat-edge record {args.site}".strip(),
        description=args.description,
        protocol_settings=dumped["protocol"],
        usb=usb,
    )
    fixture.save(args.out)
    print(f"{args.out}: {len(fixture.steps)} steps, {recorder.inputs} inputs decoded", file=sys.stderr)
    return 0
