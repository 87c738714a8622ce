"""The listener's built-in tools (get_time, list_files, read_file_head, echo, dismiss, ask_brain) and
`build_listener_tools`, which registers them with their formatters.

File tools only ever see the folder `Settings.workspace_root` (see tools.workspace).
"""

from __future__ import annotations

import asyncio
import codecs
import itertools
import logging
import os
import stat
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from config.settings import SETTINGS_FILE, Settings
from decisions.dismissal import DISMISS_DESCRIPTION, DISMISS_TOOL
from safety.text import clean
from speech.speakable import DEFAULT_MAX_CHARS
from tools.formatters import format_ask_brain, format_echo, format_get_time, format_list_files, format_read_file_head
from tools.registry import Effect, ToolRegistry
from tools.result import ToolError
from tools.workspace import Workspace, speakable_name

if TYPE_CHECKING:
    from brain import Brain

log = logging.getLogger(__name__)

MAX_LIST_ENTRIES = 50  # entries kept in a list_files result; the rest are counted
MAX_SCAN_ENTRIES = 10_000  # list_files reads a folder this far and no further: a huge one costs no more
MAX_READ_BYTES = 64 * 1024  # read_file_head never reads more than this from a file
BINARY_SNIFF_BYTES = 8 * 1024  # NUL bytes or invalid UTF-8 in this much of the head = binary
MAX_HEAD_LINES = 200
DEFAULT_HEAD_LINES = 20
MAX_ECHO_CHARS = 500
MAX_QUERY_CHARS = 4000


Clock = Callable[[], datetime]


def _local_now() -> datetime:
    return datetime.now().astimezone()


class FileTools:
    """list_files and read_file_head, confined to one Workspace.

    A listing runs on a worker thread and reads at most MAX_SCAN_ENTRIES names (a folder of
    300,000 files took 1.3 s to list and sort whole, on the event loop). A head read is bounded
    (at most MAX_READ_BYTES) and stays on the loop: it costs less than the hop.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    async def list_files(self, args: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self._list, args["path"])

    def _list(self, path: str) -> dict[str, Any]:
        fd, folder = self.workspace.open(path, folder=True)
        try:
            # Listed through the descriptor that was checked, not by path again.
            with os.scandir(fd) as scan:
                entries = list(itertools.islice(scan, MAX_SCAN_ENTRIES + 1))
            complete = len(entries) <= MAX_SCAN_ENTRIES
            entries = sorted(entries[:MAX_SCAN_ENTRIES], key=lambda e: (e.name.lower(), e.name))
            shown = [_describe_entry(e) for e in entries[:MAX_LIST_ENTRIES]]  # stats need the descriptor open
        except OSError as exc:
            raise ToolError(f"That folder cannot be read: {_os_reason(exc)}.")
        finally:
            os.close(fd)
        return {
            "path": self.workspace.relative(folder),
            "entries": shown,
            "total": len(entries),  # of those read: all of them unless `complete` is false
            "complete": complete,
            "more": max(0, len(entries) - len(shown)),
        }

    async def read_file_head(self, args: dict[str, Any]) -> dict[str, Any]:
        fd, path = self.workspace.open(args["path"], folder=False)
        wanted: int = args["lines"]
        name = self.workspace.relative(path)
        try:
            # Everything through the descriptor that was checked, not by path again.
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                os.close(fd)
                if stat.S_ISDIR(info.st_mode):
                    raise ToolError("That path is a folder, not a file.")
                raise ToolError("That path is not a regular file.")  # a FIFO or device could block or never end
            with os.fdopen(fd, "rb") as handle:
                head = handle.read(MAX_READ_BYTES)
                complete = handle.read(1) == b""
        except OSError as exc:
            raise ToolError(f"That file cannot be read: {_os_reason(exc)}.")
        lines = _decode_text(head, complete).split("\n")
        tail = lines.pop()  # after the last newline: a whole line only if the file ends there
        if complete and tail:
            lines.append(tail)
        if not complete and not lines:
            raise ToolError(f"The first line of that file is longer than {MAX_READ_BYTES // 1024} KB, too long to read.")
        return {
            "path": name,
            "lines": [line.rstrip("\r") for line in lines[:wanted]],
            "requested": wanted,
            "more": len(lines) > wanted or not complete,
            # Fewer lines than asked although the file goes on: the read stopped at MAX_READ_BYTES.
            "cut_by_size": not complete and len(lines) < wanted,
            "size_bytes": info.st_size,
        }


def _os_reason(exc: OSError) -> str:
    """'permission denied' etc.: the OS's reason without the path (which may be a host path)."""
    return (exc.strerror or "the system refused").lower()


