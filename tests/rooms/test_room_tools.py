"""The shared tools as one room's coordinator calls them (rooms.hub.RoomTools)."""

from __future__ import annotations

from typing import Any

from decisions.rooms import NoticeTargets
from rooms.hub import RoomTools
from tools.registry import Effect, ToolRegistry


async def test_a_yes_said_in_a_room_runs_the_tool_that_waited_for_it() -> None:
    # The coordinator runs a yes'd call with `run_confirmed`, and asks the tools which calls need a
    # yes and which only read: a room's tools lacked all of these, so a yes in a room said "Sorry,
    # the unlock tool failed." and nothing was unlocked.
    unlocked: list[dict[str, Any]] = []

    async def unlock(args: dict[str, Any]) -> dict[str, Any]:
        unlocked.append(args)
        return {"door": args["door"]}

    async def clock(args: dict[str, Any]) -> dict[str, Any]:
        return {"time": "noon"}

    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"door": {"type": "string"}}, "required": ["door"]}
    registry.register("unlock", "Unlock a door.", schema, unlock, effect=Effect.CONFIRMS, title="unlock the door")
    registry.register("get_time", "The time.", {"type": "object"}, clock, effect=Effect.READS)
    room = RoomTools(registry, "kitchen", NoticeTargets(rooms=("kitchen",)))

    assert "unlock" in room.needs_yes_names() and "get_time" in room.read_only_names()
    assert room.question_for("unlock", '{"door": "front"}') == "Unlock the door (front)?"
    asked = await room.run("unlock", '{"door": "front"}', "call-1")
    assert not asked.ok and asked.data["needs_yes"] and unlocked == []
    done = await room.run_confirmed("unlock", '{"door": "front"}', "call-1-yes")
    assert done.ok and unlocked == [{"door": "front"}]
