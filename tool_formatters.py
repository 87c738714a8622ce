"""Tool results -> short spoken scripts for the narrator.

Each tool gets a formatter that turns its `ToolResult` into plain sentences; anything without
one (or whose formatter breaks) gets the generic formatter. `speakable_text` is the last
filter on every script: a voice cannot read markdown, JSON or URLs aloud sensibly.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from listener_tools import ToolResult

log = logging.getLogger(__name__)

Formatter = Callable[[ToolResult], str]

DEFAULT_MAX_CHARS = 600
MAX_SPOKEN_NAMES = 8  # a folder listing read aloud names this many entries, then counts the rest
MAX_SPOKEN_FIELDS = 4  # the generic formatter mentions this many simple fields


@dataclass(frozen=True)
class Speakable:
    """A script to read aloud and the full structured result it came from (for logs)."""

    script: str
    full: dict


class FormatterRegistry:
    """Per-tool formatters with a generic fallback; `format` always returns something speakable."""

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self._formatters: dict[str, Formatter] = {}
        self._max_chars = max_chars

    def register(self, tool: str, formatter: Formatter) -> None:
        self._formatters[tool] = formatter

    def format(self, result: ToolResult) -> Speakable:
        formatter = self._formatters.get(result.tool, format_generic)
        try:
            script = speakable_text(formatter(result), self._max_chars)
        except Exception:  # a broken formatter must not cost the user their answer
            log.exception("formatter for %s failed; using the generic one", result.tool)
            script = ""
        if not script:
            script = speakable_text(format_generic(result), self._max_chars)
        return Speakable(script=script, full=dataclasses.asdict(result))


def default_formatters(max_chars: int = DEFAULT_MAX_CHARS) -> FormatterRegistry:
    """Formatters for the listener's tools (see listener_tools.build_listener_tools)."""
    registry = FormatterRegistry(max_chars)
    registry.register("get_time", format_get_time)
    registry.register("list_files", format_list_files)
    registry.register("read_file_head", format_read_file_head)
    registry.register("echo", format_echo)
    registry.register("ask_brain", format_ask_brain)
    return registry


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
    if rest == 0:
        return f"{folder} has {items}: {join_spoken(spoken)}."
    return f"{folder} has {items}. Among them: {', '.join(spoken)} and {rest} more."


def _spoken_entry(entry: dict) -> str:
    if entry["kind"] == "dir":
        return f"a folder called {entry['name']}"
    if entry["kind"] == "link":
        return f"a link called {entry['name']}"
    return entry["name"]


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
    return result.data["answer"]


def join_spoken(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _as_sentence(text: str) -> str:
    return text if text[-1] in ".!?:;," else text + "."


# --- the speakable filter ---------------------------------------------------------------------

# Code is noise when spoken: whole fenced blocks go, then any unmatched fence line.
_CODE_BLOCK = re.compile(r"^\s*(```|~~~).*?^\s*\1\s*$", re.MULTILINE | re.DOTALL)
_FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_LINK_DEFINITION = re.compile(r"^\s*\[[^\]]+\]:\s*\S+.*$", re.MULTILINE)
_URL = re.compile(r"<?\b(?:https?://|ftp://|www\.)[^\s<>()\]]*[^\s<>()\].,;:!?'\"]>?", re.IGNORECASE)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s*(.*?)\s*#*\s*$", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.*)$", re.MULTILINE)
_QUOTE = re.compile(r"^\s*>+\s?", re.MULTILINE)
_RULE = re.compile(r"^\s*(?:[-*_=]\s*){3,}$", re.MULTILINE)
_TABLE_DIVIDER = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|~~|\*)(?=\S)(.+?)(?<=\S)\1")
# Underscore emphasis only at word edges, so snake_case_names are not mistaken for it.
_UNDERSCORE_EMPHASIS = re.compile(r"(?<!\w)(__|_)(?=\S)(.+?)(?<=\S)\1(?!\w)")
_JSON_KEY = re.compile(r'"([^"\n]{1,40})"\s*:')
_MULTIPLY = re.compile(r"(?<=\d)\s+\*\s+(?=\d)")
_INLINE_CODE = re.compile(r"`+([^`]*)`+")
_NOISE = re.compile(r"[*#`~|{}\[\]<>\\^]")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]*\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_REPEATED_PUNCT = re.compile(r"([,;:])(\s*[,;:.])+")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_LINE_END_PUNCT = (".", "!", "?", ":", ";", ",")


def speakable_text(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Plain sentences fit to be read aloud: no markdown, URLs or JSON-ish noise, cut at a sentence end."""
    text = _CODE_BLOCK.sub("", text)
    text = _FENCE.sub("", text)
    text = _LINK_DEFINITION.sub("", text)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _HTML_TAG.sub("", text)
    text = _TABLE_DIVIDER.sub("", text)
    text = _RULE.sub("", text)
    text = _QUOTE.sub("", text)
    # Headings and list items become sentences of their own, so they are not run together.
    text = _HEADER.sub(lambda m: _end_line(m.group(1)), text)
    text = _BULLET.sub(lambda m: _end_line(m.group(1)), text)
    text = "\n".join(_table_row(line) for line in text.splitlines())
    text = _INLINE_CODE.sub(r"\1", text)
    text = _MULTIPLY.sub(" times ", text)  # before '*' is dropped as emphasis noise
    for _ in range(2):  # nested emphasis: ***x*** or **_x_**
        text = _EMPHASIS.sub(r"\2", text)
        text = _UNDERSCORE_EMPHASIS.sub(r"\2", text)
    text = _JSON_KEY.sub(r"\1:", text)
    text = _NOISE.sub(" ", text)
    text = re.sub(r"(?<=\w)_(?=\w)", " ", text)  # snake_case names read as words
    text = text.replace("_", " ")
    text = _EMPTY_BRACKETS.sub("", text)
    text = " ".join(text.split())
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = _REPEATED_PUNCT.sub(lambda m: m.group(0)[-1], text)
    return _cut(text.strip(" ,;:"), max_chars)


def _end_line(line: str) -> str:
    line = line.strip()
    if not line or line.endswith(_LINE_END_PUNCT):
        return line
    return line + "."


def _table_row(line: str) -> str:
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1):
        return line
    cells = [c.strip() for c in stripped.strip("|").split("|") if c.strip()]
    return _end_line(", ".join(cells))


def _cut(text: str, max_chars: int) -> str:
    """At most max_chars, ending at the last sentence end that fits, else at a word boundary."""
    if len(text) <= max_chars:
        return text
    window = text[:max_chars]
    ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if ends and ends[-1] >= max_chars // 3:
        return window[: ends[-1]]
    words = window[: max_chars - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return words + "…"
