"""The plain data the task package passes around: a task's record and a queued notice.

Both are frozen: a change of state produces a new record (see `tasks.state`), so whatever
holds an old one (the store, a tool result being spoken) never sees it change underneath.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TaskStatus(StrEnum):
    QUEUED = "queued"  # waiting for a free slot under the concurrency cap
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # exit code 0
    FAILED = "failed"  # non-zero exit, killed by a signal nobody asked for, or could not start
    TIMED_OUT = "timed_out"  # ran past its time limit and was stopped
    CANCELLED = "cancelled"  # the user asked to stop it
    INTERRUPTED = "interrupted"  # handoff died while it was queued or running (found at the next start)
    STOPPED = "stopped"  # handoff was stopped (a signal, the end of its input) and stopped it on the way out


class TaskKind(StrEnum):
    PROCESS = "process"  # a program from a template (or a shell command)
    TIMER = "timer"  # no process: a length of time, announced when it is up
    REMINDER = "reminder"  # no process: a text, announced at a clock time


TIMER_KINDS = frozenset({TaskKind.TIMER, TaskKind.REMINDER})

ACTIVE_STATUSES = frozenset({TaskStatus.QUEUED, TaskStatus.RUNNING})
FINAL_STATUSES = frozenset(TaskStatus) - ACTIVE_STATUSES


@dataclass(frozen=True)
class TaskRecord:
    """One task run: what it runs, where, and how far it got."""

    id: int
    name: str  # the template's name ("shell" for a voice shell command)
    spoken: str  # how speech refers to it: "the backup"
    argv: tuple[str, ...]
    cwd: str
    timeout_s: float
    log_path: str  # full output on disk; empty until the store has assigned an id
    created_at: float  # wall-clock seconds (time.time), so they mean something after a restart
    params: tuple[tuple[str, str], ...] = ()  # the filled-in template parameters
    label: str = ""  # what tells two runs of one template apart: the agent prompt, the shell command
    agent: bool = False
    status: TaskStatus = TaskStatus.QUEUED
    started_at: float | None = None
    finished_at: float | None = None
    pid: int | None = None  # also the process group id: each task leads its own session
    exit_code: int | None = None  # negative: killed by that signal number
    stop_reason: str | None = None  # "cancel" or "timeout" while a running task is being stopped; "shutdown" once stopped
    error: str | None = None  # why it could not start
    tail: tuple[str, ...] = ()  # the last lines of output (bounded), saved when it ends
    line_count: int = 0  # all lines it printed, including those only in the log
    kind: TaskKind = TaskKind.PROCESS
    due_at: float | None = None  # a timer's or reminder's wall-clock due time

    @property
    def is_timer(self) -> bool:
        return self.kind in TIMER_KINDS

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    def duration_s(self, now: float) -> float | None:
        """How long it ran (so far, for a running task); None if it never started."""
        if self.started_at is None:
            return None
        end = self.finished_at if self.finished_at is not None else now
        return max(0.0, end - self.started_at)


@dataclass(frozen=True)
class Notice:
    """A spoken announcement waiting for the narrator: one task's outcome, or a timer that is up.

    It keeps the facts rather than a finished sentence, so several old notices can be merged
    into one short script when they are finally delivered.
    """

    task_id: int
    created_at: float  # when it happened (see notice_for), which decides when notices are merged
    outcome: TaskStatus
    spoken: str
    duration_s: float | None  # None: it never started
    exit_code: int | None = None
    timeout_s: float | None = None
    error: str | None = None
    summary: str = ""  # the last lines of output, already made speakable
    id: int | None = None  # assigned by the store
    kind: TaskKind = TaskKind.PROCESS
    label: str = ""  # a timer's label, a reminder's text
    due_at: float | None = None
    late: bool = False  # a timer or reminder announced well after its time (handoff was not running)
