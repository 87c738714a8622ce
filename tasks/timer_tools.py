"""The listener's timer tools (set_timer, set_reminder, time_left, cancel_timer) and their
formatters. Timers and reminders are task records with a due time (see `TaskManager.add_timer`),
so they persist, show in `handoff tasks`, and are announced through the notice queue.

The model only copies the user's words into a standard form ("PT10M", "17:00"); lengths and
times are worked out here (`tasks.when`), never by the model.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from safety.text import clean
from tasks.errors import AmbiguousTask, UnknownTask
from tasks.identify import describe_candidates, resolve_task
from tasks.records import TaskKind, TaskRecord
from tasks.speech import and_list, number_words, or_list, sentence, sentence_start
from tasks.voice_tools import MAX_LISTED, spoken_errors
from tools.registry import Effect
from tasks.when import MAX_TIMER_S, WhenError, parse_due, parse_length, remaining_words, when_words
from tools.result import ToolError, ToolResult

if TYPE_CHECKING:
    from tasks.manager import TaskManager
    from tools.registry import ToolRegistry

MAX_LABEL_CHARS = 200
# Words that say which kind of thing is meant but not which one ("cancel my timer").
_ARTICLE = re.compile(r"^(the|my|a|an)\s+", re.IGNORECASE)
_ALL = re.compile(r"\b(?:all|every|everything)\b", re.I)
_GENERIC = re.compile(r"\b(my|your|the|a|an|timers?|reminders?)\b")
_NAME = {"type": "string", "description": "Which one, if the user said: a label or words of the reminder.",
         "maxLength": MAX_LABEL_CHARS}  # fmt: skip


def register_timer_tools(registry: "ToolRegistry", manager: "TaskManager") -> None:
    """Register the four timer tools, each with its formatter, on `registry`."""
    handlers = _TimerToolHandlers(manager)
    registry.register(
        "set_timer",
        "Start a countdown timer; it is announced when it is up.",
        {
            "type": "object",
            "properties": {
                "duration": {
                    "type": "string",
                    "description": "ISO 8601 duration of the user's own numbers: PT10M, PT1H30M, PT45S.",
                    "maxLength": 40,
                },
                "label": {"type": "string", "description": "Its name, if the user gave one.", "maxLength": MAX_LABEL_CHARS},
            },
            "required": ["duration"],
            "additionalProperties": False,
        },
        handlers.set_timer,
        format_set_timer,
    )
    registry.register(
        "set_reminder",
        "Remind the user of something at a time; it is announced then.",
        {
            "type": "object",
            "properties": {
                "at": {
                    "type": "string",
                    "description": "The user's time made standard, never computed: 17:00 or 5 pm, with a day "
                    "word if said (tomorrow 09:00, friday 5 pm), or PT20M for 'in twenty minutes'.",
                    "maxLength": 60,
                },
                "text": {"type": "string", "description": "What to remind them of: call the plumber.",
                         "maxLength": MAX_LABEL_CHARS},  # fmt: skip
            },
            "required": ["at", "text"],
            "additionalProperties": False,
        },
        handlers.set_reminder,
        format_set_reminder,
    )
    registry.register(
        "time_left",
        "How long is left on the user's timers; when their reminders are due.",
        {"type": "object", "properties": {"name": _NAME}, "additionalProperties": False},
        handlers.time_left,
        format_time_left,
        Effect.READS,
    )
    registry.register(
        "cancel_timer",
        "Cancel a timer or a reminder; name 'all timers' (or 'all reminders', 'all') cancels every one.",
        {"type": "object", "properties": {"name": _NAME}, "additionalProperties": False},
        handlers.cancel_timer,
        format_cancel_timer,
    )


def timer_name(length_words: str, adjective: str | None, label: str) -> str:
    """How speech names a timer: "your pasta timer", "your ten-minute timer",
    "your timer for an hour and thirty minutes"."""
    if label:
        return f"your {_ARTICLE.sub('', label)} timer"
    return f"your {adjective} timer" if adjective else f"your timer for {length_words}"


def reminder_name(text: str) -> str:
    """"your reminder to call the plumber", "your reminder about the dentist"."""
    return f"your reminder {text}" if re.match(r"(about|that|of)\b", text, re.I) else f"your reminder to {text}"


def _clean(text: str | None) -> str:
    """A label or a reminder as the model sent it, fit to keep and say: control characters (an
    escape sequence, a newline) become spaces, a lone surrogate U+FFFD."""
    return re.sub(r"[\s\x00-\x1f\x7f-\x9f]+", " ", clean(text or "")).strip().strip(".!?").strip()


def timer_data(record: TaskRecord, now: float) -> dict[str, Any]:
    """A timer as tool-result data (the model and the logs see this)."""
    due = record.due_at if record.due_at is not None else now
    return {
        "id": record.id,
        "kind": str(record.kind),
        "spoken": record.spoken,
        "label": record.label,
        "status": str(record.status),
        "due_local": datetime.fromtimestamp(due).isoformat(timespec="seconds"),
        "due_words": when_words(datetime.fromtimestamp(due), datetime.fromtimestamp(now)),
        "remaining_s": round(max(0.0, due - now), 1),
    }


class _TimerToolHandlers:
    def __init__(self, manager: "TaskManager") -> None:
        self._manager = manager

    async def set_timer(self, args: dict[str, Any]) -> dict[str, Any]:
        with spoken_errors():
            length = parse_length(args["duration"])
            if length.total_s > MAX_TIMER_S:
                raise WhenError("A timer can run for at most a week; for later than that, ask me for a reminder.")
            label = _clean(args.get("label"))
            now = self._manager.now()
            spoken = timer_name(length.words(), length.adjective(), label)
            record = await self._manager.add_timer(TaskKind.TIMER, now + length.total_s, spoken, label)
        return {"timer": timer_data(record, now), "length": length.words()}

    async def set_reminder(self, args: dict[str, Any]) -> dict[str, Any]:
        text = re.sub(r"^to\s+", "", _clean(args["text"]), flags=re.I)
        if not text:
            raise ToolError("Say what to remind you of.")
        with spoken_errors():
            now = self._manager.now()
            due = parse_due(args["at"], datetime.fromtimestamp(now))
            record = await self._manager.add_timer(TaskKind.REMINDER, due.timestamp(), reminder_name(text), text)
        return {"timer": timer_data(record, now)}

    async def time_left(self, args: dict[str, Any]) -> dict[str, Any]:
        pending = self._manager.pending_timers()
        if _clean(args.get("name")):
            pending = self._matching(args.get("name"), pending)
        now = self._manager.now()
        return {"timers": [timer_data(r, now) for r in pending[:MAX_LISTED]], "more": max(0, len(pending) - MAX_LISTED)}

    async def cancel_timer(self, args: dict[str, Any]) -> dict[str, Any]:
        if _ALL.search(_clean(args.get("name")).lower()):  # "cancel all timers", from any room
            return await self._cancel_all(_ALL.sub(" ", _clean(args.get("name"))))
        record = self._pick(args.get("name"), self._manager.pending_timers())
        now = self._manager.now()
        left = timer_data(record, now)["remaining_s"]
        with spoken_errors():
            outcome = await self._manager.cancel(record.id)
        return {"timer": {**timer_data(outcome.record, now), "remaining_s": left}, "cancelled": outcome.stopped}

    async def _cancel_all(self, kinds_said: str) -> dict[str, Any]:
        now = self._manager.now()
        cancelled = []
        for record in self._matching(kinds_said, self._manager.pending_timers()):
            with spoken_errors():
                outcome = await self._manager.cancel(record.id)
            if outcome.stopped:
                cancelled.append(timer_data(outcome.record, now))
        return {"timers": cancelled, "all": True}

    def _pick(self, name: str | None, pending: list[TaskRecord]) -> TaskRecord:
        """The one pending timer `name` means; with no name (or just "timer"), the only one there is."""
        candidates = self._matching(name, pending)
        if len(candidates) > 1:
            asked = candidates[-4:]
            raise ToolError(f"Which one: {or_list(describe_candidates(asked))}?",
                            data={"candidates": [r.id for r in candidates]})  # fmt: skip
        return candidates[0]

    def _matching(self, name: str | None, pending: list[TaskRecord]) -> list[TaskRecord]:
        """The pending timers `name` may mean ("pasta", "the reminder", "3", nothing); never empty."""
        if not pending:
            raise ToolError("You have no timers or reminders set.")
        said = _clean(name).lower()
        key = re.sub(r"\s+", " ", _GENERIC.sub(" ", said)).strip()
        kinds = {kind for kind in TaskKind if re.search(rf"\b{kind}s?\b", said)}
        candidates = [r for r in pending if not kinds or r.kind in kinds]
        if not candidates:
            raise ToolError(f"You have no {' or '.join(sorted(f'{kind}s' for kind in kinds))} set.")
        if not key:
            return candidates
        try:
            return [resolve_task(key, candidates)]
        except AmbiguousTask as exc:
            return list(exc.candidates)
        except UnknownTask:
            raise ToolError(
                f"I can't find a timer or reminder called '{_clean(name)}'; you have {and_list([r.spoken for r in pending[:4]])}."
            ) from None


# --- formatters ---------------------------------------------------------------------------------


def format_set_timer(result: ToolResult) -> str:
    if not result.ok:
        return result.error or "I couldn't set the timer."
    timer = result.data["timer"]
    head = sentence_start(timer["spoken"]) + " is" if timer["label"] else "Timer"
    return f"{head} set for {result.data['length']}; it ends {timer['due_words']}."


def format_set_reminder(result: ToolResult) -> str:
    if not result.ok:
        return result.error or "I couldn't set the reminder."
    timer = result.data["timer"]
    return sentence(f"I'll remind you {timer['due_words']}: {timer['label']}")


def _left_clause(timer: dict[str, Any]) -> str:
    if timer["kind"] == str(TaskKind.REMINDER):
        return f"{timer['spoken']} is due {timer['due_words']}, in {remaining_words(timer['remaining_s'])}"
    return f"{timer['spoken']} has {remaining_words(timer['remaining_s'])} left"


def format_time_left(result: ToolResult) -> str:
    if not result.ok:
        return result.error or "I couldn't check your timers."
    timers = result.data["timers"]
    if not timers:
        return "You have no timers or reminders set."
    text = sentence("; ".join(_left_clause(t) for t in timers))
    more = result.data.get("more", 0)
    if more:
        text += " There is one more." if more == 1 else f" There are {number_words(more)} more."
    return text


def format_cancel_timer(result: ToolResult) -> str:
    if not result.ok:
        return result.error or "I couldn't cancel that."
    if result.data.get("all"):
        names = [t["spoken"] for t in result.data["timers"]]
        return sentence(f"I cancelled {and_list(names)}" if names else "there was nothing to cancel")
    timer = result.data["timer"]
    if not result.data.get("cancelled"):
        return sentence(f"there was nothing to cancel: {timer['spoken']} is already done")
    if timer["kind"] == str(TaskKind.REMINDER):
        return sentence(f"I cancelled {timer['spoken']}")
    return sentence(f"I cancelled {timer['spoken']}; it had {remaining_words(timer['remaining_s'])} left")
