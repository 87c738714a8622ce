"""`handoff tools` lists every tool (built-in, tasks, timers, MCP) with its source and whether it
needs a spoken yes; `handoff check` says what is wrong with mcp.json, one sentence each."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from hands.config import ServerConfig, load_servers
from tests.commands.test_checks import KEY, check_lines, handoff, home  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parents[2]


def write_config(path: Path, servers: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def home_server(**extra: object) -> dict:
    return {"command": sys.executable, "args": ["-m", "tests.support.home_server"],
            "env": {"PYTHONPATH": str(REPO), "HOME_TOKEN": "env-secret-0123456789"}, **extra}  # fmt: skip


def test_tools_json_names_every_tool_its_source_and_whether_it_needs_a_yes(home, capsys) -> None:
    write_config(home / "state" / "mcp.json", {"home": home_server()})
    code, out, err = handoff(capsys, "tools", "--json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["get_time"]["source"] == "built-in" and rows["get_time"]["needs_yes"] is False
    assert rows["start_task"]["source"] == "tasks" and rows["set_timer"]["source"] == "timers"
    assert rows["set_light"]["source"] == "home" and rows["set_light"]["needs_yes"] is False
    assert rows["unlock_door"]["source"] == "home" and rows["unlock_door"]["needs_yes"] is True
    assert all(isinstance(row["needs_yes"], bool) for row in rows.values())
    assert "env-secret-0123456789" not in out + err

    code, out, _ = handoff(capsys, "tools")
    assert code == 0
    unlock = next(line for line in out.splitlines() if line.startswith("unlock_door "))
    assert unlock.split()[1:3] == ["home", "yes"]
    assert "MCP server home (stdio): up, " in out


def test_check_says_what_is_wrong_with_mcp_json_one_sentence_each(home, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    config = home / "state" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"mcpServers": {"home": {"command": "x",}}}')
    code, out, _ = handoff(capsys, "check")
    assert code == 2
    assert f"error: The MCP servers' file {config} is not valid JSON (line 1, column 41: " \
           "expecting property name enclosed in double quotes); fix it." in check_lines(out)

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    write_config(config, {
        "lamp": {"command": "no-such-mcp-server-here"},
        "empty": {"args": ["x"]},
        "hass": {"url": f"http://127.0.0.1:{port}/api/mcp", "headers": {"Authorization": "Bearer hass-token-0123456789"}},
    })
    code, out, _ = handoff(capsys, "check")
    lines = check_lines(out)
    assert code == 2
    assert f"error: The MCP server 'empty' in {config} has neither a \"command\" (a program to start) nor a \"url\"; give one." in lines
    assert "problem: The MCP server 'lamp' runs no-such-mcp-server-here, which is not on PATH; install it or give " \
           "its full path as \"command\"." in lines
    assert f"problem: The MCP server 'hass' at 127.0.0.1:{port} cannot be reached (connection refused); start it " \
           "or fix its \"url\"." in lines
    assert "hass-token" not in out


@pytest.mark.parametrize(
    "servers, problem",
    [
        ({"a": {"command": "x", "url": "http://h/"}}, "has both a \"command\" and a \"url\"; keep one."),
        ({"a": {"command": ""}}, "has an empty \"command\"; name the program that starts it."),
        ({"a": {"command": "x", "args": "y"}}, "has \"args\" that are not a list of strings; fix them."),
        ({"a": {"command": "x", "env": {"K": 1}}}, "has an \"env\" that is not an object of strings; fix it."),
        ({"a": {"url": "http://h/", "headers": []}}, "has \"headers\" that are not an object of strings; fix them."),
        ({"a": {"command": "x", "allowedTools": "all"}}, "has an \"allowedTools\" that is not a list of tool names; fix it."),
        ({"a/b": {"command": "x"}}, "needs a name of letters, digits, spaces, dots, dashes or underscores"),
    ],
)
def test_each_bad_server_entry_is_one_sentence(tmp_path: Path, servers: dict, problem: str) -> None:
    path = write_config(tmp_path / "mcp.json", servers)
    found, problems = load_servers(path)
    assert found == [] and len(problems) == 1 and problem in problems[0]


def test_no_file_is_no_servers_unless_it_was_named(tmp_path: Path) -> None:
    assert load_servers(tmp_path / "mcp.json") == ([], [])
    assert load_servers(tmp_path / "mcp.json", named=True)[1] == [
        f"MCP_CONFIG={tmp_path / 'mcp.json'} does not exist; create it or unset MCP_CONFIG."]
    path = write_config(tmp_path / "mcp.json", {"off": {"command": "x", "disabled": True},
                                                "hass": {"url": "https://h:8123/api/mcp", "headers": {"Authorization": "Bearer abcdefgh"},
                                                         "allowedTools": ["HassTurnOff"]}})  # fmt: skip
    (server,), problems = load_servers(path)
    assert problems == [] and server.transport == "http" and server.allows("HassTurnOff") and not server.allows("HassTurnOn")
    assert "abcdefgh" in server.secrets and "abcdefgh" not in repr(server)
    assert "tok-in-the-query" in ServerConfig("q", url="https://h/mcp?token=tok-in-the-query").secrets


def test_the_users_word_on_a_tools_effect_wins_over_its_hints(tmp_path: Path) -> None:
    from mcp_types import Tool

    from hands.tools import effect_of
    from tools.registry import Effect

    path = write_config(tmp_path / "mcp.json", {"hass": {"url": "http://h:8123/api/mcp",
                                                         "effects": {"HassTurnOff": "acts", "GetLiveContext": "reads"}}})
    (server,), _ = load_servers(path)
    bare = Tool(name="HassTurnOff", input_schema={"type": "object"})  # Home Assistant's say nothing about themselves
    assert effect_of(bare) is Effect.CONFIRMS
    assert effect_of(bare, server.effects.get("HassTurnOff")) is Effect.ACTS
    bad = write_config(tmp_path / "bad.json", {"hass": {"url": "http://h/", "effects": {"HassTurnOff": "safe"}}})
    assert "has \"effects\" that are not an object of tool names to reads, acts or confirms" in load_servers(bad)[1][0]
