"""Which task the user means: a number ("3", "task 3", "three"), an exact name ("backup",
"the test run"), or a unique part of a name, prompt or command. Pure: records in, one record
out, or an error whose message is the question to ask back."""

from __future__ import annotations

import re
import time
from typing import Callable, Sequence

from tasks.errors import AmbiguousTask, UnknownTask
from tasks.records import TaskRecord
from tasks.speech import and_list, clock_time, match_key, number_words, or_list

_NUMBER_WORDS = {number_words(n): n for n in range(1, 100)}
MAX_CANDIDATES_ASKED = 4  # a spoken question can't list more than a few


def resolve_task(
    ident: str | int,
    records: Sequence[TaskRecord],
    prefer: Callable[[TaskRecord], bool] | None = None,
) -> TaskRecord:
    """The one record `ident` names. When several match and exactly one satisfies `prefer`
    (cancel prefers the task that is still running), that one is taken.

    Raises UnknownTask or AmbiguousTask (its message asks "Which one: ...?")."""
    number = _as_number(ident)
    if number is not None:
        for record in records:
            if record.id == number:
                return record
        raise UnknownTask(f"There is no task number {number}.")

    wanted = match_key(str(ident))
    if not wanted:
        raise UnknownTask("Say which task: its number or its name.")
    exact = [r for r in records if wanted in (match_key(r.name), match_key(r.spoken))]
    candidates = exact or [r for r in records if any(wanted in match_key(t) for t in (r.name, r.spoken, r.label))]
    if not candidates:
        names = sorted({r.name for r in records})
        known = f" The tasks I know of are: {and_list(names[:6])}." if names else " There are no tasks yet."
        raise UnknownTask(f"I can't find a task called '{ident}'.{known}")
    if len(candidates) == 1:
        return candidates[0]
    if prefer is not None:
        preferred = [r for r in candidates if prefer(r)]
        if len(preferred) == 1:
            return preferred[0]
        candidates = preferred or candidates
    asked = sorted(candidates, key=lambda r: r.id)[-MAX_CANDIDATES_ASKED:]
    raise AmbiguousTask(f"Which one: {or_list(describe_candidates(asked))}?", candidates)


def describe_candidates(records: Sequence[TaskRecord]) -> list[str]:
    """Spoken descriptions that tell the records apart: "the backup started at 10:02"; when
    two would sound the same, the task number is added."""
    descriptions = [_describe(r) for r in records]
    return [
        f"task {number_words(r.id) if r.id < 1000 else r.id}, {d}" if descriptions.count(d) > 1 else d
        for r, d in zip(records, descriptions)
    ]


def written_candidates(records: Sequence[TaskRecord]) -> str:
    """The command line's form of `describe_candidates`, for reading: "1 (nap, running, started
    2026-11-24 10:02:13); 2 (...)". """
    def when(record: TaskRecord) -> str:
        if record.is_timer and record.due_at is not None:
            return "due " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.due_at))
        started = record.started_at is not None
        at = record.started_at if started else record.created_at
        return ("started " if started else "queued ") + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))

    return "; ".join(f"{r.id} ({r.name}, {r.status}, {when(r)})" for r in sorted(records, key=lambda r: r.id))


def _describe(record: TaskRecord) -> str:
    if record.is_timer and record.due_at is not None:  # its name already says what it is for
        return f"{record.spoken} due at {clock_time(record.due_at)}"
    when = record.started_at if record.started_at is not None else record.created_at
    verb = "started" if record.started_at is not None else "queued"
    about = f" for '{_short(record.label)}'" if record.label else ""
    return f"{record.spoken}{about} {verb} at {clock_time(when)}"


def _short(text: str, words: int = 6) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def _as_number(ident: str | int) -> int | None:
    if isinstance(ident, int) and not isinstance(ident, bool):
        return ident
    text = re.sub(r"^(task|number|no\.?|#)\s*", "", str(ident).strip().lower()).strip()
    text = re.sub(r"^(number|#)\s*", "", text).strip(" .?!")
    if text.isdigit():
        return int(text)
    return _NUMBER_WORDS.get(text)
