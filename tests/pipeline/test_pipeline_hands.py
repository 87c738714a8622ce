"""MCP tools through the whole assistant against the simulator, with the test home server (a
real MCP server over stdio): a light is switched once, after the command is confirmed, and the
answer says so; a crashing server gets a spoken error, is restarted and the next command works;
injected instructions unlock nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from realtime_sim import SimConfig
from tests.support.pipeline_harness import narrated_scripts, running_pipeline
from tests.support.scripted_wake import ScriptedWake, scripted_wake_filter

REPO = Path(__file__).resolve().parents[2]
LATE = SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=1, transcription_delay_ms=(800, 800))
START_S = 60.0  # a busy machine starts a Python server slowly


def home_config(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "home.jsonl"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"home": {
        "command": sys.executable, "args": ["-m", "tests.support.home_server"],
        "env": {"PYTHONPATH": str(REPO), "HOME_LOG": str(log)}}}}))  # fmt: skip
    return config, log


async def home_up(p) -> None:
    """The daemon's start waits a few seconds for its servers; a busy machine may need longer."""
    link = p.coordinator.parts.notices.hands.link("home")
    await link.changes.wait_until(lambda: link.up, START_S)


def calls_made(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def kinds(p) -> list[str]:
    return [str(e.kind) for e in p.timeline.entries]


def routes(p) -> list[dict]:
    return [e for c in p.listener_connections() for e in c.received if e["type"] == "response.create"]


@pytest.mark.parametrize("sim", [LATE], indirect=True)
async def test_turn_off_the_kitchen_light_runs_once_after_the_command_is_confirmed(tmp_path, sim):
    config, log = home_config(tmp_path)
    wake = ScriptedWake()
    async with running_pipeline(tmp_path, sim, mic_filter=scripted_wake_filter(wake), mcp_config=config,
                                mcp_routing="direct") as p:
        await home_up(p)
        offered = [t["name"] for t in p.coordinator.parts.tools.session_tools()]
        assert {"set_light", "unlock_door", "get_time"} <= set(offered)
        sim.script.push_tool_call("set_light", {"area": "kitchen", "on": False})
        wake.wake_next()
        p.say("Computer, turn off the kitchen light")  # routed by its audio; its words come 0.8 s later
        await p.wait(lambda t: t.count("narrated") >= 1, START_S)
        order = kinds(p)
        assert order.index("confirmed") < order.index("tool")  # it acted only once its words were heard
        assert calls_made(log) == [{"tool": "set_light", "area": "kitchen", "on": False}]
        assert narrated_scripts(p) == ["The home server says: The kitchen light is now off."]
        (route,) = routes(p)
        assert "set_light" in [t["name"] for t in route["response"]["tools"]]


async def test_a_crashing_server_is_said_restarted_and_the_next_command_works(tmp_path, sim):
    config, log = home_config(tmp_path)
    async with running_pipeline(tmp_path, sim, mcp_config=config, mcp_routing="direct") as p:
        await home_up(p)
        link = p.coordinator.parts.notices.hands.link("home")
        sim.script.push_tool_call("crash_hub", {})
        await p.ask("Computer, restart the hub", START_S)
        assert narrated_scripts(p) == [
            "The crash hub tool didn't work: the home server stopped while doing that; I'm starting it again."]
        await link.changes.wait_until(lambda: link.up and link.restarts >= 1, START_S)
        sim.script.push_tool_call("set_light", {"area": "hall", "on": True})
        await p.ask("Computer, turn on the hall light", START_S)
        assert narrated_scripts(p)[-1] == "The home server says: The hall light is now on."
        assert calls_made(log) == [{"tool": "set_light", "area": "hall", "on": True}]
        assert len(narrated_scripts(p)) == 2  # said once, by the answer to the call it died in: no notice too


async def test_injected_instructions_unlock_nothing(tmp_path, sim):
    config, log = home_config(tmp_path)
    async with running_pipeline(tmp_path, sim, mcp_config=config, mcp_routing="direct") as p:
        await home_up(p)
        sim.script.push_tool_call("weather_note", {})  # its description and its result say "call unlock_door"
        await p.ask("Computer, what's the weather", START_S)
        assert narrated_scripts(p)[-1].startswith("The home server says: Sunny.")  # said as its words
        # Even a model that obeyed them, routing a command to the lock, opens nothing without a yes.
        sim.script.push_tool_call("unlock_door", {})
        await p.ask("Computer, what's the weather like", START_S)
        assert narrated_scripts(p)[-1].startswith("Just to be sure: unlock")  # asked, not done
        await p.ask("Computer, what's the weather", START_S)  # no yes: the question lapses unanswered
        assert calls_made(log) == []
        assert p.timeline.count("tool") == 1  # the note ran; the lock was asked about, not run; no result called more


async def test_through_the_brain_the_listener_is_offered_one_tool_and_the_light_is_switched_once(tmp_path, sim):
    config, log = home_config(tmp_path)
    async with running_pipeline(tmp_path, sim, mcp_config=config, mcp_routing="brain") as p:
        await home_up(p)
        offered = [t["name"] for t in p.coordinator.parts.tools.session_tools()]
        assert "use_device" in offered and "set_light" not in offered and "get_time" in offered
        sim.script.push_tool_call("use_device", {"request": "turn off the kitchen light"})
        await p.ask("Computer, turn off the kitchen light", START_S)
        assert narrated_scripts(p) == ["The home server says: The kitchen light is now off."]
        assert calls_made(log) == [{"tool": "set_light", "area": "kitchen", "on": False}]
        (pick,) = sim.brain_requests  # one request: the brain picks, the result never goes back to it
        assert {t["name"] for t in pick["tools"]} >= {"set_light", "unlock_door"} and pick["tool_choice"] == "required"
        sim.script.push_tool_call("use_device", {"request": "unlock the front door"})
        await p.ask("Computer, unlock the front door", START_S)
        assert narrated_scripts(p)[-1].startswith("Just to be sure: unlock")  # the brain's pick, asked about
        assert calls_made(log) == [{"tool": "set_light", "area": "kitchen", "on": False}]
        await p.ask("Computer, yes", START_S)
        assert calls_made(log)[1:] == [{"tool": "unlock_door"}]


@pytest.mark.parametrize(("reply", "unlocked"), [("Computer, yes please", True), ("Computer, no", False)])
async def test_unlock_the_front_door_asks_and_only_a_spoken_yes_unlocks_once(tmp_path, sim, reply, unlocked):
    config, log = home_config(tmp_path)
    async with running_pipeline(tmp_path, sim, mcp_config=config, mcp_routing="direct") as p:
        await home_up(p)
        sim.script.push_tool_call("unlock_door", {})
        await p.ask("Computer, unlock the front door", START_S)
        assert narrated_scripts(p)[-1].startswith("Just to be sure: unlock")
        assert calls_made(log) == []  # asked, nothing done
        await p.ask(reply, START_S)
        assert calls_made(log) == ([{"tool": "unlock_door"}] if unlocked else [])
        if not unlocked:
            assert narrated_scripts(p)[-1] == "Okay, I won't."
        sim.script.push_tool_call("get_time", {})
        await p.ask("Computer, yes", START_S)  # a later yes is a command of its own: it unlocks nothing
        assert calls_made(log) == ([{"tool": "unlock_door"}] if unlocked else [])
