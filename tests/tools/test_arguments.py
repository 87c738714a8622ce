"""Arguments checked against the schemas MCP servers publish (nested objects, arrays, enums,
anyOf), said as one sentence; a tool that needs a spoken yes never runs through `run`."""

from __future__ import annotations

import json

import pytest

from tools.registry import Effect, ToolRegistry

SCHEMA = {
    "type": "object",
    "properties": {
        "area": {"type": "string", "enum": ["kitchen", "hall", "bedroom"]},
        "state": {"anyOf": [{"type": "boolean"}, {"type": "string", "enum": ["on", "off"]}]},
        "colour": {
            "type": "object",
            "properties": {"rgb": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255},
                                   "minItems": 3, "maxItems": 3}},
            "required": ["rgb"],
            "additionalProperties": False,
        },
        "brightness": {"type": "number", "default": 100},
    },
    "required": ["area", "state"],
}


@pytest.fixture
def registry() -> ToolRegistry:
    tools = ToolRegistry()
    calls: list[dict] = []

    async def set_light(args: dict) -> dict:
        calls.append(args)
        return {"done": True}

    tools.register("set_light", "Lights.", SCHEMA, set_light, effect=Effect.ACTS)
    tools.calls = calls  # type: ignore[attr-defined]
    return tools


@pytest.mark.parametrize(
    "arguments, expected",
    [
        ({"area": "garage", "state": "on"}, "The argument 'area' of set_light must be one of: kitchen, hall, bedroom."),
        ({"area": "hall", "state": "dim"}, "The argument 'state' of set_light matches none of the forms it may take."),
        ({"area": "hall", "state": True, "colour": {}}, "The argument 'colour' of set_light needs the field 'rgb'."),
        ({"area": "hall", "state": True, "colour": {"rgb": [1, 2]}},
         "The argument 'colour.rgb' of set_light must have at least 3 items."),
        ({"area": "hall", "state": True, "colour": {"rgb": [1, 2, 300]}},
         "The argument 'colour.rgb.2' of set_light must be between 0 and 255."),
        ({"area": "hall", "state": True, "colour": {"rgb": [1, 2, 3], "alpha": 1}},
         "The argument 'colour' of set_light has no field called 'alpha'."),
        ({"area": "hall", "state": True, "brightness": "high"}, "The argument 'brightness' of set_light must be a number."),
        ({"state": True}, "The set_light tool needs the argument 'area'."),
    ],
)
async def test_what_mcp_schemas_say_is_checked_and_said_in_one_sentence(registry, arguments, expected) -> None:
    result = await registry.run("set_light", json.dumps(arguments), "c1")
    assert (result.ok, result.error) == (False, expected)
    assert registry.calls == []


async def test_valid_nested_arguments_run_with_defaults_filled(registry) -> None:
    result = await registry.run("set_light", json.dumps({"area": "kitchen", "state": "off", "colour": {"rgb": [1, 2, 3]}}), "c1")
    assert result.ok
    assert registry.calls == [{"area": "kitchen", "state": "off", "colour": {"rgb": [1, 2, 3]}, "brightness": 100}]


async def test_a_ref_outside_the_schema_is_never_fetched() -> None:
    tools = ToolRegistry()

    async def handler(args: dict) -> dict:
        return {}

    tools.register("t", "d", {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/s.json"}}}, handler)
    result = await tools.run("t", '{"x": 1}', "c1")
    assert (result.ok, result.error) == (False, "The t tool's own description of its arguments cannot be checked.")


async def test_a_tool_that_needs_a_yes_runs_only_through_run_confirmed() -> None:
    tools = ToolRegistry()
    unlocked: list[dict] = []

    async def unlock(args: dict) -> dict:
        unlocked.append(args)
        return {"unlocked": True}

    schema = {"type": "object", "properties": {"door": {"type": "string"}}, "required": ["door"]}
    tools.register("unlock", "Unlock a door.", schema, unlock, effect=Effect.CONFIRMS, title="unlock the door")
    assert tools.get("unlock").needs_yes and not tools.get("unlock").effect is Effect.ACTS
    asked = await tools.run("unlock", '{"door": "front door"}', "c1")
    assert not asked.ok and unlocked == []
    assert asked.data == {"needs_yes": True, "question": "Unlock the door (front door)?", "tool": "unlock",
                          "arguments": {"door": "front door"}}
    done = await tools.run_confirmed("unlock", json.dumps(asked.data["arguments"]), "c1")
    assert done.ok and unlocked == [{"door": "front door"}]


async def test_the_live_views_follow_tools_that_come_and_go() -> None:
    tools = ToolRegistry()

    async def handler(args: dict) -> dict:
        return {}

    listed = tools.session_tools()
    read_only = tools.read_only_names()
    tools.register("lights", "d", {"type": "object"}, handler, effect=Effect.READS, source="mcp:home")
    assert [t["name"] for t in listed] == ["lights"] and "lights" in read_only
    assert tools.remove_source("mcp:home") == ["lights"]
    assert listed == [] and "lights" not in read_only
    tools.register("lights", "d", {"type": "object"}, handler, effect=Effect.CONFIRMS, source="mcp:home")
    assert "lights" not in read_only  # no longer read-only: a copy taken earlier would still say it was
