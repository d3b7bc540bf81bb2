"""Hardware side: wire-protocol decoders, device drivers, and fixture record/replay.

Decoders are pure and incremental (bytes in, engine inputs out). Drivers only move
bytes and keep devices open. Both are picked by name through registries with lazy
imports, so pyusb and OpenCV load only when configured.
"""
