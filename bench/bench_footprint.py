"""Footprint of an idle daemon: RSS and CPU with a reader on a pty, then with the camera path loaded.

The real daemon (``python -m daemon.cli run``) starts with ``NOTIFY_SOCKET`` bound by this
script (start-up time = Popen → ``READY=1``), connects to a mosquitto of its own, and then
idles for ``--idle`` seconds (no card dealt): RSS sampled every 0.5 s (median, max) and CPU%
= (user + system CPU seconds used) / wall seconds over the window. The camera run adds the
fallback camera on a folder of 1280x720 frames made from real card art (4 cards each,
looping at the camera's 10 fps), templates learned from the same deck.

Baseline in the same run: a bare ``python -c 'import time; time.sleep(N)'`` measured the
same way (the interpreter's own floor), and the wall time of ``python -c pass``.
Targets: idle with a reader under 60 MB RSS and under 1% CPU.

    .venv/bin/python -m bench.bench_footprint [--idle 20] [--starts 3] [--no-camera] [--py-spy FILE] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import collapsed_profile, cpu_seconds, ms, pyspy_start, report, rss_bytes
from bench.rig import REPO, Broker, DaemonProcess, NotifySocket, TimedPty, write_config

TABLE_ID = "IDLE-1"
TARGET_RSS_MB = 60.0
TARGET_CPU_PCT = 1.0


def sample(pid: int, seconds: float) -> dict[str, float]:
    """RSS (MB: median, max) and CPU% of ``pid`` over ``seconds``."""
    rss: list[float] = []
    cpu0, wall0 = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - wall0 < seconds:
        rss.append(rss_bytes(pid) / 1e6)
        time.sleep(0.5)
    cpu = cpu_seconds(pid) - cpu0
    wall = time.monotonic() - wall0
    return {
        "rss_mb_median": round(statistics.median(rss), 1),
        "rss_mb_max": round(max(rss), 1),
        "cpu_pct": round(100 * cpu / wall, 2),
    }


def camera_section(workdir: Path, frames: int) -> dict[str, Any]:
    """A camera on a folder of synthetic frames (real card art), templates learned from the deck."""
    import cv2

    from drivers.camera.templates import learn_templates, save_templates
    from tests.camera.fetch_art import ensure_decks
    from tests.camera.synth import SHOE_MOUTH, SLOT_BOXES, frame_set, load_faces

    deck = ensure_decks()["svg-cards"]
    workdir.mkdir(parents=True, exist_ok=True)
    templates = workdir / "templates.npz"
    save_templates(learn_templates(deck, "svg-cards"), templates)
    folder = workdir / "frames"
    folder.mkdir(parents=True, exist_ok=True)
    for i, frame in enumerate(frame_set(load_faces(deck), "clean", frames, seed=3)):
        cv2.imwrite(str(folder / f"{i:04d}.png"), frame.image)

    def box(b: tuple[float, float, float, float]) -> dict[str, float]:
        return {"x0": b[0], "y0": b[1], "x1": b[2], "y1": b[3]}

    layout = {slot: box(b) for slot, b in SLOT_BOXES.items()} | {"shoe_mouth": box(SHOE_MOUTH)}
    return {
        "settings": {
            "source": str(folder),
            "source_kind": "folder",
            "templates": str(templates),
            "layout": layout,
            "fps": 10.0,
            "loop_replay": True,
            "stale_frame_s": None,
        }
    }


def measure_daemon(workdir: Path, config: Path, idle_s: float, profile: Path | None = None) -> dict[str, Any]:
    notify = NotifySocket(workdir / "notify.sock")
    daemon = DaemonProcess(config, workdir / "daemon.log", notify_socket=notify.path)
    try:
        ready = notify.wait_ready(60.0)
        if ready is None:
            raise RuntimeError(f"no READY within 60 s:\n{daemon.tail()}")
        time.sleep(2.0)  # let the connection and the first health report settle
        figures: dict[str, Any] = {"start_to_ready_ms": round((ready - daemon.started) * 1000, 1)}
        spy = None if profile is None else pyspy_start(daemon.pid, idle_s, profile)
        figures.update(sample(daemon.pid, idle_s))
        if spy is not None:
            spy.wait(30)
            figures["py_spy"] = collapsed_profile(profile) if profile and profile.exists() else "no output"
        if not daemon.alive():
            raise RuntimeError(f"the daemon exited while idle:\n{daemon.tail()}")
        return figures
    finally:
        daemon.stop()
        notify.close()


def start_to_ready(workdir: Path, config: Path) -> float:
    notify = NotifySocket(workdir / "notify.sock")
    daemon = DaemonProcess(config, workdir / "daemon.log", notify_socket=notify.path)
    try:
        ready = notify.wait_ready(60.0)
        if ready is None:
            raise RuntimeError(f"no READY within 60 s:\n{daemon.tail()}")
        return ready - daemon.started
    finally:
        daemon.stop()
        notify.close()


def baseline(idle_s: float) -> dict[str, Any]:
    """A bare interpreter sleeping, sampled the same way; and ``python -c pass`` wall time."""
    proc = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({idle_s + 5})"])
    try:
        time.sleep(1.0)
        figures: dict[str, Any] = sample(proc.pid, idle_s)
    finally:
        proc.kill()
        proc.wait(5)
    walls = []
    for _ in range(5):
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True, cwd=REPO)
        walls.append(time.monotonic() - start)
    figures["python_c_pass_ms"] = round(statistics.median(walls) * 1000, 1)
    return figures


def run(
    idle_s: float, starts: int, with_camera: bool, frames: int, profile: Path | None = None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as tmp_name:
        tmp = Path(tmp_name)
        with Broker(tmp / "broker") as broker:
            pty = TimedPty(tmp / "shoe")
            try:
                reader_cfg = write_config(tmp / "reader", TABLE_ID, pty.path, broker.port)
                starts_s = [start_to_ready(tmp / "reader", reader_cfg) for _ in range(starts)]
                reader = measure_daemon(tmp / "reader", reader_cfg, idle_s, profile)
                camera: dict[str, Any] | None = None
                if with_camera:
                    section = camera_section(tmp / "camera-assets", frames)
                    camera_cfg = write_config(tmp / "camera", TABLE_ID, pty.path, broker.port, camera=section)
                    camera = measure_daemon(tmp / "camera", camera_cfg, idle_s)
            finally:
                pty.close()
        base = baseline(idle_s)
    figures: dict[str, Any] = {
        "idle_window_s": idle_s,
        "idle_with_reader": reader,
        "start_to_ready_reader_only": ms(starts_s).text(),
    }
    if camera is not None:
        figures["idle_with_reader_and_camera_10fps"] = camera
    figures["baseline_bare_python_sleeping"] = base
    figures["ratio_rss_to_bare_python"] = round(reader["rss_mb_median"] / base["rss_mb_median"], 1)
    figures["target"] = f"reader idle < {TARGET_RSS_MB:g} MB RSS and < {TARGET_CPU_PCT:g}% CPU"
    figures["target_met"] = reader["rss_mb_max"] < TARGET_RSS_MB and reader["cpu_pct"] < TARGET_CPU_PCT
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle", type=float, default=20.0, help="seconds sampled per idle daemon")
    parser.add_argument("--starts", type=int, default=3, help="extra starts timed (reader only)")
    parser.add_argument("--frames", type=int, default=30, help="camera frames in the looped folder")
    parser.add_argument("--no-camera", action="store_true", help="skip the camera run")
    parser.add_argument(
        "--py-spy", type=Path, default=None, metavar="FILE",
        help="profile the idle reader daemon with py-spy (collapsed stacks to FILE; adds py-spy's own cost)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run(args.idle, args.starts, not args.no_camera, args.frames, args.py_spy)
    report("idle footprint and start-up", figures, args.json)
    return 0 if figures["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
