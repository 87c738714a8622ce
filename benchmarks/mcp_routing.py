"""MCP routing (issue 30): the listener offered the MCP tools directly, or one `use_device` tool
that asks the brain, measured in one run against today's routing (no MCP tools).

    nice -n 10 .venv/bin/python -m benchmarks.mcp_routing [--quick] [--trials N]

1. Routing tokens per command with 5, 40 and 150 MCP tools (home-server-like definitions, about
   60 tokens each, as the test home server's): what every routed command carries (the listener's
   instructions, its tools, the command), and what the brain's one extra request carries for a
   command that uses an MCP tool; ratios to today's routing, and what the shipped policy
   (hands.routing, MCP_ROUTING=auto) picks. Tokens are 4 characters each, as the simulator bills text.
2. Voice to voice for "turn off the kitchen light" (end of speech to the answer's first audio), the
   real test home server over stdio, against the simulator behind a network, the wake heard on
   the device and the turn ended there (the defaults), next to `get_time` in the same run.
   Printed, never asserted (the machine is shared).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import AsyncIterator

from mcp_types import Tool, ToolAnnotations

from openai import AsyncOpenAI

from brain import Brain
from config.settings import BrainSettings, Settings
from tasks import TaskConfig, TaskManager, TaskSettings, TaskStore, register_task_tools, register_timer_tools
from tools.builtin import build_listener_tools
from tools.registry import ToolRegistry, function_tool
from benchmarks.voice_to_voice import _running, _sim_config, one_command, quick_or_full
from hands.config import ServerConfig
from hands.routing import PICK_INSTRUCTIONS, Routing
from hands.tools import spec_for
from realtime_api.sessions import LISTENER_INSTRUCTIONS
from realtime_sim import SimServer

REPO = Path(__file__).resolve().parents[1]
TOOL_COUNTS = (5, 40, 150)
COMMAND = "turn off the kitchen light"
# How the command is routed (benchmarks.voice_to_voice): at the device's turn end, or provisionally
# at the pause the turn end begins with (PROVISIONAL_MS; the default), where a held call's pick starts
# once the turn is over.
ROUTES = {"device": "at the turn end", "provisional": "provisionally"}
CHARS_PER_TOKEN = 4
AREAS = ["kitchen", "living room", "hall", "bedroom", "bathroom", "office", "garage", "garden"]
THINGS = ["light", "heater", "blind", "fan", "speaker", "plug", "vacuum", "kettle", "camera", "sprinkler"]
VERBS = [("set", "Switch the {thing} in one area of the home on or off."),
         ("get", "Whether the {thing} in an area is on, and its level."),
         ("dim", "Set the level of the {thing} in an area, from 0 to 100."),
         ("schedule", "Turn the {thing} in an area on or off at a time of day.")]  # fmt: skip


def synthetic_tools(count: int) -> list[Tool]:
    """`count` tools shaped as the test home server's (an area enum, a boolean or a level)."""
    tools = []
    for index in range(count):
        verb, description = VERBS[index % len(VERBS)]
        thing = THINGS[(index // len(VERBS)) % len(THINGS)]
        suffix = f"_{index // (len(VERBS) * len(THINGS))}" if index >= len(VERBS) * len(THINGS) else ""
        properties: dict = {"area": {"enum": AREAS, "title": "Area", "type": "string"}}
        if verb in ("set", "schedule"):
            properties["on"] = {"title": "On", "type": "boolean"}
        if verb == "dim":
            properties["level"] = {"title": "Level", "type": "integer", "minimum": 0, "maximum": 100}
        tools.append(Tool(name=f"{verb}_{thing}{suffix}", description=description.format(thing=thing),
                          input_schema={"type": "object", "properties": properties, "required": list(properties)},
                          annotations=ToolAnnotations(read_only_hint=verb == "get", destructive_hint=False)))  # fmt: skip
    return tools


def todays_registry(folder: Path) -> ToolRegistry:
    """The tools as the assistant offers them today: built-in (ask_brain too), tasks, timers."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = Settings(workspace_root=folder, state_dir=folder)
    tools = build_listener_tools(settings, Brain(BrainSettings(), AsyncOpenAI(api_key="sk-none")))
    manager = TaskManager(TaskConfig(), TaskStore(folder / "tasks.db"), TaskSettings(state_dir=folder))
    register_task_tools(tools, manager)  # never started: only the definitions are read
    register_timer_tools(tools, manager)
    return tools


async def _never(tool: str, arguments: dict):  # the definitions are measured, never called
    raise AssertionError("not called")


def listener_tokens(session_tools: list[dict]) -> int:
    return (len(LISTENER_INSTRUCTIONS) + len(json.dumps(session_tools)) + len(COMMAND)) // CHARS_PER_TOKEN


def token_rows(folder: Path) -> list[str]:
    today = listener_tokens(todays_registry(folder / "today").session_tools())
    lines = [
        f"Routing tokens per command (~4 characters each): today, with no MCP tools, {today}.",
        "",
        "| MCP tools | direct: every command | ratio | through the brain: every command | ratio "
        "| + the brain's pick, per MCP command | auto ships | its ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    server = ServerConfig("bench", command="unused")
    for count in TOOL_COUNTS:
        cells = {}
        for mode in ("direct", "brain", "auto"):
            tools = todays_registry(folder / f"{count}-{mode}")
            for tool in synthetic_tools(count):
                tools.add(spec_for(server, tool, tool.name, _never))
            routing = Routing(tools, pick=_never_pick, mode=mode)  # type: ignore[arg-type]
            routing.update()
            mcp = [function_tool(s) for s in tools.specs() if s.source.startswith("mcp:")]
            pick = (len(PICK_INSTRUCTIONS) + len(COMMAND) + len(json.dumps(mcp))) // CHARS_PER_TOKEN
            cells[mode] = (listener_tokens(tools.session_tools()), pick, routing.through_brain)
        direct, brain, auto = cells["direct"][0], cells["brain"][0], cells["auto"][0]
        shipped = "through the brain" if cells["auto"][2] else "direct"
        lines.append(f"| {count} | {direct} | {direct / today:.2f}x | {brain} | {brain / today:.2f}x | "
                     f"{cells['brain'][1]} | {shipped} | {auto / today:.2f}x |")  # fmt: skip
    return lines


async def _never_pick(request: str, tools: list[dict]):
    raise AssertionError("not called")


# --- voice to voice ----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _with_home(sim: SimServer, root: Path, routing: str, route: str) -> AsyncIterator[tuple]:
    """The assistant as voice_to_voice runs it, with the test home server (stdio), once it is up."""
    config = root / "mcp.json"
    root.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"mcpServers": {"home": {
        "command": sys.executable, "args": ["-m", "tests.support.home_server"], "env": {"PYTHONPATH": str(REPO)}}}}))  # fmt: skip
    async with _running(sim, root, 500, route, mcp_config=config, mcp_routing=routing) as running:
        link = running[0].parts.notices.hands.link("home")
        await link.changes.wait_until(lambda: link.up, 60)
        yield running


async def voice_to_voice(rtt_ms: int, routing: str, command: str, trials: int, root: Path,
                         picks: list[float] | None = None, route: str = "device") -> list[float]:
    """Each trial's voice to voice (ms); `picks`: filled with each brain pick's own round trip (ms)."""
    found: list[float] = []
    async with SimServer(_sim_config(rtt_ms)) as sim:
        async with _with_home(sim, root, routing, route) as running:
            if picks is not None:
                _time_picks(running[0].parts.notices.hands.routing, picks)
            for _ in range(trials):
                if command == "what time is it":
                    call: tuple[str, dict] = ("get_time", {})
                elif routing == "direct":
                    call = ("set_light", {"area": "kitchen", "on": False})
                else:
                    call = ("use_device", {"request": command})
                found.append(await one_command(sim, running, f"Computer, {command}", call, 60))
    return found


def _time_picks(routing: Routing, picks: list[float]) -> None:
    """Time the brain's pick (its one Responses request, as the handler sees it) on this routing."""
    pick = routing._pick  # (the benchmark's probe; the product never times it)
    assert pick is not None

    async def timed(request: str, tools: list[dict]):
        started = time.perf_counter()
        try:
            return await pick(request, tools)
        finally:
            picks.append((time.perf_counter() - started) * 1000)

    routing._pick = timed


async def measure(quick: bool, trials: int) -> str:
    with tempfile.TemporaryDirectory(prefix="mcp-routing-") as scratch:
        folder = Path(scratch)
        lines = token_rows(folder)
        lines += ["", f"Voice to voice, end of speech -> first answer audio, median (worst) of {trials}, the home server over stdio:",
                  "", "| RTT ms | routed | get_time (today) | light, direct | vs get_time | light, through the brain | vs get_time "
                  "| the brain's pick (one round trip) | through the brain, less its pick |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for rtt, route in [(rtt, route) for rtt in ((50,) if quick else (50, 150)) for route in ROUTES]:
            cells = {}
            picks: list[float] = []
            for label, routing, command in (("time", "direct", "what time is it"), ("direct", "direct", COMMAND),
                                            ("brain", "brain", COMMAND)):  # fmt: skip
                cells[label] = await voice_to_voice(rtt, routing, command, trials, folder / f"{rtt}-{route}-{label}",
                                                    picks if label == "brain" else None, route)
            base = statistics.median(cells["time"])

            def cell(values: list[float]) -> str:
                return f"{statistics.median(values):.0f} ms ({max(values):.0f})"

            lines.append(f"| {rtt} | {ROUTES[route]} | {cell(cells['time'])} | {cell(cells['direct'])} | "
                         f"{statistics.median(cells['direct']) - base:+.0f} ms | {cell(cells['brain'])} | "
                         f"{statistics.median(cells['brain']) - base:+.0f} ms | {statistics.median(picks):.0f} ms | "
                         f"{statistics.median(cells['brain']) - statistics.median(picks) - base:+.0f} ms |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return quick_or_full(argv, "benchmarks.mcp_routing", __doc__, measure, 5)


if __name__ == "__main__":
    sys.exit(main())
