"""The wake gate: decides, from a transcript alone, whether an utterance is addressed to us.

Code, not a model's judgement: an utterance is addressed when it starts with the wake phrase
(case and punctuation ignored, "hey"/"ok" tolerated in front). A wake-only utterance opens a
short window in which the next utterance is the command.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from config.wake_phrases import model_for
from decisions.words import word_spans
from decisions.words import words as _words

# Words people put in front of a wake phrase ("hey computer", "ok computer").
_LEADING_FILLERS = frozenset({"hey", "hi", "ok", "okay", "oh", "hello", "yo", "um", "uh", "so"})
# How alike a transcript's first words must be to the phrase, letter for letter (difflib's ratio),
# for an utterance the device already heard the phrase in: "hey travis" 0.89 and "hey head jarvis"
# 0.82 for "hey jarvis" pass; "the commuter" 0.70 and "commuter" 0.74 for "computer" do not.
WOKEN_LIKENESS = 0.75


@dataclass(frozen=True)
class Ignore:
    """Not addressed to us."""


@dataclass(frozen=True)
class WakeOnly:
    """Just the wake phrase: the next utterance within the window is the command."""


@dataclass(frozen=True)
class Command:
    text: str
    via_window: bool = False  # True when it came in the window after a wake-only utterance


Decision = Ignore | WakeOnly | Command


class WakeGate:
    """Classifies transcripts. `now` is passed in (monotonic seconds), so tests control time."""

    def __init__(self, phrase: str, aliases: tuple[str, ...] = (), window_s: float = 8.0) -> None:
        model = model_for(phrase)
        # A phrase with a model: also the ways transcribers write it ("OK Nabu" for "okay nabu").
        spellings = (model.phrase, *model.transcriptions) if model is not None else ()
        # Only a shipped model's wake is trusted over a transcript's spelling: the fallback spotter
        # (pocketsphinx, for a phrase with no model) takes "commuter" for "computer".
        self._trust_device = model is not None
        self._phrases = [p for p in (_words(phrase), *(_words(a) for a in (*aliases, *spellings))) if p]
        if not self._phrases:
            raise ValueError(f"the wake phrase {phrase!r} has no letters or digits")
        self._window_s = window_s
        self._window_until: float | None = None
        self._window_since: float | None = None  # utterances begun before this are not in the window

    @property
    def window_s(self) -> float:
        return self._window_s

    @property
    def window_until(self) -> float | None:
        """When the open wake window lapses (None: no window open)."""
        return self._window_until

    @property
    def window_open(self) -> bool:
        return self._window_until is not None

    def open_window(self, until: float, since: float | None = None) -> None:
        """Take the next utterance begun from `since` until `until` as a command without the
        wake phrase (a follow-up right after an answer: not what was said before it ended)."""
        self._window_until = until
        self._window_since = since

    def window_open_at(self, now: float) -> bool:
        """A wake-only utterance was heard and its window has not lapsed yet."""
        return (self._window_until is not None and now <= self._window_until
                and (self._window_since is None or now >= self._window_since))

    def classify(self, transcript: str, now: float, woken: bool = False) -> Decision:
        """`woken`: the device's wake model (a shipped one) heard the phrase at the start of this utterance, so a
        transcript that spells it its own way ("Hey Travis", "Hey, head jarvis") still carries
        it; only words with nothing like the phrase up front say the device was wrong."""
        words = _words(transcript)
        if not words:
            return Ignore()  # a cough or a click: neither a command nor the end of an open window
        rest = self._strip_wake(words)
        if rest is None and woken and self._trust_device:
            rest = self._strip_likeness(words)
        if rest is not None:
            if rest:
                if self._window_since is None or now >= self._window_since:
                    # (a late transcript of a command said before a follow-up window opened, one
                    # already answered, leaves that window open)
                    self._window_until = None
                return Command(self._command_text(transcript, rest))
            self._window_until = now + self._window_s
            self._window_since = None
            return WakeOnly()
        if self._window_since is not None and now < self._window_since:
            return Ignore()  # begun before the answer ended: no follow-up, and the window stays open
        if self._window_until is not None:
            in_window = now <= self._window_until
            self._window_until = None
            if in_window:
                return Command(transcript.strip(), via_window=True)
        return Ignore()

    def _strip_wake(self, words: list[str]) -> list[str] | None:
        """The words after the wake phrase, or None when the utterance does not start with it."""
        fillers = 0
        while fillers < len(words) and words[fillers] in _LEADING_FILLERS:
            fillers += 1
        # The phrase may itself begin with a filler word ("hey handoff"), so try each start.
        for start in range(fillers + 1):
            for phrase in self._phrases:
                if words[start : start + len(phrase)] == phrase:
                    return words[start + len(phrase) :]
        return None

    def _strip_likeness(self, words: list[str]) -> list[str] | None:
        """The words after the longest run of first words that reads like the phrase (or like the
        phrase without its leading filler), or None when nothing up front does."""
        best: tuple[float, int] | None = None
        for phrase in self._phrases:
            targets = {"".join(phrase)}
            if len(phrase) > 1 and phrase[0] in _LEADING_FILLERS:
                targets.add("".join(phrase[1:]))
            for end in range(1, min(len(words), len(phrase) + 3) + 1):
                said = "".join(words[:end])
                for target in targets:
                    likeness = difflib.SequenceMatcher(None, said, target).ratio()
                    if likeness >= WOKEN_LIKENESS and (best is None or likeness > best[0]):
                        best = (likeness, end)
        return None if best is None else words[best[1]:]

    @staticmethod
    def _command_text(transcript: str, rest: list[str]) -> str:
        """The command as the user said it, minus the wake phrase and its punctuation."""
        # Find where the remaining words begin in the original text, to keep its punctuation/case.
        first = rest[0]
        for span in word_spans(transcript):
            token = _words(span.text)
            if token and token[0] == first:
                position = span.start
                # Make sure the remaining tail really is the rest (not an earlier repeat of the word).
                if _words(transcript[position:]) == rest:
                    return transcript[position:].strip()
        return " ".join(rest)
