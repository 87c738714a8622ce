"""What the page shows and /metrics counts, kept in memory as the daemon runs: the last commands
(the very `HistoryEntry` objects the history tracker fills in), the last connection events and
errors, the tasks, and plain counters. Synchronous and I/O-free: each timeline entry costs an
append and a few integer additions, whether anyone looks or not; everything else (JSON, charts,
Prometheus text) is built only when a page or a scraper asks.

Overheard speech never gets here: only the history's commands and what was said unasked.
"""

from __future__ import annotations

import bisect
import collections
import enum
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from concurrency.changes import Changes
from decisions.stages import Stage, StageTimes
from decisions.events import (
    CommandClosed, CommandRouted, ConnectAttemptFailed, FatalError, ListenerLost, ListenerReady, LossCause, Narrated, NarrationKind,
    ToolFinished, ToolOutcome,
)
from decisions.timeline import TimelineEntry, TimelineKind
from service.history import HistoryEntry, HistoryKind
from tasks.records import TaskRecord

# Upper bounds of the stage latency histograms, in seconds after the end of speech.
STAGE_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 30.0)
KEEP_FINISHED_TASKS = 20
# The narrations that end a command (the others are notices, progress and connection news).
_ANSWERS = frozenset((NarrationKind.ANSWER, NarrationKind.FALLBACK, NarrationKind.ERROR))


class EventKind(enum.StrEnum):
    RECONNECT = "reconnect"  # the listener's session ended and a new one is on its way
    ERROR = "error"
    FATAL = "fatal"  # handoff stops: the line it says on its way out
    SAID = "said"  # what it said unasked about the connection (or a task's notice)


@dataclass
class CommandView:
    """One command as the page shows it: the history's entry (filled in as it goes), the tool
    results, and the stages seen at the timeline's level (used where the entry has none)."""

    entry: HistoryEntry
    observed: StageTimes = field(default_factory=StageTimes)
    results: list[str] = field(default_factory=list)
    done: bool = False
    command_id: int | None = None  # the lifecycle's id (decisions.lifecycle), once routed here

    def stages(self) -> dict[str, float]:
        return dict(self.entry.stages) or self.observed.offsets()


@dataclass(frozen=True)
class EventView:
    at: float  # wall clock
    kind: EventKind
    text: str


