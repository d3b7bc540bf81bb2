"""The durable journal: every engine input and validated event, on disk before publishing."""

from daemon.journal.records import Capacity, DeliveryEvent, JournalableEvent, JournaledEvent
from daemon.journal.settings import FullPolicy, JournalSettings
from daemon.journal.store import Journal, JournalError, NonceVerdict

__all__ = [
    "Capacity",
    "DeliveryEvent",
    "FullPolicy",
    "Journal",
    "JournalError",
    "JournalSettings",
    "JournalableEvent",
    "JournaledEvent",
    "NonceVerdict",
]
