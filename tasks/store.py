"""Persistence for task records and notices: SQLite in WAL mode, one transaction per change.

Only storage lives here: what a state change means is decided in `tasks.state`, when a notice
is due in the manager, how notices are merged in `tasks.notices`. A task's final state and
its notice are written in one transaction, so after a crash there is never a finished task
without its announcement, or an announcement for a task that is still shown as running.
WAL lets `handoff tasks` read while the daemon writes.

The daemon never touches the database on its event loop: `StoreWorker` runs every call in one
thread that owns the connection, in order, and retries a call that finds the database locked
(another program holding it) instead of losing the write. A database that is not one (or is
corrupt) is set aside under a timestamped name and a new one started; `recovery` says so once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from tasks.errors import TaskError
from tasks.files import private_dir
from tasks.records import ACTIVE_STATUSES, Notice, TaskKind, TaskRecord, TaskStatus

log = logging.getLogger(__name__)
T = TypeVar("T")

# sqlite3 result codes (the low byte of an extended code).
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6

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

# Columns added after the first release: a database made before them gets them on open
# (ALTER TABLE, in the schema's transaction), so old records read as process tasks.
_ADDED_COLUMNS = (
    ("tasks", "kind", "TEXT NOT NULL DEFAULT 'process'"),
    ("tasks", "due_at", "REAL"),
    ("notices", "kind", "TEXT NOT NULL DEFAULT 'process'"),
    ("notices", "label", "TEXT NOT NULL DEFAULT ''"),
    ("notices", "due_at", "REAL"),
    ("notices", "late", "INTEGER NOT NULL DEFAULT 0"),
)

_TASK_COLUMNS = (
    "name", "spoken", "argv", "cwd", "timeout_s", "log_path", "created_at", "params", "label",
    "agent", "status", "started_at", "finished_at", "pid", "exit_code", "stop_reason", "error",
    "tail", "line_count", "kind", "due_at",
)  # fmt: skip
_NOTICE_COLUMNS = (
    "task_id", "created_at", "outcome", "spoken", "duration_s", "exit_code", "timeout_s", "error", "summary",
    "kind", "label", "due_at", "late",
)  # fmt: skip


class StoreDamaged(TaskError):
    """The task database is not a database (or is corrupt) and may not be replaced here."""


class StoreBusy(TaskError):
    """Another program holds the task database locked."""


class StoreUnwritable(TaskError):
    """The task database cannot be opened or written (a full disk, an I/O error); said as a
    sentence (to the user asking for a task, or by `handoff run` refusing to start)."""


@dataclass(frozen=True)
class StoreRecovery:
    """A damaged database was set aside and a new one started."""

    moved_to: Path
    reason: str

    def sentence(self) -> str:
        return (
            f"My list of background tasks was damaged ({self.reason}), so I put it aside as "
            f"{self.moved_to.name} and started a new one."
        )


def is_busy(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _is_damage(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


class TaskStore:
    """Task records and the notice queue in `<state_dir>/tasks/tasks.db`.

    Synchronous: the daemon calls it only through a `StoreWorker`; `handoff tasks` directly.
    The connection opens on first use, so constructing a store does no I/O."""

    def __init__(self, db_path: Path, *, replace_damaged: bool = True, busy_timeout_s: float = 0.2) -> None:
        """`replace_damaged=False` (the read-only CLI) raises StoreDamaged instead of setting a
        damaged file aside. `busy_timeout_s` is how long one statement waits for a lock before
        SQLite reports it busy (the worker then retries, off the event loop)."""
        self.path = Path(db_path)
        self.recovery: StoreRecovery | None = None
        self._replace_damaged = replace_damaged
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._conn: sqlite3.Connection | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.open()
        assert self._conn is not None
        return self._conn

    def open(self) -> None:
        """Open (and if need be create) the database; a damaged one is set aside (see class doc)."""
        if self._conn is not None:
            return
        private_dir(self.path.parent)
        # Created private before SQLite touches it; its -wal and -shm files copy these permissions.
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        os.chmod(self.path, 0o600)
        try:
            self._conn = self._connect()
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                if is_busy(exc):
                    raise StoreBusy(f"The task database {self.path} is locked by another program; try again in a moment.") from exc
                raise
            if not self._replace_damaged:
                raise StoreDamaged(
                    f"The task database {self.path} is damaged ({exc}); handoff will set it aside and start a new one when it next starts."
                ) from exc
            self.recovery = self._set_aside(str(exc))
            self._conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; `_transaction` says where they are.
        # check_same_thread=False: a StoreWorker's thread uses it; one thread at a time.
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            db.row_factory = sqlite3.Row
            db.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode loses nothing when the process dies, only (maybe) on power loss.
            db.execute("PRAGMA synchronous=NORMAL")
            checked = db.execute("PRAGMA quick_check").fetchone()[0]
            if checked != "ok":
                error = sqlite3.DatabaseError(f"database disk image is malformed: {checked}")
                error.sqlite_errorcode = _SQLITE_CORRUPT
                raise error
            # executescript would commit an open transaction first, so the script carries its own.
            db.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
            _add_missing_columns(db)
        except BaseException:
            db.close()
            raise
        return db

    def _set_aside(self, reason: str) -> StoreRecovery:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        moved = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):  # the journal belongs to the damaged file
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, f"{moved}{suffix}")
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        log.error("task database %s was damaged (%s); kept it as %s and started a new one", self.path, reason, moved)
        return StoreRecovery(moved, reason)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

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

    def create_task(self, draft: TaskRecord, log_path_for: Callable[[int], Path] | None) -> TaskRecord:
        """Insert a new task; the returned record has its id and its log path (derived from the id;
        none without `log_path_for`: a timer has no output)."""
        with self._transaction() as db:
            values = _task_values(draft)
            cursor = db.execute(
                f"INSERT INTO tasks ({', '.join(_TASK_COLUMNS)}) VALUES ({', '.join('?' * len(_TASK_COLUMNS))})",
                values,
            )
            task_id = _inserted_id(cursor)
            log_path = str(log_path_for(task_id)) if log_path_for is not None else ""
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
                f"INSERT INTO notices ({', '.join(_NOTICE_COLUMNS)}) VALUES ({', '.join('?' * len(_NOTICE_COLUMNS))})",
                (
                    notice.task_id, notice.created_at, str(notice.outcome), notice.spoken, notice.duration_s,
                    notice.exit_code, notice.timeout_s, notice.error, notice.summary, str(notice.kind),
                    notice.label, notice.due_at, int(notice.late),
                ),
            )  # fmt: skip
            return dataclasses.replace(notice, id=_inserted_id(cursor))

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


def _add_missing_columns(db: sqlite3.Connection) -> None:
    """Give a database made by an older handoff the columns added since. Checked under the write
    lock, so the assistant and `handoff tasks` opening it at once do not both add a column."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for table, column, declaration in _ADDED_COLUMNS:
            if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    """The row id an INSERT gave (sqlite3 sets it after every INSERT; None only after other statements)."""
    if cursor.lastrowid is None:
        raise sqlite3.DatabaseError("the INSERT gave no row id")
    return cursor.lastrowid


