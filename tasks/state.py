"""A task's lifecycle as a pure state machine: events in, a new record out, no I/O.

    queued --Started--> running --Exited--> succeeded | failed | timed_out | cancelled
    queued --StopRequested(cancel)--> cancelled      queued --LaunchFailed--> failed
    queued | running --Interrupted--> interrupted    (found unfinished after a restart)
    queued | running --ShutDown--> stopped            (handoff stopped it on its way out)
    queued | running --Crashed--> failed, with the reason  (a bug in running it)
Timers and reminders have no process: they are created running and end one of two ways:
    running --Fired--> succeeded     running --StopRequested(cancel)--> cancelled
    running --StopRequested--> running, remembering why it is being stopped, so the Exited
                               that follows becomes cancelled or timed_out, not failed.

Anything else raises `IllegalTransition`: a final state never changes again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from decisions.errors import IllegalTransition
from tasks.records import FINAL_STATUSES, TaskRecord, TaskStatus

StopReason = Literal["cancel", "timeout"]


@dataclass(frozen=True)
class Started:
    pid: int
    at: float


@dataclass(frozen=True)
class StopRequested:
    reason: StopReason
    at: float


@dataclass(frozen=True)
class Exited:
    exit_code: int
    at: float
    tail: tuple[str, ...] = ()
    line_count: int = 0


@dataclass(frozen=True)
class LaunchFailed:
    error: str
    at: float


@dataclass(frozen=True)
class Interrupted:
    at: float


@dataclass(frozen=True)
class ShutDown:
    """handoff is stopping and has stopped the task's processes (or it never got a slot)."""

    at: float


@dataclass(frozen=True)
class Crashed:
    error: str
    at: float


@dataclass(frozen=True)
class Fired:
    """A timer's or reminder's time has come."""

    at: float


TaskEvent = Started | StopRequested | Exited | LaunchFailed | Interrupted | ShutDown | Crashed | Fired


def transition(record: TaskRecord, event: TaskEvent) -> TaskRecord:
    """The record after `event`; raises IllegalTransition if the event cannot happen now."""
    status = record.status
    if status in FINAL_STATUSES:
        raise IllegalTransition(f"task {record.id} is already {status}; {type(event).__name__} cannot change it")
    replace = dataclasses.replace

    if record.is_timer:
        if isinstance(event, Fired):
            return replace(record, status=TaskStatus.SUCCEEDED, finished_at=event.at)
        if isinstance(event, StopRequested) and event.reason == "cancel":
            return replace(record, status=TaskStatus.CANCELLED, stop_reason="cancel", finished_at=event.at)
        raise IllegalTransition(f"{record.kind} {record.id} is {status}; {type(event).__name__} cannot happen to it")

    if isinstance(event, Interrupted):
        return replace(record, status=TaskStatus.INTERRUPTED, finished_at=event.at)
    if isinstance(event, ShutDown):
        return replace(record, status=TaskStatus.STOPPED, stop_reason="shutdown", finished_at=event.at)
    if isinstance(event, Crashed):
        return replace(record, status=TaskStatus.FAILED, error=event.error, finished_at=event.at)

    if status is TaskStatus.QUEUED:
        if isinstance(event, Started):
            return replace(record, status=TaskStatus.RUNNING, pid=event.pid, started_at=event.at)
        if isinstance(event, LaunchFailed):
            return replace(record, status=TaskStatus.FAILED, error=event.error, finished_at=event.at)
        if isinstance(event, StopRequested) and event.reason == "cancel":
            return replace(record, status=TaskStatus.CANCELLED, stop_reason="cancel", finished_at=event.at)

    if status is TaskStatus.RUNNING:
        if isinstance(event, StopRequested):
            # The first reason wins: a cancel that is still waiting for the process to die
            # does not turn into a timeout, and vice versa.
            return record if record.stop_reason else replace(record, stop_reason=event.reason)
        if isinstance(event, Exited):
            return replace(
                record,
                status=_outcome(record.stop_reason, event.exit_code),
                exit_code=event.exit_code,
                finished_at=event.at,
                tail=event.tail,
                line_count=event.line_count,
            )

    raise IllegalTransition(f"task {record.id} is {status}; {type(event).__name__} cannot happen now")


def _outcome(stop_reason: str | None, exit_code: int) -> TaskStatus:
    if stop_reason == "cancel":
        return TaskStatus.CANCELLED
    if stop_reason == "timeout":
        return TaskStatus.TIMED_OUT
    return TaskStatus.SUCCEEDED if exit_code == 0 else TaskStatus.FAILED
