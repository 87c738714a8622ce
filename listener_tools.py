"""The listener's tools: specs, argument validation, implementations and workspace confinement.

A `ToolRegistry` holds named tools, each with a JSON schema for its arguments and an async
handler. `run` is the only way a tool is called: it parses and validates the arguments the
model sent, calls the handler, and always returns a `ToolResult` (never raises for bad
input), so the listener can answer every function call, however malformed.

File tools only ever see the folder `Settings.workspace_root`; `Workspace.resolve` is the
single place that decides whether a path may be touched.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from settings import Settings

if TYPE_CHECKING:
    from brain import Brain

log = logging.getLogger(__name__)

Handler = Callable[[dict], Awaitable[dict]]

SHORT_OUTPUT_MAX_CHARS = 1000  # function_call_output goes into the listener's context: keep it small
MAX_LIST_ENTRIES = 50  # entries kept in a list_files result; the rest are counted
MAX_READ_BYTES = 64 * 1024  # read_file_head never reads more than this from a file
BINARY_SNIFF_BYTES = 8 * 1024  # NUL bytes or invalid UTF-8 in this much of the head = binary
MAX_HEAD_LINES = 200
DEFAULT_HEAD_LINES = 20
MAX_ECHO_CHARS = 500
MAX_QUERY_CHARS = 4000


class ToolError(Exception):
    """A user-facing tool failure; the message is a sentence that can be read aloud.

    `data` is optional structured detail kept in the result for logs.
    """

    def __init__(self, message: str, *, data: dict | None = None) -> None:
        super().__init__(message)
        self.data = dict(data or {})


@dataclass(frozen=True)
class ToolResult:
    """What one tool call produced; `data` is the full result, `short_output` what the model sees."""

    tool: str
    call_id: str
    ok: bool
    data: dict = field(default_factory=dict)
    error: str | None = None

    def short_output(self) -> str:
        """Compact JSON for `function_call_output`, at most `SHORT_OUTPUT_MAX_CHARS` characters."""
        payload: dict[str, Any] = {"ok": self.ok}
        if self.error is not None:
            payload["error"] = self.error
        payload.update({k: v for k, v in self.data.items() if k not in payload})
        # Shrink long strings and lists step by step until the JSON fits.
        for max_str, max_items in ((400, 20), (200, 10), (80, 5), (30, 3)):
            text = _compact_json(_shrink(payload, max_str, max_items))
            if len(text) <= SHORT_OUTPUT_MAX_CHARS:
                return text
        minimal = {"ok": self.ok, "note": "the full result was too large to include"}
        if self.error is not None:
            minimal["error"] = self.error[:300]
        return _compact_json(minimal)


def _compact_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _shrink(value: object, max_str: int, max_items: int) -> object:
    if isinstance(value, str):
        return value if len(value) <= max_str else value[:max_str] + "…"
    if isinstance(value, dict):
        items = list(value.items())
        shrunk = {str(k): _shrink(v, max_str, max_items) for k, v in items[:max_items]}
        if len(items) > max_items:
            shrunk["…"] = f"{len(items) - max_items} more fields"
        return shrunk
    if isinstance(value, (list, tuple)):
        shrunk_list = [_shrink(v, max_str, max_items) for v in value[:max_items]]
        if len(value) > max_items:
            shrunk_list.append(f"… and {len(value) - max_items} more")
        return shrunk_list
    return value


# --- argument validation (the JSON-schema subset our tools use) -------------------------

_SCHEMA_KEYS = {"type", "properties", "required", "additionalProperties", "description"}
_PROPERTY_KEYS = {"type", "description", "default", "minimum", "maximum", "minLength", "maxLength"}
_PROPERTY_TYPES = {"string", "integer", "boolean"}
_TYPE_WORDS = {"string": "text", "integer": "a whole number", "boolean": "true or false"}


def check_schema(parameters: dict) -> None:
    """Refuse schemas using keywords the validator does not implement, so none is silently ignored."""
    if parameters.get("type") != "object":
        raise ValueError("a tool's parameters must be a JSON schema of type 'object'")
    unknown = set(parameters) - _SCHEMA_KEYS
    if unknown:
        raise ValueError(f"unsupported schema keywords: {sorted(unknown)}")
    properties = parameters.get("properties", {})
    for name, prop in properties.items():
        if prop.get("type") not in _PROPERTY_TYPES or set(prop) - _PROPERTY_KEYS:
            raise ValueError(f"property {name!r} uses an unsupported type or keyword")
    missing = set(parameters.get("required", ())) - set(properties)
    if missing:
        raise ValueError(f"required properties {sorted(missing)} are not defined")


def validate_arguments(tool: str, parameters: dict, arguments: object) -> dict:
    """Return the arguments with defaults filled in, or raise ToolError saying what is wrong."""
    if not isinstance(arguments, dict):
        raise ToolError(f"The arguments for {tool} must be a JSON object.")
    properties: dict = parameters.get("properties", {})
    if parameters.get("additionalProperties") is False:
        extra = sorted(set(arguments) - set(properties))
        if extra and not properties:
            raise ToolError(f"The {tool} tool takes no arguments, but got {_quoted_list(extra)}.")
        if extra:
            raise ToolError(f"The {tool} tool has no argument called {_quoted_list(extra)}.")
    for name in parameters.get("required", ()):
        if name not in arguments:
            raise ToolError(f"The {tool} tool needs the argument '{name}'.")
    validated = dict(arguments)
    for name, prop in properties.items():
        if name not in validated:
            if "default" in prop:
                validated[name] = prop["default"]
            continue
        _check_value(tool, name, prop, validated[name])
    return validated


def _check_value(tool: str, name: str, prop: dict, value: object) -> None:
    kind = prop["type"]
    # bool is a subclass of int in Python; JSON true is not a number.
    matches = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }[kind]
    if not matches:
        raise ToolError(f"The argument '{name}' of {tool} must be {_TYPE_WORDS[kind]}.")
    if kind == "integer":
        low, high = prop.get("minimum"), prop.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ToolError(f"The argument '{name}' of {tool} must be between {low} and {high}.")
    if kind == "string":
        if len(value) < prop.get("minLength", 0):
            raise ToolError(f"The argument '{name}' of {tool} must not be empty.")
        if "maxLength" in prop and len(value) > prop["maxLength"]:
            raise ToolError(f"The argument '{name}' of {tool} is longer than {prop['maxLength']} characters.")


def _quoted_list(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


# --- the registry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict
    handler: Handler


class ToolRegistry:
    """Named tools with validated arguments; `run` turns every outcome into a ToolResult."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}

    def register(self, name: str, description: str, parameters: dict, handler: Handler) -> None:
        if name in self._tools:
            raise ValueError(f"a tool called {name!r} is already registered")
        check_schema(parameters)
        self._tools[name] = ToolSpec(name, description, parameters, handler)

    def names(self) -> list[str]:
        return list(self._tools)

    def session_tools(self) -> list[dict]:
        """The tools in the shape `session.update {session: {tools: [...]}}` expects."""
        return [
            {"type": "function", "name": s.name, "description": s.description, "parameters": s.parameters}
            for s in self._tools.values()
        ]

    async def run(self, name: str, arguments_json: str, call_id: str) -> ToolResult:
        spec = self._tools.get(name)
        if spec is None:
            return self._failed(name, call_id, f"There is no tool called {name}.")
        try:
            # Models send "" for a call without arguments.
            arguments = json.loads(arguments_json) if arguments_json.strip() else {}
        except (ValueError, RecursionError, AttributeError, TypeError):  # JSONDecodeError is a ValueError
            return self._failed(name, call_id, f"The arguments for {name} were not valid JSON.")
        try:
            validated = validate_arguments(name, spec.parameters, arguments)
            data = await spec.handler(validated)
        except ToolError as exc:
            return self._failed(name, call_id, str(exc), exc.data)
        except Exception as exc:  # a bug or an unexpected OS error: say so, keep the session going
            log.exception("tool %s (call %s) failed unexpectedly", name, call_id)
            return self._failed(name, call_id, f"The {name} tool failed: {type(exc).__name__}.")
        log.info("tool %s (call %s) succeeded", name, call_id)
        return ToolResult(tool=name, call_id=call_id, ok=True, data=data, error=None)

    @staticmethod
    def _failed(name: str, call_id: str, error: str, data: dict | None = None) -> ToolResult:
        log.info("tool %s (call %s) refused: %s", name, call_id, error)
        return ToolResult(tool=name, call_id=call_id, ok=False, data=dict(data or {}), error=error)


