"""The stop detector's interface: "computer, stop" on the microphone while the narrator talks.

The coordinator's mic reader feeds it every chunk while a narration plays (muted or not: the
upload stays muted, nothing of this audio leaves the machine) and resets it when the narration
ends. A hit cuts the narration (`decisions.coordinator.StopHeard`). The acoustic detector
(pocketsphinx, the wake phrase followed by one of `StopSettings.words`) implements this
protocol; tests inject scripted fakes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class StopHit:
    phrase: str  # what was heard, e.g. "computer stop"
    end_s: float  # when the stop word ended, on the time scale `feed` was given
    detected_s: float  # the `at` of the chunk that completed it (detected_s - end_s: the detector's delay)


class StopDetector(Protocol):
    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        """`chunk`: pcm16 mono 24 kHz; `at`: the time at its end, in seconds of microphone audio
        (continuous across calls until `reset`). One hit per utterance of the phrase."""
        ...

    def reset(self) -> None:
        """What is fed next does not follow what came before (a narration ended)."""
        ...
