"""MQTT side of the daemon: topics, the event envelope and its signature, the publisher
that drains the journal, the authenticated command channel and the reference consumer.

The contract for the game-server team is ``daemon/mqtt/README.md`` with the machine-readable
``contract/asyncapi.yaml`` and ``contract/schemas/*.json``.
"""