# --- workspace confinement -----------------------------------------------------------------


class Workspace:
    """The one folder file tools may touch. Paths are resolved (symlinks followed) and checked."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve(strict=True)
        # The root as configured, in case it is itself reached through a symlink:
        # absolute paths spelled through it are inside too.
        self._spelled_root = Path(os.path.abspath(root))

    def resolve(self, path: str) -> Path:
        """The real path of an existing file or folder inside the workspace, or ToolError."""
        if "\x00" in path:
            raise ToolError("That path contains a NUL character, which no file name can.")
        requested = Path(path.strip() or ".")
        candidate = self.root / requested  # an absolute `requested` replaces the root here
        # Check the spelled-out path first so `../x` is refused as outside even when it does not exist.
        spelled = Path(os.path.normpath(candidate))
        if not (_is_within(spelled, self.root) or _is_within(spelled, self._spelled_root)):
            raise ToolError("That path is outside the workspace folder.")
        try:
            real = candidate.resolve(strict=True)
        except FileNotFoundError:
            raise ToolError(f"There is no file or folder called {self.describe_request(path)} in the workspace.")
        except (OSError, RuntimeError):  # symlink loops (RuntimeError before 3.13), permissions
            raise ToolError("That path cannot be followed: a link loops or a folder cannot be read.")
        if not _is_within(real, self.root):
            raise ToolError("That path is outside the workspace folder.")  # a symlink pointing out
        return real

    def relative(self, real: Path) -> str:
        """How to name a resolved path to the user: relative to the root, '.' for the root itself."""
        return real.relative_to(self.root).as_posix() or "."

    def describe_request(self, path: str) -> str:
        """The user's own path, made relative when it was spelled absolute inside the workspace."""
        requested = Path(path.strip())
        if not requested.is_absolute():
            return requested.as_posix()
        spelled = Path(os.path.normpath(requested))
        base = self.root if _is_within(spelled, self.root) else self._spelled_root
        return spelled.relative_to(base).as_posix() or "."


