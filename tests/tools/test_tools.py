"""The listener's tools: validation, confinement to the workspace, and each tool's behaviour."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tools.builtin import MAX_LIST_ENTRIES, MAX_READ_BYTES, build_listener_tools
from tools.registry import ToolRegistry
from tools.result import SHORT_OUTPUT_MAX_CHARS, ToolError, ToolResult
from tools.workspace import Workspace
from config.settings import Settings

CET = timezone(timedelta(hours=1), "CET")
FIXED_NOW = datetime(2025, 11, 22, 15, 5, 9, tzinfo=CET)  # a Saturday
OUTSIDE = "That path is outside the workspace folder."


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with files, a sub-folder, links in and out; and a folder outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    ws = tmp_path / "ws"
    (ws / "notes" / "drafts").mkdir(parents=True)
    (ws / "todo.txt").write_text("buy milk\ncall mom\nwater plants\n")
    (ws / "notes" / "ideas.md").write_text("# Ideas\n- a boat\n")
    (ws / "escape.txt").symlink_to(outside / "secret.txt")
    (ws / "escape_dir").symlink_to(outside)
    (ws / "inner_link.md").symlink_to(ws / "notes" / "ideas.md")
    return ws, outside


@pytest.fixture
def ws(layout: tuple[Path, Path]) -> Path:
    return layout[0]


@dataclass(frozen=True)
class FakeAnswer:
    text: str
    ok: bool
    attempts: int
    error: str | None
    citations: tuple = ()


class FakeBrain:
    """Stands in for brain.Brain; test_brain.py covers the real one against the simulator."""

    def __init__(self, answer: FakeAnswer) -> None:
        self.answer = answer
        self.queries: list[str] = []

    async def ask(self, query: str) -> FakeAnswer:
        self.queries.append(query)
        return self.answer


def make_tools(ws: Path, brain: FakeBrain | None = None, clock=lambda: FIXED_NOW) -> ToolRegistry:
    return build_listener_tools(Settings(workspace_root=ws), brain, clock=clock)


def snapshot(root: Path) -> list[tuple[str, int, int]]:
    """Every entry under root (links not followed) with size and mtime: changes show up here."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            info = os.lstat(os.path.join(dirpath, name))
            found.append((os.path.relpath(os.path.join(dirpath, name), root), info.st_size, info.st_mtime_ns))
    return sorted(found)


async def run(tools: ToolRegistry, name: str, args: object) -> ToolResult:
    raw = args if isinstance(args, str) else json.dumps(args)
    return await tools.run(name, raw, call_id="call_1")


# --- registry and session tools ------------------------------------------------------------


def test_session_tools_lists_every_tool_as_a_function(ws: Path) -> None:
    without_brain = make_tools(ws).session_tools()
    with_brain = make_tools(ws, FakeBrain(FakeAnswer("x", True, 1, None))).session_tools()
    assert [t["name"] for t in without_brain] == ["get_time", "list_files", "read_file_head", "echo", "dismiss"]
    assert [t["name"] for t in with_brain][-1] == "ask_brain"
    for tool in with_brain:
        assert tool["type"] == "function"
        assert tool["description"]
        assert tool["parameters"]["type"] == "object"
        assert tool["parameters"]["additionalProperties"] is False


def test_register_refuses_duplicates_and_unsupported_schemas() -> None:
    registry = ToolRegistry()

    async def handler(args: dict) -> dict:
        return {}

    registry.register("t", "d", {"type": "object", "properties": {}}, handler)
    with pytest.raises(ValueError):
        registry.register("t", "d", {"type": "object", "properties": {}}, handler)
    with pytest.raises(ValueError):  # not a JSON schema: no such type
        registry.register("u", "d", {"type": "object", "properties": {"x": {"type": "list"}}}, handler)
    with pytest.raises(ValueError):  # not a JSON schema: oneOf must be a non-empty array
        registry.register("v", "d", {"type": "object", "oneOf": []}, handler)
    with pytest.raises(ValueError):
        registry.register("w", "d", {"type": "array"}, handler)


