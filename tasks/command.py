"""`handoff tasks` (list tasks: id, name, status, duration, log) and `handoff tasks show ID`
(print one task's output log). Read-only: it never changes a record, so it is safe to run
while the assistant is running."""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import time

from config.settings import load_settings
from tasks.config import TaskSettings
from tasks.errors import TaskError
from tasks.identify import resolve_task
from tasks.records import TaskRecord
from tasks.store import TaskStore, is_busy

EXIT_NOT_FOUND = 1
EXIT_STORE = 1  # the task database could not be read


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where task records and logs live (HANDOFF_STATE_DIR)")
    actions = parser.add_subparsers(dest="tasks_action", metavar="ACTION")
    show = actions.add_parser("show", help="print one task's output log", description="Print one task's output log.")
    show.add_argument("task", help="the task's number (from `handoff tasks`), or its name")


def run(args: argparse.Namespace) -> int:
    settings = load_settings({"HANDOFF_STATE_DIR": getattr(args, "state_dir", None)})
    task_settings = TaskSettings.from_settings(settings)
    if not task_settings.db_path.exists():
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
    if getattr(args, "tasks_action", None) == "show":
        return _show(records, args.task)
    _print_table(records, time.time())
    return 0


def _print_table(records: list[TaskRecord], now: float) -> None:
    if not records:
        print("No tasks yet.")
        return
    rows = [("ID", "NAME", "STATUS", "STARTED", "DURATION", "LOG")]
    for record in records:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.started_at)) if record.started_at else "-"
        duration = record.duration_s(now)
        rows.append((
            str(record.id), record.name, str(record.status), started,
            compact_duration(duration) if duration is not None else "-", record.log_path,
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])


def _show(records: list[TaskRecord], ident: str) -> int:
    try:
        record = resolve_task(ident, records)
    except TaskError as exc:
        print(f"handoff tasks: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    try:
        log = open(record.log_path, "rb")
    except OSError:
        print(f"Task {record.id} ({record.name}, {record.status}) has no output log yet.", file=sys.stderr)
        return EXIT_NOT_FOUND
    with log:
        sys.stdout.flush()
        shutil.copyfileobj(log, sys.stdout.buffer)  # logs can be large: stream, don't load
        sys.stdout.buffer.flush()
    return 0


def compact_duration(seconds: float) -> str:
    """"45s", "2m05s", "1h05m" for the table."""
    total = int(round(seconds))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m{total % 60:02d}s"
    return f"{total // 3600}h{(total % 3600) // 60:02d}m"
