"""The task manager: admits tasks from templates, runs at most `max_concurrent` at once (the rest
wait as "queued"), records every state change, and queues a notice when a task ends.

Each running task is one asyncio task owned by the manager (`close` cancels and awaits them all,
which stops their process groups). Records change only through `tasks.state.transition`.
Timers and reminders are records with a due time and no process: one asyncio task sleeps until
the earliest is due (or the set of timers changes) and fires it; they survive a restart, and one
that came due while handoff was not running fires at the next start, its notice marked late.
The store is only ever used through a `StoreWorker`: its I/O never runs on the event loop, and
state changes are written in the order they happen without the loop waiting for them.
A bug in running a task is logged with its traceback, counted, and ends that task as failed
with a spoken reason; the worker loop, the other tasks and the voice tools go on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from concurrency.changes import Changes
from tasks.config import TaskConfig, TaskSettings, check_text
from tasks.errors import NotStarted, ShellNotAllowed, TooMany
from tasks.files import TaskLog, private_dir, prune_logs
from tasks.identify import resolve_task
from tasks.notices import NoticeBatch, NoticeQueue, notice_for
from tasks.output import OutputSink, OutputTail, Redactor
from tasks.records import FINAL_STATUSES, TIMER_KINDS, Notice, TaskKind, TaskRecord, TaskStatus
from tasks.runner import LaunchError, ProcessRunner, stop_marked, task_environment
from tasks.state import (
    Crashed, Exited, Fired, Interrupted, LaunchFailed, ShutDown, Started, StopReason, StopRequested, TaskEvent,
    transition,
)
from tasks.store import StoreWorker, TaskStore

log = logging.getLogger(__name__)

SHELL_NAME = "shell"
# Bounds on what commands can pile up (a model that asks for 300 timers gets a sentence, not 300
# timers and 300 notices).
MAX_PENDING_TIMERS = 50
MAX_QUEUED_TASKS = 20  # waiting for a slot (max_concurrent run at once)
INTERNAL_ERROR = "handoff hit an internal error while running it; the details are in handoff's log"


@dataclass(frozen=True)
class Cancellation:
    """What a cancel request did: `record` is the task afterwards; `stopped` is False when the
    task had already ended (or ended on its own before it could be stopped)."""

    record: TaskRecord
    stopped: bool


@dataclass
class _LiveTask:
    """A queued or running task's in-memory side: its latest record, output tail and signals."""

    record: TaskRecord
    tail: OutputTail
    stop: asyncio.Future[StopReason]  # resolved with "cancel" to stop it
    env: tuple[str, ...] = ()  # secret variables its template passes on
    launched: asyncio.Event = field(default_factory=asyncio.Event)  # spawned, or failed to
    done: asyncio.Event = field(default_factory=asyncio.Event)  # reached a final state
    saved: asyncio.Event = field(default_factory=asyncio.Event)  # ... and that state is stored, its notice queued
    worker: asyncio.Task[None] | None = None  # set once it has a slot
    caller_told: bool = False  # whoever started it hears at once if it cannot start: no notice then