async def test_handler_tool_error_and_unexpected_exception_become_results() -> None:
    registry = ToolRegistry()

    async def refuses(args: dict) -> dict:
        raise ToolError("The printer is out of paper.", data={"tray": 2})

    async def crashes(args: dict) -> dict:
        raise RuntimeError("/home/someone/secret details")

    schema = {"type": "object", "properties": {}}
    registry.register("refuses", "d", schema, refuses)
    registry.register("crashes", "d", schema, crashes)
    refused = await registry.run("refuses", "{}", "c1")
    crashed = await registry.run("crashes", "{}", "c2")
    assert (refused.ok, refused.error, refused.data, refused.call_id) == (
        False, "The printer is out of paper.", {"tray": 2}, "c1",
    )
    assert not crashed.ok
    assert crashed.error == "The crashes tool failed: RuntimeError."


async def test_unknown_tool_is_refused(ws: Path) -> None:
    result = await run(make_tools(ws), "delete_everything", {})
    assert not result.ok
    assert result.error == "There is no tool called delete_everything."
    assert result.tool == "delete_everything"


# --- get_time and echo ---------------------------------------------------------------------


async def test_get_time_reports_the_clock_with_zone(ws: Path) -> None:
    result = await run(make_tools(ws), "get_time", {})
    assert result.ok
    assert result.data == {
        "iso": "2025-11-22T15:05:09+01:00",
        "weekday": "Saturday",
        "timezone": "CET",
        "utc_offset": "+01:00",
    }


async def test_get_time_accepts_empty_arguments_and_makes_naive_clocks_aware(ws: Path) -> None:
    tools = make_tools(ws, clock=lambda: datetime(2025, 1, 6, 8, 0))
    result = await tools.run("get_time", "", "call_1")
    assert result.ok
    assert datetime.fromisoformat(result.data["iso"]).tzinfo is not None
    assert result.data["weekday"] == "Monday"


async def test_echo_returns_the_text_and_bounds_it(ws: Path) -> None:
    tools = make_tools(ws)
    short = await run(tools, "echo", {"text": "hello there"})
    long = await run(tools, "echo", {"text": "x" * 5000})
    assert short.data == {"text": "hello there", "truncated": False}
    assert long.ok and long.data["truncated"] is True
    assert 0 < len(long.data["text"]) < 5000


# --- ask_brain -------------------------------------------------------------------------------


async def test_ask_brain_passes_the_query_and_returns_the_answer(ws: Path) -> None:
    brain = FakeBrain(FakeAnswer("The sky scatters blue light.", True, 2, None))
    result = await run(make_tools(ws, brain), "ask_brain", {"query": "why is the sky blue"})
    assert brain.queries == ["why is the sky blue"]
    assert result.ok
    assert result.data == {"answer": "The sky scatters blue light.", "attempts": 2}


async def test_ask_brain_failure_carries_the_apology_and_reason(ws: Path) -> None:
    brain = FakeBrain(FakeAnswer("Sorry, try again.", False, 4, "HTTP 503"))
    result = await run(make_tools(ws, brain), "ask_brain", {"query": "anything"})
    assert not result.ok
    assert result.error == "Sorry, try again."
    assert result.data["reason"] == "HTTP 503"


async def test_ask_brain_refuses_an_empty_query_without_asking(ws: Path) -> None:
    brain = FakeBrain(FakeAnswer("unused", True, 1, None))
    result = await run(make_tools(ws, brain), "ask_brain", {"query": ""})
    assert not result.ok and "must not be empty" in result.error
    assert brain.queries == []


# --- list_files ------------------------------------------------------------------------------


async def test_list_files_lists_names_kinds_and_sizes(ws: Path) -> None:
    result = await run(make_tools(ws), "list_files", {"path": "."})
    assert result.ok
    assert result.data["path"] == "."
    assert result.data["total"] == 5 and result.data["more"] == 0
    by_name = {e["name"]: e for e in result.data["entries"]}
    assert by_name["todo.txt"] == {"name": "todo.txt", "kind": "file", "size": len("buy milk\ncall mom\nwater plants\n")}
    assert by_name["notes"]["kind"] == "dir"
    assert by_name["escape_dir"]["kind"] == "link"
    assert [e["name"] for e in result.data["entries"]] == sorted(by_name, key=str.lower)


