"""Brokers of a floor with TLS everywhere, from the shipped configs: a central broker from
``central.conf`` and ``central-acl``, and site brokers from the ``site.conf`` that
``make-pki.sh site`` writes for each site (its bridge certificate, client ids and central
address). Only the listener address, the persistence directory, the logging and the
location of the files are replaced."""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
from pathlib import Path

from tests.fleet.bridged import CONFIG
from tests.support.broker import MosquittoBroker

# Set by MosquittoBroker itself (its listener, its directory, its log).
_OWN = re.compile(r"^(persistence_location|autosave_interval|persistence|listener|log_dest|log_type)\b")


def broker_lines(conf: Path, pki: Path, acl: Path) -> str:
    """A shipped config's lines, its files taken from ``pki`` and ``acl``."""
    out = []
    for line in conf.read_text().splitlines():
        if not line.strip() or line.startswith("#") or _OWN.match(line):
            continue
        line = line.replace("/etc/mosquitto/pki/", f"{pki}/")
        line = re.sub(r"^acl_file .*", f"acl_file {acl}", line)
        out.append(line)
    # mosquitto started as root drops to its own user, which cannot read the test's keys.
    out.append(f"user {getpass.getuser()}")
    return "\n".join(out)


def make_pki(out: Path, *clients: str) -> Path:
    """CA, central broker certificate (127.0.0.1) and client certificates."""
    subprocess.run(
        ["bash", str(CONFIG / "make-pki.sh"), str(out), "127.0.0.1", *clients],
        check=True,
        capture_output=True,
    )
    return out


def add_site(pki: Path, site: str, central_port: int, acl: Path) -> str:
    """The one step that adds a site; returns what the script said."""
    done = subprocess.run(
        [
            "bash",
            str(CONFIG / "make-pki.sh"),
            "site",
            str(pki),
            site,
            "127.0.0.1",
            f"127.0.0.1:{central_port}",
            str(acl),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def start_central(workdir: Path, pki: Path) -> tuple[MosquittoBroker, Path]:
    """The central broker with a copy of the shipped central ACL (sites get added to it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    acl = workdir / "central-acl"
    shutil.copy(CONFIG / "central-acl", acl)
    broker = MosquittoBroker(workdir, persistent=True)
    broker.extra_config = broker_lines(CONFIG / "central.conf", pki, acl)
    return broker.start(), acl


def start_site_broker(workdir: Path, pki: Path, site: str) -> MosquittoBroker:
    site_dir = pki / f"site-{site}"
    extra = broker_lines(site_dir / "site.conf", site_dir, CONFIG / "acl")
    return MosquittoBroker(workdir, persistent=True, extra_config=extra).start()
