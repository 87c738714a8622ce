"""Tool results read aloud: plain sentences, bounded, with a fallback that always says something."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from config.settings import Settings
from speech.speakable import DEFAULT_MAX_CHARS
from tools.builtin import build_listener_tools
from tools.formatters import Speakable
from tools.registry import ToolRegistry
from tools.result import ToolResult

CET = timezone(timedelta(hours=1), "CET")
MARKUP = re.compile(r"[*#`\[\]{}<>|_~\\]|https?:|://|www\.", re.IGNORECASE)


def assert_speakable(script: str, max_chars: int = 600) -> None:
    assert script, "a script must say something"
    assert not MARKUP.search(script), f"markup, JSON or URL left in {script!r}"
    assert len(script) <= max_chars
    assert "\n" not in script and "  " not in script


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "notes" / "drafts").mkdir(parents=True)
    (root / "notes" / "todo.txt").write_text("buy milk\ncall mom\nwater plants\n")
    (root / "notes" / "ideas.md").write_text("# Ideas\n- **a boat** see [the shop](https://boats.example.com)\n")
    return root


class _UnusedBrain:
    """ask_brain is registered only with a brain; formatting never calls it."""


def default_formatters(max_chars: int = DEFAULT_MAX_CHARS) -> ToolRegistry:
    """The listener's tools, each formatting its results by the formatter on its spec."""
    return build_listener_tools(Settings(workspace_root=Path.cwd()), _UnusedBrain(), max_chars=max_chars)  # type: ignore[arg-type]


async def _unused_handler(args: dict) -> dict:
    raise AssertionError("formatter tests never run a tool")


def tools_for(ws: Path, now: datetime = datetime(2025, 11, 22, 15, 5, tzinfo=CET)) -> ToolRegistry:
    return build_listener_tools(Settings(workspace_root=ws), None, clock=lambda: now)


async def spoken(ws: Path, tool: str, args: dict, tools: ToolRegistry | None = None) -> str:
    result = await (tools or tools_for(ws)).run(tool, json.dumps(args), "call_1")
    speakable = default_formatters().format(result)
    assert_speakable(speakable.script)
    return speakable.script


# --- each tool's script --------------------------------------------------------------------


async def test_get_time_script(ws: Path) -> None:
    assert await spoken(ws, "get_time", {}) == "It's 3:05 PM on Saturday, November 22."
    midnight = tools_for(ws, datetime(2026, 1, 1, 0, 30, tzinfo=CET))
    assert await spoken(ws, "get_time", {}, midnight) == "It's 12:30 AM on Thursday, January 1."


async def test_list_files_script_names_files_then_folders(ws: Path) -> None:
    script = await spoken(ws, "list_files", {"path": "notes"})
    assert script == "The folder notes has 3 items: ideas.md, todo.txt and a folder called drafts."


async def test_list_files_script_for_the_root_an_empty_folder_and_a_crowded_one(ws: Path) -> None:
    (ws / "empty").mkdir()
    crowded = ws / "crowded"
    crowded.mkdir()
    for i in range(30):
        (crowded / f"photo-{i:02d}.jpg").write_text("x")
    assert await spoken(ws, "list_files", {}) == (
        "The workspace folder has 3 items: a folder called crowded, a folder called empty and a folder called notes."
    )
    assert await spoken(ws, "list_files", {"path": "empty"}) == "The folder empty is empty."
    crowded_script = await spoken(ws, "list_files", {"path": "crowded"})
    assert crowded_script.startswith("The folder crowded has 30 items. Among them: photo-00.jpg, photo-01.jpg")
    assert crowded_script.endswith("and 22 more.")


async def test_read_file_head_script(ws: Path) -> None:
    assert await spoken(ws, "read_file_head", {"path": "notes/todo.txt", "lines": 2}) == (
        "The first 2 lines of notes/todo.txt say: buy milk. call mom."
    )
    assert await spoken(ws, "read_file_head", {"path": "notes/todo.txt", "lines": 1}) == (
        "The first line of notes/todo.txt says: buy milk."
    )
    assert await spoken(ws, "read_file_head", {"path": "notes/todo.txt"}) == (
        "notes/todo.txt has 3 lines. It says: buy milk. call mom. water plants."
    )


async def test_read_file_head_script_strips_markdown_from_the_file(ws: Path) -> None:
    script = await spoken(ws, "read_file_head", {"path": "notes/ideas.md"})
    assert script == "notes/ideas.md has 2 lines. It says: Ideas. a boat see the shop."


