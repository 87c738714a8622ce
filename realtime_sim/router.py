"""A plain keyword router: which declared tool the simulated model calls for a user's words.

Only used when no tool call is scripted. Patterns are tried in order; a pattern whose tool the
session did not declare is skipped, so the router never calls an undeclared tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from realtime_sim.tool_choice import device_call
from realtime_sim.timer_phrases import set_reminder_arguments, set_timer_arguments, timer_name_arguments

# The wake phrase leading a transcript (the shipped "hey jarvis", the old "computer"): a model reads past it,
# so no route or query carries it.
_WAKE_PREFIX = re.compile(r"^\s*(?:hey\s+)?(?:computer|jarvis)\b[\s,.:;!?-]*", re.IGNORECASE)


@dataclass(frozen=True)
class RoutedCall:
    name: str
    arguments: dict[str, Any]


def _clean(fragment: str) -> str:
    return fragment.strip().strip(".,!?;:\"'").strip()


def _task_name(fragment: str) -> str:
    return _clean(re.sub(r"\s+task$", "", _clean(fragment), flags=re.IGNORECASE))


_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "twenty": 20}


def _read_file(match: re.Match[str]) -> dict[str, Any]:
    count = (match.group("lines") or "").lower()
    if not count and (match.group("unit") or "").lower() == "line":
        count = "one"  # "the first line of"
    lines = int(count) if count.isdigit() else _NUMBER_WORDS.get(count, 10)
    return {"path": _clean(match.group("path")), "lines": lines}


# A command that asks for nothing: a stop word (or "never mind") and nothing more ("stop the timer" is
# a command). Matched after the wake phrase is stripped ("hey jarvis, stop": a barge-in the hold let through).
_ASKS_NOTHING = re.compile(
    r"^(?:ok(?:ay)?[\s,]+|please[\s,]+)?"
    r"(?:stop(?: talking)?|cancel|never ?mind|forget it|be quiet|quiet|shut up|(?:that's )?enough)"
    r"(?:[\s,]+(?:please|now|thanks|thank you))?[\s.!]*$",
    re.I,
)

# (pattern, tool, arguments from the match); first match whose tool is declared wins.
_ROUTES: tuple[tuple[re.Pattern[str], str, Callable[[re.Match[str]], dict[str, Any]]], ...] = (
    (_ASKS_NOTHING, "dismiss", lambda m: {}),
    # Timers first: "how much time is left on my timer" is not get_time, "cancel the timer" not cancel_task.
    (re.compile(r"\b(?:set|start) (?:a|an|the|my)?\b.*\btimer\b.*", re.I), "set_timer", lambda m: set_timer_arguments(m[0])),
    (re.compile(r"\bremind me\b.*", re.I), "set_reminder", lambda m: set_reminder_arguments(m[0])),
    (re.compile(r"\b(?:how (?:long|much time)|time left|how much longer)\b.*\b(?:timers?|reminders?|left)\b.*", re.I),
     "time_left", lambda m: timer_name_arguments(m[0])),  # fmt: skip
    (re.compile(r"\bcancel\b.*\b(?:timer|reminder)s?\b.*", re.I), "cancel_timer", lambda m: timer_name_arguments(m[0])),
    (re.compile(r"\bask (?:the )?brain\b[\s,:]*(?P<q>.*)", re.I), "ask_brain", lambda m: {"query": _clean(m["q"])}),
    (re.compile(r"\bstart (?:the |a |an )?(?P<n>.+?) task\b", re.I), "start_task", lambda m: {"name": _clean(m["n"])}),
    (re.compile(r"\blist (?:my |the |all )?tasks\b", re.I), "list_tasks", lambda m: {}),
    (re.compile(r"\bcancel (?:the )?(?P<t>.+)", re.I), "cancel_task", lambda m: {"task": _task_name(m["t"])}),
    (re.compile(r"\bresult of (?:the )?(?P<t>.+)", re.I), "get_task_result", lambda m: {"task": _task_name(m["t"])}),
    (re.compile(r"\blist (?:the |my |all )?files\b", re.I), "list_files", lambda m: {"path": "."}),
    (
        re.compile(
            r"\bread (?:the )?(?:first (?:(?P<lines>\d+|[a-z]+) )?(?P<unit>lines?) of )?(?:the )?(?:file )?(?P<path>\S+)",
            re.I,
        ),
        "read_file_head",
        _read_file,
    ),
    (re.compile(r"\b(?:echo|repeat)\b[\s,:]*(?P<x>.*)", re.I), "echo", lambda m: {"text": _clean(m["x"])}),
    (re.compile(r"\btime\b", re.I), "get_time", lambda m: {}),
)

_KNOWN = {tool for _, tool, _ in _ROUTES} | {"ask_brain"}


def declared_tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["name"] for t in tools if t.get("type", "function") == "function" and "name" in t]


def route(text: str, tools: list[dict[str, Any]], tool_choice: Any) -> RoutedCall | None:
    """The call a model would make for `text`, or None for a plain answer.

    `tool_choice` "none" (or no tools) never calls; "required" falls back to ask_brain with the
    whole text when declared; {"type": "function", "name": N} always calls N.
    """
    names = declared_tool_names(tools)
    if not names or tool_choice == "none":
        return None
    spoken = _WAKE_PREFIX.sub("", text).strip()
    routed: RoutedCall | None = None
    for pattern, tool, arguments in _ROUTES:
        if tool not in names:
            continue
        match = pattern.search(spoken)
        if match:
            routed = RoutedCall(tool, arguments(match))
            break
    if routed is None:  # no keyword route: an MCP tool (or use_device) whose words the command shares
        device = device_call(spoken, tools, _KNOWN)
        routed = RoutedCall(*device) if device is not None else None
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        forced = tool_choice.get("name")
        if routed is not None and routed.name == forced:
            return routed
        if forced == "ask_brain":
            return RoutedCall(forced, {"query": spoken})
        return RoutedCall(str(forced), {})
    if routed is None and tool_choice == "required":
        if "ask_brain" in names:
            return RoutedCall("ask_brain", {"query": spoken})
        return None
    return routed
