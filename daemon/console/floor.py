"""Every table of the broker, thread-safe, with a change counter the browsers' streams wait on."""

from __future__ import annotations

import threading
from typing import Any

import structlog

from daemon.console.table_model import ConsoleTable
from daemon.console.verification import MessageVerifier, Trust

log = structlog.get_logger("baccarat_edge.console")

REFUSALS_LOGGED_EVERY = 100
"""The first refused message of a table is logged, then every this many (a flood of forgeries
must not flood the log)."""
MAX_TABLES = 1000
"""A broker publishing more table ids than this (a fault or an attack) cannot exhaust memory."""
PREFIX = "baccarat/v1/"
SUFFIXES = ("status", "health", "state", "events")


class Floor:
    """The tables, fed from the MQTT thread, read by the HTTP threads."""

    def __init__(self, only: list[str] | None = None, verifier: MessageVerifier | None = None) -> None:
        self._only = set(only or [])
        self._verifier = verifier if verifier is not None else MessageVerifier()
        self._tables: dict[str, ConsoleTable] = {}
        self._changed = threading.Condition()
        self.version = 0
        self.ignored = 0

    def apply(self, topic: str, payload: bytes) -> None:
        """One MQTT message of ``baccarat/v1/{table}/{suffix}``; anything else is ignored."""
        if not topic.startswith(PREFIX):
            self.ignored += 1
            return
        table_id, sep, suffix = topic[len(PREFIX) :].partition("/")
        if not sep or suffix not in SUFFIXES or not table_id or (self._only and table_id not in self._only):
            self.ignored += 1
            return
        checked = self._verifier.check(table_id, suffix, payload)
        with self._changed:
            table = self._table(table_id)
            if table is None:
                return
            if checked.trust is Trust.REFUSED:
                self._refuse(table, suffix, checked.reason)
            else:
                table.apply(suffix, payload)
            self.version += 1
            self._changed.notify_all()

    def refused_reply(self, table_id: str, reason: str) -> None:
        """A ``cmd/reply`` of ``table_id`` that did not verify (the feed judged it)."""
        with self._changed:
            table = self._table(table_id)
            if table is None:
                return
            self._refuse(table, "cmd/reply", reason)
            self.version += 1
            self._changed.notify_all()

    @staticmethod
    def _refuse(table: ConsoleTable, suffix: str, reason: str) -> None:
        table.refuse(suffix, reason)
        if table.refused == 1 or table.refused % REFUSALS_LOGGED_EVERY == 0:
            log.warning(
                "console_message_refused",
                table_id=table.table_id[:64],
                topic=suffix,
                reason=reason[:200],
                refused=table.refused,
            )

    def _table(self, table_id: str) -> ConsoleTable | None:
        """The table's model, made on its first message; None past MAX_TABLES (counted)."""
        table = self._tables.get(table_id)
        if table is None:
            if len(self._tables) >= MAX_TABLES:
                self.ignored += 1
                return None
            table = self._tables[table_id] = ConsoleTable(table_id, self._verifier.trust_of(table_id))
        return table

    def wait_change(self, seen: int, timeout: float) -> int:
        """Block until the version passes ``seen`` (or ``timeout``); the current version."""
        with self._changed:
            self._changed.wait_for(lambda: self.version != seen, timeout)
            return self.version

    def wake_all(self) -> None:
        """Wake every waiting stream (the console stops)."""
        with self._changed:
            self.version += 1
            self._changed.notify_all()

    def floor_model(self) -> dict[str, Any]:
        """Every table's floor line, worst first, then by id."""
        with self._changed:
            rows = [t.floor_row() for t in self._tables.values()]
        rows.sort(key=lambda r: (-r["severity"], r["table_id"]))
        return {"tables": rows}

    def table_model(self, table_id: str) -> dict[str, Any] | None:
        with self._changed:
            table = self._tables.get(table_id)
            return table.table_model() if table is not None else None

    def known(self, table_id: str) -> bool:
        with self._changed:
            return table_id in self._tables
