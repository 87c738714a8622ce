"""Text from outside (the model, the transcriber, a task's output, a file name) made safe where
it enters and where it is shown.

- `clean`: where text enters (tool arguments, transcripts). A lone surrogate (a JSON `\\ud800`
  escape) can be stored nowhere: SQLite, the log's encoder and the HTTP client all refuse it,
  so it becomes U+FFFD, the replacement character.
- `printable`: where text is printed or logged. Control characters (ESC, BEL, an OSC title
  sequence, clear-screen, a carriage return) would act on the terminal, and a newline would
  let one log line forge another: each is shown as a visible escape (`\\x1b`, `\\n`) instead.
"""

from __future__ import annotations

import re
from typing import Any, Callable

# C0 controls, DEL, C1 controls (a lone 0x9b is CSI on some terminals), the Unicode line and
# paragraph separators (line breaks to some viewers) and the bidi overrides and isolates (they
# reorder what a reader sees).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def clean(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so it can be encoded as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """`value` (a JSON-like value: dicts, lists, tuples, scalars) with `change` applied to every
    string in it, dict keys included; tuples come back as lists, as JSON would have them."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {map_strings(k, change): map_strings(v, change) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [map_strings(v, change) for v in value]
    return value


def printable(text: str, *, lines: bool = False) -> str:
    """`text` fit for a terminal or a log line: control characters shown as escapes, lone
    surrogates replaced. `lines=True` keeps newlines and tabs (a task's output, a traceback)."""
    pattern = _CONTROL_BUT_LINES if lines else _CONTROL
    return pattern.sub(_escape, clean(text))


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
