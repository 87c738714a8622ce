"""Which way MCP tools are offered (directly, or behind `use_device` and the brain), by what they
cost per command; what `use_device` may run."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp_types import Tool, ToolAnnotations

from benchmarks.mcp_routing import synthetic_tools
from hands.config import ServerConfig
from hands.routing import ROUTER_TOOL, Pick, Routing
from hands.tools import spec_for
from tools.registry import Effect, ToolRegistry

HOME = ServerConfig("home", command="unused")


def registry_with(count: int, calls: list | None = None) -> ToolRegistry:
    tools = ToolRegistry()

    async def get_time(args: dict) -> dict:
        return {"iso": "now"}

    tools.register("get_time", "The current local date and time. " * 30, {"type": "object", "properties": {}}, get_time,
                   effect=Effect.READS)  # (about as large as today's built-in tools together)

    async def call(tool: str, arguments: dict):
        (calls if calls is not None else []).append((tool, arguments))
        from mcp_types import CallToolResult, TextContent
        return CallToolResult(content=[TextContent(type="text", text=f"{tool} done")])

    for tool in synthetic_tools(count):
        tools.add(spec_for(HOME, tool, tool.name, call))
    unlock = Tool(name="unlock_door", description="Unlock the front door.", input_schema={"type": "object"},
                  annotations=ToolAnnotations(title="Unlock the front door", destructive_hint=True))
    tools.add(spec_for(HOME, unlock, "unlock_door", call))
    return tools


async def picks(*chosen: Pick):
    queue = list(chosen)

    async def pick(request: str, tools: list) -> Pick:
        return queue.pop(0)

    return pick


@pytest.mark.parametrize("count, through_brain", [(1, False), (40, True)])
async def test_few_tools_are_offered_directly_many_behind_one(count: int, through_brain: bool) -> None:
    tools = registry_with(count)
    routing = Routing(tools, await picks())
    routing.update()
    offered = [t["name"] for t in tools.session_tools()]
    assert routing.through_brain is through_brain
    assert (ROUTER_TOOL in offered) is through_brain and ("unlock_door" in offered) is not through_brain
    assert "get_time" in offered
    assert tools.get("unlock_door") is not None  # registered either way: the brain's pick runs by name
    if through_brain:
        assert tools.get(ROUTER_TOOL).effect is Effect.ACTS  # waits for the command to be confirmed


async def test_use_device_runs_the_brains_pick_with_its_effect_and_nothing_else() -> None:
    calls: list = []
    tools = registry_with(40, calls)
    routing = Routing(tools, await picks(
        Pick("set_light", json.dumps({"area": "kitchen", "on": False})),
        Pick("unlock_door", "{}"),
        Pick("get_time", "{}"),  # not an MCP tool: not the brain's to run
        Pick(None, text="I can't do that."),
    ))
    routing.update()
    done = await tools.run(ROUTER_TOOL, json.dumps({"request": "turn off the kitchen light"}), "c1")
    assert done.ok and done.data["routed_to"] == "set_light" and calls == [("set_light", {"area": "kitchen", "on": False})]
    asked = await tools.run(ROUTER_TOOL, json.dumps({"request": "unlock the front door"}), "c2")
    assert not asked.ok and asked.data["needs_yes"] and asked.data["tool"] == "unlock_door"
    assert tools.format(asked).script == "Unlock the front door? That needs your spoken yes first, so nothing was done."
    assert len(calls) == 1
    refused = await tools.run(ROUTER_TOOL, json.dumps({"request": "what time is it"}), "c3")
    assert refused.error == "None of the connected devices or services can do that."
    said = await tools.run(ROUTER_TOOL, json.dumps({"request": "make coffee"}), "c4")
    assert said.error == "I can't do that." and len(calls) == 1


async def test_direct_and_brain_modes_are_kept_whatever_the_count() -> None:
    direct, brain = registry_with(40), registry_with(1)
    Routing(direct, await picks(), mode="direct").update()
    Routing(brain, await picks(), mode="brain").update()
    assert ROUTER_TOOL not in direct.names() and ROUTER_TOOL in [t["name"] for t in brain.session_tools()]
    no_brain = registry_with(40)
    Routing(no_brain, None).update()  # no brain to ask: offered directly
    assert ROUTER_TOOL not in no_brain.names()


async def test_the_brains_pick_starts_while_the_call_is_held_and_its_run_takes_it() -> None:
    calls: list = []
    tools = registry_with(40, calls)
    asked: list[str] = []
    released = asyncio.Event()

    async def pick(request: str, offered: list) -> Pick:
        asked.append(request)
        await released.wait()  # (the brain's round trip)
        return Pick("set_light", json.dumps({"area": "kitchen", "on": request.endswith("on")}))

    routing = Routing(tools, pick)
    routing.update()
    tools.prepare(ROUTER_TOOL, json.dumps({"request": "turn the kitchen light on"}))
    tools.prepare(ROUTER_TOOL, json.dumps({"request": "turn the kitchen light on"}))  # (told twice: one pick)
    tools.prepare(ROUTER_TOOL, json.dumps({"nothing": "valid"}))  # arguments that do not validate: nothing
    await asyncio.sleep(0)
    assert asked == ["turn the kitchen light on"] and calls == []  # picked, nothing run
    released.set()
    done = await tools.run(ROUTER_TOOL, json.dumps({"request": "turn the kitchen light on"}), "c1")
    assert done.ok and asked == ["turn the kitchen light on"]  # the run took the pick made while it was held
    assert calls == [("set_light", {"area": "kitchen", "on": True})]

    # A pick for a command that never ran is not used for another; one made before the tools
    # changed is made again.
    tools.prepare(ROUTER_TOOL, json.dumps({"request": "turn the kitchen light off"}))
    await asyncio.sleep(0)  # (the pick's task starts)
    routing.update()
    await tools.run(ROUTER_TOOL, json.dumps({"request": "turn the kitchen light off"}), "c2")
    assert asked[1:] == ["turn the kitchen light off"] * 2 and calls[-1] == ("set_light", {"area": "kitchen", "on": False})
