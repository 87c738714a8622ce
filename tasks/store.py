"""Persistence for task records and notices: SQLite in WAL mode, one transaction per change.

Only storage lives here: what a state change means is decided in `tasks.state`, when a notice
is due in the manager, how notices are merged in `tasks.notices`. A task's final state and
its notice are written in one transaction, so after a crash there is never a finished task
without its announcement, or an announcement for a task that is still shown as running.
WAL lets `handoff tasks` read while the daemon writes.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from tasks.records import ACTIVE_STATUSES, Notice, TaskRecord, TaskStatus

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    spoken TEXT NOT NULL,
    argv TEXT NOT NULL,
    cwd TEXT NOT NULL,
    timeout_s REAL NOT NULL,
    log_path TEXT NOT NULL,
    created_at REAL NOT NULL,
    params TEXT NOT NULL,
    label TEXT NOT NULL,
    agent INTEGER NOT NULL,
    status TEXT NOT NULL,
    started_at REAL,
    finished_at REAL,
    pid INTEGER,
    exit_code INTEGER,
    stop_reason TEXT,
    error TEXT,
    tail TEXT NOT NULL,
    line_count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks(status);
CREATE TABLE IF NOT EXISTS notices (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id INTEGER NOT NULL REFERENCES tasks(id),
    created_at REAL NOT NULL,
    outcome TEXT NOT NULL,
    spoken TEXT NOT NULL,
    duration_s REAL,
    exit_code INTEGER,
    timeout_s REAL,
    error TEXT,
    summary TEXT NOT NULL,
    delivered_at REAL
);
CREATE INDEX IF NOT EXISTS notices_pending ON notices(delivered_at, id);
"""

_TASK_COLUMNS = (
    "name", "spoken", "argv", "cwd", "timeout_s", "log_path", "created_at", "params", "label",
    "agent", "status", "started_at", "finished_at", "pid", "exit_code", "stop_reason", "error",
    "tail", "line_count",
)  # fmt: skip


class TaskStore:
    """Task records and the notice queue in `<state_dir>/tasks/tasks.db`."""

    def __init__(self, db_path: Path) -> None:
        self.path = Path(db_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; `_transaction` says where they are.
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode loses nothing when the process dies, only (maybe) on power loss.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")  # `handoff tasks` may be reading
        # executescript would commit an open transaction first, so the script carries its own.
        self._db.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- tasks -------------------------------------------------------------------------

    def create_task(self, draft: TaskRecord, log_path_for: Callable[[int], Path]) -> TaskRecord:
        """Insert a new task; the returned record has its id and its log path (derived from the id)."""
        with self._transaction() as db:
            values = _task_values(draft)
            cursor = db.execute(
                f"INSERT INTO tasks ({', '.join(_TASK_COLUMNS)}) VALUES ({', '.join('?' * len(_TASK_COLUMNS))})",
                values,
            )
            task_id = int(cursor.lastrowid)
            log_path = str(log_path_for(task_id))
            db.execute("UPDATE tasks SET log_path = ? WHERE id = ?", (log_path, task_id))
        return dataclasses.replace(draft, id=task_id, log_path=log_path)

    def save_task(self, record: TaskRecord, notice: Notice | None = None) -> Notice | None:
        """Write the record's current state, and queue `notice` in the same transaction.
        Returns the notice with its id."""
        with self._transaction() as db:
            assignments = ", ".join(f"{column} = ?" for column in _TASK_COLUMNS)
            db.execute(f"UPDATE tasks SET {assignments} WHERE id = ?", (*_task_values(record), record.id))
            if notice is None:
                return None
            cursor = db.execute(
                "INSERT INTO notices (task_id, created_at, outcome, spoken, duration_s, exit_code,"
                " timeout_s, error, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    notice.task_id, notice.created_at, str(notice.outcome), notice.spoken, notice.duration_s,
                    notice.exit_code, notice.timeout_s, notice.error, notice.summary,
                ),
            )  # fmt: skip
            return dataclasses.replace(notice, id=int(cursor.lastrowid))

    def get_task(self, task_id: int) -> TaskRecord | None:
        row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return _task_from_row(row) if row else None

    def list_tasks(self, limit: int | None = None) -> list[TaskRecord]:
        """Oldest first; with `limit`, the most recent `limit` tasks."""
        if limit is None:
            rows = self._db.execute("SELECT * FROM tasks ORDER BY id").fetchall()
        else:
            rows = self._db.execute("SELECT * FROM tasks ORDER BY id DESC LIMIT ?", (limit,)).fetchall()[::-1]
        return [_task_from_row(row) for row in rows]

    def unfinished_tasks(self) -> list[TaskRecord]:
        """Tasks still recorded as queued or running (after a restart: the interrupted ones)."""
        marks = ", ".join("?" * len(ACTIVE_STATUSES))
        rows = self._db.execute(
            f"SELECT * FROM tasks WHERE status IN ({marks}) ORDER BY id", [str(s) for s in ACTIVE_STATUSES]
        ).fetchall()
        return [_task_from_row(row) for row in rows]

    # --- notices -----------------------------------------------------------------------

    def pending_notices(self) -> list[Notice]:
        """Notices not yet delivered, oldest first."""
        rows = self._db.execute("SELECT * FROM notices WHERE delivered_at IS NULL ORDER BY id").fetchall()
        return [_notice_from_row(row) for row in rows]

    def has_pending_notices(self) -> bool:
        return self._db.execute("SELECT 1 FROM notices WHERE delivered_at IS NULL LIMIT 1").fetchone() is not None

    def mark_delivered(self, ids: Iterable[int], at: float) -> None:
        ids = list(ids)
        if not ids:
            return
        with self._transaction() as db:
            db.executemany(
                "UPDATE notices SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL", [(at, i) for i in ids]
            )


def _task_values(record: TaskRecord) -> tuple:
    return (
        record.name, record.spoken, json.dumps(list(record.argv)), record.cwd, record.timeout_s,
        record.log_path, record.created_at, json.dumps([list(p) for p in record.params]), record.label,
        int(record.agent), str(record.status), record.started_at, record.finished_at, record.pid,
        record.exit_code, record.stop_reason, record.error, json.dumps(list(record.tail)), record.line_count,
    )  # fmt: skip


def _task_from_row(row: sqlite3.Row) -> TaskRecord:
    return TaskRecord(
        id=row["id"],
        name=row["name"],
        spoken=row["spoken"],
        argv=tuple(json.loads(row["argv"])),
        cwd=row["cwd"],
        timeout_s=row["timeout_s"],
        log_path=row["log_path"],
        created_at=row["created_at"],
        params=tuple((k, v) for k, v in json.loads(row["params"])),
        label=row["label"],
        agent=bool(row["agent"]),
        status=TaskStatus(row["status"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        pid=row["pid"],
        exit_code=row["exit_code"],
        stop_reason=row["stop_reason"],
        error=row["error"],
        tail=tuple(json.loads(row["tail"])),
        line_count=row["line_count"],
    )


def _notice_from_row(row: sqlite3.Row) -> Notice:
    return Notice(
        id=row["id"],
        task_id=row["task_id"],
        created_at=row["created_at"],
        outcome=TaskStatus(row["outcome"]),
        spoken=row["spoken"],
        duration_s=row["duration_s"],
        exit_code=row["exit_code"],
        timeout_s=row["timeout_s"],
        error=row["error"],
        summary=row["summary"],
    )
