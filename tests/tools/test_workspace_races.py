"""File tools open what they checked: a symlink swapped in between is never followed out of the
workspace; odd paths and file names get a clear answer (issue 10, item 4 and the smaller ones)."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from config.logging_setup import configure_logging
from tests.tools.test_tools import make_tools, run

TRIES = 4000
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


@pytest.fixture
def fine_thread_switching() -> Iterator[None]:
    """Let the racing thread run between any two bytecodes, as a second process could."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.mark.parametrize("tool", ["read_file_head", "list_files"])
async def test_a_symlink_swapped_between_check_and_open_is_never_followed(
    tmp_path: Path, fine_thread_switching: None, tool: str
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    (ws / "d" / "f.txt").write_text("inside\n")
    (outside / "f.txt").write_text("OUTSIDE SECRET\n")
    (outside / "OUTSIDE-NAME").write_text("")
    os.symlink(outside, ws / "x")
    tools = make_tools(ws)
    stop = threading.Event()
    libc = ctypes.CDLL(None, use_errno=True)
    d, x = os.fsencode(ws / "d"), os.fsencode(ws / "x")

    def swap() -> None:
        # ws/d is a real folder, then (atomically) a link out of the workspace, and back, fast.
        while not stop.is_set():
            if libc.renameat2(_AT_FDCWD, d, _AT_FDCWD, x, _RENAME_EXCHANGE) != 0:
                raise OSError(ctypes.get_errno(), "renameat2 failed")

    racer = threading.Thread(target=swap)
    racer.start()
    leaks = answered = 0
    try:
        args = {"path": "d/f.txt", "lines": 1} if tool == "read_file_head" else {"path": "d"}
        for _ in range(TRIES):
            result = await run(tools, tool, args)
            answered += result.ok
            leaks += "OUTSIDE" in json.dumps(result.data)
    finally:
        stop.set()
        racer.join()
    assert leaks == 0
    assert answered > 0  # the race did not just make every call fail


async def test_odd_paths_get_a_clear_answer_without_a_traceback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tools = make_tools(tmp_path)
    huge = await run(tools, "list_files", {"path": "a/" * 500_000})
    assert not huge.ok and "too long" in huge.error
    broken = await run(tools, "read_file_head", {"path": "caf\ud800.txt", "lines": 1})
    assert not broken.ok and "broken character" in broken.error
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_file_name_that_is_not_utf8_is_spoken_with_a_replacement_character(tmp_path: Path) -> None:
    with open(os.fsencode(tmp_path) + b"/caf\xe9.txt", "wb") as handle:  # Latin-1, not UTF-8
        handle.write(b"hello\n")
    tools = make_tools(tmp_path)
    listed = await run(tools, "list_files", {"path": "."})
    assert [e["name"] for e in listed.data["entries"]] == ["caf\ufffd.txt"]
    json.dumps(listed.data, ensure_ascii=False).encode("utf-8")  # nothing unencodable reaches the narrator


def test_httpcore2_debug_lines_are_silenced() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        configure_logging("DEBUG")
        assert not logging.getLogger("httpcore2").isEnabledFor(logging.DEBUG)
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
