"""The durable journal: every engine input and validated event, on disk before publishing."""

from daemon.journal.continuity import Continuity, ContinuityKind
from daemon.journal.errors import JournalError
from daemon.journal.faults import FaultKind, StorageFault, classify_storage_error
from daemon.journal.integrity import JournalReport, verify_journal
from daemon.journal.nonces import NonceVerdict
from daemon.journal.records import Capacity, DeliveryEvent, JournalableEvent, JournaledEvent
from daemon.journal.settings import FullPolicy, JournalSettings
from daemon.journal.store import Journal

__all__ = [
    "Capacity",
    "Continuity",
    "ContinuityKind",
    "DeliveryEvent",
    "FaultKind",
    "FullPolicy",
    "Journal",
    "JournalError",
    "JournalReport",
    "JournalSettings",
    "JournalableEvent",
    "JournaledEvent",
    "NonceVerdict",
    "StorageFault",
    "classify_storage_error",
    "verify_journal",
]
