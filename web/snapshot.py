"""What the page shows, as one JSON-ready dict, built from the feed and the probes only when a
page asks (each event stream's update, or a fresh page). Every text from the model, a task or
the user passes through `clean` (secrets redacted as in the log); the page puts it in the DOM as
text, never as HTML."""

from __future__ import annotations

import datetime
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from decisions.cost import CostSummary
from decisions.stages import STAGE_ORDER, Stage
from tasks.config import TaskTemplate
from tasks.records import TaskRecord
from web.cost_days import CostDays
from web.feed import CommandView, WebFeed

SHOWN_COMMANDS = 12  # the newest; the history keeps the rest
TASK_LINES = 5  # output lines shown per task
RESULT_CHARS = 600  # of a tool's result (what the model was given; the log has it whole)
TAIL_BYTES = 4096  # read from the end of a running task's log for them
COST_DAYS = 14
LATENCY_HOURS = 24


class Now:
    """What the assistant is doing, in the page's words."""

    LISTENING = "listening"
    HEARING = "hearing a command"
    ROUTING = "routing"
    WORKING = "working"
    NARRATING = "narrating"
    RECONNECTING = "reconnecting"
    STARTING = "starting"
    STOPPING = "stopping"


@dataclass(frozen=True)
class PageProbes:
    """Read-only views of the running assistant (built in commands/run.py)."""

    phase: Callable[[], str]
    listener_up: Callable[[], bool]
    session_age_s: Callable[[], float]
    sessions_opened: Callable[[], int]
    upload_mode: str
    upload_state: Callable[[], str]  # the upload gate's: quiet, hearing, sending, window, streaming
    cost: Callable[[], CostSummary | None]
    rooms: Callable[[], list[dict[str, Any]] | None] = lambda: None  # the satellites, once there are any
    mcp_servers: Callable[[], list[dict[str, Any]]] = lambda: []  # hands.manager.Hands.shown


def now_state(phase: str, listener_up: bool, upload_state: str, tools_running: bool, trouble: bool = True) -> str:
    """`trouble`: the listener's session was lost (a drop, expiry, failed attempts), rather than
    handed over to a fresh one after an answer, which the page does not call reconnecting."""
    if phase == "narrating":
        return Now.NARRATING
    if phase == "stopping":
        return Now.STOPPING
    if phase == "routing":
        return Now.WORKING if tools_running else Now.ROUTING
    if phase == "starting":
        return Now.STARTING
    if (phase == "restarting" or not listener_up) and trouble:
        return Now.RECONNECTING
    return Now.HEARING if upload_state == "sending" else Now.LISTENING


def build(
    feed: WebFeed,
    probes: PageProbes,
    clean: Callable[[str], str],
    templates: tuple[TaskTemplate, ...],
    cost_days: CostDays | None,
    csrf: str,
    now: float,
) -> dict[str, Any]:
    latest = feed.commands[-1] if feed.commands else None
    tools_running = latest is not None and not latest.done and Stage.CALL_RECEIVED in latest.observed.times \
        and Stage.TOOL_DONE not in latest.observed.times  # fmt: skip
    phase, listener_up = probes.phase(), probes.listener_up()
    summary = probes.cost()
    return {
        "revision": feed.revision,
        "csrf": csrf,
        "now": {
            "state": now_state(phase, listener_up, probes.upload_state(), tools_running, feed.listener_trouble),
            "phase": phase,
            "listener_up": listener_up,
            "session": probes.sessions_opened(),
            "session_age_s": round(probes.session_age_s(), 1) if listener_up else None,
            "upload_mode": probes.upload_mode,
            "uploading": _uploading(probes.upload_state(), phase),
            "rooms": probes.rooms(),
            "mcp_servers": [{**server, "error": clean(server["error"])} for server in probes.mcp_servers()],
            "up_s": round(now - feed.started_at),
        },
        "commands": [_command(view, clean) for view in list(reversed(feed.commands))[:SHOWN_COMMANDS]],
        "stage_order": [stage.value for stage in STAGE_ORDER],
        "tasks": _tasks(feed.tasks.values(), clean, now),
        "templates": [{"name": t.name, "spoken": t.spoken or f"the {t.name} task",
                       "params": [{"name": p.name, "default": p.default} for p in t.params]} for t in templates],  # fmt: skip
        "cost": _cost(summary, cost_days, now),
        "latency": latency_by_hour(feed.latencies, now),
        "events": [{"at": e.at, "kind": str(e.kind), "text": clean(e.text)} for e in reversed(feed.events)],
    }


def _uploading(gate: str, phase: str) -> str:
    if phase == "narrating":
        return "nothing (muted while it speaks)"
    return {"streaming": "everything (continuous)", "sending": "a command"}.get(gate, "nothing")


