"""A scripted on-device wake for pipeline tests: stands in for `detectors.pipeline.MicDetectors`
(the engine, pocketsphinx today or a shipped wake-word model, is not under test here)."""

from __future__ import annotations

from collections import deque

from audio_io import BYTES_PER_SECOND
from audio_io.format import audioop
from config.settings import UploadMode
from decisions.upload_gate import KeywordHit, UploadGate, UploadGateSettings
from detectors.pipeline import UploadFilter, Verdict


class ScriptedWake:
    """Energy is speech (the harness speaks in tones). Each utterance's wake is scripted:
    `wake_next()` makes the next utterance begin with the wake phrase (the hit comes `phrase_s`
    after its onset, as a spotter reports a phrase at its end); others wake nothing."""

    def __init__(self, rms: int = 500, phrase_s: float = 0.2) -> None:
        self.rms = rms
        self.phrase_s = phrase_s
        self._woken: deque[bool] = deque()
        self._onset: float | None = None  # the utterance being heard began here
        self._wakes: bool = False  # ... and holds a scripted wake not reported yet
        self._last_speech = 0.0
        self.hits: list[KeywordHit] = []

    def wake_next(self, woken: bool = True) -> None:
        self._woken.append(woken)

    def feed(self, chunk: bytes, now: float) -> Verdict:
        speech = audioop.rms(chunk, 2) >= self.rms
        hit = None
        if speech and self._onset is None:
            self._onset = now - len(chunk) / BYTES_PER_SECOND
            self._wakes = self._woken.popleft() if self._woken else False
        if speech:
            self._last_speech = now
        elif self._onset is not None and now - self._last_speech > 0.3:
            self._onset = None  # the utterance ended
        if speech and self._wakes and self._onset is not None and now - self._onset >= self.phrase_s:
            self._wakes = False
            hit = KeywordHit("computer", start_s=self._onset, detected_s=now)
            self.hits.append(hit)
        return Verdict(speech, 1.0 if speech else 0.0, hit)

    def reset(self) -> None:
        self._onset = None


def scripted_wake_filter(wake: ScriptedWake, window_s: float = 8.0, turn_end_s: float | None = None) -> UploadFilter:
    """`turn_end_s`: the device ends a woken turn itself after this much silence (END_OF_TURN=device)."""
    gate = UploadGate(UploadGateSettings(mode=UploadMode.ON_DEVICE_WAKE, command_window_s=window_s))
    return UploadFilter(gate, wake, BYTES_PER_SECOND, turn_end_s)  # type: ignore[arg-type]
