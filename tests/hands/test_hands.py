"""MCP servers as tools, against real servers: `mcp-server-time` from PyPI (stdio) and the test
home server (tests/support/home_server.py) over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from pathlib import Path
from typing import AsyncIterator

import pytest

from config.logging_setup import redact
from hands.config import ServerConfig
from hands.link import LinkTiming
from hands.manager import Hands
from tests.support.home_server import INJECTION
from tools.registry import Effect, ToolRegistry
from tools.result import SHORT_OUTPUT_MAX_CHARS

REPO = Path(__file__).resolve().parents[2]
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
FAST = LinkTiming(connect_timeout_s=30.0, call_timeout_s=2.0, backoff_initial_s=0.05, backoff_max_s=0.2)
START_S = 60.0  # a Python server starts in about a second; far longer on a busy machine


def home_stdio(log: Path, **extra: object) -> ServerConfig:
    return ServerConfig("home", command=sys.executable, args=("-m", "tests.support.home_server"),
                        env={"PYTHONPATH": str(REPO), "HOME_LOG": str(log)}, **extra)  # type: ignore[arg-type]


def calls_made(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@contextlib.asynccontextmanager
async def running(*servers: ServerConfig, timing: LinkTiming = FAST) -> AsyncIterator[tuple[Hands, ToolRegistry]]:
    registry = ToolRegistry()
    hands = Hands(list(servers), registry, timing)
    try:
        await hands.start(wait_s=START_S)
        yield hands, registry
    finally:
        await hands.close()


async def test_mcp_server_time_from_pypi_answers_as_a_read_only_tool() -> None:
    async with running(ServerConfig("time", command=TIME_SERVER)) as (hands, registry):
        assert hands.servers[0].up and hands.servers[0].tools == 2
        spec = registry.get("get_current_time")
        assert spec is not None and spec.effect is Effect.READS and spec.source == "mcp:time" and not spec.needs_yes
        assert spec.description.startswith("(time server) ")
        assert "get_current_time" in registry.read_only_names()
        result = await registry.run("get_current_time", '{"timezone": "Europe/London"}', "c1")
        assert result.ok and result.data["structured"]["timezone"] == "Europe/London"
        script = registry.format(result).script
        assert script.startswith("The time server says:") and "Europe/London" in script
        refused = await registry.run("get_current_time", '{"timezone": 5}', "c2")
        assert refused.error == "The argument 'timezone' of get_current_time must be text."


async def test_home_over_stdio_effects_yes_caps_slowness_and_injection(tmp_path: Path) -> None:
    log = tmp_path / "home.jsonl"
    async with running(home_stdio(log)) as (hands, registry):
        effects = {s.name: s.effect for s in registry.specs()}
        assert effects["set_light"] is Effect.ACTS and effects["get_lights"] is Effect.READS
        assert effects["unlock_door"] is Effect.CONFIRMS and registry.get("unlock_door").needs_yes

        light = await registry.run("set_light", '{"area": "kitchen", "on": false}', "c1")
        assert registry.format(light).script == "The home server says: The kitchen light is now off."
        assert calls_made(log) == [{"tool": "set_light", "area": "kitchen", "on": False}]
        wrong_area = await registry.run("set_light", '{"area": "garage", "on": false}', "c2")
        assert wrong_area.error.startswith("The argument 'area' of set_light must be one of: kitchen, living room")

        asked = await registry.run("unlock_door", "{}", "c3")  # never without the yes
        assert asked.data["needs_yes"] and asked.data["question"] == "Unlock the front door?"
        assert [c["tool"] for c in calls_made(log)] == ["set_light"]
        unlocked = await registry.run_confirmed("unlock_door", "{}", "c3")
        assert unlocked.ok and [c["tool"] for c in calls_made(log)] == ["set_light", "unlock_door"]

        # A hung call costs its own answer only: another call to the same server answers meanwhile.
        slow = asyncio.create_task(registry.run("slow_report", '{"seconds": 30}', "c4"))
        quick = await registry.run("get_lights", '{"area": "hall"}', "c5")
        assert quick.ok and not slow.done()
        assert (await slow).error == "The home server did not answer within 2 seconds."

        big = await registry.run("energy_log", "{}", "c6")
        assert big.ok and big.data["text_chars"] > 1_000_000 and len(big.data["text"]) == 16_000
        assert len(big.short_output()) <= SHORT_OUTPUT_MAX_CHARS and len(registry.format(big).script) < 400

        # What a server says is its words, said as such; nothing in it calls anything.
        weather = registry.get("weather_note")
        assert weather.description.startswith("(home server) ") and INJECTION in weather.description
        note = await registry.run("weather_note", "{}", "c7")
        assert registry.format(note).script.startswith("The home server says: Sunny.")
        assert [c["tool"] for c in calls_made(log)] == ["set_light", "unlock_door"]


async def test_a_crashed_server_is_said_restarted_announced_once_and_works_again(tmp_path: Path) -> None:
    log = tmp_path / "home.jsonl"
    async with running(home_stdio(log)) as (hands, registry):
        link = hands.link("home")
        crashed = await registry.run("crash_hub", "{}", "c1")
        assert not crashed.ok and "home server" in crashed.error
        await link.changes.wait_until(lambda: link.restarts >= 1, START_S)
        meanwhile = await registry.run("get_lights", '{"area": "hall"}', "c2")  # its tools stay, and say why
        assert meanwhile.ok or meanwhile.error in (
            "The home server is not reachable right now.", "The home server stopped while doing that; I'm starting it again.")
        await link.changes.wait_until(lambda: link.up, START_S)
        again = await registry.run("set_light", '{"area": "hall", "on": true}', "c3")
        assert again.ok and calls_made(log) == [{"tool": "set_light", "area": "hall", "on": True}]
        assert hands.next_batch() is None  # the call's answer said it: not announced again

        # A death outside any call is announced, once.
        assert (await registry.run("reboot_hub_later", '{"seconds": 0.2}', "c4")).ok
        await link.changes.wait_until(lambda: link.restarts >= 2, START_S)
        batch = hands.next_batch()
        assert batch is not None and batch.script == "The home server stopped; I'm starting it again."
        hands.ack(batch.ids)
        assert hands.next_batch() is None
        await link.changes.wait_until(lambda: link.up, START_S)
        assert hands.next_batch() is None


async def test_tools_listed_again_when_the_server_says_they_changed(tmp_path: Path) -> None:
    async with running(home_stdio(tmp_path / "home.jsonl", allowed_tools=None)) as (hands, registry):
        link = hands.link("home")
        listed = registry.session_tools()  # the list the listener holds
        assert "scene_movie" not in [t["name"] for t in listed]
        added = await registry.run("add_scene", '{"name": "movie"}', "c1")
        assert added.ok
        await link.changes.wait_until(lambda: registry.get("scene_movie") is not None, START_S)
        assert "scene_movie" in [t["name"] for t in listed]


async def test_allowed_tools_limit_what_is_offered(tmp_path: Path) -> None:
    allowed = frozenset({"get_lights", "set_light"})
    async with running(home_stdio(tmp_path / "home.jsonl", allowed_tools=allowed)) as (hands, registry):
        assert sorted(registry.names()) == ["get_lights", "set_light"]


@contextlib.asynccontextmanager
async def home_over_http(tmp_path: Path, token: str) -> AsyncIterator[str]:
    env = {"PYTHONPATH": str(REPO), "HOME_LOG": str(tmp_path / "home.jsonl"), "HOME_TOKEN": token}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.home_server", "http", cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)  # fmt: skip
    try:
        assert process.stdout is not None
        port = int((await asyncio.wait_for(process.stdout.readline(), START_S)).decode())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        await process.wait()


async def test_home_over_streamable_http_with_a_token_that_is_never_shown(tmp_path: Path, caplog) -> None:
    token = "home-token-0123456789abcdef"
    caplog.set_level(logging.DEBUG)
    async with home_over_http(tmp_path, token) as url:
        server = ServerConfig("home", url=url, headers={"Authorization": f"Bearer {token}"})
        async with running(server) as (hands, registry):
            assert hands.servers[0].up and hands.servers[0].transport == "http"
            light = await registry.run("set_light", '{"area": "bedroom", "on": true}', "c1")
            assert registry.format(light).script == "The home server says: The bedroom light is now on."
            assert redact(f"header was {token}") == "header was [redacted]"
        wrong = ServerConfig("home", url=url, headers={"Authorization": "Bearer wrong-token-000"})
        async with running(wrong) as (hands, registry):
            assert not hands.servers[0].up and registry.names() == []
    assert token not in caplog.text and "wrong-token-000" not in caplog.text


def test_the_mcp_sdk_loads_only_when_a_server_is_configured() -> None:
    """A start with no MCP servers (and every `handoff` process of the suite) does not pay the
    SDK's second of import; `Hands` with a server loads it."""
    import subprocess

    code = ("import sys, commands.run, commands.checks, web.daemon; from hands.manager import Hands; "
            "from hands.config import ServerConfig; from tools.registry import ToolRegistry; "
            "Hands([], ToolRegistry()); print('mcp' in sys.modules, end=' '); "
            "Hands([ServerConfig('time', command='unused')], ToolRegistry()); print('mcp' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.strip() == "False True", result.stderr
