"""The status file `handoff status` reads: a small JSON document in the state folder, written
atomically (a temporary file, then os.replace) and readable only by its owner.

The daemon rewrites it on every change (at most every `min_interval_s`) and at least every
`heartbeat_s`, so a file older than a few heartbeats means the daemon is stuck or gone, and a pid
that is not alive (or is another program's by now) means it is not running.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections import deque
from typing import Any, Callable, Iterable

from decisions.stages import STAGE_ORDER, Stage
from decisions.timeline import TimelineEntry, TimelineKind
from service.history import HistoryEntry

STATUS_FILE = "status.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Probes:
    """Read-only views of the running assistant (built by the caller from what it assembled)."""

    listener_up: Callable[[], bool]
    phase: Callable[[], str] = lambda: "starting"
    sessions_opened: Callable[[], int] = lambda: 0
    session_age_s: Callable[[], float] = lambda: 0.0
    weak_matches: Callable[[], int] = lambda: 0
    inexact_reads: Callable[[], int] = lambda: 0
    # Today's estimated spend by part ({"listener": usd, "narrator": ..., "transcription": ..., "brain": ...},
    # from decisions.cost.CostMeter); None: not counted.
    cost_today: Callable[[], dict[str, float] | None] = lambda: None


@dataclass
class Status:
    pid: int
    process_start: int | None  # the kernel's start time of `pid`, so a reused pid is not taken for ours
    started_at: float  # wall clock
    updated_at: float
    heartbeat_s: float  # the longest the daemon goes without rewriting this file
    phase: str = "starting"
    healthy: bool = True
    listener_up: bool = False
    session: int = 0  # listener sessions opened so far (the current one's number)
    session_started_at: float | None = None  # wall clock; None while no session is up
    drops: int = 0  # sessions that ended without us asking
    failed_attempts: int = 0  # connection attempts that failed
    last_command: dict[str, Any] | None = None  # heard, at, tools, outcome
    narrations: int = 0
    weak_matches: int = 0
    inexact_reads: int = 0
    tasks_running: int = 0
    tasks_queued: int = 0
    failures_today: int = 0  # timeline errors since local midnight
    failures_day: str = ""  # the day failures_today counts
    cost_today_usd: float | None = None  # today's estimated spend (decisions/cost.py); None: not counted
    cost_parts_usd: dict[str, float] | None = None  # the same by part: listener, narrator, transcription, brain
    # The latest commands' stages (decisions.stages), summarised: see `stage_summary`.
    stages_ms: dict[str, Any] | None = None

    @property
    def reconnects(self) -> int:
        return max(0, self.session - 1)


class StatusTracker:
    """Keeps a `Status` up to date from timeline entries, task changes and probes (no I/O)."""

    def __init__(self, probes: Probes, heartbeat_s: float, clock: Callable[[], float] = time.time, pid: int | None = None) -> None:
        self.probes = probes
        self._clock = clock
        now = clock()
        pid = os.getpid() if pid is None else pid
        self.status = Status(pid=pid, process_start=process_start(pid), started_at=now, updated_at=now, heartbeat_s=heartbeat_s)
        self._tasks: dict[int, str] = {}
        self._stages: deque[dict[str, float]] = deque(maxlen=STAGES_KEPT)

    def observe(self, entry: TimelineEntry) -> None:
        status = self.status
        match entry.kind:
            case TimelineKind.LISTENING:
                status.session_started_at = self._clock()
            case TimelineKind.NARRATED:
                status.narrations += 1
            case TimelineKind.ERROR:
                today = self._today()
                if status.failures_day != today:
                    status.failures_day, status.failures_today = today, 0
                status.failures_today += 1
                if entry.text.startswith("listener connection dropped"):
                    status.drops += 1
                elif entry.text.startswith("listener connection attempt"):
                    status.failed_attempts += 1

    def task_changed(self, task_id: int, status: str, active: bool) -> None:
        if active:
            self._tasks[task_id] = status
        else:
            self._tasks.pop(task_id, None)

    def stages(self, offsets: dict[str, float]) -> None:
        """A finished command's stage offsets (seconds after the end of speech)."""
        if offsets:
            self._stages.append(offsets)
            self.status.stages_ms = stage_summary(self._stages)

    def command(self, entry: HistoryEntry | None) -> None:
        if entry is not None:
            self.status.last_command = {"heard": entry.heard, "at": entry.at, "tools": list(entry.tools),
                                        "outcome": str(entry.outcome)}  # fmt: skip

    def snapshot(self, healthy: bool, phase: str | None = None) -> Status:
        """The status as of now, the probes read."""
        status = self.status
        probes = self.probes
        status.updated_at = self._clock()
        status.healthy = healthy
        status.phase = phase or probes.phase()
        status.listener_up = probes.listener_up()
        status.session = probes.sessions_opened()
        if not status.listener_up:
            status.session_started_at = None
        elif status.session_started_at is None:
            status.session_started_at = status.updated_at - probes.session_age_s()
        status.weak_matches, status.inexact_reads = probes.weak_matches(), probes.inexact_reads()
        status.cost_parts_usd = probes.cost_today()
        status.cost_today_usd = None if status.cost_parts_usd is None else sum(status.cost_parts_usd.values())
        status.tasks_running = sum(s == "running" for s in self._tasks.values())
        status.tasks_queued = sum(s == "queued" for s in self._tasks.values())
        if status.failures_day != self._today():
            status.failures_day, status.failures_today = self._today(), 0
        return dataclasses.replace(status)

    def _today(self) -> str:
        return datetime.date.fromtimestamp(self._clock()).isoformat()


