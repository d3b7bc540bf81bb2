"""How many commands refused at the edge are journaled one by one.

Every refused command used to become its own ``command_refused`` event: a flood of junk
commands (anyone who can publish on ``cmd``) would fill the journal and stop the table. Within
each window of ``refusal_window_s`` seconds (opened by its first refusal) the first
``refusals_journaled_per_window`` refusals are journaled one by one; the others are counted,
by code, and journaled as one summary once the window has passed (or at once when the
channel stops). Pure: time is passed in — a monotonic clock for the window (a wall clock
stepped back must not hold it open), the wall clock for the summary's stamps.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RefusalSummary:
    """The refusals of one window that were counted instead of journaled one by one."""

    count: int
    codes: dict[str, int]
    first_at: float
    last_at: float


@dataclass(slots=True)
class _Window:
    opened_at: float
    journaled: int = 0
    counted: dict[str, int] = field(default_factory=dict)
    first_counted_at: float | None = None
    last_counted_at: float | None = None


class RefusalLimiter:
    """Decides, refusal by refusal, whether it is journaled on its own or counted."""

    def __init__(self, per_window: int, window_s: float) -> None:
        self.per_window = per_window
        self.window_s = window_s
        self._window: _Window | None = None

    def admit(self, now: float, code: str, at: float) -> bool:
        """True: journal this refusal on its own; False: it was counted for the summary.

        ``now`` is monotonic, ``at`` the wall-clock time of the refusal. Call
        :meth:`take_summary` first, so that a window that has passed is closed."""
        window = self._window
        if window is None:
            window = self._window = _Window(opened_at=now)
        if window.journaled < self.per_window:
            window.journaled += 1
            return True
        window.counted[code] = window.counted.get(code, 0) + 1
        if window.first_counted_at is None:
            window.first_counted_at = at
        window.last_counted_at = at
        return False

    def take_summary(self, now: float) -> RefusalSummary | None:
        """Close the window if it has passed (``now`` monotonic, ``math.inf`` to close it
        whatever its age); the summary of what it counted, if anything."""
        window = self._window
        if window is None or now - window.opened_at < self.window_s:
            return None
        self._window = None
        if window.first_counted_at is None or window.last_counted_at is None:
            return None
        return RefusalSummary(
            count=sum(window.counted.values()),
            codes=dict(sorted(window.counted.items())),
            first_at=window.first_counted_at,
            last_at=window.last_counted_at,
        )
