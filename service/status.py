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
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections import deque
from typing import Any, Callable, Iterable

from decisions.stages import STAGE_ORDER, Stage
from decisions.events import ConnectAttemptFailed, ListenerLost, ListenerReady, LossCause, Narrated
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
    # Each satellite (rooms.link.LinkStatus as a dict: room, uri, state, last_command_at, last_error, reconnects).
    satellites: Callable[[], list[dict[str, Any]]] = lambda: []
    # Each MCP server (hands.manager.Hands.shown: name, transport, up, tools, restarts, error).
    mcp_servers: Callable[[], list[dict[str, Any]]] = lambda: []


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
    satellites: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # one per room (SATELLITES)
    mcp_servers: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # one per MCP server (mcp.json)
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
        match entry.event:
            case ListenerReady():
                status.session_started_at = self._clock()
            case Narrated():
                status.narrations += 1
        if entry.kind is TimelineKind.ERROR:
            today = self._today()
            if status.failures_day != today:
                status.failures_day, status.failures_today = today, 0
            status.failures_today += 1
            match entry.event:
                case ListenerLost(cause=LossCause.DROPPED):
                    status.drops += 1
                case ConnectAttemptFailed():
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
                                        "outcome": str(entry.outcome), "room": entry.room}  # fmt: skip

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
        status.satellites = probes.satellites()
        status.mcp_servers = probes.mcp_servers()
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


class StatusCorrupt(Exception):
    """The status file is there but is not a status this version wrote; the message says how."""


def read_status(path: Path) -> Status | None:
    """The status file's contents; None if there is none. Raises StatusCorrupt when it cannot be
    read or is not a status file this version writes (hand-edited, damaged, truncated): every
    field is checked here, so nothing downstream meets a string pid or a NaN time."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StatusCorrupt(f"it cannot be read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested beyond reason
        raise StatusCorrupt("it is not JSON") from None
    if not isinstance(data, dict):
        raise StatusCorrupt("it is not a JSON object")
    if data.pop("version", None) != FORMAT_VERSION:
        raise StatusCorrupt(f"it is not version {FORMAT_VERSION} of the status format")
    values = {}
    for spec in dataclasses.fields(Status):
        if spec.name not in data:
            if spec.default is dataclasses.MISSING:
                raise StatusCorrupt(f"it has no {spec.name}")
            continue
        value = data[spec.name]
        if not _FIELD_CHECKS[spec.name](value):
            raise StatusCorrupt(f"its {spec.name} is {_shown(value)}")
        values[spec.name] = value
    return Status(**values)


_MAX_PID = 1 << 22  # the kernel's largest pid_max


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


def _time(value: object) -> bool:
    """A wall-clock or duration in seconds: a finite number, within a few thousand years."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value < 1e11


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _last_command(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("heard"), str)
        and _time(value.get("at"))
        and isinstance(value.get("tools"), list)
        and all(isinstance(tool, str) for tool in value["tools"])
        and isinstance(value.get("outcome"), str)
    )


def _satellites(value: object) -> bool:
    """One entry a room (rooms.hub): its name, address and state as strings, the rest optional."""
    return isinstance(value, list) and all(
        isinstance(room, dict)
        and all(isinstance(room.get(key), str) for key in ("room", "uri", "state"))
        and _count(room.get("reconnects", 0))
        and _optional(_time)(room.get("last_command_at"))
        and _optional(lambda error: isinstance(error, str))(room.get("last_error"))
        for room in value
    )


def _mcp_servers(value: object) -> bool:
    """One entry a server (hands.manager.Hands.shown)."""
    return isinstance(value, list) and all(
        isinstance(server, dict)
        and all(isinstance(server.get(key), str) for key in ("name", "transport", "error"))
        and type(server.get("up")) is bool
        and _count(server.get("tools"))
        and _count(server.get("restarts"))
        for server in value
    )


def _stages_ms(value: object) -> bool:
    """`stage_summary`'s shape: a count, and [p50, p95] in ms per stage."""
    return isinstance(value, dict) and all(
        isinstance(key, str) and (_count(item) if key == "commands" else (
            isinstance(item, list) and len(item) == 2 and all(_time(ms) for ms in item)))
        for key, item in value.items()
    )


def _cost_parts(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _time(v) for k, v in value.items())


_FIELD_CHECKS: dict[str, Callable[[object], bool]] = {
    "pid": lambda value: type(value) is int and 0 < value < _MAX_PID,
    "process_start": _optional(_count),
    "started_at": _time,
    "updated_at": _time,
    "heartbeat_s": lambda value: _time(value) and value > 0,  # type: ignore[operator]
    "phase": lambda value: isinstance(value, str),
    "healthy": lambda value: type(value) is bool,
    "listener_up": lambda value: type(value) is bool,
    "session": _count,
    "session_started_at": _optional(_time),
    "drops": _count,
    "failed_attempts": _count,
    "last_command": _optional(_last_command),
    "narrations": _count,
    "weak_matches": _count,
    "inexact_reads": _count,
    "tasks_running": _count,
    "tasks_queued": _count,
    "failures_today": _count,
    "failures_day": lambda value: isinstance(value, str),
    "cost_today_usd": _optional(_time),
    "cost_parts_usd": _optional(_cost_parts),
    "satellites": _satellites,
    "mcp_servers": _mcp_servers,
    "stages_ms": _optional(_stages_ms),
}


def _shown(value: object) -> str:
    shown = json.dumps(value, ensure_ascii=True)  # no control characters reach the terminal
    return shown if len(shown) <= 40 else shown[:37] + "..."


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
