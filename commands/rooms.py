"""`handoff run` with SATELLITES: the hub, a room per satellite (loaded only then: the wyoming
package stays out of every other command's imports)."""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import TYPE_CHECKING

from config.settings import Settings
from hands.manager import servers_shown, watch_servers
from rooms.hub import Hub, hub
from service.runtime import ServiceRuntime
from service.status import Probes

if TYPE_CHECKING:
    from handoff import Coordinator

log = logging.getLogger("handoff")


async def serve_hub(settings: Settings, runtime: ServiceRuntime) -> int:
    """The hub under the service runtime: status lists every satellite, history names the room."""
    async with runtime:
        async with hub(settings, on_task_change=runtime.task_changed) as the_hub:
            for room in the_hub.rooms.values():
                runtime.watch_room(room.name, room.timeline)
            runtime.attach(_probes(the_hub))
            watch_servers(_first_room(the_hub).parts.notices, runtime.shown_changed)
            names = ", ".join(f"{r.name} ({r.link.spec.uri})" for r in the_hub.rooms.values())
            log.info("handoff is the hub for %s: say %r to a satellite (Ctrl-C stops)", names, settings.listener.wake_phrase)
            code = await the_hub.run()
            runtime.stopping("stopping" if code == 0 else f"stopping after a fatal error (exit {code})")
            for room in the_hub.rooms.values():
                if room.coordinator.fatal_message:
                    print(f"handoff: {room.coordinator.fatal_message}", file=sys.stderr)
                    break
    return code


def _first_room(the_hub: Hub) -> Coordinator:
    """The room whose shared parts (MCP servers, cost, the narrator's counters) every room uses."""
    return next(iter(the_hub.rooms.values())).coordinator


def _probes(the_hub: Hub) -> Probes:
    rooms = list(the_hub.rooms.values())
    first = _first_room(the_hub)
    return Probes(
        listener_up=lambda: any(r.coordinator.core.listener_up for r in rooms if r.link.connected) or not any(
            r.link.connected for r in rooms),  # no room connected: nothing to listen to, nothing stuck
        phase=lambda: ", ".join(f"{r.name} {r.coordinator.phase.value}" for r in rooms),
        sessions_opened=lambda: sum(r.coordinator.listener.sessions_opened for r in rooms),
        session_age_s=lambda: max(r.coordinator.listener.session_age_s for r in rooms),
        weak_matches=lambda: first.parts.narrator.weak_matches,
        inexact_reads=lambda: first.parts.narrator.inexact_reads,
        cost_today=lambda: None if first.parts.cost is None else first.parts.cost.summary().today.parts(),
        satellites=lambda: [dataclasses.asdict(r.link.status()) for r in rooms],
        mcp_servers=lambda: servers_shown(first.parts.notices),
    )
