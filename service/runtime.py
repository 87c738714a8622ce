"""What a running daemon tells the outside world, from the coordinator's timeline (`on_add`)
and a few read-only probes (nothing here reaches into the coordinator):

- systemd: READY=1 once the first listener session is configured (STATUS= lines after),
  WATCHDOG=1 every half WatchdogSec while the event loop runs and the listener is healthy
  (`service.health`), STOPPING=1 as soon as a stop begins;
- the status file (`service.status`), rewritten on change (at most every `min_interval_s`) and
  at least every `heartbeat_s`;
- the history (`service.history`) of what was asked and said.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from concurrency.changes import Changes
from config.logging_setup import redact
from decisions.timeline import Timeline, TimelineEntry, TimelineKind
from service.health import ListenerHealth
from service.history import HistoryEntry, HistoryKind, HistoryStore, HistoryTracker
from service.notify import SystemdNotifier
from service.status import Probes, StatusTracker, write_status
from tasks.records import TaskRecord

log = logging.getLogger("handoff.service")


@dataclass(frozen=True)
class StatusFiles:
    status_path: Path
    history: HistoryStore | None
    keep_overheard: bool = False  # LOG_OVERHEARD: overheard speech goes into the history too
    min_interval_s: float = 2.0
    heartbeat_s: float = 15.0
    secrets: tuple[str, ...] = field(default=(), repr=False)  # cut out of what the status and history keep


class ServiceRuntime:
    """Use as `async with ServiceRuntime(...) as service:` around the running coordinator; call
    `stopping(why)` as soon as a stop begins (a signal), so systemd knows before the tasks do."""

    def __init__(
        self,
        timeline: Timeline,
        notifier: SystemdNotifier,
        health: ListenerHealth,
        watchdog_s: float | None,
        files: StatusFiles | None = None,
    ) -> None:
        self._timeline = timeline
        self._probes = Probes(listener_up=lambda: False)  # until `attach`: nothing assembled yet
        self._notifier = notifier
        self._health = health
        self._watchdog_s = watchdog_s
        self._files = files
        self._ready = False
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self.vouching = True  # the last health check found the listener healthy
        self.checks = 0  # health checks made by the watchdog loop
        self.writes = 0  # status files written
        self.changes = Changes()  # notified after each check and each write (tests await them)
        self._dirty = Changes()  # something the status file shows has changed ...
        self._unwritten = False  # ... since it was last written
        self.tracker = StatusTracker(self._probes, files.heartbeat_s if files else 0.0)
        self._history = HistoryTracker(self._command_done, keep_overheard=files.keep_overheard if files else False)
        # Told of every finished entry but overheard speech (the web page's feed).
        self.on_history: list[Callable[[HistoryEntry], None]] = []

    @property
    def current_command(self) -> HistoryEntry | None:
        """The command in progress (filled in as it goes), or the last one finished."""
        return self._history.last_command

    def attach(self, probes: Probes) -> None:
        """Read the assembled assistant through `probes` from now on."""
        self._probes = self.tracker.probes = probes

    async def __aenter__(self) -> "ServiceRuntime":
        self._timeline.on_add.append(self._observe)
        if self._watchdog_s is not None:
            self._tasks.append(asyncio.create_task(self._ping(self._watchdog_s), name="watchdog"))
        if self._files is not None:
            self._tasks.append(asyncio.create_task(self._write_status(self._files), name="status file"))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._timeline.on_add.remove(self._observe)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.stopping("stopped")
        if self._files is not None:
            self._write(self._files, phase="stopped")
            if self._files.history is not None:
                self._files.history.close()  # every entry written before we go
        self._notifier.close()

    def stopping(self, why: str) -> None:
        if not self._stopping:
            self._stopping = True
            self._notifier.stopping(why)
            self._changed()

    def task_changed(self, record: TaskRecord) -> None:
        """The task manager's on_change: how many tasks are running and queued."""
        self.tracker.task_changed(record.id, str(record.status), record.is_active)
        self._changed()

    def shown_changed(self) -> None:
        """Something the status shows through its probes changed (an MCP server came up or went
        down): written at once (within `min_interval_s`), not at the next heartbeat."""
        self._changed()

    def _changed(self) -> None:
        self._unwritten = True
        self._dirty.notify()

    def watch_room(self, room: str, timeline: Timeline) -> None:
        """A satellite's room (rooms.hub): its timeline feeds the status too, and a history of its
        own whose entries name the room."""
        keep = self._files.keep_overheard if self._files else False
        history = HistoryTracker(lambda entry: self._command_done(dataclasses.replace(entry, room=room)), keep_overheard=keep)
        timeline.on_add.append(functools.partial(self._observe, history=history, room=room))

    # -- observing ------------------------------------------------------------------------------------
    def _observe(self, entry: TimelineEntry, history: HistoryTracker | None = None, room: str = "") -> None:
        history = history or self._history
        if self._files is not None and self._files.secrets:  # say, a key read out by the user
            secrets = self._files.secrets
            entry = dataclasses.replace(entry, text=redact(entry.text, secrets), event=redacted(entry.event, secrets))
        self._health.news()
        self.tracker.observe(entry)
        history.observe(entry)
        if entry.kind is TimelineKind.COMMAND and history.last_command is not None:
            history.last_command.room = room
        self.tracker.command(history.last_command)
        if entry.kind is TimelineKind.LISTENING and not self._stopping:
            if not self._ready:
                self._ready = True
                self._notifier.ready(entry.text)
            else:
                self._notifier.status(entry.text)
        self._changed()

    def _command_done(self, entry: HistoryEntry) -> None:
        if entry.kind is not HistoryKind.OVERHEARD:
            for watcher in self.on_history:
                watcher(entry)
        if entry.kind is HistoryKind.COMMAND:
            self.tracker.stages(entry.stages)
        if self._files is not None and self._files.history is not None:
            if entry.kind is not HistoryKind.OVERHEARD or self._files.keep_overheard:
                self._files.history.add(entry)

    # -- the loops ------------------------------------------------------------------------------------
    async def _ping(self, interval_s: float) -> None:
        """A ping only from a running loop, only for a healthy listener: a stuck one is left to
        the watchdog (systemd restarts handoff after WatchdogSec without one)."""
        while True:
            healthy = self._health.healthy(self._probes.listener_up())
            if healthy:
                self._notifier.watchdog()
            if healthy is not self.vouching:
                self.vouching = healthy
                log.warning("the listener is %s", "healthy again" if healthy else
                            f"down and silent for {self._health.stuck_after_s:g} s: no more watchdog pings")
                self._changed()
            self.checks += 1
            self.changes.notify()
            await asyncio.sleep(interval_s)  # the protocol's heartbeat: a fixed period by design

    async def _write_status(self, files: StatusFiles) -> None:
        """On every change, but at most every `min_interval_s`; and every `heartbeat_s` anyway,
        so a stale file tells `handoff status` the daemon is stuck."""
        while True:
            self._write(files)
            await asyncio.sleep(files.min_interval_s)  # a burst of changes makes one write
            if not self._unwritten:
                await self._dirty.wait(files.heartbeat_s - files.min_interval_s)

    def _write(self, files: StatusFiles, phase: str | None = None) -> None:
        healthy = self._health.healthy(self._probes.listener_up())
        if phase is None and self._stopping:
            phase = "stopping"
        self._unwritten = False
        try:
            write_status(files.status_path, self.tracker.snapshot(healthy, phase))
        except OSError as exc:  # a full disk: `handoff status` will call it stale; the assistant goes on
            log.error("could not write the status file %s: %s", files.status_path, exc)
        self.writes += 1
        self.changes.notify()


def redacted(value: Any, secrets: tuple[str, ...]) -> Any:
    """`value` (a typed event, its record, their strings, tuples and dicts) with every secret cut
    out of every string in it: the history and the status file are written from the events."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, tuple):
        return tuple(redacted(v, secrets) for v in value)
    if isinstance(value, dict):
        return {k: redacted(v, secrets) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: redacted(getattr(value, f.name), secrets) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value
