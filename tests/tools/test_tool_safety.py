"""The file tools and the registry against issue 23's hostile inputs, through `ToolRegistry.run`
and `format` as the coordinator calls them: the key never leaves in a result or a script
(defect 1), lone surrogates are cleaned where the arguments come in (defect 8), a listing is
bounded and off the event loop (defect 15), and dot files and trailing slashes are said and
read right (defect 17)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import openai
import pytest

import tools.builtin
from brain import Brain
from config.settings import BrainSettings, LogSettings, RealtimeSettings, Settings
from realtime_sim import SimServer
from tests.tools.test_tools import FIXED_NOW, run
from tools.builtin import build_listener_tools
from tools.registry import ToolRegistry
from tools.workspace import PRIVATE

# Not shaped like an OpenAI key (no "sk-"), so only the configured value can catch it.
KEY = "handoff-test-key-Q7w9zXv3LmN2pR8t"


def keyed_tools(ws: Path, state_dir: Path | None = None, log_file: Path | None = None, brain: Brain | None = None) -> ToolRegistry:
    settings = Settings(realtime=RealtimeSettings(api_key=KEY), workspace_root=ws,
                        state_dir=state_dir or ws.parent / "state", log=LogSettings(file=log_file))  # fmt: skip
    return build_listener_tools(settings, brain, clock=lambda: FIXED_NOW)


def everything_said(tools: ToolRegistry, result) -> str:
    """The result as the model (short output), the narrator (script) and the log (full) see it."""
    speakable = tools.format(result)
    return "\n".join((result.short_output(), speakable.script, json.dumps(speakable.full), repr(result)))


async def test_the_key_in_any_workspace_file_never_reaches_a_result_or_a_script(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "deploy-notes.txt").write_text(f"server: example\napi_token = {KEY}\nsecond copy:{KEY}!\n")
    (ws / f"backup-{KEY}.txt").write_text("named after the key\n")
    tools = keyed_tools(ws)
    read = await run(tools, "read_file_head", {"path": "deploy-notes.txt", "lines": 5})
    assert read.ok and read.data["lines"][1] == "api_token = [redacted]"
    listing = await run(tools, "list_files", {"path": "."})
    assert listing.ok
    failed = await run(tools, "read_file_head", {"path": f"missing-{KEY}.txt"})  # the key echoed in an error
    assert not failed.ok
    for result in (read, listing, failed):
        assert KEY not in everything_said(tools, result)


@pytest.mark.parametrize("name", [".env", ".env.local", "prod.env", ".envrc", "config/.ENV"])
async def test_settings_files_are_never_read_whatever_their_content(tmp_path: Path, name: str) -> None:
    ws = tmp_path / "ws"
    (ws / "config").mkdir(parents=True)
    (ws / name).write_text("OPENAI_API_KEY=sk-live-abcdefghijklmnopqrstuvwxyz\nHARMLESS=1\n")
    (ws / "innocent.txt").symlink_to(ws / name)  # a link to one is refused as well
    tools = keyed_tools(ws)
    for path in (name, "innocent.txt"):
        result = await run(tools, "read_file_head", {"path": path})
        assert not result.ok and result.error == PRIVATE
        assert "abcdefghij" not in everything_said(tools, result)


async def test_the_state_folder_and_the_log_inside_the_workspace_are_never_read(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "state" / "tasks").mkdir(parents=True)
    (ws / "state" / "tasks" / "1.log").write_text("what a task printed\n")
    (ws / "handoff.log").write_text("the log\n")
    tools = keyed_tools(ws, state_dir=ws / "state", log_file=ws / "handoff.log")
    for path, tool in (("state/tasks/1.log", "read_file_head"), ("state", "list_files"), ("handoff.log", "read_file_head")):
        result = await run(tools, tool, {"path": path})
        assert not result.ok and result.error == PRIVATE, (path, result)


async def test_a_dot_file_is_spoken_as_dot_and_its_name(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".env").write_text("X=1\n")
    tools = keyed_tools(ws)
    script = tools.format(await run(tools, "list_files", {"path": "."})).script
    assert script == "The workspace folder has 1 item: dot env."  # was "... has 1 item.env."


async def test_a_trailing_slash_on_a_file_is_an_error_not_a_read(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "a.txt").write_text("hello\n")
    tools = keyed_tools(ws)
    result = await run(tools, "read_file_head", {"path": "a.txt/"})
    assert not result.ok and result.error == "That path is a file, not a folder."
    assert "hello" not in tools.format(result).script
    listed = await run(tools, "list_files", {"path": "a.txt/"})
    assert not listed.ok and listed.error == "That path is a file, not a folder."
    folder = await run(tools, "read_file_head", {"path": "docs/"})
    assert not folder.ok and folder.error == "That path is a folder, not a file."
    assert (await run(tools, "read_file_head", {"path": "a.txt"})).data["lines"] == ["hello"]


async def test_a_huge_folder_is_listed_off_the_event_loop_and_only_so_far(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in range(250):
        (ws / f"f{n:03d}.txt").write_text("")
    monkeypatch.setattr(tools.builtin, "MAX_SCAN_ENTRIES", 100)
    threads: list[threading.Thread] = []
    real_scandir = tools.builtin.os.scandir

    def scandir(fd):  # records where the folder is read
        threads.append(threading.current_thread())
        return real_scandir(fd)

    monkeypatch.setattr(tools.builtin.os, "scandir", scandir)
    registry = keyed_tools(ws)
    result = await run(registry, "list_files", {"path": "."})
    assert result.ok and result.data["total"] == 100 and result.data["complete"] is False
    assert threads and threading.main_thread() not in threads  # not on the event loop's thread
    script = registry.format(result).script
    assert script.startswith("The workspace folder has more than 100 items. Among them: ") and script.endswith("and many more.")


async def test_lone_surrogates_in_echo_arguments_become_replacement_characters(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tools = keyed_tools(ws)
    result = await run(tools, "echo", '{"text": "caf\\ud800 and \\udfff"}')  # as the model sent them: JSON escapes
    assert result.ok and result.data["text"] == "caf\ufffd and \ufffd"
    everything_said(tools, result).encode("utf-8")  # storable, loggable, sendable


async def test_a_lone_surrogate_in_a_brain_question_still_gets_an_answer(tmp_path: Path) -> None:
    server = SimServer()
    await server.start(host="127.0.0.1", port=0)
    try:
        async with openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0) as client:
            brain = Brain(BrainSettings(timeout_s=5.0, retry_budget_s=10.0, backoff_initial_s=0.001, backoff_max_s=0.005), client)
            ws = tmp_path / "ws"
            ws.mkdir()
            tools = keyed_tools(ws, brain=brain)
            result = await run(tools, "ask_brain", '{"query": "what is caf\\ud800 au lait?"}')
            assert result.ok, result  # was: "could not reach the brain", with a traceback in the log
            assert [r["input"] for r in server.brain_requests][-1].count("\ufffd") == 1
    finally:
        await server.stop()