def _describe_entry(entry: os.DirEntry[str]) -> dict[str, Any]:
    # Not following symlinks: a link's target may be outside the workspace.
    name = speakable_name(entry.name)
    if entry.is_symlink():
        return {"name": name, "kind": "link"}
    if entry.is_dir(follow_symlinks=False):
        return {"name": name, "kind": "dir"}
    try:
        size = entry.stat(follow_symlinks=False).st_size
    except OSError:
        size = None
    return {"name": name, "kind": "file", "size": size}


def _decode_text(head: bytes, complete: bool) -> str:
    """Refuse binary files (judged on the first BINARY_SNIFF_BYTES), decode the rest leniently."""
    sniff = head[:BINARY_SNIFF_BYTES]
    if b"\x00" in sniff:
        raise ToolError(_NOT_TEXT)
    try:
        # final=False unless the sniff is the whole file: a multi-byte character may be split at its end.
        codecs.getincrementaldecoder("utf-8")().decode(sniff, final=complete and len(head) == len(sniff))
    except UnicodeDecodeError:
        raise ToolError(_NOT_TEXT)
    # A stray bad byte further down should not hide the text file's first lines.
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(head, final=complete)


_NOT_TEXT = "That file is not a text file; I can only read text."


def build_listener_tools(
    settings: Settings, brain: "Brain | None", clock: Clock | None = None, *, max_chars: int = DEFAULT_MAX_CHARS
) -> ToolRegistry:
    """The listener's registry: get_time, list_files, read_file_head, echo, dismiss, and ask_brain when a
    brain is given."""
    now = clock or _local_now
    private = [SETTINGS_FILE.absolute(), settings.state_dir, *([settings.log.file] if settings.log.file else [])]
    files = FileTools(Workspace(settings.workspace_root, private))
    registry = ToolRegistry(max_chars, secrets=[settings.realtime.api_key])

    async def get_time(args: dict[str, Any]) -> dict[str, Any]:
        moment = now()
        moment = moment.astimezone() if moment.tzinfo is None else moment
        offset = moment.strftime("%z")
        return {
            "iso": moment.isoformat(timespec="seconds"),
            "weekday": moment.strftime("%A"),
            "timezone": moment.tzname() or "",
            "utc_offset": f"{offset[:3]}:{offset[3:]}" if offset else "",
        }

    async def echo(args: dict[str, Any]) -> dict[str, Any]:
        text = clean(args["text"])  # a lone surrogate: U+FFFD, so it can be stored, logged and said
        return {"text": text[:MAX_ECHO_CHARS], "truncated": len(text) > MAX_ECHO_CHARS}

    registry.register(
        "get_time",
        "The current local date and time, with weekday and time zone.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        get_time,
        format_get_time,
        Effect.READS,
    )
    registry.register(
        "list_files",
        "List the files and folders in a folder of the user's workspace. "
        "Paths are relative to the workspace; '.' is the workspace itself.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Folder relative to the workspace.", "default": "."},
            },
            "additionalProperties": False,
        },
        files.list_files,
        format_list_files,
        Effect.READS,
    )
    registry.register(
        "read_file_head",
        "Read the first lines of a text file in the user's workspace.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File relative to the workspace.", "minLength": 1},
                "lines": {
                    "type": "integer",
                    "description": "How many lines to read from the top.",
                    "minimum": 1,
                    "maximum": MAX_HEAD_LINES,
                    "default": DEFAULT_HEAD_LINES,
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        files.read_file_head,
        format_read_file_head,
        Effect.READS,
    )
    registry.register(
        "echo",
        "Repeat the given text back, for testing the assistant.",
        {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to repeat."}},
            "required": ["text"],
            "additionalProperties": False,
        },
        echo,
        format_echo,
        Effect.READS,
    )

    async def dismiss(args: dict[str, Any]) -> dict[str, Any]:
        return {}  # (never run for a command: the coordinator's core ends a command whose only call it is)

    registry.register(
        DISMISS_TOOL,
        DISMISS_DESCRIPTION,
        {"type": "object", "properties": {}, "additionalProperties": False},
        dismiss,
        lambda result: "",  # nothing is said
        Effect.READS,
    )
    if brain is not None:  # without a brain the model is not offered a tool that cannot work

        async def ask_brain(args: dict[str, Any]) -> dict[str, Any]:
            answer = await brain.ask(clean(args["query"]))  # a lone surrogate cannot be sent: U+FFFD
            data = {"answer": answer.text, "attempts": answer.attempts}
            if answer.citations:  # kept for history and the page; the narrator says only the answer
                data["citations"] = [dict(c) for c in answer.citations]
            if not answer.ok:
                raise ToolError(answer.text, data={**data, "reason": answer.error})
            return data

        registry.register(
            "ask_brain",
            "Ask a stronger text model a question that needs knowledge or reasoning; "
            "the answer is short and meant to be read aloud.",
            {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "The user's question, complete and self-contained.",
                        "minLength": 1,
                        "maxLength": MAX_QUERY_CHARS,
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            ask_brain,
            format_ask_brain,
            Effect.READS,
        )
    return registry
