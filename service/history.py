"""What handoff was asked and what it said, for `handoff history`: a bounded SQLite table in
the state folder (0600), fed from the coordinator's timeline.

Only what was addressed to it is kept: the command, the tools it ran, what the narrator read,
and the notices and connection messages it said unasked. Overheard speech (utterances the wake
gate ignored) is never stored unless LOG_OVERHEARD=true says so (a debugging aid).
"""

from __future__ import annotations

import concurrent.futures
import enum
import json
import logging
import os
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from decisions.events import (
    UNCONFIRMED_ANSWER, CommandClosed, CommandConfirmed, CommandRouted, NarrationKind, Narrated, Overheard,
    StagesMeasured, ToolRan,
)
from decisions.lifecycle import CommandRecord, Step
from decisions.timeline import TimelineEntry

log = logging.getLogger("handoff.service")

HISTORY_FILE = "history.db"


class HistoryKind(enum.StrEnum):
    COMMAND = "command"  # addressed to it: what was asked, run and answered
    NOTICE = "notice"  # said unasked: a background task's outcome
    STATUS = "status"  # said unasked: the connection's trouble or recovery
    OVERHEARD = "overheard"  # not addressed (kept only with LOG_OVERHEARD=true)


class Outcome(enum.StrEnum):
    IN_PROGRESS = "in progress"
    ANSWERED = "answered"  # a tool's result, or the model's own text, was read out
    APOLOGISED = "apologised"  # routing failed or timed out: the apology was read out
    SAID = "said"  # a notice or status message was read out
    STOPPED = "stopped"  # "computer, stop" cut it while it was being read
    DECLINED = "declined"  # it asked for a spoken yes and none came: nothing ran
    DISMISSED = "dismissed"  # it asked for nothing ("stop", "never mind"): nothing ran, nothing was said
    IGNORED = "ignored"


@dataclass
class HistoryEntry:
    at: float  # wall clock, when it was heard (or said, for what was said unasked)
    kind: HistoryKind
    heard: str = ""  # the command as routed (or the overheard words)
    tools: list[str] = field(default_factory=list)  # "name(arguments)" for each call
    said: str = ""  # what the narrator read
    outcome: Outcome = Outcome.IN_PROGRESS
    stages: dict[str, float] = field(default_factory=dict)  # decisions.stages offsets, seconds after the end of speech
    room: str = ""  # the satellite's room it came from or was said in; "" for this machine's own mic and speaker


class HistoryTracker:
    """Turns the timeline's typed events into history entries (pure: no I/O). A command's entry
    is opened when it is routed, filled in as it goes (the page shows it in progress), and
    finished by its `CommandClosed` with the lifecycle's record: what it was asked, what ran,
    what was said and how it ended. A withdrawn command is dropped: the room's words never were
    ours. `on_done` gets each finished entry; `last_command` is the command in progress, or the
    last one finished."""

    def __init__(
        self, on_done: Callable[[HistoryEntry], None], keep_overheard: bool, clock: Callable[[], float] = time.time
    ) -> None:
        self._on_done = on_done
        self._keep_overheard = keep_overheard
        self._clock = clock
        self._open: dict[int, HistoryEntry] = {}  # by command id
        self.last_command: HistoryEntry | None = None

    def observe(self, entry: TimelineEntry) -> None:
        match entry.event:
            case CommandRouted(command=record):
                if record.id not in self._open:
                    self._open[record.id] = self.last_command = HistoryEntry(
                        self._clock(), HistoryKind.COMMAND, heard=record.words or "")
            case CommandConfirmed(command=record) if record.id in self._open:
                self._open[record.id].heard = record.words or ""
            case ToolRan(command=command) if command in self._open:
                self._open[command].tools.append(entry.text)
            case StagesMeasured(command=command, offsets=offsets) if command in self._open:
                self._open[command].stages = dict(offsets)
            case CommandClosed(command=record):
                self._closed(record)
            case Narrated(narration=kind, script=script, stopped_after_s=stopped) if kind in _UNASKED:
                outcome = Outcome.STOPPED if stopped is not None else Outcome.SAID
                self._on_done(HistoryEntry(self._clock(), _UNASKED[kind], said=script, outcome=outcome))
            case Overheard(words=words) if self._keep_overheard:
                self._on_done(HistoryEntry(self._clock(), HistoryKind.OVERHEARD, heard=words, outcome=Outcome.IGNORED))

    def _closed(self, record: CommandRecord) -> None:
        entry = self._open.pop(record.id, None)
        if not record.kept:
            return  # withdrawn (not addressed after all) or lost (its words route it again)
        if entry is None:
            entry = HistoryEntry(self._clock(), HistoryKind.COMMAND)
        entry.heard = record.words or ""
        entry.tools = list(record.tools)
        entry.said = record.said if record.words is not None or not record.said else UNCONFIRMED_ANSWER
        entry.outcome = _outcome(record)
        entry.stages = dict(record.stages)
        self._on_done(entry)


