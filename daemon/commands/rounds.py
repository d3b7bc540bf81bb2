"""``baccarat-edge rounds [--last N] [JOURNAL | --config FILE]``: recall the last rounds.

The current (or last) round and the ones before it, read from the journal (read-only: the
daemon may run), oldest first: each round's ids (the shoe, the edge's hand number, the game
server's round id), its cards by slot and who placed each, its outcome, every hold with its
reason and how it ended, every supervisor correction with who made it (actor, command id), and
its voiding. ``--json`` prints one object ``{"journal", "last", "rounds": [...]}``, each round
as in the retained state's ``recent_rounds`` (the MQTT contract's ``state.json``).

The journal is the file given, else the one the config names (``journal.path``, by default
``<state_dir>/journal.sqlite3``); with neither, the config ``/etc/baccarat-edge/table.yaml``.

Exit status: 0 printed (also when the journal holds no round yet), 2 bad usage, a config that
cannot be read, or a journal that is missing or cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.commands._journal_file import journal_path

DEFAULT_CONFIG = Path("/etc/baccarat-edge/table.yaml")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "rounds",
        help="recall the last rounds from the journal: cards, outcome, holds, corrections, voids",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("journal", type=Path, nargs="?", help="the journal (SQLite) file")
    parser.add_argument("--config", type=Path, metavar="FILE", help="find the journal from this config")
    parser.add_argument(
        "--last", type=_last, default=10, metavar="N", help="how many rounds, 1..100 (default 10)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    parser.set_defaults(handler=run)


def _last(text: str) -> int:
    from daemon.journal.recall import MAX_LAST

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--last must be a whole number, not {text!r}") from None
    if not 1 <= value <= MAX_LAST:
        raise argparse.ArgumentTypeError(f"--last must be 1..{MAX_LAST}, not {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from daemon.journal.errors import JournalError
    from daemon.journal.recall import recall_from_journal

    journal = journal_path(args, DEFAULT_CONFIG)
    if isinstance(journal, str):
        print(f"error: {journal}", file=sys.stderr)
        return 2
    try:
        rounds = recall_from_journal(journal, args.last)
    except JournalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"journal": str(journal), "last": args.last, "rounds": rounds}, sort_keys=True))
        return 0
    if not rounds:
        print(f"{journal}: no round yet")
        return 0
    print(f"{journal}: the last {len(rounds)} round(s), oldest first")
    for rnd in rounds:
        print("\n".join(round_lines(rnd)))
    return 0


def round_lines(rnd: dict[str, Any]) -> list[str]:
    """One recalled round (``daemon.journal.recall``) as text lines."""
    ids = f"hand {rnd['hand']}" + (f"  round {rnd['round_id']}" if rnd["round_id"] else "")
    lines = [f"{ids}  shoe {rnd['shoe_id'] or '-'}  {rnd['status'].upper()}  {_outcome_text(rnd['outcome'])}"]
    lines.append(f"  opened {_when(rnd['opened_at'])}, decided {_when(rnd['decided_at'])}")
    cards = "  ".join(
        f"{slot} {card or '(face down)'}"
        + (f" [{rnd['sources'][slot]}]" if rnd["sources"].get(slot, "reader") != "reader" else "")
        for slot, card in rnd["cards"].items()
    )
    lines.append(f"  cards: {cards or '-'}")
    for hold in rnd["holds"]:
        code = f" ({hold['code']})" if hold["code"] else ""
        lines.append(f"  hold: {hold['reason']}{code} -> {_ended(hold['resolution'])}")
    for fix in rnd["corrections"]:
        lines.append(
            f"  correction: {fix['action']} {_cards_text(fix['before'])} -> {_cards_text(fix['after'])}"
            f" by {_who(fix)} at {_when(fix['at'])}"
        )
    void = rnd["void"]
    if void is not None:
        completed = " (after it completed)" if void["was_completed"] else ""
        if void["opening_burn"]:
            completed = " (its cards were the forgotten opening burn: the hand is dealt afresh)"
        lines.append(f"  voided{completed}: {void['reason'] or '-'} by {_who(void)} at {_when(void['at'])}")
    return lines


def _outcome_text(outcome: dict[str, Any] | None) -> str:
    if outcome is None:
        return "no result"
    pairs = [side for side in ("player", "banker") if outcome[f"{side}_pair"]]
    extra = f"  pair: {', '.join(pairs)}" if pairs else ""
    return f"{outcome['winner'].upper()} {outcome['player_total']}-{outcome['banker_total']}{extra}"


def _ended(resolution: dict[str, Any] | None) -> str:
    if resolution is None:
        return "still holding"
    who = f" by {_who(resolution)}" if resolution["actor"] or resolution["command_id"] else ""
    return f"{resolution['how']}{who} at {_when(resolution['at'])}"


def _who(entry: dict[str, Any]) -> str:
    return f"{entry['actor'] or '-'} (command {entry['command_id'] or '-'})"


def _cards_text(cards: dict[str, str | None]) -> str:
    return " ".join(f"{slot}={card or '?'}" for slot, card in cards.items()) or "-"


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
