"""The durable queue of things to announce: "the backup finished in two minutes".

Delivery is at-least-once up to the ack and exactly-once after it: `next_batch` only reads,
`ack` marks delivered. The coordinator acks after the narration has played, so a batch that was
fetched but never played (handoff stopped mid-sentence) is offered again after a restart, and an
acked one never is.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Sequence

from concurrency.changes import Changes
from tasks.config import TaskSettings
from tasks.records import TIMER_KINDS, Notice, TaskKind, TaskRecord, TaskStatus
from tasks.speech import and_list, number_words, output_summary, sentence, status_clause
from tasks.when import when_words
from tasks.store import StoreWorker

log = logging.getLogger(__name__)

# Outcomes worth announcing. A cancel is not: the user just asked for it and heard the reply.
ANNOUNCED = frozenset(
    {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.INTERRUPTED, TaskStatus.STOPPED}
)
_FINISHED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.TIMED_OUT})


@dataclass(frozen=True)
class NoticeBatch:
    """What to narrate next, and the notice ids to ack once it has been heard."""

    ids: list[int]
    script: str


def notice_for(
    record: TaskRecord, now: float, summary_lines: int, late_after_s: float = 60.0, *, late: bool = False
) -> Notice | None:
    """The notice a task's final record calls for, or None (still active, or cancelled).
    A timer's notice is late when it came due while handoff was not running (`late`), or fired
    `late_after_s` or more after its due time (the machine was asleep)."""
    if record.status not in ANNOUNCED:
        return None
    if record.is_timer:
        if record.status is not TaskStatus.SUCCEEDED:
            return None  # only a fired timer is announced
        late = late or (record.due_at is not None and now - record.due_at >= late_after_s)
        return Notice(task_id=record.id, created_at=now, outcome=record.status, spoken=record.spoken,
                      duration_s=record.duration_s(now), kind=record.kind, label=record.label,
                      due_at=record.due_at, late=late)  # fmt: skip
    summary = output_summary(record.tail, summary_lines) if record.status in _FINISHED else ""
    # An interruption is found at the next start, but happened earlier: date it by the last
    # moment the task was known to exist, so a long-gone one is merged as "while you were away".
    happened = (record.started_at or record.created_at) if record.status is TaskStatus.INTERRUPTED else now
    return Notice(
        task_id=record.id,
        created_at=happened,
        outcome=record.status,
        spoken=record.spoken,
        duration_s=record.duration_s(now),
        exit_code=record.exit_code,
        timeout_s=record.timeout_s,
        error=record.error,
        summary=summary,
    )


def timer_script(notice: Notice, now: float) -> str:
    """"Your ten-minute timer is done." / "Reminder: call the plumber." and, when it is late,
    "This was due at 5 PM, while I was not running." """
    if notice.kind is TaskKind.REMINDER:
        text = sentence(f"reminder: {notice.label}")
    else:
        text = sentence(f"{notice.spoken} is done")
    if notice.late and notice.due_at is not None:
        when = when_words(datetime.fromtimestamp(notice.due_at), datetime.fromtimestamp(now))
        text += f" This was due {when}, while I was not running."
    return text


def notice_script(notice: Notice) -> str:
    """One notice on its own: the outcome, then what the output last said.
    "The test run failed after forty seconds, with exit code 1. The last output was: 1 failed."
    """
    text = sentence(_clause(notice, detailed=True))
    if notice.summary:
        text += " " + sentence(f"the last output was: {notice.summary}")
    return text


def merged_script(notices: Sequence[Notice], max_named: int) -> str:
    """Several old notices as one: "While you were away, three tasks finished: the backup
    finished in two minutes; the test run failed after forty seconds; and ..." """
    named, rest = list(notices[:max_named]), len(notices) - max_named
    finished = all(n.outcome in _FINISHED for n in notices)
    count = number_words(len(notices))
    head = f"{count} tasks finished" if finished else f"there was news of {count} tasks"
    clauses = [_clause(n, detailed=False) for n in named]
    if rest > 0:
        clauses.append(f"{number_words(rest)} more, which you can hear with the task list")
    return sentence(f"while you were away, {head}: {and_list(clauses, sep='; ', last='; and ')}")


def _clause(notice: Notice, detailed: bool) -> str:
    return status_clause(
        notice.spoken,
        str(notice.outcome),
        notice.duration_s,
        exit_code=notice.exit_code,
        timeout_s=notice.timeout_s,
        error=notice.error,
        detailed=detailed,
    )