_UNASKED = {NarrationKind.NOTICE: HistoryKind.NOTICE, NarrationKind.STATUS: HistoryKind.STATUS}


def _outcome(record: CommandRecord) -> Outcome:
    match record.step:
        case Step.SAID:
            return Outcome.APOLOGISED if record.apology else Outcome.ANSWERED
        case Step.STOPPED | Step.ANSWERING:  # cut by "stop", or by the assistant stopping
            return Outcome.STOPPED
        case Step.DECLINED:
            return Outcome.DECLINED
        case Step.DISMISSED:
            return Outcome.DISMISSED
    return Outcome.IN_PROGRESS


_SCHEMA = """
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    heard TEXT NOT NULL,
    tools TEXT NOT NULL,
    said TEXT NOT NULL,
    outcome TEXT NOT NULL,
    stages TEXT NOT NULL DEFAULT '{}',
    room TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS history_by_time ON history(at);
"""

# Columns added after the first release: a history.db written by an older version gains them.
_ADDED_COLUMNS = {"stages": "TEXT NOT NULL DEFAULT '{}'", "room": "TEXT NOT NULL DEFAULT ''"}


def _add_missing_columns(db: sqlite3.Connection) -> None:
    present = {row[1] for row in db.execute("PRAGMA table_info(history)")}
    for name, declaration in _ADDED_COLUMNS.items():
        if name not in present:
            db.execute(f"ALTER TABLE history ADD COLUMN {name} {declaration}")


class HistoryStore:
    """The table, written on a thread of its own (in order, off the event loop) and capped at
    `max_rows` (the oldest go). `close()` waits for every write: nothing said is lost on a
    clean stop."""

    def __init__(self, path: Path, max_rows: int) -> None:
        self.path = path
        self._max_rows = max_rows
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="history")
        self._db: sqlite3.Connection | None = None  # opened and used on the executor's one thread only
        self.failures = 0

    def add(self, entry: HistoryEntry) -> None:
        """Queue `entry` to be written; does not wait."""
        self._executor.submit(self._write, entry).add_done_callback(self._log_failure)

    def close(self) -> None:
        self._executor.submit(self._close_connection)
        self._executor.shutdown(wait=True)

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            db = open_private_db(self.path)
            try:
                db.executescript(_SCHEMA)
                _add_missing_columns(db)
            except BaseException:  # a full disk: the next write tries the whole set-up again
                db.close()
                raise
            self._db = db
        return self._db

    def _write(self, entry: HistoryEntry) -> None:
        db = self._connection()
        with db:
            db.execute(
                "INSERT INTO history (at, kind, heard, tools, said, outcome, stages, room) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.at, str(entry.kind), entry.heard, json.dumps(entry.tools), entry.said, str(entry.outcome),
                    json.dumps(entry.stages), entry.room,
                ),
            )
            db.execute("DELETE FROM history WHERE id <= (SELECT MAX(id) FROM history) - ?", (self._max_rows,))

    def _close_connection(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _log_failure(self, future: "concurrent.futures.Future[None]") -> None:
        error = future.exception()
        if error is not None:  # a full disk, a damaged file: the assistant goes on without history
            self.failures += 1
            log.error("could not write to the history %s: %s", self.path, error)


def open_private_db(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """A SQLite database only its owner may read; created 0600 before SQLite touches it (its
    journal files take the database's permissions)."""
    if readonly:
        # A URI, for mode=ro; the path quoted, or a '#' or '?' in it would end the path there.
        uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro"
        return sqlite3.connect(uri, uri=True, timeout=2.0)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)
    return sqlite3.connect(path, timeout=5.0)


def read_history(path: Path, since: float | None = None, limit: int = 50) -> list[HistoryEntry]:
    """The newest `limit` entries (from `since`, wall clock), oldest first."""
    db = open_private_db(path, readonly=True)
    try:
        present = {row[1] for row in db.execute("PRAGMA table_info(history)")}
        added = [name if name in present else "NULL" for name in _ADDED_COLUMNS]  # an older file lacks them
        rows = db.execute(
            f"SELECT at, kind, heard, tools, said, outcome, {', '.join(added)} FROM history"
            " WHERE at >= ? ORDER BY id DESC LIMIT ?",
            (since or 0.0, limit),
        ).fetchall()
    finally:
        db.close()
    return [
        HistoryEntry(at, HistoryKind(kind), heard, json.loads(tools), said, Outcome(outcome), json.loads(stages or "{}"), room or "")
        for at, kind, heard, tools, said, outcome, stages, room in reversed(rows)
    ]
