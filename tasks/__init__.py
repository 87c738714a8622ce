"""Background tasks: named templates started by voice, run as process groups, announced when done.

For the coordinator:

    config = load_task_config(settings.tasks_config)
    store = TaskStore(task_settings.db_path)
    manager = TaskManager(config, store, task_settings)
    await manager.start()              # marks what the last run left unfinished as interrupted
    await manager.notices.wait_pending(); batch = manager.notices.next_batch(now); ...; notices.ack(batch.ids)
    await manager.close(); store.close()

`register_task_tools(registry, manager)` (from tasks.voice_tools) adds the voice
tools, `register_timer_tools(registry, manager)` (tasks.timer_tools) the timer tools; they are
imported lazily so `handoff tasks` works without the listener's modules.
"""

from __future__ import annotations

from typing import Any

from decisions.errors import IllegalTransition
from tasks.config import TaskConfig, TaskParam, TaskSettings, TaskTemplate, load_task_config, parse_task_config
from tasks.errors import (
    AmbiguousTask,
    NotStarted,
    ParameterError,
    ShellNotAllowed,
    TaskConfigError,
    TaskError,
    UnknownTask,
    UnknownTemplate,
)
from tasks.manager import Cancellation, TaskManager
from tasks.notices import NoticeBatch, NoticeQueue
from tasks.records import Notice, TaskKind, TaskRecord, TaskStatus
from tasks.store import TaskStore

__all__ = [
    "AmbiguousTask", "Cancellation", "IllegalTransition", "Notice", "NoticeBatch", "NoticeQueue", "NotStarted",
    "ParameterError", "ShellNotAllowed", "TaskConfig", "TaskConfigError", "TaskError", "TaskManager",
    "TaskKind", "TaskParam", "TaskRecord", "TaskSettings", "TaskStatus", "TaskStore", "TaskTemplate", "UnknownTask",
    "UnknownTemplate", "load_task_config", "parse_task_config", "register_task_tools", "register_timer_tools",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name == "register_task_tools":
        from tasks.voice_tools import register_task_tools

        return register_task_tools
    if name == "register_timer_tools":
        from tasks.timer_tools import register_timer_tools

        return register_timer_tools
    raise AttributeError(f"module 'tasks' has no attribute {name!r}")
