"""A minimal daemon for the crash tests: real engine + real journal + real publisher.

    python -m tests.mqtt.runner --journal J --port P --inputs INPUTS.jsonl --table-settings T.json

Feeds the journaled-input file into the engine one input at a time (journal append, then
publisher notify), resuming after the inputs the journal already holds, exactly as the
daemon does after a restart: the engine is rebuilt by folding the journal. Exits 0 once
everything is fed and acknowledged by the broker. The crash test SIGKILLs it anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from daemon.engine import Engine, Event, TableSettings
from daemon.journal import Journal, JournalSettings
from daemon.journal.codec import loads_input
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import SecretSource
from daemon.mqtt.settings import BrokerSettings, DeliverySettings, SigningSettings, TlsSettings
from daemon.rules.variants import load_variant_by_name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--table-settings", type=Path, required=True)
    parser.add_argument("--table", default="T1")
    parser.add_argument("--events-key", type=Path)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between inputs")
    args = parser.parse_args(argv)

    settings = TableSettings.model_validate(json.loads(args.table_settings.read_text()))
    variant = load_variant_by_name(settings.variant)
    inputs = [loads_input(line) for line in args.inputs.read_text().splitlines() if line.strip()]

    journal = Journal(JournalSettings(path=args.journal), args.table)
    engine = Engine.restore(settings, variant, (Event.from_dict(e.body) for e in journal.events()))
    broker = BrokerSettings(
        host="127.0.0.1",
        port=args.port,
        client_id=f"edge-{args.table}",
        tls=TlsSettings(enabled=False),
        signing=SigningSettings(events_key=SecretSource(file=args.events_key) if args.events_key else None),
        delivery=DeliverySettings(inflight_window=8, backoff_initial_s=0.05, backoff_max_s=0.2),
    )
    publisher = Publisher(broker, args.table, journal, snapshot=engine.snapshot)
    publisher.start()

    for inp in inputs[journal.input_count() :]:
        events = engine.handle(inp)
        journal.append([inp], events)  # durable before it can be published
        if events:
            publisher.notify()
        if args.delay:
            time.sleep(args.delay)

    deadline = time.monotonic() + 60
    while journal.pending():
        if time.monotonic() > deadline:
            print("runner: broker never acknowledged everything", file=sys.stderr)
            return 1
        time.sleep(0.02)
    publisher.stop()
    journal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
