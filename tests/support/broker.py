"""A real mosquitto broker started by a test on its own free port and its own config.

Tests may stop, restart and reconfigure it freely. When the mosquitto binary is
missing the test fails (it is installed by ``.ci/system-deps``); it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def mosquitto_binary() -> str:
    for candidate in (shutil.which("mosquitto"), "/usr/sbin/mosquitto"):
        if candidate and Path(candidate).exists():
            return candidate
    raise RuntimeError(
        "mosquitto is not installed: the MQTT tests need a real broker. "
        "Run `make test` (it installs it) or `apt-get install -y mosquitto`."
    )


class MosquittoBroker:
    """One mosquitto process with a generated config in ``workdir``.

    ``extra_config`` is appended to the listener block (TLS, ACL, auth lines);
    ``persistent`` keeps sessions and queued messages across restarts.
    """

    def __init__(
        self, workdir: Path, port: int | None = None, extra_config: str = "", persistent: bool = False
    ) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.extra_config = extra_config
        self.persistent = persistent
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "mosquitto.log"

    @property
    def config_path(self) -> Path:
        return self.workdir / "mosquitto.conf"

    def write_config(self) -> None:
        if self.persistent:
            persistence = [
                "persistence true",
                f"persistence_location {self.workdir}/",
                "autosave_interval 0",
            ]
        else:
            persistence = ["persistence false"]
        lines = [
            *persistence,
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            f"listener {self.port} 127.0.0.1",
        ]
        sets_user = any(line.strip().startswith("user ") for line in self.extra_config.splitlines())
        if os.geteuid() == 0 and not sets_user:
            # mosquitto started as root drops to user "mosquitto", which cannot write the log
            # or the persistence file in a private temporary directory
            lines.insert(0, "user root")
        if "allow_anonymous" not in self.extra_config and "password_file" not in self.extra_config:
            lines.append("allow_anonymous true")
        if self.extra_config:
            lines.append(self.extra_config.strip())
        self.config_path.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 10.0) -> Self:
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.write_config()
        self.proc = subprocess.Popen(
            [mosquitto_binary(), "-c", str(self.config_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
                raise RuntimeError(f"mosquitto exited at start (rc={self.proc.returncode}): {err}{log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not listen on port {self.port} within {timeout}s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker not started"
        return self.proc.pid

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