async def test_list_files_defaults_to_the_workspace_and_lists_sub_folders(ws: Path) -> None:
    tools = make_tools(ws)
    root = await tools.run("list_files", "{}", "c")
    sub = await run(tools, "list_files", {"path": "notes"})
    assert root.ok and root.data["path"] == "."
    assert sub.data["path"] == "notes"
    assert [(e["name"], e["kind"]) for e in sub.data["entries"]] == [("drafts", "dir"), ("ideas.md", "file")]


async def test_list_files_bounds_the_entries_and_counts_the_rest(ws: Path) -> None:
    crowded = ws / "crowded"
    crowded.mkdir()
    for i in range(MAX_LIST_ENTRIES + 7):
        (crowded / f"file_{i:03d}.txt").write_text("x")
    result = await run(make_tools(ws), "list_files", {"path": "crowded"})
    assert len(result.data["entries"]) == MAX_LIST_ENTRIES
    assert result.data["total"] == MAX_LIST_ENTRIES + 7
    assert result.data["more"] == 7
    output = result.short_output()
    assert len(output) <= SHORT_OUTPUT_MAX_CHARS
    assert json.loads(output)["ok"] is True


async def test_list_files_on_a_file_is_refused(ws: Path) -> None:
    result = await run(make_tools(ws), "list_files", {"path": "todo.txt"})
    assert (result.ok, result.error) == (False, "That path is a file, not a folder.")


# --- read_file_head --------------------------------------------------------------------------


async def test_read_file_head_reads_the_first_lines(ws: Path) -> None:
    result = await run(make_tools(ws), "read_file_head", {"path": "todo.txt", "lines": 2})
    assert result.ok
    assert result.data["lines"] == ["buy milk", "call mom"]
    assert result.data["path"] == "todo.txt"
    assert result.data["more"] is True


