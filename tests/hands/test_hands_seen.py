"""Seeing the MCP servers (issue 30, item 6): `handoff status` and the page show each server, up
or down with its tool count, and an MCP call on its command's row; a daemon on the simulator with
the test home server (up) and a server that exits at once (down) in its mcp.json."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from realtime_sim import SimServer
from service.status import STATUS_FILE, read_status
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