def _task_values(record: TaskRecord) -> tuple[object, ...]:
    return (
        record.name, record.spoken, json.dumps(list(record.argv)), record.cwd, record.timeout_s,
        record.log_path, record.created_at, json.dumps([list(p) for p in record.params]), record.label,
        int(record.agent), str(record.status), record.started_at, record.finished_at, record.pid,
        record.exit_code, record.stop_reason, record.error, json.dumps(list(record.tail)), record.line_count,
        str(record.kind), record.due_at,
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
        kind=TaskKind(row["kind"]),
        due_at=row["due_at"],
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
        kind=TaskKind(row["kind"]),
        label=row["label"],
        due_at=row["due_at"],
        late=bool(row["late"]),
    )


class StoreWorker:
    """Runs calls on a TaskStore in one thread, in the order they were made, off the event loop.

    A call that finds the database locked is retried (with backoff) until it lands: a task's
    outcome must not be lost because another program held the file for a while. Once `close`
    has begun, retrying stops after `close_wait_s` and what is still pending is logged as lost."""

    def __init__(self, store: TaskStore, *, max_backoff_s: float = 0.5, close_wait_s: float = 10.0,
                 on_busy: Callable[[], None] | None = None) -> None:  # fmt: skip
        """`on_busy` is called (on the store's thread) each time a call found the database locked."""
        self.store = store
        self._on_busy = on_busy
        self.busy_retries = 0  # how often a call found the database locked (tests and logs)
        self.failures = 0  # calls that failed for good
        self._max_backoff_s = max_backoff_s
        self._close_wait_s = close_wait_s
        self._give_up_at: float | None = None
        self._lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="task-store")

    def submit(self, fn: Callable[..., T], *args: Any) -> "concurrent.futures.Future[T]":
        """Queue `fn(*args)` behind every earlier call; does not wait."""
        return self._executor.submit(self._retrying, fn, *args)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self.submit(fn, *args))

    def _retrying(self, fn: Callable[..., T], *args: Any) -> T:
        backoff = 0.01
        while True:
            try:
                return fn(*args)
            except (sqlite3.OperationalError, OSError, StoreBusy) as exc:  # OSError: creating the file
                cause = exc.__cause__ if isinstance(exc, StoreBusy) else exc
                if not isinstance(cause, sqlite3.Error) or not is_busy(cause) or self._given_up():
                    with self._lock:
                        self.failures += 1
                    if isinstance(exc, StoreBusy):
                        raise
                    raise StoreUnwritable(
                        f"handoff could not write its list of background tasks ({exc}); if the disk is full, free some space."
                    ) from exc
                with self._lock:
                    self.busy_retries += 1
                    first = self.busy_retries == 1
                if first:
                    log.warning("task database %s is locked by another program; retrying", self.store.path)
                if self._on_busy is not None:
                    self._on_busy()
                time.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff_s)

    def _given_up(self) -> bool:
        return self._give_up_at is not None and time.monotonic() >= self._give_up_at

    async def close(self) -> None:
        """Wait for every queued call (a locked database gets `close_wait_s` more), then stop the thread."""
        self._give_up_at = time.monotonic() + self._close_wait_s
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown, True)