async def test_read_file_head_defaults_to_twenty_lines(ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {i}\n" for i in range(30)))
    result = await run(make_tools(ws), "read_file_head", {"path": "long.txt"})
    assert result.data["lines"] == [f"line {i}" for i in range(20)]
    assert result.data["more"] is True


async def test_read_file_head_of_a_short_file_says_there_is_no_more(ws: Path) -> None:
    result = await run(make_tools(ws), "read_file_head", {"path": "todo.txt", "lines": 10})
    assert result.data["lines"] == ["buy milk", "call mom", "water plants"]
    assert result.data["more"] is False


@pytest.mark.parametrize("spelling", ["notes/ideas.md", "./notes/../notes/ideas.md", "inner_link.md", "ABSOLUTE"])
async def test_read_file_head_accepts_paths_that_stay_inside(ws: Path, spelling: str) -> None:
    path = str(ws / "notes" / "ideas.md") if spelling == "ABSOLUTE" else spelling
    result = await run(make_tools(ws), "read_file_head", {"path": path, "lines": 1})
    assert result.ok, result.error
    assert result.data["lines"] == ["# Ideas"]
    assert result.data["path"] == "notes/ideas.md"


async def test_read_file_head_reads_utf8_text(ws: Path) -> None:
    (ws / "menu.txt").write_text("crème brûlée\nnaïve café ☕\n", encoding="utf-8")
    result = await run(make_tools(ws), "read_file_head", {"path": "menu.txt"})
    assert result.data["lines"] == ["crème brûlée", "naïve café ☕"]


async def test_read_file_head_of_an_empty_file(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    result = await run(make_tools(ws), "read_file_head", {"path": "empty.txt"})
    assert result.ok and result.data["lines"] == [] and result.data["more"] is False


@pytest.mark.parametrize(
    "content",
    [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"text then a NUL \x00 byte\n", b"\xff\xfe\xfa latin junk \xe9\n"],
    ids=["png", "nul", "not-utf8"],
)
async def test_read_file_head_refuses_binary_files(ws: Path, content: bytes) -> None:
    (ws / "blob.bin").write_bytes(content)
    result = await run(make_tools(ws), "read_file_head", {"path": "blob.bin"})
    assert (result.ok, result.error) == (False, "That file is not a text file; I can only read text.")


async def test_read_file_head_of_a_huge_file_reads_only_the_head(ws: Path) -> None:
    line = "a fairly ordinary line of text\n"
    (ws / "huge.log").write_text(line * (4 * MAX_READ_BYTES // len(line)))
    result = await run(make_tools(ws), "read_file_head", {"path": "huge.log", "lines": 200})
    assert result.ok
    assert result.data["lines"] == [line.strip()] * 200
    assert result.data["more"] is True


async def test_read_file_head_refuses_a_first_line_longer_than_the_read_bound(ws: Path) -> None:
    (ws / "one_line.json").write_text("x" * (2 * MAX_READ_BYTES) + "\nshort\n")
    result = await run(make_tools(ws), "read_file_head", {"path": "one_line.json"})
    assert not result.ok
    assert result.error == "The first line of that file is longer than 64 KB, too long to read."


async def test_read_file_head_stops_at_the_read_bound(ws: Path) -> None:
    third = "z" * (MAX_READ_BYTES // 2)
    (ws / "wide_lines.txt").write_text(f"short\n{third}\n{third}\nnever read\n")
    result = await run(make_tools(ws), "read_file_head", {"path": "wide_lines.txt", "lines": 4})
    assert result.ok
    assert result.data["lines"] == ["short", third]  # the next line does not fit in MAX_READ_BYTES
    assert result.data["more"] is True and result.data["cut_by_size"] is True


async def test_read_file_head_handles_windows_line_ends_and_a_missing_final_newline(ws: Path) -> None:
    (ws / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree")
    result = await run(make_tools(ws), "read_file_head", {"path": "dos.txt"})
    assert result.data["lines"] == ["one", "two", "three"]
    assert (result.data["more"], result.data["cut_by_size"]) == (False, False)


async def test_read_file_head_keeps_a_long_line_that_fits_the_bound(ws: Path) -> None:
    (ws / "wide.txt").write_text("y" * (MAX_READ_BYTES // 2))
    result = await run(make_tools(ws), "read_file_head", {"path": "wide.txt"})
    assert result.ok and result.data["lines"] == ["y" * (MAX_READ_BYTES // 2)]
    assert len(result.short_output()) <= SHORT_OUTPUT_MAX_CHARS


async def test_read_file_head_refuses_folders_and_fifos(ws: Path) -> None:
    os.mkfifo(ws / "pipe")  # opening it would block forever: must be refused before that
    tools = make_tools(ws)
    folder = await run(tools, "read_file_head", {"path": "notes"})
    fifo = await run(tools, "read_file_head", {"path": "pipe"})
    assert folder.error == "That path is a folder, not a file."
    assert fifo.error == "That path is not a regular file."


async def test_missing_file_is_named_relative_to_the_workspace(ws: Path) -> None:
    tools = make_tools(ws)
    relative = await run(tools, "read_file_head", {"path": "notes/missing.txt"})
    absolute = await run(tools, "read_file_head", {"path": str(ws / "missing.txt")})
    assert relative.error == "There is no file or folder called notes/missing.txt in the workspace."
    assert absolute.error == "There is no file or folder called missing.txt in the workspace."


# --- confinement and bad input change nothing ----------------------------------------------


@pytest.mark.parametrize(
    "tool, path",
    [
        ("read_file_head", "../outside/secret.txt"),
        ("read_file_head", "notes/../../outside/secret.txt"),
        ("read_file_head", "OUTSIDE_ABSOLUTE"),
        ("read_file_head", "/etc/passwd"),
        ("read_file_head", "escape.txt"),
        ("read_file_head", "escape_dir/secret.txt"),
        ("read_file_head", "../does-not-exist"),
        ("list_files", ".."),
        ("list_files", "/"),
        ("list_files", "escape_dir"),
    ],
)
async def test_paths_leaving_the_workspace_are_refused(
    layout: tuple[Path, Path], tool: str, path: str
) -> None:
    ws, outside = layout
    if path == "OUTSIDE_ABSOLUTE":
        path = str(outside / "secret.txt")
    result = await run(make_tools(ws), tool, {"path": path})
    assert (result.ok, result.error) == (False, OUTSIDE)
    assert "top secret" not in result.short_output()
    assert str(outside) not in result.short_output()


def test_workspace_resolve_allows_the_root_and_rejects_nul(ws: Path) -> None:
    workspace = Workspace(ws)
    assert workspace.resolve(".") == ws.resolve()
    assert workspace.resolve("") == ws.resolve()
    with pytest.raises(ToolError, match="NUL"):
        workspace.resolve("todo.txt\x00.png")


async def test_workspace_reached_through_a_symlink_still_works(layout: tuple[Path, Path], tmp_path: Path) -> None:
    ws, _ = layout
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    tools = make_tools(alias)
    via_alias = await run(tools, "read_file_head", {"path": str(alias / "todo.txt"), "lines": 1})
    assert via_alias.ok and via_alias.data["lines"] == ["buy milk"]


@pytest.mark.parametrize(
    "tool, raw, expected",
    [
        ("read_file_head", '{"path": ', "The arguments for read_file_head were not valid JSON."),
        ("read_file_head", "[1, 2]", "The arguments for read_file_head must be a JSON object."),
        ("read_file_head", "{}", "The read_file_head tool needs the argument 'path'."),
        ("read_file_head", '{"path": "todo.txt", "mode": "w"}', "The read_file_head tool has no argument called 'mode'."),
        ("read_file_head", '{"path": 5}', "The argument 'path' of read_file_head must be text."),
        ("read_file_head", '{"path": "todo.txt", "lines": "3"}', "The argument 'lines' of read_file_head must be a whole number."),
        ("read_file_head", '{"path": "todo.txt", "lines": true}', "The argument 'lines' of read_file_head must be a whole number."),
        ("read_file_head", '{"path": "todo.txt", "lines": 2.5}', "The argument 'lines' of read_file_head must be a whole number."),
        ("read_file_head", '{"path": "todo.txt", "lines": 0}', "The argument 'lines' of read_file_head must be between 1 and 200."),
        ("read_file_head", '{"path": "todo.txt", "lines": 201}', "The argument 'lines' of read_file_head must be between 1 and 200."),
        ("list_files", '{"path": null}', "The argument 'path' of list_files must be text."),
        ("get_time", '{"zone": "UTC"}', "The get_time tool takes no arguments, but got 'zone'."),
        ("echo", "{}", "The echo tool needs the argument 'text'."),
        ("nope", "{}", "There is no tool called nope."),
    ],
)
async def test_bad_arguments_are_refused_with_a_clear_sentence_and_change_nothing(
    ws: Path, tool: str, raw: str, expected: str
) -> None:
    before = snapshot(ws)
    result = await make_tools(ws).run(tool, raw, "call_9")
    assert (result.ok, result.error, result.call_id) == (False, expected, "call_9")
    assert json.loads(result.short_output()) == {"ok": False, "error": expected}
    assert snapshot(ws) == before


async def test_refused_paths_change_nothing(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    before = (snapshot(ws), snapshot(outside))
    tools = make_tools(ws)
    for path in ("../outside/secret.txt", "escape.txt", "escape_dir", str(outside)):
        await run(tools, "read_file_head", {"path": path})
        await run(tools, "list_files", {"path": path})
    assert (snapshot(ws), snapshot(outside)) == before


# --- short_output --------------------------------------------------------------------------


def test_short_output_is_compact_bounded_json() -> None:
    huge = ToolResult(
        tool="t", call_id="c", ok=True,
        data={"lines": ["z" * 3000] * 100, "nested": {f"k{i}": "v" * 500 for i in range(50)}},
    )
    failed = ToolResult(tool="t", call_id="c", ok=False, data={}, error="No good.")
    output = huge.short_output()
    assert len(output) <= SHORT_OUTPUT_MAX_CHARS
    parsed = json.loads(output)
    assert parsed["ok"] is True and parsed["lines"]
    assert failed.short_output() == '{"ok":false,"error":"No good."}'
