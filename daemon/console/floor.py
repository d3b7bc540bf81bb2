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
"""A broker publishing more unverified table ids than this (a fault or an attack) cannot exhaust
memory. Tables whose messages verify with a configured key never count against it: a message
that does not verify never makes a floor entry, so forgeries cannot keep a real table off."""
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
        self.refused_unknown = 0
        """Refused messages on table ids the floor does not show (no entry is made for them)."""
        self._unverified = 0
        # Each table's floor line and view model as last built, with the table's ``changes``
        # then: a stream rebuilds only what changed, and every stream shares one build. Built
        # under ``_changed``, which the MQTT thread needs for every message: rebuilding the
        # whole floor (every table's roads) there held each card back behind it.
        self._rows: dict[str, tuple[int, dict[str, Any]]] = {}
        self._models: dict[str, tuple[int, dict[str, Any]]] = {}

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
            if checked.trust is Trust.REFUSED:
                self._refuse(table_id, suffix, checked.reason)
            else:
                table = self._table(table_id)
                if table is None:
                    return
                table.apply(suffix, payload)
                table.changes += 1
            self.version += 1
            self._changed.notify_all()

    def refused_reply(self, table_id: str, reason: str) -> None:
        """A ``cmd/reply`` of ``table_id`` that did not verify (the feed judged it)."""
        with self._changed:
            self._refuse(table_id, "cmd/reply", reason)
            self.version += 1
            self._changed.notify_all()

    def _refuse(self, table_id: str, suffix: str, reason: str) -> None:
        """Count a refused message on the table's entry; a table the floor does not show yet
        gets no entry from it (only the floor's own count)."""
        table = self._tables.get(table_id)
        if table is None:
            self.refused_unknown += 1
            count = self.refused_unknown
        else:
            table.refuse(suffix, reason)
            table.changes += 1
            count = table.refused
        if count == 1 or count % REFUSALS_LOGGED_EVERY == 0:
            log.warning(
                "console_message_refused",
                table_id=table_id[:64],
                topic=suffix,
                reason=reason[:200],
                refused=count,
                known_table=table is not None,
            )

    def _table(self, table_id: str) -> ConsoleTable | None:
        """The table's model, made on its first message; None past MAX_TABLES (counted)."""
        table = self._tables.get(table_id)
        if table is None:
            trust = self._verifier.trust_of(table_id)
            if trust is Trust.UNVERIFIED:
                if self._unverified >= MAX_TABLES:
                    self.ignored += 1
                    return None
                self._unverified += 1
            table = self._tables[table_id] = ConsoleTable(table_id, trust)
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
        """Every table's floor line, worst first, then by id (the lines are shared: read only)."""
        with self._changed:
            rows = []
            for table_id, table in self._tables.items():
                built = self._rows.get(table_id)
                if built is None or built[0] != table.changes:
                    built = self._rows[table_id] = (table.changes, table.floor_row())
                rows.append(built[1])
        rows.sort(key=lambda r: (-r["severity"], r["table_id"]))
        return {"tables": rows, "refused_unknown": self.refused_unknown}

    def table_model(self, table_id: str) -> dict[str, Any] | None:
        """The table's view model (shared by every stream: read only), None when not shown."""
        with self._changed:
            table = self._tables.get(table_id)
            if table is None:
                return None
            built = self._models.get(table_id)
            if built is None or built[0] != table.changes:
                built = self._models[table_id] = (table.changes, table.table_model())
            return built[1]

    def stamp(self, table_id: str) -> int:
        """How many times ``table_id``'s model changed (-1: not on the floor): a stream
        rebuilds a table's model only when this moved."""
        with self._changed:
            table = self._tables.get(table_id)
            return table.changes if table is not None else -1

    def known(self, table_id: str) -> bool:
        with self._changed:
            return table_id in self._tables
