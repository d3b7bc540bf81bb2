"""``baccarat-edge check-config FILE``: validate a config, then probe what it points at.

Prints every configuration error at once (file, line, key path, what is wrong —
unreadable secrets and an unknown variant included); when the file is valid, flags
insecure broker settings (``tls.verify: false``, no TLS to a remote host, no login,
unsigned events), then probes the reader devices, the camera source, the state
directory and the broker (TCP, then one MQTT connect with the configured TLS and
credentials) and says what it found; an existing journal file is verified like
``baccarat-edge journal verify`` (a damaged one is a problem).

Exit status (the table in the top-level README):

* 0: the file is valid and everything it points at was found (insecure settings only
  with ``--allow-insecure``, each still printed);
* 1: the file itself is invalid or unreadable (YAML, keys, values, driver settings, variant);
* 2: the file is valid, but a file it names (secret, TLS file) is missing, unreadable or open
  to others, or a device, the state directory, the journal or the broker is missing, damaged
  or unreachable, or a broker setting is insecure without ``--allow-insecure``. A mistyped
  command line also exits 2 (with the usage), as every command's does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon.service.probes import Finding


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check-config",
        help="validate a config file and probe its devices and broker",
        description="Validate FILE; then probe device paths, state directory and broker.",
    )
    parser.add_argument("file", type=Path, help="the table's YAML config file")
    parser.add_argument("--no-probe", action="store_true", help="only validate the file")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per network probe")
    parser.add_argument(
        "--allow-insecure",
        action="store_true",
        help="accept insecure broker settings (still listed); never for a production table",
    )
    parser.add_argument(
        "--verify-snapshots",
        action="store_true",
        help="also re-fold the journal's events and compare its engine snapshots (reads the whole "
        "journal, like `journal verify`)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from daemon.service.attestation import attestation_finding
    from daemon.service.config import config_digest, device_name, load_config
    from daemon.service.configfile import ConfigError
    from daemon.service.probes import (
        Finding,
        insecure_settings,
        probe_broker,
        probe_camera,
        probe_reader,
        probe_secrets,
        probe_state_dir,
    )

    try:
        loaded = load_config(args.file)
    except ConfigError as exc:
        file_valid = _file_itself_valid(args.file)
        if args.json:
            listed = [str(p) for p in exc.problems]
            print(json.dumps({"valid": False, "file_valid": file_valid, "problems": listed}))
        else:
            print(str(exc), file=sys.stderr)
            if file_valid:
                print("the file itself is valid: fix the files it names, then check again", file=sys.stderr)
        return 2 if file_valid else 1
    cfg = loaded.config
    summary = (
        f"{args.file}: valid — table {cfg.table_id}, variant {cfg.table.variant}, {cfg.table.decks} decks, "
        f"{len(cfg.readers)} reader(s)"
        + (", camera" if loaded.camera_settings is not None else "")
        + f", journal {cfg.journal.path}, broker {cfg.broker.host}:{cfg.broker.effective_port}"
        + f" ({'TLS' if cfg.broker.tls.enabled else 'no TLS'})"
    )
    digest = config_digest(cfg, loaded.variant)
    findings: list[Finding] = [
        Finding("security", ok=bool(args.allow_insecure), detail=text, warning=True)
        for text in insecure_settings(cfg.broker)
    ]
    if not args.no_probe:
        for section, settings in zip(cfg.readers, loaded.reader_settings, strict=True):
            findings.append(probe_reader(device_name(settings, "reader"), section.driver, settings))
        if loaded.camera_settings is not None:
            findings.append(
                probe_camera(device_name(loaded.camera_settings, "camera"), loaded.camera_settings)
            )
        findings.append(probe_state_dir(cfg.state_dir))
        if cfg.journal.path.exists():
            findings.append(_journal_finding(cfg.journal.path, cfg.table_id))
            if args.verify_snapshots:
                findings.append(_snapshots_finding(cfg.journal.path))
        findings.extend(probe_secrets(cfg.broker))
        findings.append(attestation_finding(cfg.attestation))
        findings.extend(probe_broker(cfg.broker, cfg.table_id, timeout=args.timeout))
    problems = [f for f in findings if not f.ok]
    if args.json:
        print(
            json.dumps(
                {
                    "valid": True,
                    "summary": summary,
                    "config_digest": digest,
                    "findings": [
                        {"subject": f.subject, "ok": f.ok, "warning": f.warning, "detail": f.detail}
                        for f in findings
                    ],
                }
            )
        )
    else:
        print(summary)
        print(f"  config digest {digest} (the fleet view's config column)")
        for finding in findings:
            print(f"  {finding}")
        if problems:
            print(f"{len(problems)} problem(s) found: fix them before relying on this table")
            if any(f.subject == "security" for f in problems):
                print("(insecure settings: fix them, or --allow-insecure on a lab bench)")
        elif not args.no_probe:
            print("everything it points at was found")
    return 2 if problems else 0


def _file_itself_valid(path: Path) -> bool:
    """Whether the file loads when the secret and TLS files it names are not read: its
    problems are then all in those files (exit 2), not in the file (exit 1)."""
    from daemon.service.config import load_config
    from daemon.service.configfile import ConfigError

    try:
        load_config(path, check_secrets=False)
    except ConfigError:
        return False
    return True


def _journal_finding(path: Path, table_id: str) -> Finding:
    """The configured journal, verified read-only (the daemon may be running)."""
    from daemon.journal.integrity import verify_journal, way_out
    from daemon.service.probes import Finding

    report = verify_journal(path)
    if not report.readable:
        return Finding("journal", False, "; ".join(report.problems))
    if report.problems:
        listed = "; ".join(report.problems)
        return Finding(
            "journal", False, f"{path} is damaged: {listed}. {way_out(path, report.delivered_through)}"
        )
    if report.table_id != table_id:
        return Finding("journal", False, f"{path} belongs to table {report.table_id!r}, not {table_id!r}")
    return Finding("journal", True, f"{path} is whole: {report.events} event(s), last seq {report.last_seq}")


def _snapshots_finding(path: Path) -> Finding:
    """The journal's engine snapshots, each compared with the fold of its events (read-only)."""
    from daemon.service.engine_restore import verify_snapshots
    from daemon.service.probes import Finding

    report = verify_snapshots(path)
    if report.problems:
        return Finding("journal snapshots", False, "; ".join(report.problems))
    notes = f" ({'; '.join(report.notes)})" if report.notes else ""
    return Finding("journal snapshots", True, f"{len(report.checked)} equal to the fold of the events{notes}")
