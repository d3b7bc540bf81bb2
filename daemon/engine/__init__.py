"""The table engine: the single, deterministic owner of a table's state.

Drivers and the command channel turn the outside world into the input types of
``common.inputs``; the engine turns them into validated events. It does no
I/O and reads no clock: time arrives with each input. See ``README.md`` here.
"""

from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine

__all__ = ["Engine", "Event", "TableSettings"]