class NoticeQueue:
    """Pending announcements: stored in the task database, and mirrored in memory so the
    coordinator's `next_batch` and `ack` never wait for the disk (writes go through the
    store's worker thread, in order)."""

    def __init__(self, io: StoreWorker, settings: TaskSettings, clock: Callable[[], float] = time.time) -> None:
        self._io = io
        self._settings = settings
        self._clock = clock
        self._pending: dict[int, Notice] = {}  # by id: stored, not yet acked; oldest first
        self._announcements: dict[int, Notice] = {}  # about handoff itself (not stored, ids < 0): said once
        self._next_announcement_id = -1
        self._posted = Changes()  # notified whenever a notice is queued

    async def load(self) -> None:
        """Read what earlier runs left undelivered."""
        self._pending = _by_id(await self._io.call(self._io.store.pending_notices))
        self._posted.notify()

    def posted(self, notice: Notice) -> None:
        """Called after `notice` was stored (it has its id): wakes whoever waits in `wait_pending`."""
        self._pending.update(_by_id([notice]))
        self._posted.notify()

    def announce(self, script: str) -> int:
        """Queue a sentence about handoff itself (a damaged task list was replaced); it is said
        once, before any task's notice, and not stored."""
        notice_id = self._next_announcement_id
        self._next_announcement_id -= 1
        self._announcements[notice_id] = Notice(task_id=0, created_at=self._clock(), outcome=TaskStatus.FAILED,
                                                spoken="", duration_s=None, summary=script, id=notice_id)  # fmt: skip
        self._posted.notify()
        return notice_id

    def task_of(self, notice_id: int) -> int | None:
        """The task a waiting notice is about (0: about handoff itself); None: not waiting."""
        notice = self._announcements.get(notice_id) or self._pending.get(notice_id)
        return notice.task_id if notice is not None else None

    def _waiting(self) -> list[Notice]:
        return [*self._announcements.values(), *self._pending.values()]

    def pending_count(self) -> int:
        return len(self._announcements) + len(self._pending)

    async def wait_pending(self, accept: Callable[[Notice], bool] | None = None) -> None:
        """Returns as soon as at least one notice is waiting (at once if one already is);
        `accept`: only notices it accepts count (a room's, when there are satellites)."""
        if accept is None:
            await self._posted.wait_until(lambda: self.pending_count() > 0)
        else:
            await self._posted.wait_until(lambda: any(map(accept, self._waiting())))

    def next_batch(self, now: float | None = None, accept: Callable[[Notice], bool] | None = None) -> NoticeBatch | None:
        """What to narrate next, or None. A timer or reminder comes first and alone (it is about
        now). Task notices older than `merge_older_than_s` (piled up while nobody could be
        told, e.g. across a restart) come together as one script; a fresh one comes alone.
        Nothing is marked delivered until `ack`."""
        announcements = [(i, n) for i, n in self._announcements.items() if accept is None or accept(n)]
        if announcements:
            first_id, first = announcements[0]
            return NoticeBatch(ids=[first_id], script=first.summary)
        pending = [(i, n) for i, n in self._pending.items() if accept is None or accept(n)]
        if not pending:
            return None
        now = self._clock() if now is None else now
        timer = next(((i, n) for i, n in pending if n.kind in TIMER_KINDS), None)
        if timer is not None:
            return NoticeBatch(ids=[timer[0]], script=timer_script(timer[1], now))
        old = [(i, n) for i, n in pending if now - n.created_at >= self._settings.merge_older_than_s]
        if len(old) >= 2:
            script = merged_script([n for _, n in old], self._settings.max_merged_notices)
            return NoticeBatch(ids=[i for i, _ in old], script=script)
        first_id, first = pending[0]
        return NoticeBatch(ids=[first_id], script=notice_script(first))

    def ack(self, ids: Sequence[int]) -> None:
        """These notices have been heard; they are never offered again, across restarts too."""
        heard = set(ids)
        self._announcements = {i: n for i, n in self._announcements.items() if i not in heard}
        self._pending = {i: n for i, n in self._pending.items() if i not in heard}
        stored = [i for i in ids if i >= 0]
        if stored:
            written = self._io.submit(self._io.store.mark_delivered, stored, self._clock())
            written.add_done_callback(_log_failure)


def _by_id(notices: list[Notice]) -> dict[int, Notice]:
    """Stored notices by their id (the store gives every one an id; a notice without one was never stored)."""
    by_id: dict[int, Notice] = {}
    for notice in notices:
        if notice.id is None:
            raise ValueError("a notice is queued only once it is stored (with its id)")
        by_id[notice.id] = notice
    return by_id


def _log_failure(future: "concurrent.futures.Future[None]") -> None:
    if future.exception() is not None:
        # After a restart these would be said again: annoying, not lost. Worth a line in the log.
        log.error("could not record notices as delivered", exc_info=future.exception())
