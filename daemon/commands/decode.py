"""``baccarat-edge decode``: raw reader bytes in, one JSON object per decoded or rejected frame out.

A technician's tool: ``baccarat-edge decode --protocol angel_eye capture.bin``, or
live, ``cat /dev/ttyUSB0 | baccarat-edge decode --protocol angel_eye -``. Input is
raw bytes, hex text with ``--hex``, or a fixture's steps with ``--fixture``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "decode",
        help="decode raw reader bytes; one JSON object per decoded or rejected frame",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--protocol", required=True, choices=["angel_eye", "ascii_lines", "usb_hid"], help="wire protocol"
    )
    parser.add_argument("--settings", type=Path, help="YAML/JSON file with the protocol's decoder settings")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--hex", action="store_true", help="input is hex text (whitespace ignored)")
    source.add_argument(
        "--fixture", action="store_true", help="input is a fixture file; its step times are used"
    )
    parser.add_argument("file", nargs="?", default="-", help="input file, or - for stdin (default)")
    parser.set_defaults(handler=run)


def _load_settings(path: Path | None) -> dict[str, Any] | str:
    if path is None:
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return f"{path}: cannot read settings: {exc}"
    if data is None:
        return {}
    if not isinstance(data, dict):
        return f"{path}: settings must be a mapping of setting names to values"
    return data


def _emit(frames: list[Any], at: float) -> int:
    for frame in frames:
        out = frame.to_dict()
        out["at"] = round(at, 6)
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    sys.stdout.flush()
    return len(frames)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from drivers.protocols import make_decoder
    from drivers.protocols.hid_wedge import HidWedgeDecoder

    settings = _load_settings(args.settings)
    if isinstance(settings, str):
        print(f"error: {settings}", file=sys.stderr)
        return 2
    try:
        decoder = make_decoder(args.protocol, settings)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"])
            print(f"error: {args.settings}: {where}: {error['msg']}", file=sys.stderr)
        return 2
    if args.fixture:
        return _decode_fixture(args, decoder)
    stream: BinaryIO
    if args.file == "-":
        stream = sys.stdin.buffer
    else:
        try:
            stream = Path(args.file).open("rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            print(f"error: cannot open {args.file}: {exc}", file=sys.stderr)
            return 2
    start = time.monotonic()
    pending_hex = ""
    try:
        while True:
            chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096)
            if not chunk:
                break
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
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if isinstance(decoder, HidWedgeDecoder) or decoder.has_partial_frame:
        _emit(decoder.reset("incomplete frame at end of input"), time.monotonic() - start)
    return 0


def _decode_fixture(args: argparse.Namespace, decoder: Any) -> int:
    from drivers.fixtures import FixtureError, load_fixture

    try:
        fixture = load_fixture(Path(args.file))
    except FixtureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if fixture.header.protocol != args.protocol:
        print(
            f"error: {args.file} is a {fixture.header.protocol} fixture, not {args.protocol}",
            file=sys.stderr,
        )
        return 2
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