@dataclass
class StageHistogram:
    """A Prometheus histogram's numbers, kept as plain integers: counts per bucket (not
    cumulative; the last one is +Inf), the sum and the count."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(STAGE_BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect.bisect_left(STAGE_BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1


class WebFeed:
    """Fed by the daemon: `observe` (timeline `on_add`), `history_done` (each finished history
    entry), `task_changed` (the task manager's on_change). `changes` wakes the page's event
    streams; with nobody connected, notifying it does nothing."""

    def __init__(self, current_command: Callable[[], HistoryEntry | None], clock: Callable[[], float] = time.time,
                 keep_commands: int = 30, keep_events: int = 50, keep_latencies: int = 5000) -> None:  # fmt: skip
        self._current_command = current_command
        self._clock = clock
        self.commands: deque[CommandView] = deque(maxlen=keep_commands)
        self.events: deque[EventView] = deque(maxlen=keep_events)
        self.tasks: dict[int, TaskRecord] = {}
        self.latencies: deque[tuple[float, float]] = deque(maxlen=keep_latencies)  # (wall clock, voice-to-voice s)
        self.counts: collections.Counter[tuple[str, ...]] = collections.Counter()  # for /metrics
        self.stage_seconds: dict[str, StageHistogram] = {}
        self.revision = 0
        self.changes = Changes()
        self._heard_at: float | None = None  # the last command-shaped transcript, timeline clock
        self._finished: CommandView | None = None  # a command the history just finished
        # The listener's session was lost, not handed over after an answer (which takes a moment
        # and is no news): from then until the next session is ready, the page says reconnecting.
        self.listener_trouble = True
        self.started_at = clock()

    # -- what the daemon calls ----------------------------------------------------------------------
    def observe(self, entry: TimelineEntry) -> None:
        view = self.commands[-1] if self.commands and not self.commands[-1].done else None
        match entry.kind:
            case TimelineKind.HEARD:
                self._heard_at = entry.at
            case TimelineKind.COMMAND:
                current = self._current_command()
                if current is not None and (view is None or view.entry is not current):
                    view = CommandView(current)
                    if self._heard_at is not None:
                        view.observed.mark(Stage.TRANSCRIPT, self._heard_at)
                    view.observed.mark(Stage.ROUTE_SENT, entry.at)
                    self.commands.append(view)
                self._heard_at = None
            case TimelineKind.TOOL | TimelineKind.FALLBACK if view is not None:
                view.observed.mark(Stage.CALL_RECEIVED, entry.at)
            case TimelineKind.RESULT | TimelineKind.ERROR if isinstance(entry.event, ToolFinished):
                tool = entry.event
                self.counts["tool_runs", tool.name, tool.outcome.value] += 1
                if view is not None and tool.outcome is not ToolOutcome.CRASHED:
                    view.observed.times[Stage.TOOL_DONE] = entry.at  # the last tool's end
                    view.results.append(entry.text)
            case TimelineKind.NARRATING if view is not None and Stage.CALL_RECEIVED in view.observed.times:
                view.observed.mark(Stage.TOOL_DONE, entry.at)  # (a reply with no tool: the model's text)
        match entry.event:
            case CommandRouted(command=record) if view is not None and view.command_id is None:
                view.command_id = record.id
            case CommandClosed(command=record) if not record.kept:
                # Withdrawn (not addressed after all) or lost (its words route it again): not a
                # command of the user's, so no row stays "in progress" for ever.
                self.commands = deque((v for v in self.commands if v.command_id != record.id), maxlen=self.commands.maxlen)
            case Narrated(narration=kind):
                self.counts["narrations", kind.value] += 1
                answered = view or self._finished
                if answered is not None and kind in _ANSWERS:
                    answered.observed.mark(Stage.LAST_AUDIO, entry.at)
            case ListenerReady():
                self.counts["listener_sessions",] += 1
                self.listener_trouble = False
            case ListenerLost(cause=cause):
                self.listener_trouble = True
                self.counts["reconnects", cause.value] += 1
                if cause is not LossCause.DROPPED:
                    self.events.append(EventView(self._clock(), EventKind.RECONNECT, entry.text))
            case ConnectAttemptFailed():
                self.counts["connection_failures",] += 1
                self.listener_trouble = True
        if entry.kind is TimelineKind.ERROR:
            fatal = isinstance(entry.event, FatalError)
            self.counts["errors", "fatal" if fatal else "error"] += 1
            message = entry.event.message if isinstance(entry.event, FatalError) else entry.text
            self.events.append(EventView(self._clock(), EventKind.FATAL if fatal else EventKind.ERROR, message))
        if self._finished is not None:
            self._count_stages(self._finished)
            self._finished = None
        self._changed()

    def history_done(self, entry: HistoryEntry) -> None:
        """A finished history entry: a command answered (or not), or something said unasked."""
        if entry.kind is HistoryKind.COMMAND:
            view = next((v for v in reversed(self.commands) if v.entry is entry), None)
            if view is None:
                view = CommandView(entry)
                self.commands.append(view)
            view.done = True
            self.counts["commands", str(entry.outcome)] += 1
            # Its stages are counted once the timeline entry that finished it has been seen
            # (the history hears of it first: the narration's end is its last audio).
            self._finished = view
        elif entry.kind in (HistoryKind.STATUS, HistoryKind.NOTICE):
            self.events.append(EventView(entry.at, EventKind.SAID, entry.said))
        self._changed()

    def task_changed(self, record: TaskRecord) -> None:
        previous = self.tasks.get(record.id)
        self.tasks[record.id] = record
        if not record.is_active and (previous is None or previous.is_active):
            self.counts["tasks", str(record.status)] += 1
            finished = sorted(r.id for r in self.tasks.values() if not r.is_active)
            for old in finished[:-KEEP_FINISHED_TASKS]:
                del self.tasks[old]
        self._changed()

    def preload(self, entries: list[HistoryEntry]) -> None:
        """Commands and voice-to-voice times from the history of earlier runs (oldest first), so
        a restarted daemon's page is not empty; they count in no metric."""
        for entry in entries:
            if entry.kind is not HistoryKind.COMMAND:
                continue
            if Stage.FIRST_AUDIO.value in entry.stages:
                self.latencies.append((entry.at, entry.stages[Stage.FIRST_AUDIO.value]))
            self.commands.append(CommandView(entry, done=True))
        self._changed()

    def _count_stages(self, view: CommandView) -> None:
        stages = view.stages()
        for stage, seconds in stages.items():
            self.stage_seconds.setdefault(stage, StageHistogram()).observe(seconds)
        if Stage.FIRST_AUDIO.value in stages:
            self.latencies.append((view.entry.at, stages[Stage.FIRST_AUDIO.value]))

    def _changed(self) -> None:
        self.revision += 1
        self.changes.notify()
