"""Text fit to be read aloud: a voice cannot read markdown, JSON or URLs sensibly, so
`speakable_text` is the last filter on every script the narrator reads."""

from __future__ import annotations

import re

DEFAULT_MAX_CHARS = 600


def join_spoken(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


# --- the speakable filter ---------------------------------------------------------------------

# Code is noise when spoken: whole fenced blocks go, then any unmatched fence line.
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but the newline, which ends a line of markdown
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
    text = _CONTROL.sub(" ", text)  # an escape sequence or a bell is nothing to read
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