STAGES_KEPT = 200  # the commands `handoff status` summarises


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def stage_summary(commands: Iterable[dict[str, float]]) -> dict[str, Any]:
    """p50/p95 in ms of each stage's offset from the end of speech over recent commands, and of
    voice to voice (end of speech to the answer's first audio), kept small for status.json:
    {"commands": n, "voice_to_voice": [p50, p95], "<stage>": [p50, p95], ...}."""
    rows = list(commands)
    summary: dict[str, Any] = {"commands": len(rows)}
    for stage in STAGE_ORDER:
        values = [row[stage.value] * 1000 for row in rows if stage.value in row]
        if values and stage is not Stage.END_OF_SPEECH:
            summary[stage.value] = [round(_percentile(values, 0.5)), round(_percentile(values, 0.95))]
    if Stage.FIRST_AUDIO.value in summary:
        summary["voice_to_voice"] = summary[Stage.FIRST_AUDIO.value]
    return summary


def write_status(path: Path, status: Status) -> None:
    """Atomically: readers see the old file or the new one, never half of one."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".status-", suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"version": FORMAT_VERSION, **dataclasses.asdict(status)}, handle, indent=1)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_status(path: Path) -> Status | None:
    """The status file's contents; None if there is none or it is not one of ours."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.pop("version", None) != FORMAT_VERSION:
        return None
    known = {f.name for f in dataclasses.fields(Status)}
    try:
        return Status(**{k: v for k, v in data.items() if k in known})
    except TypeError:  # a field missing: written by another version
        return None


class Liveness(enum.Enum):
    RUNNING = "running"
    UNHEALTHY = "unhealthy"  # running, but its status is stale or its listener is stuck
    STOPPED = "stopped"  # it said so on its way out
    GONE = "not running"  # its pid is not alive (or is someone else's now): it died


def liveness(status: Status, now: float) -> Liveness:
    if status.phase == "stopped":
        return Liveness.STOPPED
    if not pid_alive(status.pid, status.process_start):
        return Liveness.GONE
    if now - status.updated_at > 3 * status.heartbeat_s or not status.healthy:
        return Liveness.UNHEALTHY
    return Liveness.RUNNING


def process_start(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None without /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2 :].split()[19])


def pid_alive(pid: int, started: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's: decided by its start time below
    return started is None or process_start(pid) == started
