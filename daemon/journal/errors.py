"""The journal's one exception type."""

from __future__ import annotations


class JournalError(RuntimeError):
    """The journal file cannot be used (wrong table, newer schema, unreadable, damaged).

    The message names the file, what is wrong and, for a damaged file, the way out."""
