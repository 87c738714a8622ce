"""`handoff tasks` (list tasks: id, name, status, duration, log), `handoff tasks show ID` (print
one task's output log), and `handoff tasks start NAME [PARAM=VALUE...]` / `handoff tasks cancel ID`.

Listing and showing only read the database, so they are safe while the assistant runs. Starting
and cancelling ask the running assistant over its control socket (`tasks.control`): the task
runs under the assistant's own task manager, whose notice is then announced exactly once.

Exit codes: 0 done; 1 unknown task or template, bad parameter, nothing to cancel, unreadable
database; 2 usage; 3 the assistant is not running (nothing was started or cancelled)."""

from __future__ import annotations

import argparse
import codecs
import sqlite3
import sys
import time

from pathlib import Path
from typing import Any, BinaryIO

from config.read_only import readable_settings
from safety.text import printable
from tasks import control
from tasks.config import TaskSettings, load_task_config
from tasks.control import NotRunning
from tasks.errors import AmbiguousTask, TaskError, UnknownTask
from tasks.identify import resolve_task, written_candidates
from tasks.records import TaskRecord, TaskStatus
from tasks.store import TaskStore, is_busy

EXIT_NOT_FOUND = 1
EXIT_STORE = 1  # the task database could not be read
EXIT_REFUSED = 1  # unknown template, bad parameter, nothing to cancel
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
CONTROL_TIMEOUT_S = 120.0  # a cancel waits for the task's processes to go (kill_grace_s and more)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where task records and logs live (HANDOFF_STATE_DIR)")
    # Accepted after the action too (`tasks start backup --state-dir D`); SUPPRESS keeps one
    # given before it.
    state_dir = argparse.ArgumentParser(add_help=False)
    state_dir.add_argument("--state-dir", default=argparse.SUPPRESS, help="where task records and logs live (HANDOFF_STATE_DIR)")
    actions = parser.add_subparsers(dest="tasks_action", metavar="ACTION")
    show = actions.add_parser("show", help="print one task's output log", description="Print one task's output log.",
                              parents=[state_dir])
    show.add_argument("task", help="the task's number (from `handoff tasks`), or its name")
    start = actions.add_parser(
        "start", help="start a task from the templates in the running assistant; prints its id",
        description="Start a task from the task templates (HANDOFF_TASKS_CONFIG) in the running assistant, "
        "which announces its outcome. Prints the task's id.", parents=[state_dir],
    )  # fmt: skip
    start.add_argument("template", help="the template's name")
    # default=[]: argparse calls a "*" positional required without one ("tasks start" said so)
    start.add_argument("params", nargs="*", default=[], metavar="PARAM=VALUE", help="the template's parameters")
    cancel = actions.add_parser("cancel", help="cancel a running or queued task", description="Cancel a running or queued task.",
                                parents=[state_dir])
    cancel.add_argument("task", help="the task's number (from `handoff tasks`), or its name")
    for action in (show, start, cancel):  # an unknown option is the action's to report, with its usage (commands.cli)
        action.set_defaults(_parser=action)


def run(args: argparse.Namespace) -> int:
    settings = readable_settings({"HANDOFF_STATE_DIR": getattr(args, "state_dir", None)}, "tasks")
    task_settings = TaskSettings.from_settings(settings)
    action = getattr(args, "tasks_action", None)
    if action == "start":
        return _start(args, settings.tasks_config, task_settings)
    if action == "cancel":
        return _cancel(args.task, task_settings)
    if not task_settings.db_path.exists():
        if action == "show":
            print(f"handoff tasks: there is no task {args.task}: there are no tasks yet.", file=sys.stderr)
            return EXIT_NOT_FOUND
        print(f"No tasks yet (no task database at {task_settings.db_path}).")
        return 0
    # Read-only: a damaged database is reported, and set aside only by the assistant itself.
    store = TaskStore(task_settings.db_path, replace_damaged=False, busy_timeout_s=2.0)
    try:
        records = store.list_tasks()
    except TaskError as exc:  # StoreDamaged, StoreBusy: one sentence, no traceback
        print(f"handoff tasks: {exc}", file=sys.stderr)
        return EXIT_STORE
    except sqlite3.OperationalError as exc:
        if not is_busy(exc):
            raise
        print(f"handoff tasks: the task database {task_settings.db_path} is locked by another program; try again in a moment.", file=sys.stderr)
        return EXIT_STORE
    finally:
        store.close()
    if action == "show":
        return _show(records, args.task)
    _print_table(records, time.time())
    return 0


