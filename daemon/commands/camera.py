"""``baccarat-edge camera``: learn a deck's templates, recognise cards in images."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``camera calibrate`` and ``camera recognize``."""
    parser = subparsers.add_parser("camera", help="camera fallback: calibrate a deck, recognise images")
    commands = parser.add_subparsers(dest="camera_command", metavar="ACTION", required=True)
    calibrate = commands.add_parser(
        "calibrate", help="learn templates from 52 face images named <rank><suit>.png (As.png, Th.png...)"
    )
    calibrate.add_argument("--faces", type=Path, required=True, help="folder of the 52 face images")
    calibrate.add_argument("--out", type=Path, required=True, help="templates file to write (.npz)")
    calibrate.add_argument("--deck", help="deck name stored in the file (default: folder name)")
    calibrate.set_defaults(handler=_calibrate)
    recognize = commands.add_parser("recognize", help="print one JSON line per image: card or unknown")
    recognize.add_argument("--templates", type=Path, required=True, help="file from `camera calibrate`")
    recognize.add_argument("--layout", type=Path, help="camera settings YAML whose layout names the slots")
    recognize.add_argument("images", nargs="+", type=Path, metavar="IMAGE")
    recognize.set_defaults(handler=_recognize)


def _calibrate(args: argparse.Namespace) -> int:
    from drivers.camera.templates import TemplateError, learn_templates, save_templates

    try:
        templates = learn_templates(args.faces, args.deck)
        save_templates(templates, args.out)
    except (TemplateError, OSError) as exc:
        print(f"camera calibrate: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "templates": str(args.out),
                "deck": templates.deck,
                "rank_templates": len(templates.rank_labels),
                "suit_templates": len(templates.suit_labels),
            }
        )
    )
    return 0


def _load_layout(path: Path) -> object:
    from common.yamlfile import load_yaml
    from drivers.camera.settings import CameraSettingsError, LayoutSettings, load_camera_settings

    try:
        return load_camera_settings(path).layout
    except CameraSettingsError:
        # A file holding only the layout mapping is accepted too.
        data = load_yaml(path)
        if isinstance(data, dict) and "layout" not in data:
            from pydantic import ValidationError

            try:
                return LayoutSettings.model_validate(data)
            except ValidationError as exc:
                raise CameraSettingsError(f"{path}: layout: {exc}") from exc
        raise


def _recognize(args: argparse.Namespace) -> int:
    import cv2

    from drivers.camera.recognize import Recognizer
    from drivers.camera.settings import CameraSettingsError, LayoutSettings
    from drivers.camera.templates import TemplateError, load_templates

    try:
        recognizer = Recognizer(load_templates(args.templates))
        layout = _load_layout(args.layout) if args.layout else None
    except (TemplateError, CameraSettingsError, OSError) as exc:
        print(f"camera recognize: {exc}", file=sys.stderr)
        return 1
    status = 0
    for path in args.images:
        frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if frame is None:
            print(json.dumps({"image": str(path), "error": "not a readable image"}))
            status = 1
            continue
        start = time.perf_counter()
        recognitions = recognizer.recognize_frame(frame)
        elapsed_ms = (time.perf_counter() - start) * 1000
        height, width = frame.shape[:2]
        cards = []
        for rec in recognitions:
            slot = None
            if isinstance(layout, LayoutSettings):
                slot = layout.slot_at(rec.outline.center[0] / width, rec.outline.center[1] / height)
            cards.append(
                {
                    "card": rec.card.code if rec.card is not None else "unknown",
                    "confidence": round(rec.confidence, 3),
                    "slot": slot,
                    "reason": rec.reason,
                    "center": [round(rec.outline.center[0], 1), round(rec.outline.center[1], 1)],
                }
            )
        first = cards[0] if len(cards) == 1 else None
        print(
            json.dumps(
                {
                    "image": str(path),
                    "card": first["card"] if first else ("unknown" if not cards else None),
                    "confidence": first["confidence"] if first else 0.0,
                    "slot": first["slot"] if first else None,
                    "cards": cards,
                    "ms": round(elapsed_ms, 2),
                }
            ),
            flush=True,
        )
    return status
