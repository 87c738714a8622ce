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

from decisions.coordinator import ROUTED_BY_AUDIO, UNCONFIRMED_ANSWER, NarrationKind
from decisions.timeline import TimelineEntry, TimelineKind

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


_OUTCOMES = {
    NarrationKind.ANSWER: Outcome.ANSWERED,
    NarrationKind.FALLBACK: Outcome.ANSWERED,
    NarrationKind.ERROR: Outcome.APOLOGISED,
}


class HistoryTracker:
    """Turns timeline entries into history entries (pure: no I/O). `on_done` gets each finished
    entry; `current` is the command in progress, or the last one finished."""

    def __init__(
        self, on_done: Callable[[HistoryEntry], None], keep_overheard: bool, clock: Callable[[], float] = time.time
    ) -> None:
        self._on_done = on_done
        self._keep_overheard = keep_overheard
        self._clock = clock
        self._open: HistoryEntry | None = None
        self._script = ""  # the last script the narrator started reading
        self._wordless: HistoryEntry | None = None  # answered, its transcript still to come
        self.last_command: HistoryEntry | None = None

    def observe(self, entry: TimelineEntry) -> None:
        match entry.kind:
            case TimelineKind.COMMAND:
                self._finish(self._open)  # one command at a time: an unfinished one is left as it was
                self._finish(self._wordless)
                self._wordless = None
                # Routed by its audio: its words come with its transcript (CONFIRMED), maybe after its answer.
                heard = "" if entry.text == ROUTED_BY_AUDIO else entry.text
                self._open = self.last_command = HistoryEntry(self._clock(), HistoryKind.COMMAND, heard=heard)
            case TimelineKind.CONFIRMED:
                target = self._open or self._wordless
                if target is not None and not target.heard:
                    target.heard = entry.text
                if self._wordless is not None and self._wordless.said != UNCONFIRMED_ANSWER:
                    self._finish(self._wordless)  # (its answer's words were logged: nothing more comes)
                    self._wordless = None
            case TimelineKind.SAID:  # (after CONFIRMED: the answer said before its words came)
                target = self._wordless or self._open
                if target is not None and target.said in ("", UNCONFIRMED_ANSWER):
                    target.said = entry.text
                if self._wordless is not None:
                    self._finish(self._wordless)
                    self._wordless = None
            case TimelineKind.WITHDRAWN:
                # Not addressed after all: nothing of it is kept (the room's words never were).
                if self._open is not None and not self._open.heard:
                    self._open = None
            case TimelineKind.STAGES if self._open is not None:
                try:
                    self._open.stages = json.loads(entry.text)
                except ValueError:
                    log.warning("history: stages that are not JSON: %r", entry.text)
            case TimelineKind.TOOL if self._open is not None:
                self._open.tools.append(entry.text)
            case TimelineKind.NARRATING:
                self._script = entry.text
            case TimelineKind.NARRATED:
                self._narrated(entry.text)
            case TimelineKind.IGNORED if self._keep_overheard:
                self._on_done(HistoryEntry(self._clock(), HistoryKind.OVERHEARD, heard=entry.text, outcome=Outcome.IGNORED))

    def _narrated(self, text: str) -> None:
        try:
            kind = NarrationKind(text.split(" ", 1)[0])  # "answer (similarity 0.97, attempts 1)"
        except ValueError:
            log.warning("history: a narration of an unknown kind: %r", text)
            return
        stopped = "(stopped after" in text  # "answer (stopped after 2.3 s of audio)"
        if kind in _OUTCOMES and self._open is not None:
            if not (self._script == UNCONFIRMED_ANSWER and self._open.said):  # (SAID came while it was said)
                self._open.said = self._script
            self._open.outcome = Outcome.STOPPED if stopped else _OUTCOMES[kind]
            if self._open.heard:
                self._finish(self._open)
            else:
                self._wordless = self._open  # answered before its words came: kept once they do
            self._open = None
        elif kind in (NarrationKind.NOTICE, NarrationKind.STATUS):
            unasked = HistoryKind.NOTICE if kind is NarrationKind.NOTICE else HistoryKind.STATUS
            outcome = Outcome.STOPPED if stopped else Outcome.SAID
            self._on_done(HistoryEntry(self._clock(), unasked, said=self._script, outcome=outcome))

    def _finish(self, entry: HistoryEntry | None) -> None:
        if entry is not None:
            self._on_done(entry)


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
