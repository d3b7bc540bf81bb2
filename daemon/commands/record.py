"""``baccarat-edge record``: capture a live reader into a fixture, through the daemon's own driver.

Serial: ``baccarat-edge record --driver angel_eye --url /dev/baccarat-shoe --out shoe.fixture.jsonl``.
USB: ``baccarat-edge record --driver usb_hid --vid 0c2e --pid 0b61 --out wedge.fixture.jsonl``.
Every raw chunk is kept with its time (even what the decoder rejects); unplug and
replug are recorded. ``--settings FILE`` gives the protocol settings (YAML, validated like
the daemon's ``readers[].settings.protocol``: a grammar, an HID map, the Angel Eye BCC
variant) that the driver decodes with and that the fixture's header keeps for replay.

The file is written as the capture goes: the header at once, then each step as one
whole line. ``--duration``, Ctrl-C or SIGTERM end the recording cleanly; a recorder
that is killed or crashes leaves a readable fixture with everything captured until then
(fsync only at the end: a power cut can lose the last lines the kernel had not written).
Decoded inputs are echoed to stderr while recording.

The expected engine events beside the fixture (``NAME.expected.jsonl``): set the
header's ``table`` to the table's engine settings and add the dealer's supervisor steps
(e.g. ``new_shoe`` at ``t`` 0) if the recording needs them, then
``baccarat-edge replay NAME.fixture.jsonl --write-expected``; review what it wrote.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from daemon.commands._settings_file import load_protocol_settings


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
    parser.add_argument(
        "--settings",
        type=Path,
        help="YAML file with the protocol settings (grammar, HID map, BCC variant…); default: the protocol's",
    )
    parser.add_argument("--out", type=Path, required=True, help="fixture file to write (*.fixture.jsonl)")
    parser.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: until Ctrl-C or SIGTERM)"
    )
    parser.add_argument("--site", default="", help="where/what was recorded, for the fixture's provenance")
    parser.add_argument("--description", default="")
    parser.set_defaults(handler=run)


class _Refused(Exception):
    """A usage error: the line to print (exit 2)."""


def run(args: argparse.Namespace) -> int:
    from drivers.base import ReaderDriver, log_to_stderr
    from drivers.record import FixtureWriter, Recorder, attach
    from drivers.registry import load

    log_to_stderr()
    driver_class = load(args.driver)
    try:
        validated = _validated_settings(args, driver_class)
        header = _header(args, validated.model_dump(mode="json"))
        try:
            writer = FixtureWriter(args.out, header)
        except OSError as exc:
            raise _Refused(f"error: cannot write {args.out}: {exc.strerror}") from exc
    except _Refused as refused:
        print(refused, file=sys.stderr)
        return 2
    recorder = Recorder(transport="usb" if args.driver == "usb_hid" else "serial", writer=writer)

    def echo(item: Any) -> None:
        print(f"  {type(item).__name__}: {item}", file=sys.stderr, flush=True)

    driver = driver_class.driver(validated, lambda item: recorder.sink(item, echo), time.monotonic)
    if not isinstance(driver, ReaderDriver):
        print(f"error: {args.driver} is not a card reader driver", file=sys.stderr)
        return 2
    attach(driver, recorder)
    print(f"recording {args.driver} into {args.out}; Ctrl-C to stop", file=sys.stderr, flush=True)
    stopped_by = _record_until_stopped(driver, recorder, writer, args.duration)
    if recorder.write_error is not None:
        print(
            f"error: writing {args.out} failed after {writer.steps} steps: {recorder.write_error}; "
            "the file holds the steps written until then",
            file=sys.stderr,
        )
        return 1
    how = f" (stopped by {stopped_by})" if stopped_by else ""
    print(
        f"{args.out}: {writer.steps} steps, {recorder.inputs} inputs decoded{how}",
        file=sys.stderr,
    )
    return 0


def _validated_settings(args: argparse.Namespace, driver_class: Any) -> Any:
    """The driver's settings from the flags (and ``--settings``), validated; raises ``_Refused``."""
    from pydantic import ValidationError

    settings: dict[str, Any]
    if args.driver == "usb_hid":
        if not (args.vid and args.pid):
            raise _Refused("error: usb_hid needs --vid and --pid")
        settings = {"vendor_id": args.vid, "product_id": args.pid, "serial_number": args.serial_number}
    else:
        if not args.url:
            raise _Refused(f"error: {args.driver} needs --url")
        settings = {"url": args.url, "baudrate": args.baudrate}
    protocol = load_protocol_settings(args.settings)
    if isinstance(protocol, str):
        raise _Refused(f"error: {protocol}")
    if args.settings is not None:
        settings["protocol"] = protocol
    try:
        return driver_class.validate({k: v for k, v in settings.items() if v is not None})
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = [str(p) for p in error["loc"]]
            if args.settings is not None and loc[:1] == ["protocol"]:
                lines.append(f"error: {args.settings}: {'.'.join(loc[1:])}: {error['msg']}")
            else:
                lines.append(f"error: {'.'.join(loc)}: {error['msg']}")
        raise _Refused("\n".join(lines)) from exc


def _header(args: argparse.Namespace, dumped: dict[str, Any]) -> Any:
    """The fixture's header for the validated settings ``dumped``; raises ``_Refused``."""
    from pydantic import ValidationError

    from drivers.fixtures import FIXTURE_SUFFIX, UsbIdentity
    from drivers.record import recorded_header

    usb = None
    if args.driver == "usb_hid":
        serial_number = dumped.get("serial_number") or "unknown"
        usb = UsbIdentity(
            vendor_id=dumped["vendor_id"], product_id=dumped["product_id"], serial_number=serial_number
        )
    name = args.out.name.removesuffix(FIXTURE_SUFFIX).removesuffix(".jsonl")
    try:
        return recorded_header(
            name=name,
            protocol=args.driver,
            provenance=f"recorded live with baccarat-edge record {args.site}".strip(),
            description=args.description,
            protocol_settings=dumped["protocol"],
            usb=usb,
        )
    except ValidationError as exc:
        lines = [f"error: --out {args.out.name}: {error['loc'][0]}: {error['msg']}" for error in exc.errors()]
        raise _Refused("\n".join(lines)) from exc


def _record_until_stopped(driver: Any, recorder: Any, writer: Any, duration: float | None) -> str | None:
    """Run the driver until Ctrl-C, SIGTERM, ``duration`` or a write error; close the file.
    The signal that stopped it, if one did."""
    done = threading.Event()
    stopped_by: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopped_by.append(signal.Signals(signum).name)
        done.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    deadline = None if duration is None else time.monotonic() + duration
    driver.start()
    try:
        while not done.wait(0.2):  # short waits: a signal handler runs between them
            if deadline is not None and time.monotonic() >= deadline:
                break
            if recorder.write_error is not None:
                break
    except KeyboardInterrupt:
        stopped_by.append("SIGINT")  # Ctrl-C ends the recording; the file is complete
    finally:
        driver.stop()
        signal.signal(signal.SIGTERM, previous)
        try:
            writer.close()
        except OSError as exc:
            recorder.write_error = recorder.write_error or exc
    return stopped_by[0] if stopped_by else None
