"""`handoff tools`: every tool the assistant can call (built-in, tasks, timers, MCP), where it
comes from and whether it needs a spoken yes; `--json` prints them as a JSON list.

The MCP servers of MCP_CONFIG are started (or reached) to list their tools, then stopped; a
server that cannot be is named with the reason. Nothing is called.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from brain import Brain
from commands.options import add_common_arguments, settings_from_args
from config.settings import Settings, SettingsError
from hands.config import load_servers
from hands.manager import Hands, ServerState
from realtime_api.link import make_client
from tasks import TaskManager, TaskSettings, TaskStore, load_task_config, register_task_tools, register_timer_tools
from tools.builtin import build_listener_tools
from tools.registry import ToolRegistry

LIST_WAIT_S = 20.0  # how long the servers get to start and list their tools


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON list: name, source, kind, needs_yes, effect, description")


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    logging.getLogger("handoff.hands").setLevel(logging.ERROR)  # each server's state is printed below instead
    rows, servers = asyncio.run(catalog(settings))
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    width = max((len(r["name"]) for r in rows), default=4)
    source_width = max((len(r["source"]) for r in rows), default=6)
    print(f"{'TOOL':<{width}}  {'SOURCE':<{source_width}}  YES?  WHAT IT DOES")
    for row in rows:
        yes = "yes" if row["needs_yes"] else "no"
        print(f"{row['name']:<{width}}  {row['source']:<{source_width}}  {yes:<4}  {row['description'][:70]}")
    for server in servers:
        state = f"up, {server.tools} tool(s)" if server.up else f"not reachable ({server.error or 'it did not start in time'})"
        print(f"MCP server {server.name} ({server.transport}): {state}")
    if not servers:
        print(f"No MCP servers ({settings.mcp_config} has none, or does not exist).")
    return 0


async def catalog(settings: Settings) -> tuple[list[dict[str, Any]], list[ServerState]]:
    """The tools as the assistant builds them: rows in its order, and each MCP server's state."""
    servers, problems = load_servers(settings.mcp_config, settings.mcp_config_named)
    if problems:
        raise SettingsError(*problems)
    client = make_client(settings.realtime)  # never used: ask_brain is listed, not asked
    with tempfile.TemporaryDirectory() as scratch:  # the tools' definitions only: no folder or store is used
        tools = build_listener_tools(settings.replace(workspace_root=Path(scratch)), Brain(settings.brain, client))
        kinds = {name: "built-in" for name in tools.names()}
        task_settings = TaskSettings.from_settings(settings.replace(state_dir=Path(scratch)))
        manager = TaskManager(load_task_config(settings.tasks_config), TaskStore(Path(scratch) / "tasks.db"), task_settings)
        register_task_tools(tools, manager)
        kinds.update({name: "tasks" for name in tools.names() if name not in kinds})
        register_timer_tools(tools, manager)
        kinds.update({name: "timers" for name in tools.names() if name not in kinds})
    hands = Hands(servers, tools)
    try:
        await hands.start(wait_s=LIST_WAIT_S)
        states = hands.servers  # (as they were listed: closing takes them down)
    finally:
        await hands.close()
    await client.close()
    return rows(tools, kinds), states


def rows(tools: ToolRegistry, kinds: dict[str, str]) -> list[dict[str, Any]]:
    found = []
    for spec in tools.specs():
        kind = kinds.get(spec.name, "mcp")
        source = spec.source.removeprefix("mcp:") if kind == "mcp" else kind
        found.append({"name": spec.name, "source": source, "kind": kind, "needs_yes": spec.needs_yes,
                      "effect": spec.effect.value, "description": spec.description})  # fmt: skip
    return found


