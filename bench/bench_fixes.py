"""What the profiles point at, measured: each proposed fix applied *in this process only*
(a subclass or a patched instance, never the project's files) against the stock code, in
the same run, on the same machine. The owners apply the real change; these numbers say
what it is worth.

``decoder``   AngelEyeDecoder.feed with a whole-frame fast path (find ETX, check BCC once)
              instead of one Python state-machine step per byte; then also a memo so the
              shoe's two repeat transmissions of a frame are not interpreted again. Output
              checked identical frame by frame on every transmission before timing.
``idle``      the daemon's publisher liveness probe re-registered as a cheap thread check
              (before 302d958 the probe called ``Publisher.health()``, which recursed through
              ``Liveness.states()`` to RecursionError every watchdog turn: 2.25% idle CPU).
              Since 302d958 stock has the fix, so both variants should now agree; kept as a
              check, not in ``all``.
``drain``     the publisher draining a journal of pending events to mosquitto, by
              ``broker.delivery.inflight_window`` (16, 32 = the default since 51d3c8b, 64,
              256); ``--marks-fsync`` adds the pre-51d3c8b variant (delivery marks committed
              with an fsync).

``capacity``  what the runner pays per admitted card for the journal-full check as a
              backlog grows (before 403f933 it counted the undelivered rows: 6.6 ms at
              20,000 and 46 ms at 100,000 undelivered; since then a counter).

    .venv/bin/python -m bench.bench_fixes [decoder|idle|drain|capacity|all] [--marks-fsync] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import report
from bench.rig import Broker, TimedPty, shoe_stream, write_config
from drivers.protocols.angel_eye import ENQ, ETX, AngelEyeDecoder, _State
from drivers.protocols.frames import DecodedFrame


# ----------------------------------------------------------------------------- decoder
class FastPathDecoder(AngelEyeDecoder):
    """``feed`` that hands a complete, clean frame to ``_finish_frame`` in one slice.

    Equivalent to the per-byte machine when, from an ENQ met outside a frame, the ETX comes
    within ``max_frame_length`` bytes, two BCC bytes follow, and no ENQ lies in between;
    anything else falls back to the per-byte steps.
    """

    def feed(self, data: bytes, at: float) -> list[DecodedFrame]:
        out: list[DecodedFrame] = []
        i, n = 0, len(data)
        limit = self.settings.max_frame_length
        while i < n:
            if self._state is _State.OUTSIDE and data[i] == ENQ:
                etx = data.find(ETX, i + 1, i + limit + 1)
                end = etx + 3
                if etx != -1 and end <= n and data.find(ENQ, i + 1, end) == -1:
                    self._flush_garbage(out)
                    out.append(self._finish_frame(bytes(data[i:end]), at))
                    i = end
                    continue
            self._step(data[i], at, out)
            i += 1
        return out


class MemoDecoder(FastPathDecoder):
    """Also: a repeat transmission (same SEQ and payload, still in the repeat memory) reuses
    the input decoded from the first one instead of interpreting the frame again. The
    repeat then carries the first transmission's time, which nothing reads (drivers only
    count duplicates)."""

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[tuple[int, bytes], Any] = {}

    def _interpret(self, code: str, data: bytes, seq: int, raw: bytes, at: float) -> Any:
        key = (seq, raw[2:-3])
        if key in self._recent and key in self._memo:
            return self._memo[key]
        result = super()._interpret(code, data, seq, raw, at)
        if len(self._memo) >= 4 * self.settings.dedup_window:
            self._memo = {k: v for k, v in self._memo.items() if k in self._recent}
        self._memo[key] = result
        return result


def _frames_key(frames: list[DecodedFrame], strict: bool = True) -> list[tuple[Any, ...]]:
    if strict:
        return [(f.raw, f.rejected, f.duplicate, f.input, f.reply, f.notice) for f in frames]
    # repeats may carry the first transmission's input (its time); the rest must be identical
    return [
        (f.raw, f.rejected, f.duplicate, type(f.input) if f.duplicate else f.input, f.reply, f.notice)
        for f in frames
    ]


def decoder_figures(shoes: int, repeats: int) -> dict[str, Any]:
    transmissions = [(s.t, s.data) for s in shoe_stream(shoes, 1).steps if s.data is not None]
    # also whole runs of frames in one read (a reader that fell behind), garbage and a cut frame
    chunks = [(transmissions[i][0], b"".join(d for _, d in transmissions[i : i + 64]))
              for i in range(0, len(transmissions), 64)]  # fmt: skip
    noisy = [*transmissions, *chunks, (1e6, b"\x81\x05\x31garbage\x03"), (1e6 + 1, b"\x05\x31\x44\x81")]
    stock_dec, fast_dec, memo_dec = AngelEyeDecoder(), FastPathDecoder(), MemoDecoder()
    for at, data in noisy:  # identical output first, or no figure at all
        expected = stock_dec.feed(data, at)
        if _frames_key(expected) != _frames_key(fast_dec.feed(data, at)):
            raise RuntimeError(f"fast path differs from the stock decoder on {data.hex(' ')}")
        if _frames_key(expected, strict=False) != _frames_key(memo_dec.feed(data, at), strict=False):
            raise RuntimeError(f"memo decoder differs from the stock decoder on {data.hex(' ')}")

    def timed(make: Callable[[], AngelEyeDecoder]) -> float:
        decoder = make()
        start = time.process_time()
        for at, data in transmissions:
            decoder.feed(data, at)
        return time.process_time() - start

    stock, fast, memo = [], [], []
    for _ in range(repeats):
        stock.append(timed(AngelEyeDecoder))
        fast.append(timed(FastPathDecoder))
        memo.append(timed(MemoDecoder))
    cards = sum(1 for _, d in transmissions if d[2:3] == b"D") / 3
    return {
        "transmissions": len(transmissions),
        "stock_cards_per_cpu_s": round(cards / statistics.median(stock)),
        "fast_path_cards_per_cpu_s": round(cards / statistics.median(fast)),
        "speed_up": round(statistics.median(stock) / statistics.median(fast), 2),
        "fast_path_and_repeat_memo_cards_per_cpu_s": round(cards / statistics.median(memo)),
        "speed_up_with_memo": round(statistics.median(stock) / statistics.median(memo), 2),
        "output_identical": True,
    }


# ----------------------------------------------------------------------------- idle
def _idle_child(variant: str, seconds: float) -> None:
    """Runs in a child process: an in-process daemon idling; prints its CPU seconds."""
    import os

    from daemon.service.config import load_config
    from daemon.service.logging import configure_logging
    from daemon.service.runner import Daemon

    with tempfile.TemporaryDirectory(prefix="bench-fix-idle-") as tmp_name:
        tmp = Path(tmp_name)
        with Broker(tmp / "broker") as broker:
            pty = TimedPty(tmp / "shoe")
            loaded = load_config(write_config(tmp / "t", "IDLE-FIX", pty.path, broker.port))
            configure_logging("warning", "json", stream=open(os.devnull, "w"))  # noqa: SIM115
            daemon = Daemon(loaded)
            daemon.start()
            if variant == "fixed":
                publisher = daemon.publisher

                def cheap_probe() -> float | None:
                    threads = getattr(publisher, "_threads", [])
                    return time.monotonic() if threads and all(t.is_alive() for t in threads) else None

                daemon.liveness.register("publisher", cheap_probe)
            loop = threading.Thread(target=daemon.run_until_stopped, daemon=True)
            loop.start()
            time.sleep(2.0)
            cpu0, wall0 = time.process_time(), time.monotonic()
            time.sleep(seconds)
            cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
            daemon.stop_requested.set()
            loop.join(5)
            daemon.stop()
            pty.close()
    print(f"{100 * cpu / wall:.3f}")


def idle_figures(seconds: float, repeats: int) -> dict[str, Any]:
    results: dict[str, list[float]] = {"stock": [], "fixed": []}
    for _ in range(repeats):
        for variant in ("stock", "fixed"):
            out = subprocess.run(
                [sys.executable, "-m", "bench.bench_fixes", "--idle-child", variant,
                 "--seconds", str(seconds)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            results[variant].append(float(out.stdout.strip().splitlines()[-1]))
    stock, fixed = statistics.median(results["stock"]), statistics.median(results["fixed"])
    return {
        "idle_window_s": seconds,
        "stock_cpu_pct_median": round(stock, 2),
        "fixed_probe_cpu_pct_median": round(fixed, 2),
        "runs": repeats,
        "saved_pct_points": round(stock - fixed, 2),
    }


# ----------------------------------------------------------------------------- drain
def _drain_once(tmp: Path, port: int, events: int, fsync_marks: bool, window: int) -> float:
    """Seconds for a Publisher to get every pending event of a fresh journal acknowledged."""
    from daemon.engine.events import Event
    from daemon.journal.settings import JournalSettings
    from daemon.journal.store import Journal
    from daemon.mqtt.publisher import Publisher
    from daemon.mqtt.settings import BrokerSettings

    path = tmp / f"drain-{fsync_marks}-{window}-{time.monotonic_ns()}.sqlite3"
    journal = Journal(JournalSettings(path=path), "DRAIN-1")
    body = {"card": "8s", "slot": "P1", "round": 1, "read": {"raw": "05 31 44 81 b8 03 34 36"}}
    for first in range(0, events, 500):
        batch = [Event("card_dealt", 1.0, "shoe", 1, "reader", body) for _ in range(min(500, events - first))]
        journal.append([], batch)
    if fsync_marks:  # the journal before 51d3c8b: every delivery mark commits with an fsync
        db = journal._db

        def mark_with_fsync(seqs: Any, at: float | None = None) -> None:
            stamp = time.time() if at is None else at
            with journal._lock:
                db.execute("BEGIN IMMEDIATE")
                db.executemany(
                    "UPDATE events SET delivered_at = ? WHERE seq = ? AND delivered_at IS NULL",
                    [(stamp, int(s)) for s in seqs],
                )
                db.execute("COMMIT")
                journal._undelivered = db.execute(
                    "SELECT count(*) FROM events WHERE delivered_at IS NULL AND dead_letter IS NULL"
                ).fetchone()[0]

        journal.mark_delivered = mark_with_fsync  # type: ignore[method-assign]
    settings = BrokerSettings.model_validate(
        {"host": "127.0.0.1", "port": port, "tls": {"enabled": False},
         "client_id": f"drain-{time.monotonic_ns()}", "delivery": {"inflight_window": window}}
    )  # fmt: skip
    publisher = Publisher(settings, "DRAIN-1", journal)
    start = time.monotonic()
    publisher.start()
    try:
        while journal.capacity().undelivered > 0:
            if time.monotonic() - start > 120:
                raise RuntimeError("drain did not finish within 120 s")
            time.sleep(0.02)
        return time.monotonic() - start
    finally:
        publisher.stop(5.0)
        journal.close()


def drain_figures(events: int, repeats: int, fsync_marks: bool) -> dict[str, Any]:
    variants = {f"window {w}": (False, w) for w in (16, 32, 64, 256)}
    if fsync_marks:
        variants["window 16, marks with fsync (before 51d3c8b)"] = (True, 16)
    times: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench-fix-drain-") as tmp_name:
        tmp = Path(tmp_name)
        with Broker(tmp / "broker") as broker:
            for _ in range(repeats):
                for name, (normal, window) in variants.items():
                    times[name].append(_drain_once(tmp, broker.port, events, normal, window))
    return {
        "events": events,
        "runs": repeats,
        **{f"{name}: events/s": round(events / statistics.median(t)) for name, t in times.items()},
    }


# ----------------------------------------------------------------------------- capacity
def capacity_figures(sizes: list[int], calls: int = 50) -> dict[str, Any]:
    """Cost of ``Journal.capacity()`` (what ``admits_new_round`` runs for every card the runner
    admits) as the undelivered backlog grows: it counts the undelivered rows each time."""
    from daemon.engine.events import Event
    from daemon.journal.settings import JournalSettings
    from daemon.journal.store import Journal

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fix-capacity-") as tmp_name:
        journal = Journal(JournalSettings(path=Path(tmp_name) / "j.sqlite3"), "CAP-1")
        body = {"card": "8s", "slot": "P1", "round": 1, "read": {"raw": "05 31 44 81 b8 03 34 36"}}
        try:
            have = 0
            for size in sorted(sizes):
                while have < size:
                    batch = min(1000, size - have)
                    journal.append([], [Event("card_dealt", 1.0, "shoe", 1, "reader", body)] * batch)
                    have += batch
                times = []
                for _ in range(calls):
                    start = time.perf_counter()
                    journal.admits_new_round()
                    times.append(time.perf_counter() - start)
                out[f"admits_new_round ms at {size} undelivered"] = round(1000 * statistics.median(times), 3)
        finally:
            journal.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "which", nargs="?", default="all", choices=("decoder", "idle", "drain", "capacity", "all")
    )
    parser.add_argument("--marks-fsync", action="store_true", help="drain: add the fsync-per-mark variant")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="idle window per run")
    parser.add_argument("--events", type=int, default=4000, help="pending events per drain run")
    parser.add_argument("--idle-child", choices=("stock", "fixed"), help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.idle_child:
        _idle_child(args.idle_child, args.seconds)
        return 0
    figures: dict[str, Any] = {}
    if args.which in ("decoder", "all"):
        figures["decoder_fast_path"] = decoder_figures(10, args.repeats)
    if args.which == "idle":
        figures["publisher_probe_recursion"] = idle_figures(args.seconds, args.repeats)
    if args.which in ("capacity", "all"):
        figures["capacity_check_per_card"] = capacity_figures([0, 5_000, 20_000, 100_000])
    if args.which in ("drain", "all"):
        figures["drain_by_inflight_window"] = drain_figures(args.events, args.repeats, args.marks_fsync)
    report("proposed fixes, measured against stock in the same run", figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