def _command(view: CommandView, clean: Callable[[str], str]) -> dict[str, Any]:
    entry = view.entry
    return {
        "at": entry.at,
        "heard": clean(entry.heard),
        "tools": [clean(tool) for tool in entry.tools],
        "results": [_result(clean(result)) for result in view.results],
        "said": clean(entry.said),
        "outcome": str(entry.outcome),
        "room": entry.room,
        "done": view.done,
        "stages": view.stages(),
    }


def _result(text: str) -> dict[str, Any]:
    """ "get_time ok: {...}" (the timeline's result line) as the page shows it: JSON as lines of
    "name: value" (raw JSON broke mid-word on a phone and read as code)."""
    head, _, rest = text.partition(": ")
    rest = readable(rest)
    return {"ok": head.endswith(" ok"), "text": rest if len(rest) <= RESULT_CHARS else rest[: RESULT_CHARS - 1] + "…"}


def readable(text: str) -> str:
    """A JSON object or list as one "name: value" line per value (nested names joined by a space,
    a list of plain values on one line); `"ok": true` left out (the line says ok already). Any
    other text as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, (dict, list)):
        return text
    if isinstance(value, dict) and value.get("ok") is True:
        value = {k: v for k, v in value.items() if k != "ok"}
    return "\n".join(_lines(value, "")) or "(nothing)"


def _lines(value: Any, name: str) -> list[str]:
    label = f"{name}: " if name else ""
    if isinstance(value, dict):
        return [line for key, item in value.items() for line in _lines(item, f"{name} {key}".strip().replace("_", " "))]
    if isinstance(value, list):
        if all(not isinstance(item, (dict, list)) for item in value):
            return [label + ", ".join(_plain(item) for item in value)]
        return [line for index, item in enumerate(value, 1) for line in _lines(item, f"{name} {index}".strip())]
    return [label + _plain(value)] if value != "" else []  # an empty value says nothing


def _plain(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _tasks(records: Any, clean: Callable[[str], str], now: float) -> list[dict[str, Any]]:
    order = {"running": 0, "queued": 1}
    rows = sorted(records, key=lambda r: (order.get(str(r.status), 2), -r.id))
    return [{
        "id": r.id, "name": r.name, "spoken": clean(r.spoken), "status": str(r.status), "active": r.is_active,
        "duration_s": None if r.duration_s(now) is None else round(r.duration_s(now) or 0.0, 1),
        "lines": [clean(line) for line in _last_lines(r)], "error": clean(r.error or ""),
    } for r in rows]  # fmt: skip


def _last_lines(record: TaskRecord) -> list[str]:
    if not record.is_active or not record.log_path:
        return list(record.tail[-TASK_LINES:])
    try:  # running: its log so far (the tail in the record is saved only when it ends)
        with Path(record.log_path).open("rb") as log:
            size = log.seek(0, 2)
            log.seek(max(0, size - TAIL_BYTES))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # cut mid-line
    return lines[-TASK_LINES:]


def _cost(summary: CostSummary | None, cost_days: CostDays | None, now: float) -> dict[str, Any] | None:
    if summary is None:
        return None
    today = summary.today
    parts = today.parts()
    spent = today.spent_usd
    budget = summary.budget_usd
    today_date = datetime.date.fromtimestamp(now)
    return {
        "today": {k: round(v, 6) for k, v in parts.items()},
        "total": round(spent, 6),
        "budget": budget,
        "left": None if budget is None else round(max(0.0, budget - spent), 6),
        "per_day_estimate": round(summary.estimate_per_day_usd, 4),
        "uploaded_s": round(today.uploaded_s, 1),
        "days": cost_days.last_days(today_date, COST_DAYS, parts) if cost_days is not None else [
            {"day": today_date.isoformat(), "parts": parts, "total": round(spent, 6)}],
    }


def latency_by_hour(latencies: Any, now: float, hours: int = LATENCY_HOURS) -> list[dict[str, Any]]:
    """Voice-to-voice seconds (end of speech to the answer's first audio) per hour of the last
    `hours`, oldest first: p50 and p95 of each hour's commands (None in an hour without one)."""
    this_hour = int(now // 3600)
    by_hour: dict[int, list[float]] = {}
    for at, seconds in latencies:
        hour = int(at // 3600)
        if this_hour - hours < hour <= this_hour:
            by_hour.setdefault(hour, []).append(seconds)
    rows = []
    for hour in range(this_hour - hours + 1, this_hour + 1):
        values = sorted(by_hour.get(hour, []))
        rows.append({"hour": hour * 3600, "count": len(values),
                     "p50": round(statistics.median(values), 3) if values else None,
                     "p95": round(_percentile(values, 0.95), 3) if values else None})  # fmt: skip
    return rows


def _percentile(ordered: list[float], fraction: float) -> float:
    """Nearest rank: the smallest value at least `fraction` of them do not exceed."""
    rank = max(1, math.ceil(fraction * len(ordered) - 1e-9))
    return ordered[min(len(ordered), rank) - 1]