def _start(args: argparse.Namespace, tasks_config: Path | None, task_settings: TaskSettings) -> int:
    params: dict[str, str] = {}
    for pair in args.params:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            print(f"handoff tasks start: '{pair}' is not PARAM=VALUE.", file=sys.stderr)
            return EXIT_USAGE
        params[name] = value
    try:
        # Checked here too, so a mistake is reported even when the assistant is not running.
        template = load_task_config(tasks_config).template(args.template)
        template.fill(params)
    except TaskError as exc:
        print(f"handoff tasks: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    reply = _ask(task_settings, {"op": "start", "name": template.name, "params": params})
    if isinstance(reply, int):
        return reply
    task = reply["task"]
    print(task["id"])
    if task["status"] == str(TaskStatus.FAILED):
        print(printable(f"handoff tasks: {task['spoken']} could not start: {task['error']}."), file=sys.stderr)
        return EXIT_REFUSED
    return 0


def _cancel(ident: str, task_settings: TaskSettings) -> int:
    reply = _ask(task_settings, {"op": "cancel", "task": ident})
    if isinstance(reply, int):
        return reply
    task = reply["task"]
    if not reply["cancelled"]:
        print(printable(f"handoff tasks: task {task['id']} ({task['name']}) had already ended: {task['status']}."), file=sys.stderr)
        return EXIT_REFUSED
    print(printable(f"Cancelled task {task['id']} ({task['name']})."))
    return 0


def _ask(task_settings: TaskSettings, request: dict[str, Any]) -> dict[str, Any] | int:
    """The running assistant's reply, or the exit code once its refusal (or its absence) is printed."""
    try:
        reply = control.ask(task_settings.control_path, request, CONTROL_TIMEOUT_S)
    except NotRunning as exc:
        print(f"handoff tasks: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    except TimeoutError:
        print(f"handoff tasks: handoff did not answer within {CONTROL_TIMEOUT_S:.0f} seconds; see its log.", file=sys.stderr)
        return EXIT_REFUSED
    except TaskError as exc:
        print(f"handoff tasks: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if not reply.get("ok"):
        if "candidates" in reply:  # the assistant's question is spoken; the command line writes
            print(printable(_several(str(request.get("task")), reply["count"], reply["candidates"])), file=sys.stderr)
        else:
            print(printable(f"handoff tasks: {reply.get('error') or 'handoff refused the request.'}"), file=sys.stderr)
        return EXIT_REFUSED
    return reply


def _print_table(records: list[TaskRecord], now: float) -> None:
    if not records:
        print("No tasks yet.")
        return
    rows = [("ID", "NAME", "STATUS", "STARTED", "DURATION", "LOG")]
    for record in records:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.started_at)) if record.started_at else "-"
        duration = record.duration_s(now)
        rows.append((
            str(record.id), printable(record.name), str(record.status), started,
            compact_duration(duration) if duration is not None else "-", printable(_details(record)),
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])


def _details(record: TaskRecord) -> str:
    """The last column: a task's log, a timer's due time and label."""
    if not record.is_timer or record.due_at is None:
        return record.log_path
    due = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.due_at))
    return f"due {due}" + (f": {record.label}" if record.label else "")


def _show(records: list[TaskRecord], ident: str) -> int:
    try:
        record = resolve_task(ident, records)
    except AmbiguousTask as exc:  # its question is for the ear ("task one, the nap started at..."): written here
        print(_several(ident, len(exc.candidates), written_candidates(exc.candidates)), file=sys.stderr)
        return EXIT_NOT_FOUND
    except UnknownTask:
        names = ", ".join(sorted({r.name for r in records})[:6])
        what = f"there is no task number {ident}" if ident.strip().isdigit() else f"no task is called '{ident}'"
        print(f"handoff tasks: {what}" + (f"; the tasks are: {names}." if names else "; there are no tasks yet."),
              file=sys.stderr)
        return EXIT_NOT_FOUND
    if record.is_timer:  # no output to show: what it is and when it is due
        print(printable(f"{record.kind} {record.id} ({record.spoken}), {record.status}, {_details(record)}"))
        return 0
    try:
        log = open(record.log_path, "rb")
    except OSError:
        print(f"Task {record.id} ({record.name}, {record.status}) has no output log yet.", file=sys.stderr)
        return EXIT_NOT_FOUND
    with log:
        sys.stdout.flush()
        _print_output(log, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    return 0


def _print_output(log: BinaryIO, out: BinaryIO, chunk: int = 65536) -> None:
    """A task's output as text, streamed (logs can be large): its lines kept, every other
    control character (an escape sequence, a bell, clear-screen) shown as an escape, so the
    terminal shows what the task printed and does not obey it."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while data := log.read(chunk):
        out.write(printable(decoder.decode(data), lines=True).encode("utf-8"))
    out.write(printable(decoder.decode(b"", final=True), lines=True).encode("utf-8"))


def _several(ident: str, count: int, choices: str) -> str:
    return f"handoff tasks: '{ident}' names {count} tasks: {choices}; give its number."


def compact_duration(seconds: float) -> str:
    """"45s", "2m05s", "1h05m" for the table."""
    total = int(round(seconds))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m{total % 60:02d}s"
    return f"{total // 3600}h{(total % 3600) // 60:02d}m"
