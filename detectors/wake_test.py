"""What `handoff wake-test` measures: the wake model's score on each utterance of a recording.

Synthetic voices are a floor; the user's own voice and microphone are the truth. A recording (or
the takes the command asks for) is split into utterances by the on-device VAD, each is scored by
the model alone (fed from a short pre-roll to a short tail, reset in between, as the pipeline
feeds it), and the report says which were heard at the cutoff in use, and which cutoff would have
caught every phrase with no false wake.

    utterances = split_utterances(pcm)                       # pcm16 mono 24 kHz
    takes = [Take(u.start_s, score(spotter, u.pcm), is_phrase=True) for u in utterances]
    report = WakeReport(takes, cutoff=spotter.cutoff, model_cutoff=spotter.model_cutoff)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from detectors.audio import SAMPLE_WIDTH
from detectors.vad import SileroVad

if TYPE_CHECKING:
    from detectors.wake_model import ModelSpotter

RATE = 24000
CHUNK_BYTES = RATE * SAMPLE_WIDTH // 50  # 20 ms
PREROLL_S = 0.4  # as MicDetectors feeds the spotter
TAIL_S = 0.6
GAP_S = 0.5  # silence that ends an utterance (a pause inside "hey jarvis ... what time" is shorter)
MIN_SPEECH_S = 0.2  # a click or a cough is not an utterance


@dataclass(frozen=True)
class Utterance:
    start_s: float
    end_s: float
    pcm: bytes  # from PREROLL_S before its start to TAIL_S after its end


def split_utterances(pcm: bytes, vad: SileroVad | None = None) -> list[Utterance]:
    """The stretches of speech in `pcm`, as the on-device VAD hears them."""
    vad = vad or SileroVad()
    runs: list[list[float]] = []
    count = len(pcm) // CHUNK_BYTES
    for index in range(count):
        if not vad.feed(pcm[index * CHUNK_BYTES : (index + 1) * CHUNK_BYTES]).is_speech:
            continue
        start, end = index * 0.02, (index + 1) * 0.02
        if runs and start - runs[-1][1] < GAP_S:
            runs[-1][1] = end
        else:
            runs.append([start, end])
    found = []
    for start, end in runs:
        if end - start < MIN_SPEECH_S:
            continue
        first = max(0, int((start - PREROLL_S) * 50)) * CHUNK_BYTES
        last = min(count, int((end + TAIL_S) * 50)) * CHUNK_BYTES
        found.append(Utterance(start, end, pcm[first:last]))
    return found


class Scorer:
    """The model's best probability over one utterance (a `ModelSpotter`, reset before each)."""

    def __init__(self, spotter: ModelSpotter) -> None:  # numpy and TFLite: loaded by the caller
        self.spotter = spotter

    def __call__(self, pcm: bytes) -> float:
        self.spotter.reset()
        self.spotter.take_best()
        for index in range(len(pcm) // CHUNK_BYTES):
            self.spotter.feed(pcm[index * CHUNK_BYTES : (index + 1) * CHUNK_BYTES], (index + 1) * 0.02)
        best = self.spotter.take_best()
        return best.probability if best is not None else 0.0


@dataclass(frozen=True)
class Take:
    start_s: float
    score: float
    is_phrase: bool  # the wake phrase (True) or a sentence that is not it


@dataclass(frozen=True)
class WakeReport:
    takes: tuple[Take, ...]
    cutoff: float  # in use (WAKE_CUTOFF, or the model's own)
    model_cutoff: float

    @property
    def phrases(self) -> list[Take]:
        return [t for t in self.takes if t.is_phrase]

    @property
    def others(self) -> list[Take]:
        return [t for t in self.takes if not t.is_phrase]

    @property
    def heard(self) -> int:
        return sum(t.score > self.cutoff for t in self.phrases)

    @property
    def false_wakes(self) -> int:
        return sum(t.score > self.cutoff for t in self.others)

    def suggested_cutoff(self) -> float | None:
        """A cutoff that catches every phrase with no false wake, as high as that allows (but
        never above the model's own), or None when no cutoff does."""
        if not self.phrases:
            return None
        lowest = min(t.score for t in self.phrases)
        highest_other = max((t.score for t in self.others), default=0.0)
        if lowest <= highest_other:
            return None
        # Halfway between the two (rounded down to two places): a margin on both sides.
        middle = (lowest + highest_other) / 2 if self.others else lowest * 0.9
        return min(self.model_cutoff, max(0.01, int(middle * 100) / 100))

    def lines(self, phrase: str) -> list[str]:
        out = []
        for number, take in enumerate(self.takes, 1):
            what = f'"{phrase}"' if take.is_phrase else "not the phrase"
            verdict = "heard" if take.score > self.cutoff else "not heard"
            if not take.is_phrase:
                verdict = "FALSE WAKE" if take.score > self.cutoff else "ignored"
            out.append(f"  {number:>2}. at {take.start_s:6.1f} s  {what:<16} score {take.score:.3f}  {verdict}")
        if self.phrases:
            out.append(f"heard {self.heard} of {len(self.phrases)} wake phrases at cutoff {self.cutoff:g}"
                       + (" (the model's own)" if self.cutoff == self.model_cutoff else ""))
        if self.others:
            out.append(f"false wakes: {self.false_wakes} of {len(self.others)} utterances that were not the phrase")
        suggestion = self.suggested_cutoff()
        clean = " with no false wake" if self.others else ""
        untested = "" if self.others else " No sentence that is not the phrase was scored, so false wakes are untested."
        if not self.phrases:
            pass
        elif suggestion is None:
            lowest = min(t.score for t in self.phrases)
            highest = max(t.score for t in self.others)
            out.append(f"no cutoff catches every phrase with no false wake: the lowest phrase scored {lowest:.3f}, "
                       f"a sentence that was not it {highest:.3f}; say the phrase more clearly or choose another one.")
        elif self.heard == len(self.phrases) and self.false_wakes == 0:
            out.append(f"the cutoff in use ({self.cutoff:g}) caught every phrase{clean}: nothing to change.{untested}")
        else:
            out.append(f"WAKE_CUTOFF={suggestion:g} would have caught all {len(self.phrases)}{clean} "
                       f"(set it in .env; lower hears more, and wakes falsely more).{untested}")
        return out
