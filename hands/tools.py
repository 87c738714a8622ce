"""An MCP server's tools as the registry's ToolSpecs, and what a call returned as a result's data.

What a tool may do is read from its annotations (hints the server gives about itself, from a
server the user configured):

| annotations | effect | runs |
|---|---|---|
| `readOnlyHint: true` | `Effect.READS` | as soon as the command is routed (as `get_time`) |
| not read-only, `destructiveHint: false` | `Effect.ACTS` | once the command is confirmed (its transcript heard) |
| not read-only, `destructiveHint` true or unset, or no annotations at all | `Effect.CONFIRMS` | only after a spoken yes |

(MCP's own default for `destructiveHint` is true: a tool that does not say it is harmless is
asked about.) The user may say otherwise per tool in mcp.json (`"effects": {"HassTurnOff": "acts"}`):
their word wins over the server's hints.

A server's descriptions and results are untrusted text: a description is framed as the server's
and cut short; a result is data the narrator reads out as the server's words (never instructions:
nothing a tool returns is given to a model that could call another tool).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from hands.config import ServerConfig
from tools.formatters import format_mcp
from tools.registry import Effect, ToolSpec
from tools.result import ToolError

if TYPE_CHECKING:  # the MCP SDK loads only with a server configured (see hands.link_types)
    from mcp_types import CallToolResult, Tool

MAX_DESCRIPTION_CHARS = 400  # of a server's tool description, given to the model
MAX_TEXT_CHARS = 16_000  # of a result's text kept (history, the page); the narrator says far less
MAX_STRUCTURED_CHARS = 16_000  # of a result's structured content, as JSON
MAX_ERROR_CHARS = 200  # of a server's own error text, said
_INVALID_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME_CHARS = 64  # a function name the Realtime and Responses APIs take: ^[A-Za-z0-9_-]{1,64}$

# (the server's tool name, arguments) -> its result, or None: still running, its answer comes later as a notice
Caller = Callable[[str, dict[str, Any]], Awaitable["CallToolResult | None"]]


def effect_of(tool: Tool, said: str | None = None) -> Effect:
    """`said`: the user's word for this tool in mcp.json ("effects"), which wins over its hints."""
    if said is not None:
        return Effect(said)
    hints = tool.annotations
    if hints is None:
        return Effect.CONFIRMS
    if hints.read_only_hint is True:
        return Effect.READS
    if hints.destructive_hint is False:
        return Effect.ACTS
    return Effect.CONFIRMS


def function_name(server: str, tool: str, taken: Callable[[str], bool]) -> str | None:
    """The name the model calls it by: the tool's own (made a valid function name) unless another
    tool has it, then `<server>_<tool>`; None if that is taken too."""
    own = _INVALID_NAME.sub("_", tool)[:MAX_NAME_CHARS] or "tool"
    if not taken(own):
        return own
    prefixed = _INVALID_NAME.sub("_", f"{server}_{tool}")[:MAX_NAME_CHARS]
    return None if taken(prefixed) else prefixed


def spec_for(server: ServerConfig, tool: Tool, name: str, call: Caller) -> ToolSpec:
    """The registry's spec for one listed tool; its handler calls the server (via `call`)."""
    title = (tool.annotations.title if tool.annotations and tool.annotations.title else None) or tool.title or ""
    description = " ".join((tool.description or title or tool.name).split())[:MAX_DESCRIPTION_CHARS]

    async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        result = await call(tool.name, arguments)
        if result is None:  # slow: it goes on in the background (hands.manager)
            return {"server": server.name, "text": "", "pending": True}
        return result_data(server.name, result)

    return ToolSpec(
        name=name,
        description=f"({server.name} server) {description}",
        parameters=_object_schema(tool.input_schema),
        handler=handler,
        formatter=format_mcp,
        effect=effect_of(tool, server.effects.get(tool.name)),
        source=server.source,
        title=" ".join(title.split())[:80],
    )


def _object_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A server may publish `{}` or leave `type` out for a tool without arguments."""
    schema = dict(schema or {})
    schema.setdefault("type", "object")
    return schema


def result_data(server: str, result: CallToolResult) -> dict[str, Any]:
    """What a call returned, kept for history and the page: its text (capped), its structured
    content (capped), and what could not be kept (images, audio: named, never said as data).
    A result the server marks as an error is a ToolError with its first words."""
    texts: list[str] = []
    skipped: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)  # type: ignore[union-attr]
        elif kind == "resource" and hasattr(getattr(block, "resource", None), "text"):
            texts.append(block.resource.text)  # type: ignore[union-attr]
        else:
            skipped.append(kind or "unknown")
    text = "\n".join(t for t in texts if t)
    if result.is_error:
        said = " ".join(text.split())[:MAX_ERROR_CHARS] or "it gave no reason"
        raise ToolError(f"The {server} server said the call failed: {said}", data={"server": server})
    data: dict[str, Any] = {"server": server, "text": text[:MAX_TEXT_CHARS]}
    if len(text) > MAX_TEXT_CHARS:
        data["text_chars"] = len(text)  # what it sent; only the first MAX_TEXT_CHARS are kept
    structured = result.structured_content
    if structured is not None:
        encoded = json.dumps(structured, ensure_ascii=False, default=str)
        if len(encoded) <= MAX_STRUCTURED_CHARS:
            data["structured"] = structured
        else:
            data["structured_chars"] = len(encoded)  # too large to keep
    if skipped:
        data["skipped"] = skipped
    return data
