"""Tool results -> short spoken scripts for the narrator.

Each tool's formatter (registered on its `ToolSpec`, see tools.registry) turns its `ToolResult`
into plain sentences; anything without one (or whose formatter breaks) gets `format_generic`.
`speech.speakable.speakable_text` is the last filter on every script.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from speech.speakable import DEFAULT_MAX_CHARS, join_spoken, speakable_text
from tools.result import ToolResult

Formatter = Callable[[ToolResult], str]

MAX_SPOKEN_NAMES = 8  # a folder listing read aloud names this many entries, then counts the rest
MAX_SPOKEN_FIELDS = 4  # the generic formatter mentions this many simple fields


@dataclass(frozen=True)
class Speakable:
    """A script to read aloud and the full structured result it came from (for logs)."""

    script: str
    full: dict[str, Any]


# --- per-tool formatters --------------------------------------------------------------------


def spoken_tool_name(tool: str) -> str:
    return tool.replace("_", " ").strip() or "that"


def failure_clause(error: str | None) -> str:
    """'That path is outside ...' -> 'it is outside ...', so it reads after 'I couldn't X:'."""
    text = (error or "something went wrong").strip().rstrip(".")
    if text.startswith("That path "):
        return "it " + text[len("That path ") :]
    first = text.split(" ", 1)[0]
    # Lower-case an ordinary capitalised first word, but not 'README' or 'I'.
    if len(first) > 1 and first[0].isupper() and first[1:].islower():
        return text[0].lower() + text[1:]
    return text


def format_generic(result: ToolResult) -> str:
    name = spoken_tool_name(result.tool)
    if not result.ok:
        return f"The {name} tool didn't work: {failure_clause(result.error)}."
    fields = [
        f"{spoken_tool_name(str(key))} {value}"
        for key, value in result.data.items()
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip()
    ][:MAX_SPOKEN_FIELDS]
    if not fields:
        return f"The {name} tool finished."
    return f"The {name} tool finished: {join_spoken(fields)}."


def format_get_time(result: ToolResult) -> str:
    if not result.ok:
        return f"I couldn't get the time: {failure_clause(result.error)}."
    moment = datetime.fromisoformat(result.data["iso"])
    hour = moment.hour % 12 or 12
    half = "AM" if moment.hour < 12 else "PM"
    return f"It's {hour}:{moment.minute:02d} {half} on {moment:%A}, {moment:%B} {moment.day}."


def format_list_files(result: ToolResult) -> str:
    if not result.ok:
        return f"I couldn't list that folder: {failure_clause(result.error)}."
    data = result.data
    folder = "The workspace folder" if data["path"] == "." else f"The folder {data['path']}"
    total: int = data["total"]
    if total == 0:
        return f"{folder} is empty."
    # Files first, then folders: "todo.txt, ideas.md and a folder called drafts".
    entries = sorted(data["entries"], key=lambda e: e["kind"] != "file")
    spoken = [_spoken_entry(e) for e in entries[:MAX_SPOKEN_NAMES]]
    rest = total - len(spoken)
    items = "1 item" if total == 1 else f"{total} items"
    if not data.get("complete", True):  # only the first MAX_SCAN_ENTRIES were read
        return f"{folder} has more than {total} items. Among them: {', '.join(spoken)} and many more."
    if rest == 0:
        return f"{folder} has {items}: {join_spoken(spoken)}."
    return f"{folder} has {items}. Among them: {', '.join(spoken)} and {rest} more."


def _spoken_entry(entry: dict[str, Any]) -> str:
    name = _spoken_name(entry["name"])
    if entry["kind"] == "dir":
        return f"a folder called {name}"
    if entry["kind"] == "link":
        return f"a link called {name}"
    return name


def _spoken_name(name: str) -> str:
    """".env" -> "dot env": a leading dot is said (the speakable filter would fold it into the
    punctuation before it: "has 1 item: .env." read "has 1 item.env.")."""
    return f"dot {name[1:]}" if name.startswith(".") and len(name) > 1 else name


def format_read_file_head(result: ToolResult) -> str:
    if not result.ok:
        return f"I couldn't read that file: {failure_clause(result.error)}."
    data = result.data
    name = data["path"]
    if not data["lines"]:
        return f"{name} is empty."
    # Line by line, so a markdown file's headings and bullets are recognised as such.
    lines = [text for text in (speakable_text(line, DEFAULT_MAX_CHARS) for line in data["lines"]) if text]
    if not lines:
        return f"The first lines of {name} have nothing to read aloud."
    body = " ".join(_as_sentence(line) for line in lines)
    count = len(data["lines"])
    if not data["more"]:
        return f"{name} has {_lines_word(count)}. It says: {body}"
    if count == 1:
        return f"The first line of {name} says: {body}"
    return f"The first {count} lines of {name} say: {body}"


def _lines_word(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


def format_echo(result: ToolResult) -> str:
    if not result.ok:
        return f"I couldn't echo that: {failure_clause(result.error)}."
    return result.data["text"] or "There was nothing to echo."


def format_ask_brain(result: ToolResult) -> str:
    # On failure the brain's own apology is the error: it is already meant to be heard.
    if not result.ok:
        return result.error or "Sorry, I couldn't get an answer just now."
    return str(result.data["answer"])


def _as_sentence(text: str) -> str:
    return text if text[-1] in ".!?:;," else text + "."


# --- MCP tools (hands/): a server's words, said as its words ---------------------------------

MCP_SPOKEN_CHARS = 300  # of a server's text read aloud; the whole result is kept for history
_SKIPPED_WORDS = {"image": "an image", "audio": "a sound clip", "resource_link": "a link"}


def format_mcp(result: ToolResult) -> str:
    """A short speakable summary of an MCP call: the server's text framed as what it said (it is
    data, never an instruction to anyone), or its structured fields, and what could not be said
    (an image or audio it sent)."""
    if not result.ok:
        if result.data.get("needs_yes"):
            return f"{result.data.get('question', 'That needs a yes')} That needs your spoken yes first, so nothing was done."
        return f"The {spoken_tool_name(result.tool)} tool didn't work: {failure_clause(result.error)}."
    data = result.data
    server = str(data.get("server") or "tool")
    if data.get("pending"):
        return f"The {server} server is still working on that; I'll tell you when it's done."
    text = " ".join(str(data.get("text") or "").split())
    if len(text) > MCP_SPOKEN_CHARS:
        cut = text[:MCP_SPOKEN_CHARS]
        text = (cut[: cut.rfind(" ")] if " " in cut else cut) + ", and more"
    structured = data.get("structured")
    if not text and isinstance(structured, dict):
        fields = [f"{spoken_tool_name(str(k))} {v}" for k, v in structured.items()
                  if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()][:MAX_SPOKEN_FIELDS]
        text = join_spoken(fields)
    said = f"The {server} server says: {_as_sentence(text)}" if text else f"The {server} server did it."
    skipped = [_SKIPPED_WORDS.get(kind, "something") for kind in data.get("skipped", ())]
    if skipped:
        said += f" It also sent {join_spoken(sorted(set(skipped)))}, which I can't read out."
    return said
