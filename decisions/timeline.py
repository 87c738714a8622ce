"""The readable timeline: what happened, in words; printed by the demo, asserted on by tests,
logged always. Synchronous: whoever wants to wait for a state observes it through `on_add`
(see `concurrency.changes.wait_for`)."""

from __future__ import annotations

import collections
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from decisions.events import Note, Overheard, TimelineEvent
from decisions.timeline_kind import TimelineKind
from decisions.words import words
from safety.text import clean

__all__ = ["Timeline", "TimelineEntry", "TimelineKind"]

log = logging.getLogger("handoff.coordinator")


@dataclass(frozen=True)
class TimelineEntry:
    at: float
    kind: TimelineKind
    text: str  # the event's rendering, as logged (for people; code reads `event`)
    event: TimelineEvent | None = None


class Timeline:
    """Keeps the recent entries and a count of every kind, so it stays small however long it runs.
    Every added entry is passed to each callable in `on_add` (the printer, waiters)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        printer: Callable[[TimelineEntry], None] | None = None,
        keep: int = 1000,
        log_overheard: bool = False,
    ):
        """`log_overheard`: log the words of utterances not addressed to us (a debugging aid;
        by default only their length is logged: overheard speech is the room's, not ours)."""
        self._clock = clock
        self.log_overheard = log_overheard
        self._start = clock()
        self.entries: deque[TimelineEntry] = deque(maxlen=keep)
        self._counts: collections.Counter[TimelineKind] = collections.Counter()
        self.on_add: list[Callable[[TimelineEntry], None]] = [printer] if printer else []

    def add(self, kind: TimelineKind | str, text: str) -> None:
        """An entry with nothing more to it than its words."""
        kind = TimelineKind(kind)
        self.emit(Overheard(text) if kind is TimelineKind.IGNORED else Note(kind, text))

    def emit(self, event: TimelineEvent) -> None:
        text = event.text
        if isinstance(event, Overheard) and not self.log_overheard:
            # Overheard speech is the room's: not even the in-memory timeline keeps its words.
            text = f"({len(words(text))} words)"
            event = Overheard(text)
        # What was heard or said enters here on its way to the history, the status and the log:
        # a lone surrogate from the wire would make each of them fail to store it.
        entry = TimelineEntry(self._clock() - self._start, TimelineKind(event.kind), clean(text), event)
        self.entries.append(entry)
        self._counts[entry.kind] += 1
        if entry.kind is TimelineKind.IGNORED and not self.log_overheard:
            log.info("ignored an utterance not addressed to me %s", text)
        elif entry.kind in (TimelineKind.STAGES, TimelineKind.CLOSED):
            log.debug("%s: %s", entry.kind, text)
        elif entry.kind is TimelineKind.ERROR:
            # At WARNING, so a log kept at WARNING still shows a listener that cannot connect.
            log.warning("%s: %s", entry.kind, text)
        else:
            log.info("%s: %s", entry.kind, text)
        for observer in list(self.on_add):
            observer(entry)

    def count(self, kind: TimelineKind | str) -> int:
        return self._counts[TimelineKind(kind)]
