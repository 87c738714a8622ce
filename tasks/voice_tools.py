"""The listener's task tools (start_task, list_tasks, get_task_result, cancel_task) and the
formatters that turn their results into sentences for the narrator.

Handlers return plain data (kept in logs, sent compactly to the model); formatters speak it:
"The backup finished in two minutes; the test run is still going, forty seconds so far."
Task errors become `ToolError`s whose message is already a sentence to read aloud, including
the question to ask back when a name fits several tasks.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from tools.registry import Effect
from tools.result import ToolError, ToolResult
from tasks.config import TaskConfig
from tasks.errors import AmbiguousTask, TaskError
from tasks.records import TaskRecord
from tasks.speech import and_list, duration_words, number_words, output_summary, sentence, status_clause

if TYPE_CHECKING:
    from tasks.manager import TaskManager
    from tools.registry import ToolRegistry

MAX_LISTED = 6  # a spoken list names this many tasks (all running and queued ones first)
MAX_TAIL_IN_RESULT = 10  # output lines kept in a tool result (the log file has them all)

_TASK_ARGUMENT = {
    "type": "string",
    "description": "Which task: its number, its name (for example backup), or a distinctive part of it.",
}


def register_task_tools(registry: "ToolRegistry", manager: "TaskManager") -> None:
    """Register the four task tools, each with its formatter, on `registry`."""
    handlers = _TaskToolHandlers(manager)
    registry.register("start_task", start_task_description(manager.config), start_task_parameters(manager.config),
                      handlers.start_task, format_start_task)  # fmt: skip
    registry.register(
        "list_tasks",
        "List the background tasks: which are running, queued or finished, and how long they took.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        handlers.list_tasks,
        format_list_tasks,
        Effect.READS,
    )
    registry.register(
        "get_task_result",
        "Tell how one background task went: its outcome and the last lines of its output.",
        {"type": "object", "properties": {"task": _TASK_ARGUMENT}, "required": ["task"], "additionalProperties": False},
        handlers.get_task_result,
        format_get_task_result,
        Effect.READS,
    )
    registry.register(
        "cancel_task",
        "Stop a running or queued background task.",
        {"type": "object", "properties": {"task": _TASK_ARGUMENT}, "required": ["task"], "additionalProperties": False},
        handlers.cancel_task,
        format_cancel_task,
    )


def start_task_description(config: TaskConfig) -> str:
    """What the model reads to choose a template: each one, its parameters, and the agent rule."""
    parts = [
        "Start a background task from the user's task templates. It runs while the conversation "
        "goes on, and its outcome is announced when it ends."
    ]
    if config.templates:
        listed = []
        for template in config.templates:
            entry = f"'{template.name}'" + (f": {template.description}" if template.description else "")
            if template.params:
                entry += " (parameters: " + ", ".join(
                    p.name + (f", {p.description}" if p.description else "") for p in template.params
                ) + ")"
            listed.append(entry)
        parts.append("Templates: " + "; ".join(listed) + ".")
    else:
        parts.append("No templates are set up yet.")
    agent = config.agent_template
    if agent is not None:
        first = next((p.name for p in agent.params if p.required), None)
        fill = f" with {first} set to the request in the user's own words" if first else ""
        parts.append(f"For a request to go and do some work ('go fix the failing test'), use '{agent.name}'{fill}.")
    if config.allow_shell:
        parts.append("To run a shell command the user dictates, give it as command instead of a name.")
    else:
        parts.append("Shell commands are turned off; a command argument is refused.")
    return " ".join(parts)


def start_task_parameters(config: TaskConfig) -> dict[str, Any]:
    """name, command, and every parameter any template declares, as a flat set of strings
    (the tool schema has no nested objects); the chosen template checks which apply."""
    properties: dict[str, dict[str, Any]] = {
        "name": {"type": "string", "description": "The template to start, for example backup."},
        "command": {"type": "string", "description": "A shell command, only if the user has enabled shell commands."},
    }
    for template in config.templates:
        for param in template.params:
            if param.name not in properties:
                properties[param.name] = {
                    "type": "string",
                    "description": f"For the {template.name} template: {param.description or param.name}.",
                }
    return {"type": "object", "properties": properties, "additionalProperties": False}


class _TaskToolHandlers:
    """The tool handlers: arguments in, data out; task errors become spoken ToolErrors."""

    def __init__(self, manager: "TaskManager", clock: Callable[[], float] = time.time) -> None:
        self._manager = manager
        self._clock = clock

    async def start_task(self, args: dict[str, Any]) -> dict[str, Any]:
        command = (args.get("command") or "").strip()
        name = (args.get("name") or "").strip()
        # The schema is flat, so models send "" for parameters they are not using.
        params = {k: v for k, v in args.items() if k not in ("name", "command") and v not in ("", None)}
        with spoken_errors():
            if command:
                record = await self._manager.start_shell(command)
            elif name:
                record = await self._manager.start_task(name, params)
            else:
                names = [t.name for t in self._manager.config.templates]
                raise ToolError(f"Say which task to start: {and_list(names)}." if names else "No tasks are set up.")
        if record.error and record.started_at is None:
            # It could not start (no such program, no such folder): a failed call, said once.
            raise ToolError(sentence(status_clause(record.spoken, str(record.status), None, error=record.error,
                                                   detailed=True)), data={"task": task_data(record, self._clock())})
        return {
            "task": task_data(record, self._clock()),
            "running": self._manager.running_count,
            "queued": self._manager.queued_count,
        }

    async def list_tasks(self, args: dict[str, Any]) -> dict[str, Any]:
        records = await self._manager.list_tasks()
        shown = pick_for_listing(records, MAX_LISTED)
        now = self._clock()
        return {"tasks": [task_data(r, now) for r in shown], "more": len(records) - len(shown)}

    async def get_task_result(self, args: dict[str, Any]) -> dict[str, Any]:
        with spoken_errors():
            record = await self._manager.get_result(args["task"])
        return {"task": task_data(record, self._clock())}

    async def cancel_task(self, args: dict[str, Any]) -> dict[str, Any]:
        with spoken_errors():
            outcome = await self._manager.cancel(args["task"])
        return {"task": task_data(outcome.record, self._clock()), "cancelled": outcome.stopped}


@contextmanager
def spoken_errors() -> Iterator[None]:
    """Turns a TaskError into a ToolError with the same sentence (and the candidates, if any)."""
    try:
        yield
    except AmbiguousTask as exc:
        now = time.time()
        raise ToolError(str(exc), data={"candidates": [task_data(r, now) for r in exc.candidates]}) from exc
    except TaskError as exc:
        raise ToolError(str(exc)) from exc


def pick_for_listing(records: list[TaskRecord], limit: int) -> list[TaskRecord]:
    """Every active task, then the most recent finished ones, up to `limit`; oldest first."""
    active = [r for r in records if r.is_active]
    finished = [r for r in records if not r.is_active]
    room = max(0, limit - len(active))
    picked = active[:limit] + (finished[-room:] if room else [])
    return sorted(picked, key=lambda r: r.id)


def task_data(record: TaskRecord, now: float) -> dict[str, Any]:
    """A task as tool-result data (JSON-friendly; the model and the logs see this)."""
    duration = record.duration_s(now)
    return {
        "id": record.id,
        "name": record.name,
        "spoken": record.spoken,
        "status": str(record.status),
        "duration_s": round(duration, 1) if duration is not None else None,
        "exit_code": record.exit_code,
        "timeout_s": record.timeout_s,
        "error": record.error,
        "lines": record.line_count,
        "tail": list(record.tail[-MAX_TAIL_IN_RESULT:]),
        "log_path": record.log_path,
    }


# --- formatters ---------------------------------------------------------------------------------


def _clause(task: dict[str, Any], detailed: bool) -> str:
    return status_clause(
        task["spoken"],
        task["status"],
        task["duration_s"],
        exit_code=task["exit_code"],
        timeout_s=task["timeout_s"],
        error=task["error"],
        detailed=detailed,
    )


def _failure(result: ToolResult) -> str:
    return result.error or "Something went wrong with the task tool."


def format_start_task(result: ToolResult) -> str:
    if not result.ok:
        return _failure(result)
    task = result.data["task"]
    spoken = task["spoken"]
    if task["status"] == "queued":
        running = result.data.get("running", 0)
        return sentence(
            f"{spoken} is queued: {number_words(running)} tasks are already running, so it starts when one finishes"
        )
    if task["status"] == "running":
        return sentence(f"I started {spoken}; I'll tell you when it's done")
    return sentence(_clause(task, detailed=True))  # it could not start, or ended at once


def format_list_tasks(result: ToolResult) -> str:
    if not result.ok:
        return _failure(result)
    tasks = result.data["tasks"]
    if not tasks:
        return "There are no background tasks."
    text = sentence("; ".join(_clause(t, detailed=False) for t in tasks))
    more = result.data.get("more", 0)
    if more:
        text += " There is one older one too." if more == 1 else f" There are {number_words(more)} older ones too."
    return text


def format_get_task_result(result: ToolResult) -> str:
    if not result.ok:
        return _failure(result)
    task = result.data["task"]
    text = sentence(_clause(task, detailed=True))
    summary = output_summary(task["tail"], lines=2)
    if summary:
        which = "latest" if task["status"] == "running" else "last"
        text += " " + sentence(f"the {which} output was: {summary}")
    elif task["status"] not in ("queued",) and task["lines"] == 0 and not task["error"]:
        text += " It has printed nothing."
    return text


def format_cancel_task(result: ToolResult) -> str:
    if not result.ok:
        return _failure(result)
    task = result.data["task"]
    if result.data.get("cancelled"):
        took = task["duration_s"]
        when = f"after {duration_words(took)}" if took is not None else "before it started"
        return sentence(f"I cancelled {task['spoken']} {when}")
    return sentence(f"there was nothing to cancel: {_clause(task, detailed=False)}")
