"""What the daemon and the drivers share: cards, the inputs a device or a person gives the
engine, and the retry backoff.

This package imports neither ``daemon`` nor ``drivers``; both import it. ``daemon`` may import
``drivers`` (to wire the devices), never the other way round.
"""
