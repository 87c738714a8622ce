"""A perfect detector for tests: verdicts from a clip's labels instead of from its audio."""

from __future__ import annotations

from benchmarks.corpus import FRAME_S, Clip
from decisions.upload_gate import KeywordHit
from detectors.pipeline import Verdict


class OracleDetectors:
    """Same `feed(chunk, now)` as detectors.pipeline.MicDetectors, for a clip played from `start_time`.

    Speech where the clean audio has it; the wake phrase reported `detect_delay_s` after an
    addressed clip's onset (pocketsphinx reports at the word's end), starting at the onset.
    """

    def __init__(self, clip: Clip, start_time: float = 0.0, detect_delay_s: float = 0.6) -> None:
        self._labels = clip.speech_frames()
        self._start = start_time
        self._hit_at = None if clip.wake_onset_s is None else start_time + clip.wake_onset_s + detect_delay_s
        self._onset = None if clip.wake_onset_s is None else start_time + clip.wake_onset_s
        self._reported = False

    def feed(self, chunk: bytes, now: float) -> Verdict:
        index = int(round((now - self._start) / FRAME_S)) - 1
        speech = 0 <= index < len(self._labels) and self._labels[index]
        hit = None
        if self._hit_at is not None and not self._reported and now >= self._hit_at:
            self._reported = True
            hit = KeywordHit("computer", start_s=self._onset, detected_s=now)
        return Verdict(speech, 1.0 if speech else 0.0, hit)
