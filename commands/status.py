"""`handoff status` (how the running daemon is doing, from its status file) and `handoff history
[--today]` (what it was asked and what it said). Both only read: safe while the daemon runs."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from config.logging_setup import redact
from config.read_only import readable_settings
from config.settings import Settings
from safety.text import map_strings, printable
from service.history import HISTORY_FILE, HistoryEntry, HistoryKind, read_history
from commands.web_url import web_line
from service.status import STATUS_FILE, Liveness, Status, StatusCorrupt, liveness, read_status

# Exit codes, as init scripts' `status` uses them: 0 running, 1 running but unwell, 3 not running.
EXIT_RUNNING = 0
EXIT_UNHEALTHY = 1
EXIT_NOT_RUNNING = 3
EXIT_UNKNOWN = 4  # the status file is damaged
EXIT_USAGE = 2  # the state folder named is not a folder


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where the daemon keeps its status (HANDOFF_STATE_DIR)")


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where the daemon keeps its history (HANDOFF_STATE_DIR)")
    parser.add_argument("--today", action="store_true", help="only what happened since midnight")
    parser.add_argument("--limit", type=_limit, default=50, help="at most this many entries, the newest (default 50)")


def _limit(text: str) -> int:
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
    return limit


def _settings(args: argparse.Namespace) -> Settings:
    return readable_settings({"HANDOFF_STATE_DIR": getattr(args, "state_dir", None)}, args.command)


def state_dir_problem(settings: Settings, args: argparse.Namespace) -> str | None:
    """One sentence when the state folder named is a file (`--state-dir /etc/passwd`): not a
    damaged status file, nor an empty history."""
    path = settings.state_dir
    if path.exists() and not path.is_dir():
        named = f"--state-dir {path}" if getattr(args, "state_dir", None) else f"HANDOFF_STATE_DIR={path}"
        return (f"handoff {args.command}: {named} is a file, not a folder; point it at the folder handoff keeps "
                "its state in (default ~/.local/state/handoff).")
    return None


def shown(value: Any, secrets: Iterable[str] = ()) -> Any:
    """What the model, the transcriber or a task said, fit to print on a terminal: control
    characters (escape sequences, newlines) shown as escapes, the key cut out; in every string
    of a JSON-like value."""
    secrets = tuple(secrets)
    return map_strings(value, lambda text: printable(redact(text, secrets)))


def run_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    problem = state_dir_problem(settings, args)
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    path = settings.state_dir / STATUS_FILE
    try:
        status = read_status(path)
    except StatusCorrupt as exc:
        print(f"handoff status: the status file {path} is damaged ({exc}), so whether handoff runs is unknown; "
              "a running handoff rewrites it within a minute, else delete it.", file=sys.stderr)  # fmt: skip
        return EXIT_UNKNOWN
    if status is None:
        print(f"handoff is not running (no status file at {path}).")
        return EXIT_NOT_RUNNING
    status.phase, status.last_command = shown(status.phase), shown(status.last_command, [settings.realtime.api_key])
    now = time.time()
    state = liveness(status, now)
    print(describe(status, state, now))
    if state in (Liveness.RUNNING, Liveness.UNHEALTHY):
        print(web_line(settings.web, settings.state_dir) or "", end="")
    if state is Liveness.RUNNING:
        return EXIT_RUNNING
    return EXIT_UNHEALTHY if state is Liveness.UNHEALTHY else EXIT_NOT_RUNNING


def describe(status: Status, state: Liveness, now: float) -> str:
    """The status file, readable."""
    lines = []
    ended = state in (Liveness.STOPPED, Liveness.GONE)
    if ended:  # what it was doing then, not figures that look live
        how = "stopped" if state is Liveness.STOPPED else f"not running: process {status.pid} is gone"
        lines.append(f"handoff is {how}, since {_when(status.updated_at, now)} (it had run {_span(status.updated_at - status.started_at)}).")
    else:
        lines.append(f"handoff is {state.value} (pid {status.pid}), up {_span(now - status.started_at)} "
                     f"(since {_clock(status.started_at)}), now {status.phase}.")  # fmt: skip
        if status.listener_up and status.session_started_at is not None:
            listener = f"up, session {status.session} for {_span(now - status.session_started_at)}"
        else:
            listener = "down"
        lines.append(f"listener: {listener}; {status.reconnects} reconnect(s), {status.drops} drop(s), "
                     f"{status.failed_attempts} failed connection attempt(s)")  # fmt: skip
    command = status.last_command
    if command:
        tools = ", ".join(tool.split("(", 1)[0] for tool in command["tools"]) or "no tool"
        outcome = "not finished" if ended and command["outcome"] == "in progress" else command["outcome"]
        where = f" in the {command['room']}" if command.get("room") else ""
        lines.append(f"last command{where}: \"{command['heard']}\" at {_clock(command['at'])}: {tools}, {outcome}")
    else:
        lines.append("last command: none yet")
    if ended:
        return "\n".join(lines)
    for satellite in status.satellites:
        last = satellite.get("last_command_at")
        lines.append(f"satellite {satellite['room']} ({satellite['uri']}): {satellite['state']}, "
                     f"{satellite.get('reconnects', 0)} reconnect(s); last command "
                     f"{_clock(last) if last else 'none yet'}"
                     + (f"; last error: {satellite['last_error']}" if satellite.get("last_error") else "")
                     + (f"; {satellite['security']}" if satellite.get("security") else ""))
    for server in status.mcp_servers:
        lines.append(f"MCP server {server['name']} ({server['transport']}): {'up' if server['up'] else 'down'}, "
                     f"{server['tools']} tool(s), {server['restarts']} restart(s)"
                     + (f"; last error: {server['error']}" if server["error"] and not server["up"] else ""))
    lines.append(f"narrations: {status.narrations} ({status.weak_matches} weak match(es), {status.inexact_reads} inexact read(s))")
    lines.append(f"tasks: {status.tasks_running} running, {status.tasks_queued} queued")
    lines.append(f"failures today: {status.failures_today}")
    if status.cost_today_usd is None:
        lines.append("cost today: not counted")
    else:
        parts = ", ".join(f"{name} {_usd(usd)}" for name, usd in (status.cost_parts_usd or {}).items())
        lines.append(f"cost today: {_usd(status.cost_today_usd)} ({parts}), estimated from the usage the API reported")
    lines += stage_lines(status)
    if state is Liveness.UNHEALTHY:
        why = (f"its status is {_span(now - status.updated_at)} old (it is rewritten every {status.heartbeat_s:g} s)"
               if status.healthy else "its listener is down and has reported nothing for too long")  # fmt: skip
        lines.append(f"unhealthy: {why}; see its log (journalctl --user -u handoff).")
    return "\n".join(lines)



def stage_lines(status: Status) -> list[str]:
    """How fast commands were answered (the daemon's stage summary), if any were."""
    stages = status.stages_ms
    if not stages or not isinstance(stages, dict) or "voice_to_voice" not in stages:
        return []
    try:
        parts = ", ".join(f"{name.replace('_', ' ')} {value[0]}/{value[1]}" for name, value in stages.items()
                          if name not in ("commands", "voice_to_voice"))
        p50, p95 = stages["voice_to_voice"]
        return [f"voice to voice (end of speech to first answer audio): p50 {p50} ms, p95 {p95} ms over the "
                f"last {stages['commands']} command(s); stages p50/p95 ms after the end of speech: {parts}"]
    except (TypeError, ValueError):  # a status file from another version: leave the line out
        return []


def _usd(amount: float) -> str:
    return f"${amount:.4f}" if amount < 1 else f"${amount:.2f}"

def run_history(args: argparse.Namespace) -> int:
    settings = _settings(args)
    problem = state_dir_problem(settings, args)
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    path = settings.state_dir / HISTORY_FILE
    if not path.exists():
        print(f"No history yet (nothing at {path}).")
        return 0
    since = None
    if args.today:
        since = datetime.datetime.combine(datetime.date.today(), datetime.time()).timestamp()
    try:
        entries = read_history(path, since=since, limit=args.limit)
    except sqlite3.Error as exc:
        print(f"handoff history: {path} cannot be read ({exc}); is it a handoff history file?", file=sys.stderr)
        return 1
    if not entries:
        print("Nothing today." if args.today else "No history yet.")
    secrets = [settings.realtime.api_key]
    for entry in entries:
        print(format_entry(dataclasses.replace(entry, heard=shown(entry.heard, secrets), tools=shown(entry.tools, secrets),
                                               said=shown(entry.said, secrets), room=shown(entry.room))))  # fmt: skip
    return 0


def format_entry(entry: HistoryEntry) -> str:
    when = datetime.datetime.fromtimestamp(entry.at).strftime("%Y-%m-%d %H:%M:%S")
    pad = " " * len(when)
    if entry.room:  # the room column: where it was asked or said (satellites)
        when = f"{when}  {entry.room:<10}"
    pad = " " * len(when)
    if entry.kind is HistoryKind.COMMAND:
        lines = [f"{when}  asked: {entry.heard}"]
        if entry.tools:
            lines.append(f"{pad}  ran:   {'; '.join(entry.tools)}")
        lines.append(f"{pad}  said:  {entry.said}" if entry.said else f"{pad}  ({entry.outcome})")
        return "\n".join(lines)
    if entry.kind is HistoryKind.OVERHEARD:
        return f"{when}  overheard (not addressed): {entry.heard}"
    return f"{when}  said ({entry.kind}): {entry.said}"


def _span(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 3600:
        return f"{minutes} min"
    if seconds < 86400:
        return f"{hours} h {minutes % 60} min"
    return f"{days} d {hours % 24} h"


def _clock(at: float) -> str:
    return datetime.datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


def _when(at: float, now: float) -> str:
    return f"{_clock(at)}, {_span(now - at)} ago"
