"""The table engine: the single, deterministic owner of a table's state.

Drivers and the command channel turn the outside world into the input types of
``daemon.engine.inputs``; the engine turns them into validated events. It does no
I/O and reads no clock: time arrives with each input.
"""
