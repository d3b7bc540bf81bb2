"""A flow game fed to a fresh engine as the daemon would feed it: the plan encoded in a reader
protocol and decoded by the real decoder, the reader's unplugging as device connections, the game
server's commands (a late one with the time it was issued), and each outage of the edge dropping
what was sent meanwhile and restoring the engine from its own events through JSON, as the daemon
does from its journal. The game-flow property test and the flow campaign bench share it."""

from __future__ import annotations

import json

from common.inputs import DeviceConnection, SupervisorCommand, Tick
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.variants import load_variant_by_name
from daemon.simulation.flow_dealer import FlowGame
from daemon.simulation.flow_library import with_reader_outages
from drivers.fixtures import SupervisorStep
from drivers.protocols import make_decoder
from drivers.simulate import encode_plan

SERVER_ACTOR = "game_server:gs"


def server_command(sup: SupervisorStep, t: float, game: FlowGame) -> SupervisorCommand:
    """The server's command as the table receives it: a late one with the time it was issued."""
    issued = game.issued_at.get(f"{sup.action.split('_')[0]}:{sup.args.get('round_id')}")
    return SupervisorCommand(sup.action, t, SERVER_ACTOR, sup.command_id or "c", sup.args, issued_at=issued)


def restored(settings: TableSettings, events: list[Event]) -> Engine:
    """The engine restored from ``events`` as read back from a journal (JSON)."""
    journal = [Event.from_dict(json.loads(json.dumps(e.to_dict(), allow_nan=False))) for e in events]
    return Engine.restore(settings, load_variant_by_name("standard"), journal, load_variant_by_name)


def replay_flow_game(game: FlowGame, protocol: str, settings: TableSettings) -> tuple[Engine, list[Event]]:
    """The engine after the game (restored after each outage) and every event it emitted."""
    engine = Engine(settings, load_variant_by_name("standard"))
    decoder = make_decoder(protocol)
    events: list[Event] = []
    outages = list(game.outages)
    for step in with_reader_outages(encode_plan(game.plan, protocol, seed=3), game.reader_outages):
        if outages and outages[0][0] <= step.t < outages[0][1]:
            continue  # the edge is down: nothing reaches it
        if outages and step.t >= outages[0][1]:
            outages.pop(0)  # the edge restarts from its journal, with a fresh decoder
            engine = restored(settings, events)
            decoder = make_decoder(protocol)
        raw = step.data if step.data is not None else step.report
        if raw is not None:
            for frame in decoder.feed(raw, step.t):
                if frame.input is not None and not frame.duplicate:
                    events += engine.handle(frame.input)
        elif step.event == "unplug":
            decoder.reset()
            events += engine.handle(DeviceConnection(False, step.t, detail="unplugged"))
        elif step.event == "replug":
            events += engine.handle(DeviceConnection(True, step.t, detail="plugged back"))
        elif step.supervisor is not None:
            events += engine.handle(server_command(step.supervisor, step.t, game))
        elif step.tick:
            events += engine.handle(Tick(step.t))
    events += engine.handle(Tick(10_000.0))  # let every waiting read go
    return engine, events