async def test_read_file_head_script_for_empty_and_huge_files(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    (ws / "big.txt").write_text("".join(f"This is sentence number {i} of a long file.\n" for i in range(500)))
    assert await spoken(ws, "read_file_head", {"path": "empty.txt"}) == "empty.txt is empty."
    big = await spoken(ws, "read_file_head", {"path": "big.txt", "lines": 200})
    assert big.startswith("The first 200 lines of big.txt say: This is sentence number 0 of a long file.")
    assert big.endswith(".")  # cut at a sentence end, not mid-word


@pytest.mark.parametrize(
    "tool, args, expected",
    [
        ("read_file_head", {"path": "../secret.txt"}, "I couldn't read that file: it is outside the workspace folder."),
        ("read_file_head", {"path": "notes"}, "I couldn't read that file: it is a folder, not a file."),
        ("list_files", {"path": "nope"}, "I couldn't list that folder: there is no file or folder called nope in the workspace."),
        ("read_file_head", {"path": "notes/todo.txt", "lines": 999},
         "I couldn't read that file: the argument 'lines' of read file head must be between 1 and 200."),
        ("get_time", {"zone": "UTC"}, "I couldn't get the time: the get time tool takes no arguments, but got 'zone'."),
    ],
)
async def test_failures_are_short_spoken_errors(ws: Path, tool: str, args: dict, expected: str) -> None:
    assert await spoken(ws, tool, args) == expected


async def test_echo_script_is_the_text_made_speakable(ws: Path) -> None:
    script = await spoken(ws, "echo", {"text": "## Hello **world**, see https://example.com/x?y=1 now"})
    assert script == "Hello world, see now."


def test_ask_brain_scripts_speak_the_answer_or_the_apology() -> None:
    answer = ToolResult("ask_brain", "c", True, {"answer": "Light scatters. **Blue** wins.", "attempts": 1})
    failed = ToolResult("ask_brain", "c", False, {"reason": "HTTP 503"}, "Sorry, I couldn't reach the brain just now.")
    formatters = default_formatters()
    assert formatters.format(answer).script == "Light scatters. Blue wins."
    assert formatters.format(failed).script == "Sorry, I couldn't reach the brain just now."


def test_speakable_keeps_the_full_result_for_logs() -> None:
    result = ToolResult("echo", "call_7", True, {"text": "hi", "truncated": False})
    speakable = default_formatters().format(result)
    assert isinstance(speakable, Speakable)
    assert speakable.full == dataclasses.asdict(result)


def test_every_script_is_bounded_by_max_chars() -> None:
    formatters = default_formatters(max_chars=80)
    result = ToolResult("read_file_head", "c", True, {"path": "a.txt", "lines": ["word " * 50] * 20, "more": True})
    script = formatters.format(result).script
    assert_speakable(script, max_chars=80)


# --- fallbacks -----------------------------------------------------------------------------


def test_unknown_tool_gets_the_generic_formatter() -> None:
    formatters = default_formatters()
    done = ToolResult("start_task", "c", True, {"task_id": 3, "status": "running", "log": "https://x.example/log"})
    failed = ToolResult("frobnicate", "c", False, {}, "There is no tool called frobnicate.")
    bare = ToolResult("cancel_task", "c", True, {"cancelled": True})
    assert formatters.format(done).script == "The start task tool finished: task id 3, status running and log."
    assert formatters.format(failed).script == "The frobnicate tool didn't work: there is no tool called frobnicate."
    assert formatters.format(bare).script == "The cancel task tool finished."


def test_a_formatter_that_raises_or_says_nothing_falls_back_to_the_generic_one() -> None:
    formatters = ToolRegistry()

    def broken(result: ToolResult) -> str:
        raise KeyError("answer")

    formatters.register("ask_brain", "", {"type": "object"}, _unused_handler, broken)
    formatters.register("echo", "", {"type": "object"}, _unused_handler, lambda result: "```\n```")
    crashed = formatters.format(ToolResult("ask_brain", "c", True, {"attempts": 1}))
    silent = formatters.format(ToolResult("echo", "c", True, {}))
    assert crashed.script == "The ask brain tool finished: attempts 1."
    assert silent.script == "The echo tool finished."


def test_a_formatter_reading_a_malformed_result_falls_back() -> None:
    # default get_time formatter on data without "iso": KeyError inside -> generic script
    script = default_formatters().format(ToolResult("get_time", "c", True, {"weekday": "Monday"})).script
    assert script == "The get time tool finished: weekday Monday."
