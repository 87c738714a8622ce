"""The readable timeline: what happened, in words; printed by the demo, asserted on by tests,
logged always. Synchronous: whoever wants to wait for a state observes it through `on_add`
(see `concurrency.changes.wait_for`)."""

from __future__ import annotations

import collections
import enum
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from decisions.words import words
from safety.text import clean

log = logging.getLogger("handoff.coordinator")


class TimelineKind(enum.StrEnum):
    HEARD = "heard"  # a command-shaped utterance
    IGNORED = "ignored"  # not addressed to us
    WAKE = "wake"  # the wake phrase alone
    CHIME = "chime"
    FOLLOW_UP = "follow-up"  # an answer was said: a follow-up needs no wake phrase for a moment
    WORKING = "working"  # an answer is late: the working sound plays
    COMMAND = "command"  # routed to the model
    CONFIRMED = "confirmed"  # routed by its audio: the transcript confirmed it, with these words
    SAID = "said"  # the answer said before its command was confirmed, once it is (for history)
    WITHDRAWN = "withdrawn"  # routed by its audio: the transcript says it was not addressed; nothing acts
    STAGES = "stages"  # a command's stage offsets (JSON; decisions.stages), logged at debug
    TOOL = "tool"
    RESULT = "result"  # a tool finished: "name ok: what it found" (as the log always said it)
    FALLBACK = "fallback"  # no tool call: the model's text is narrated
    NARRATING = "narrating"
    NARRATED = "narrated"
    STOPPED = "stopped"  # "computer, stop" cut a narration
    NOTICE = "notice"
    LISTENING = "listening"
    RESTARTING = "restarting"
    REPLAYING = "replaying"
    MICROPHONE = "microphone"
    ERROR = "error"


@dataclass(frozen=True)
class TimelineEntry:
    at: float
    kind: TimelineKind
    text: str


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
        if TimelineKind(kind) is TimelineKind.IGNORED and not self.log_overheard:
            # Overheard speech is the room's: not even the in-memory timeline keeps its words.
            text = f"({len(words(text))} words)"
        # What was heard or said enters here on its way to the history, the status and the log:
        # a lone surrogate from the wire would make each of them fail to store it.
        entry = TimelineEntry(self._clock() - self._start, TimelineKind(kind), clean(text))
        self.entries.append(entry)
        self._counts[entry.kind] += 1
        if entry.kind is TimelineKind.IGNORED and not self.log_overheard:
            log.info("ignored an utterance not addressed to me %s", text)
        elif entry.kind is TimelineKind.STAGES:
            log.debug("stages: %s", text)
        elif entry.kind is TimelineKind.ERROR:
            # At WARNING, so a log kept at WARNING still shows a listener that cannot connect.
            log.warning("%s: %s", entry.kind, text)
        else:
            log.info("%s: %s", entry.kind, text)
        for observer in list(self.on_add):
            observer(entry)

    def count(self, kind: TimelineKind | str) -> int:
        return self._counts[TimelineKind(kind)]
