"""A plain stand-in for a model choosing among function tools it has never seen (the MCP tools
the brain is offered through the Responses API): the tool whose name and description share the
most words with the request, its arguments filled from the request by their schema (an enum
value said, on/off for a boolean, a number). Deterministic, and no smarter than that.

The simulated listener uses it too (`device_call`) for a command none of its keyword routes
fit, among the tools it has no route for: an MCP server's tools offered directly, or `use_device`
(the one tool that stands for them when they go through the brain), whose `request` is the
command's words."""

from __future__ import annotations

import re
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the my to of in on off is it please can you what whats for and or at this that be".split())
_ON = frozenset({"on", "start", "open", "enable", "unlock"})
_OFF = frozenset({"off", "stop", "close", "disable", "lock"})


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("_", " "))


def choose(request: str, tools: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    said = set(_words(request))
    best: tuple[float, str, dict[str, Any]] | None = None
    for tool in tools:
        if tool.get("type") != "function" or not tool.get("name"):
            continue
        known = set(_words(f"{tool['name']} {tool.get('description', '')}")) - _STOP
        properties = (tool.get("parameters") or {}).get("properties") or {}
        enums = {str(v).lower() for p in properties.values() if isinstance(p, dict) for v in p.get("enum") or []}
        score = len(said & known) + 2 * sum(1 for value in enums if set(_words(value)) <= said)
        if score and (best is None or score > best[0]):
            best = (score, tool["name"], properties)
    if best is None:
        return None
    return best[1], arguments(request, best[2])


def device_call(request: str, tools: list[dict[str, Any]], known: set[str]) -> tuple[str, dict[str, Any]] | None:
    """The call for `request` among the declared tools not in `known` (the tools the router has
    keyword routes for), or None when none shares a word with it."""
    unknown = [t for t in tools if t.get("name") not in known]
    chosen = choose(request, unknown)
    if chosen is None:
        return None
    name, filled = chosen
    properties = next(((t.get("parameters") or {}).get("properties") or {} for t in unknown if t.get("name") == name), {})
    if "request" in properties and "request" not in filled:
        filled["request"] = request  # use_device: the command in the user's words
    return name, filled


def arguments(request: str, properties: dict[str, Any]) -> dict[str, Any]:
    said = _words(request)
    filled: dict[str, Any] = {}
    for name, schema in properties.items():
        if not isinstance(schema, dict):
            continue
        values = schema.get("enum") or []
        matches = [v for v in values if set(_words(str(v))) <= set(said)]
        if matches:
            filled[name] = max(matches, key=lambda v: len(str(v)))
        elif schema.get("type") == "boolean":
            if set(said) & _OFF:
                filled[name] = False
            elif set(said) & _ON:
                filled[name] = True
        elif schema.get("type") in ("integer", "number"):
            numbers = [w for w in said if w.isdigit()]
            if numbers:
                filled[name] = int(numbers[0])
    return filled