class TaskManager:
    """Starts, lists, reports on and cancels background tasks; owns the notice queue."""

    def __init__(
        self,
        config: TaskConfig,
        store: TaskStore,
        settings: TaskSettings,
        *,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[TaskRecord], None] | None = None,
    ) -> None:
        """`on_change` is called after every state change with the new record (for logs and
        metrics); `clock` gives wall-clock seconds. The caller owns `store` and closes it."""
        self.config = config
        self.settings = settings
        self._store = store
        self._clock = clock
        self._on_change = on_change
        self._runner = ProcessRunner(kill_grace_s=settings.kill_grace_s, drain_s=settings.drain_s)
        self._io = StoreWorker(store, on_busy=self._store_found_busy)
        self.store_busy = Changes()  # notified each time a store call found the database locked (and retries)
        self.notices = NoticeQueue(self._io, settings, clock)
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start; store results come back on it
        self.internal_errors = 0  # bugs caught while running tasks (each logged with its traceback)
        self._live: dict[int, _LiveTask] = {}
        self._queue: deque[int] = deque()  # ids waiting for a slot, first come first served
        self._admitting = 0  # starts being stored (between the bound's check and the queue)
        self._workers: set[asyncio.Task[None]] = set()
        self._timers: dict[int, TaskRecord] = {}  # pending timers and reminders by id
        self._timers_changed = Changes()
        self._timer_worker: asyncio.Task[None] | None = None
        self._state = "new"  # new -> started -> closed

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Mark whatever the last run left queued or running as interrupted, and announce it."""
        if self._state != "new":
            raise NotStarted("The task manager can only be started once.")
        self._loop = asyncio.get_running_loop()
        for folder in (self.settings.state_dir, self.settings.tasks_dir, self.settings.log_dir):
            private_dir(folder)
        await self._io.call(self._store.open)
        if self._store.recovery is not None:
            self.notices.announce(self._store.recovery.sentence())
        await self.notices.load()
        now = self._clock()
        for record in await self._io.call(self._store.unfinished_tasks):
            if record.is_timer:  # nothing ran: it waits on, or, due while handoff was down, fires now, late
                if record.due_at is not None and record.due_at <= now:
                    self._record_change(transition(record, Fired(now)), late=True)
                else:
                    self._timers[record.id] = record
                continue
            # The daemon died under it: whatever it left running is found by its marker.
            found = await stop_marked(self._token(record), self.settings.kill_grace_s)
            if found:
                log.warning("stopped %d process(es) left behind by task %s (%s)", found, record.id, record.name)
            self._record_change(transition(record, Interrupted(now)))
        self._state = "started"
        self._timer_worker = self._loop.create_task(self._run_timers(), name="timers")
        self._timer_worker.add_done_callback(self._timer_worker_finished)

    async def close(self, *, shutdown: bool = False) -> None:
        """Stop every running task's processes (SIGTERM, grace, SIGKILL) and wait for that.

        `shutdown=True` (handoff itself is stopping): every task still queued or running is
        recorded as stopped by the shutdown, its notice stored with it, so the next start says
        so once. Otherwise their records stay queued or running, and the next `start` marks
        them interrupted (what a crash leaves too)."""
        if self._state == "closed":
            return
        self._state = "closed"
        workers = list(self._workers) + ([self._timer_worker] if self._timer_worker is not None else [])
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._queue.clear()
        if shutdown:
            now = self._clock()
            for live in list(self._live.values()):
                if live.record.is_active:
                    self._apply(live, ShutDown(now))  # written before the store worker closes below
        for live in self._live.values():
            live.launched.set()
            live.done.set()
            live.saved.set()
        self._live.clear()
        await self._io.close()

    # --- notices (the coordinator's side) ------------------------------------------------

    async def wait_pending(self) -> None:
        await self.notices.wait_pending()

    def next_batch(self, now: float | None = None) -> NoticeBatch | None:
        return self.notices.next_batch(now)

    def ack(self, ids: list[int]) -> None:
        self.notices.ack(ids)

    # --- the voice tools' side -----------------------------------------------------------

    def now(self) -> float:
        """Wall-clock seconds on the manager's clock (the one timers are due by)."""
        return self._clock()

    @property
    def store_busy_retries(self) -> int:
        """How often a store call found the database locked by another program and was retried."""
        return self._io.busy_retries

    def _store_found_busy(self) -> None:  # (on the store's thread)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.store_busy.notify)

    @property
    def running_count(self) -> int:
        return sum(1 for live in self._live.values() if live.record.status is TaskStatus.RUNNING)

    @property
    def queued_count(self) -> int:
        return sum(1 for live in self._live.values() if live.record.status is TaskStatus.QUEUED)

    async def start_task(self, name: str, params: Mapping[str, object] | None = None) -> TaskRecord:
        """Start the template `name` with `params`. Returns once it is running (or has failed
        to start), or at once with status "queued" if all slots are taken.
        Raises UnknownTemplate or ParameterError (clear sentences)."""
        self._require_started()
        template = self.config.template(check_text(name, "The task name", 200))
        argv, filled = template.fill(params or {})
        draft = self._draft(
            template.name, template.spoken_name, argv, template.cwd, template.timeout_s,
            params=filled,
            # An agent's prompt is what tells its runs apart ("cancel the login bug one").
            label=" ".join(value for _, value in filled) if template.agent else "",
            agent=template.agent,
        )  # fmt: skip
        return await self._admit(draft, template.env)

    async def start_shell(self, command: str) -> TaskRecord:
        """Run `command` with /bin/sh, only if the config has `allow_shell = true`."""
        self._require_started()
        if not self.config.allow_shell:
            where = f" in {self.config.source}" if self.config.source else " in the task templates file"
            raise ShellNotAllowed(
                f"Running shell commands by voice is turned off. To allow it, set allow_shell = true{where}."
            )
        if not command.strip():
            raise ShellNotAllowed("Say the shell command to run.")
        check_text(command, "The shell command")
        draft = self._draft(SHELL_NAME, "the shell command", ("/bin/sh", "-c", command),
                            self.config.shell_cwd, self.config.shell_timeout_s, label=command)  # fmt: skip
        return await self._admit(draft, ())

    async def add_timer(self, kind: TaskKind, due_at: float, spoken: str, label: str = "") -> TaskRecord:
        """A timer or reminder due at `due_at` (wall-clock seconds), named `spoken` ("your
        ten-minute timer"); `label` is a reminder's text. Its notice comes when it is due."""
        self._require_started()
        if kind not in TIMER_KINDS:
            raise ValueError(f"{kind} is not a timer kind")
        if len(self._timers) >= MAX_PENDING_TIMERS:
            raise TooMany(f"There are already {MAX_PENDING_TIMERS} timers and reminders set; cancel one first.")
        now = self._clock()
        draft = TaskRecord(
            id=0, name=str(kind), spoken=spoken, argv=(), cwd="", timeout_s=max(0.0, due_at - now), log_path="",
            created_at=now, label=check_text(label, f"The {kind} text", 500), kind=kind, due_at=due_at,
            status=TaskStatus.RUNNING, started_at=now,
        )  # fmt: skip
        record = await self._io.call(self._store.create_task, draft, None)
        log.info("%s %s is set, due in %.0f s", kind, record.id, due_at - now)
        self._timers[record.id] = record
        self._timers_changed.notify()
        self._notify(record)
        return record

    def pending_timers(self) -> list[TaskRecord]:
        """Timers and reminders still to come, soonest first."""
        return sorted(self._timers.values(), key=lambda r: (r.due_at or 0.0, r.id))

    async def list_tasks(self) -> list[TaskRecord]:
        """Every task, oldest first; running ones with their output so far."""
        return [self._current(record) for record in await self._io.call(self._store.list_tasks)]

    async def get_result(self, ident: str | int) -> TaskRecord:
        """The task `ident` names (number, name, unique part of a name), with its output tail.
        Raises UnknownTask or AmbiguousTask."""
        return resolve_task(_checked_ident(ident), await self.list_tasks())

    async def cancel(self, ident: str | int) -> Cancellation:
        """Cancel the task `ident` names (preferring a running one when a name matches several);
        returns once its processes are gone. Raises UnknownTask or AmbiguousTask."""
        self._require_started()
        record = resolve_task(_checked_ident(ident), await self.list_tasks(), prefer=lambda r: r.is_active)
        if record.is_timer:
            return self._cancel_timer(record)
        live = self._live.get(record.id)
        if live is None:
            return Cancellation(record, stopped=False)
        if live.worker is None:  # still waiting for a slot: nothing to kill
            self._queue.remove(record.id)
            self._apply(live, StopRequested("cancel", self._clock()))
        else:
            if not live.stop.done():
                live.stop.set_result("cancel")
            await live.done.wait()
        return Cancellation(live.record, stopped=live.record.status is TaskStatus.CANCELLED)

    async def wait(self, task_id: int) -> TaskRecord:
        """The task's record once it has ended (or once the manager closed)."""
        live = self._live.get(task_id)
        if live is not None:
            await live.done.wait()
            await live.saved.wait()
            return live.record
        record = await self._io.call(self._store.get_task, task_id)
        if record is None:
            raise KeyError(task_id)
        return record

    # --- timers --------------------------------------------------------------------------

    async def _run_timers(self) -> None:
        """Fire each timer when it is due: sleep until the earliest due time or a change."""
        while True:
            now = self._clock()
            for record in [r for r in self.pending_timers() if (r.due_at or 0.0) <= now]:
                del self._timers[record.id]
                self._record_change(transition(record, Fired(now)))
            if self._timers:
                wait_s = min(r.due_at or 0.0 for r in self._timers.values()) - now
                await self._timers_changed.wait(min(wait_s, self.settings.timer_recheck_s))
            else:
                await self._timers_changed.wait()

    def _timer_worker_finished(self, worker: asyncio.Task[None]) -> None:
        if not worker.cancelled() and worker.exception() is not None:
            self._bug("the timer worker crashed; timers will not fire until handoff restarts", worker.exception())

    def _cancel_timer(self, record: TaskRecord) -> Cancellation:
        pending = self._timers.pop(record.id, None)
        if pending is None:  # already fired or cancelled
            return Cancellation(record, stopped=False)
        cancelled = transition(pending, StopRequested("cancel", self._clock()))
        self._record_change(cancelled)  # no notice: a cancelled timer is never announced
        self._timers_changed.notify()
        return Cancellation(cancelled, stopped=True)

    # --- internals -----------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._state != "started":
            raise NotStarted("Background tasks are not available right now: the task manager is not running.")

    def _draft(
        self, name: str, spoken: str, argv: tuple[str, ...], cwd: Path | None, timeout_s: float | None, *,
        params: tuple[tuple[str, str], ...] = (), label: str = "", agent: bool = False,
    ) -> TaskRecord:
        """A new task's record before the store gives it an id (and with it a log path)."""
        return TaskRecord(
            id=0,
            name=name,
            spoken=spoken,
            argv=argv,
            cwd=str(cwd if cwd is not None else Path.home()),
            timeout_s=timeout_s if timeout_s is not None else self.settings.default_timeout_s,
            log_path="",
            created_at=self._clock(),
            params=params,
            label=label,
            agent=agent,
        )

    async def _admit(self, draft: TaskRecord, env: tuple[str, ...]) -> TaskRecord:
        """Store the new task, queue it, and start it if a slot is free."""
        # Those being stored count too: the check and the queueing are an await apart, and 40 starts
        # at once queued 22. (A free slot takes one at once: it does not wait.)
        free = max(0, self.settings.max_concurrent - len(self._workers))
        if len(self._queue) + self._admitting >= MAX_QUEUED_TASKS + free:
            raise TooMany(f"{MAX_QUEUED_TASKS} tasks are already waiting to start; try again when some have finished.")
        self._admitting += 1
        try:
            record = await self._io.call(self._store.create_task, draft, self.settings.log_path)
        finally:
            self._admitting -= 1
        live = _LiveTask(
            record=record,
            tail=OutputTail(self.settings.tail_lines, self.settings.max_line_chars),
            stop=asyncio.get_running_loop().create_future(),
            env=env,
        )
        self._live[record.id] = live
        self._queue.append(record.id)
        self._notify(record)
        self._fill_slots()
        if live.worker is not None:
            live.caller_told = True  # it launches (or fails to) before this call returns
            await live.launched.wait()
            if not live.record.is_active:  # it could not start: its notice is queued before the reply
                await live.saved.wait()
        return live.record

    def _fill_slots(self) -> None:
        while self._state == "started" and self._queue and len(self._workers) < self.settings.max_concurrent:
            live = self._live[self._queue.popleft()]
            live.worker = asyncio.get_running_loop().create_task(self._run(live), name=f"task-{live.record.id}")
            self._workers.add(live.worker)
            live.worker.add_done_callback(self._worker_finished)

    def _worker_finished(self, worker: asyncio.Task[None]) -> None:
        self._workers.discard(worker)
        if not worker.cancelled() and worker.exception() is not None:
            # _run catches everything; this is a bug in that very handling.
            self._bug("task worker crashed", worker.exception())
        self._fill_slots()

    def _bug(self, what: str, exc: BaseException | None) -> None:
        self.internal_errors += 1
        log.error("%s (internal error #%d)", what, self.internal_errors, exc_info=exc)

    def _token(self, record: TaskRecord) -> str:
        """The marker a task's processes carry: unique to this state folder, task and moment."""
        where = hashlib.sha256(str(self.settings.db_path).encode("utf-8", "replace")).hexdigest()[:12]
        return f"{where}-{record.id}-{record.created_at:.6f}"

    async def _run(self, live: _LiveTask) -> None:
        record = live.record
        try:
            exit_code = await self._launch(live)
        except LaunchError as exc:
            # Said once: in the reply to whoever started it, or (queued, nobody waiting) as a notice.
            self._apply(live, LaunchFailed(str(exc), self._clock()), announce=not live.caller_told)
        except Exception as exc:  # a bug: it must not take the worker loop (and every later task) with it
            self._bug(f"task {record.id} ({record.name}) failed unexpectedly", exc)
            if live.record.is_active:
                told = live.caller_told and live.record.started_at is None  # the reply says it could not start
                self._apply(live, Crashed(INTERNAL_ERROR, self._clock()), announce=not told)
        else:
            self._apply(live, Exited(exit_code, self._clock(), live.tail.lines(), live.tail.line_count))
        finally:
            live.launched.set()

    async def _launch(self, live: _LiveTask) -> int:
        record = live.record
        try:
            log_file = TaskLog(Path(record.log_path), self.settings.log_max_bytes)
        except OSError as exc:
            raise LaunchError(f"its log file could not be created: {exc.strerror}") from exc
        redactor = Redactor(self.settings.secrets, OutputSink(log_file, live.tail))
        # The key is not in handoff's own environment (safety.process): a template that names
        # OPENAI_API_KEY gets it from the settings (the first of the secrets, see TaskSettings).
        held = {"OPENAI_API_KEY": self.settings.secrets[0]} if self.settings.secrets else {}
        env = task_environment({**held, **os.environ}, self._token(record), self.settings.secrets, live.env)
        with log_file:
            try:
                return await self._runner.run(
                    record.argv,
                    record.cwd,
                    redactor,
                    timeout_s=record.timeout_s,
                    stop=live.stop,
                    on_started=lambda pid: self._on_started(live, pid),
                    on_stop=lambda reason: self._apply(live, StopRequested(reason, self._clock())),
                    env=env,
                )
            finally:
                redactor.flush()
                # The cap on all logs together; the other running tasks' logs are still being written.
                others = [r.record.log_path for r in self._live.values() if r is not live]
                prune_logs(self.settings.log_dir, self.settings.logs_max_total_bytes,
                           keep={p for path in others for p in (path, path + ".1")})  # fmt: skip

    def _on_started(self, live: _LiveTask, pid: int) -> None:
        self._apply(live, Started(pid, self._clock()))
        live.launched.set()

    def _apply(self, live: _LiveTask, event: TaskEvent, announce: bool = True) -> None:
        live.record = transition(live.record, event)
        final = live.record.status in FINAL_STATUSES
        self._record_change(live.record, live.saved if final else None, announce=announce)
        if final:
            live.done.set()
            self._live.pop(live.record.id, None)

    def _record_change(
        self, record: TaskRecord, landed: asyncio.Event | None = None, *, late: bool = False, announce: bool = True
    ) -> None:
        """Persist a new state; a final one with its notice, in one transaction. The write is
        queued on the store's thread (in order) and its notice posted once it has landed."""
        log.info("task %s (%s) is %s%s", record.id, record.name, record.status, f": {record.error}" if record.error else "")
        # None unless it ended worth telling (and nobody was told already).
        notice = (
            notice_for(record, self._clock(), self.settings.summary_lines, self.settings.late_after_s, late=late)
            if announce else None
        )
        saved = self._io.submit(self._store.save_task, record, notice)
        loop = self._loop or asyncio.get_running_loop()
        saved.add_done_callback(lambda future: loop.call_soon_threadsafe(self._saved, record, future, landed))
        self._notify(record)

    def _saved(
        self, record: TaskRecord, future: "concurrent.futures.Future[Notice | None]", landed: asyncio.Event | None
    ) -> None:
        if landed is not None:
            landed.set()
        error = future.exception()
        if error is not None:
            self._bug(f"task {record.id} ({record.name}): its {record.status} state could not be saved", error)
            return
        notice = future.result()
        if notice is not None:
            self.notices.posted(notice)

    def _notify(self, record: TaskRecord) -> None:
        if self._on_change is not None:
            self._on_change(record)

    def _current(self, stored: TaskRecord) -> TaskRecord:
        live = self._live.get(stored.id)
        if live is None:
            return stored
        return dataclasses.replace(live.record, tail=live.tail.lines(), line_count=live.tail.line_count)


def _checked_ident(ident: str | int) -> str | int:
    """A task identifier from the model, checked like any text it sends."""
    return ident if isinstance(ident, int) else check_text(str(ident), "The task name", 200)
