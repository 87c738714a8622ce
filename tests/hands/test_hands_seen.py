"""Seeing the MCP servers (issue 30, item 6): `handoff status` and the page show each server, up
or down with its tool count, and an MCP call on its command's row; a daemon on the simulator with
the test home server (up) and a server that exits at once (down) in its mcp.json."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from concurrency.changes import Changes
from decisions.timeline import Timeline
from hands.manager import CombinedNotices, servers_shown, watch_servers
from realtime_sim import SimServer
from service.health import ListenerHealth
from service.notify import SystemdNotifier
from service.runtime import ServiceRuntime, StatusFiles
from service.status import STATUS_FILE, Probes, read_status
from tests.hands.test_hands import START_S, home_stdio, running
from tests.pipeline.test_pipeline_hands import REPO
from tests.service.test_status import handoff_out
from tests.support.awaiting import file_written
from tests.support.daemon import daemon_env, running_daemon
from tests.web.support import free_port, wav_with_commands
from tests.web.test_page_in_a_browser import chromium, text_of, until
from web.token import load_or_create_token


def two_servers(tmp_path: Path) -> Path:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "home": {"command": sys.executable, "args": ["-m", "tests.support.home_server"], "env": {"PYTHONPATH": str(REPO)}},
        "garage": {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]},
    }}))  # fmt: skip
    return config


async def test_status_and_the_page_show_each_mcp_server_and_the_call_on_its_command(tmp_path: Path, sim: SimServer) -> None:
    port = free_port()
    state = tmp_path / "state"
    env = daemon_env(tmp_path, sim.base_url, MCP_CONFIG=str(two_servers(tmp_path)), WEB_PORT=str(port))
    sim.script.push_transcript("Computer, turn off the kitchen light")  # the simulator picks set_light from the words
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=1, lead_s=4, seconds_after=300)
    with chromium() as driver:
        async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
            await daemon.wait_line(r"narrated: answer", timeout=90)

            def servers_written() -> bool:
                status = read_status(state / STATUS_FILE)
                return status is not None and status.last_command is not None and len(status.mcp_servers) == 2

            await file_written(state, servers_written)
            code, out = await asyncio.to_thread(handoff_out, tmp_path, "status")
            assert code == 0, out
            assert "MCP server home (stdio): up, 10 tool(s)" in out, out
            assert "MCP server garage (stdio): down, 0 tool(s)" in out and "last error: " in out, out

            await asyncio.to_thread(driver.get, f"http://127.0.0.1:{port}/?token={load_or_create_token(state)}")
            await until(driver, lambda d: "set_light" in text_of(d, "#commands"))
            servers = text_of(driver, "#now-mcp")
            assert "home up (10 tools)" in servers and "garage down (0 tools)" in servers, servers
            row = text_of(driver, "#commands .command")
            assert "set_light" in row and "server: home" in row and "The kitchen light is now off." in row, row


async def test_a_server_going_down_and_coming_back_is_written_at_once_not_at_the_next_heartbeat(tmp_path: Path) -> None:
    """The status file is rewritten when a server goes down and when it is back, with no heartbeat
    for an hour and no command: only the server's change can have written it."""
    async with running(home_stdio(tmp_path / "home.jsonl")) as (hands, registry):
        files = StatusFiles(tmp_path / STATUS_FILE, history=None, min_interval_s=0.05, heartbeat_s=3600.0)
        runtime = ServiceRuntime(Timeline(), SystemdNotifier({}), ListenerHealth(60.0), None, files)
        runtime.attach(Probes(listener_up=lambda: True, mcp_servers=lambda: servers_shown(notices)))
        notices = CombinedNotices(None, hands)
        page_woken = Changes()
        watch_servers(notices, runtime.shown_changed, page_woken.notify)  # as `handoff run` wires them
        async with runtime:

            def shown_up() -> bool | None:
                status = read_status(tmp_path / STATUS_FILE)
                return None if status is None or not status.mcp_servers else status.mcp_servers[0]["up"]

            await file_written(tmp_path, lambda: shown_up() is True, START_S)
            woken = asyncio.ensure_future(page_woken.wait())
            assert not (await registry.run("crash_hub", "{}", "c1")).ok
            await file_written(tmp_path, lambda: shown_up() is False, START_S)
            assert woken.done()  # the page's event stream was woken too
            await file_written(tmp_path, lambda: shown_up() is True, START_S)
            assert hands.link("home").restarts == 1
