"""What a tool call produced: `ToolResult` (with the short output the model sees) and `ToolError`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SHORT_OUTPUT_MAX_CHARS = 1000  # function_call_output goes into the listener's context: keep it small


class ToolError(Exception):
    """A user-facing tool failure; the message is a sentence that can be read aloud.

    `data` is optional structured detail kept in the result for logs.
    """

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = dict(data or {})


@dataclass(frozen=True)
class ToolResult:
    """What one tool call produced; `data` is the full result, `short_output` what the model sees."""

    tool: str
    call_id: str
    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
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
