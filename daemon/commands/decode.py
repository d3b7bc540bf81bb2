"""``baccarat-edge decode``: raw reader bytes in, one JSON object per decoded or rejected frame out.

A technician's tool: ``baccarat-edge decode --protocol angel_eye capture.bin``, or
live, ``cat /dev/ttyUSB0 | baccarat-edge decode --protocol angel_eye -``. Input is
raw bytes, hex text with ``--hex``, or a fixture file (``*.fixture.jsonl``): a fixture
is recognised by its header line and decoded step by step with its own protocol and
``protocol_settings`` (``--settings`` overrides them; ``--protocol``, if given, must match).
JSON text that is not a fixture is refused rather than decoded as wire bytes. Reading
stdin from a terminal prints a hint on stderr. What follows the last frame at the end of
the input (an unfinished frame, or bytes outside any frame) is printed as a rejected
frame with its reason, never dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

from daemon.commands._settings_file import load_protocol_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "decode",
        help="decode raw reader bytes; one JSON object per decoded or rejected frame",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--protocol",
        choices=["angel_eye", "ascii_lines", "usb_hid"],
        help="wire protocol (required for raw bytes; a fixture file names its own)",
    )
    parser.add_argument("--settings", type=Path, help="YAML/JSON file with the protocol's decoder settings")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--hex", action="store_true", help="input is hex text (whitespace ignored)")
    source.add_argument(
        "--fixture",
        action="store_true",
        help="input must be a fixture file (detected anyway from its header line); its step times are used",
    )
    parser.add_argument("file", nargs="?", default="-", help="input file, or - for stdin (default)")
    parser.set_defaults(handler=run)


def _emit(frames: list[Any], at: float) -> int:
    for frame in frames:
        out = frame.to_dict()
        out["at"] = round(at, 6)
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    sys.stdout.flush()
    return len(frames)


_HEAD_LIMIT = 65536
"""Bytes read at most to find the end of a first line that starts like JSON."""

TTY_HINT = (
    "decode: reading reader bytes from the terminal (stdin). Pipe a capture in "
    "(cat /dev/ttyUSB0 | baccarat-edge decode --protocol angel_eye -) or give a file; "
    "Ctrl-D ends the input."
)


def _read_chunk(stream: BinaryIO) -> bytes:
    return stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096)


def _head(stream: BinaryIO) -> bytes:
    """The first bytes of the input; when they start like JSON, up to the end of the first line
    (so a fixture header can be recognised). Raw reader bytes never wait for a newline."""
    head = _read_chunk(stream)
    if not head.lstrip().startswith(b"{"):
        return head
    while b"\n" not in head and len(head) < _HEAD_LIMIT:
        more = _read_chunk(stream)
        if not more:
            break
        head += more
    return head


def _open(file: str) -> BinaryIO | str:
    if file == "-":
        if sys.stdin.isatty():
            print(TTY_HINT, file=sys.stderr)
        return sys.stdin.buffer
    try:
        return Path(file).open("rb")  # closed by run()
    except OSError as exc:
        return f"cannot open {file}: {exc}"


def _make_decoder(args: argparse.Namespace, protocol: str, settings: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    from drivers.protocols import make_decoder

    try:
        return make_decoder(protocol, settings)
    except ValidationError as exc:
        where_from = args.settings or "the fixture's protocol_settings"
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"])
            print(f"error: {where_from}: {where}: {error['msg']}", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    from drivers.fixtures import FixtureError, is_fixture_header, parse_fixture

    settings = load_protocol_settings(args.settings)
    if isinstance(settings, str):
        print(f"error: {settings}", file=sys.stderr)
        return 2
    stream = _open(args.file)
    if isinstance(stream, str):
        print(f"error: {stream}", file=sys.stderr)
        return 2
    name = "<stdin>" if args.file == "-" else args.file
    try:
        head = _head(stream)
        first_line = head.split(b"\n", 1)[0]
        if args.fixture or (not args.hex and is_fixture_header(first_line)):
            text = (head + stream.read()).decode("utf-8", errors="replace")
            try:
                fixture = parse_fixture(text, Path(args.file) if args.file != "-" else name)
            except FixtureError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            protocol = fixture.header.protocol
            if args.protocol is not None and args.protocol != protocol:
                print(f"error: {name} is a {protocol} fixture, not {args.protocol}", file=sys.stderr)
                return 2
            decoder = _make_decoder(args, protocol, {**fixture.header.protocol_settings, **settings})
            return 2 if decoder is None else _decode_fixture(fixture, decoder)
        if not args.hex and first_line.lstrip().startswith(b"{") and _is_json_object(first_line):
            print(
                f"error: {name} is JSON text, not reader bytes: a fixture starts with its header line "
                '({"format": "baccarat-edge-fixture", ...}); an .expected.jsonl file is engine output',
                file=sys.stderr,
            )
            return 2
        if args.protocol is None:
            print(
                "error: --protocol is required for raw reader bytes (only a fixture file names its own)",
                file=sys.stderr,
            )
            return 2
        decoder = _make_decoder(args, args.protocol, settings)
        if decoder is None:
            return 2
        return _decode_stream(args, stream, head, decoder)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _is_json_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, UnicodeDecodeError):
        return False


def _decode_stream(args: argparse.Namespace, stream: BinaryIO, head: bytes, decoder: Any) -> int:
    start = time.monotonic()
    pending_hex = ""
    chunk = head
    while chunk:
        if args.hex:
            pending_hex += chunk.decode("ascii", errors="replace")
            text = "".join(pending_hex.split())
            usable = len(text) - len(text) % 2
            try:
                chunk = bytes.fromhex(text[:usable])
            except ValueError:
                print("error: --hex input holds characters that are not hex digits", file=sys.stderr)
                return 2
            pending_hex = text[usable:]
        now = time.monotonic() - start
        _emit(decoder.feed(chunk, now), now)
        chunk = _read_chunk(stream)
    # Always: what follows the last frame (a partial frame, or bytes outside any frame that a
    # decoder holds until the next frame start) is reported, never dropped silently.
    _emit(decoder.reset("incomplete frame at end of input"), time.monotonic() - start)
    return 0


def _decode_fixture(fixture: Any, decoder: Any) -> int:
    last = 0.0
    for step in fixture.steps:
        last = step.t
        raw = step.data if step.data is not None else step.report
        if raw is not None:
            _emit(decoder.feed(raw, step.t), step.t)
        elif step.event == "unplug":
            _emit(decoder.reset(), step.t)
    _emit(decoder.reset("incomplete frame at end of input"), last)
    return 0
