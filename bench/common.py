"""Shared helpers of the benchmark scripts: percentiles, machine facts, process sampling, output.

Nothing here measures anything by itself; every script prints its own figures beside a
baseline measured in the same run.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank on the sorted values); NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))])


@dataclass(frozen=True, slots=True)
class Summary:
    """Median, p99 and max of one sample (in the sample's unit)."""

    n: int
    median: float
    p99: float
    max: float

    @staticmethod
    def of(values: Sequence[float]) -> Summary:
        if not values:
            return Summary(0, float("nan"), float("nan"), float("nan"))
        return Summary(len(values), statistics.median(values), percentile(values, 99), max(values))

    def scaled(self, factor: float) -> Summary:
        return Summary(self.n, self.median * factor, self.p99 * factor, self.max * factor)

    def as_dict(self, digits: int = 3) -> dict[str, float | int]:
        return {
            "n": self.n,
            "median": round(self.median, digits),
            "p99": round(self.p99, digits),
            "max": round(self.max, digits),
        }

    def text(self, unit: str = "ms", digits: int = 2) -> str:
        return (
            f"median {self.median:.{digits}f} {unit}  p99 {self.p99:.{digits}f} {unit}  "
            f"max {self.max:.{digits}f} {unit}  (n={self.n})"
        )


def ms(seconds: Sequence[float]) -> Summary:
    """Summary in milliseconds of durations given in seconds."""
    return Summary.of(seconds).scaled(1000.0)


def machine() -> dict[str, Any]:
    """The facts every figure needs beside it: cores, CPU model, Python, load now."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load1, load5, _ = os.getloadavg()
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "load_1m": round(load1, 2),
        "load_5m": round(load5, 2),
    }


def fsync_sample(directory: Path, count: int = 200, size: int = 4120, pause_s: float = 0.0) -> list[float]:
    """Seconds taken by appending ``size`` bytes to a file in ``directory`` + ``os.fsync`` (same disk).

    4120 bytes is one SQLite WAL frame (a 4 KiB page and its header), what a journal commit
    appends before its sync.
    """
    path = directory / f"fsync-probe-{threading.get_ident()}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    out: list[float] = []
    try:
        payload = b"x" * size
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, payload)
            os.fsync(fd)
            out.append(time.perf_counter() - start)
            if pause_s:
                time.sleep(pause_s)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return out


class FsyncProbe:
    """Samples ``fsync_sample`` in a thread while a benchmark runs (same disk, same moment)."""

    def __init__(self, directory: Path, interval_s: float = 0.05) -> None:
        self.directory = directory
        self.interval_s = interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fsync-probe", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.extend(fsync_sample(self.directory, 20, pause_s=self.interval_s))

    def __enter__(self) -> FsyncProbe:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return 0
    return int(fields[1]) * PAGE_SIZE


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` (all its threads)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def report(title: str, figures: dict[str, Any], as_json: bool) -> None:
    """Print ``figures`` (with the machine facts) as aligned text or one JSON line."""
    payload = {"bench": title, "machine": machine(), **figures}
    if as_json:
        print(json.dumps(payload))
        return
    print(f"== {title}")
    for key, value in payload.items():
        if key == "bench":
            continue
        if isinstance(value, dict):
            print(f"{key}:")
            for sub, subvalue in value.items():
                print(f"    {sub:40} {subvalue}")
        else:
            print(f"{key:44} {value}")


def pyspy_start(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """Start ``py-spy record`` (collapsed stacks, all threads, idle excluded) on ``pid``.

    py-spy is not a project dependency: ``.venv/bin/pip install py-spy`` to use it.
    """
    exe = Path(sys.executable).with_name("py-spy")
    if not exe.exists():
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    return subprocess.Popen(
        [str(exe), "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
         "--rate", "250", "--format", "raw", "--output", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def collapsed_profile(path: Path, top: int = 15) -> dict[str, list[str]]:
    """Top frames of a collapsed-stack file: by own samples and by inclusive samples."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [f.strip() for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count

    def ranked(table: dict[str, int]) -> list[str]:
        best = sorted(table.items(), key=lambda kv: -kv[1])[:top]
        return [f"{100 * n / max(1, total):5.1f}%  {frame}" for frame, n in best]

    return {"samples": [str(total)], "own": ranked(own), "inclusive": ranked(inclusive)}