def _is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


# --- the listener's tools ------------------------------------------------------------------


Clock = Callable[[], datetime]


def _local_now() -> datetime:
    return datetime.now().astimezone()


class FileTools:
    """list_files and read_file_head, confined to one Workspace.

    The reads are synchronous on purpose: they are bounded (a few KB of directory names, at
    most MAX_READ_BYTES of file) so they cost less than a hop to a worker thread.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    async def list_files(self, args: dict) -> dict:
        folder = self.workspace.resolve(args["path"])
        if not folder.is_dir():
            raise ToolError("That path is a file, not a folder.")
        try:
            entries = sorted(os.scandir(folder), key=lambda e: (e.name.lower(), e.name))
        except OSError as exc:
            raise ToolError(f"That folder cannot be read: {_os_reason(exc)}.")
        shown = [_describe_entry(e) for e in entries[:MAX_LIST_ENTRIES]]
        return {
            "path": self.workspace.relative(folder),
            "entries": shown,
            "total": len(entries),
            "more": max(0, len(entries) - len(shown)),
        }

    async def read_file_head(self, args: dict) -> dict:
        path = self.workspace.resolve(args["path"])
        wanted: int = args["lines"]
        name = self.workspace.relative(path)
        try:
            info = path.stat()
            if stat.S_ISDIR(info.st_mode):
                raise ToolError("That path is a folder, not a file.")
            if not stat.S_ISREG(info.st_mode):  # a FIFO or device could block or never end
                raise ToolError("That path is not a regular file.")
            with path.open("rb") as handle:
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


def _describe_entry(entry: os.DirEntry) -> dict:
    # Not following symlinks: a link's target may be outside the workspace.
    if entry.is_symlink():
        return {"name": entry.name, "kind": "link"}
    if entry.is_dir(follow_symlinks=False):
        return {"name": entry.name, "kind": "dir"}
    try:
        size = entry.stat(follow_symlinks=False).st_size
    except OSError:
        size = None
    return {"name": entry.name, "kind": "file", "size": size}


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


def build_listener_tools(settings: Settings, brain: "Brain | None", clock: Clock | None = None) -> ToolRegistry:
    """The listener's registry: get_time, list_files, read_file_head, echo, and ask_brain when a brain is given."""
    now = clock or _local_now
    files = FileTools(Workspace(settings.workspace_root))
    registry = ToolRegistry()

    async def get_time(args: dict) -> dict:
        moment = now()
        moment = moment.astimezone() if moment.tzinfo is None else moment
        offset = moment.strftime("%z")
        return {
            "iso": moment.isoformat(timespec="seconds"),
            "weekday": moment.strftime("%A"),
            "timezone": moment.tzname() or "",
            "utc_offset": f"{offset[:3]}:{offset[3:]}" if offset else "",
        }

    async def echo(args: dict) -> dict:
        text: str = args["text"]
        return {"text": text[:MAX_ECHO_CHARS], "truncated": len(text) > MAX_ECHO_CHARS}

    registry.register(
        "get_time",
        "The current local date and time, with weekday and time zone.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        get_time,
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
    )
    if brain is not None:  # without a brain the model is not offered a tool that cannot work

        async def ask_brain(args: dict) -> dict:
            answer = await brain.ask(args["query"])
            data = {"answer": answer.text, "attempts": answer.attempts}
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
        )
    return registry
