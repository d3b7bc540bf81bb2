"""The MQTT tests' fixtures (keys, journal, publisher factory) for the certificate's wire test."""

from tests.mqtt.conftest import events_key, journal, keys, make_publisher

__all__ = ["events_key", "journal", "keys", "make_publisher"]
