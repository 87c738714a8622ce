"""Echo cancellation for the on-device detectors: WebRTC's AEC3 (`pywebrtc-audio`), sync, no asyncio.

The echo gate (`audio_io.echo`) decides what of the microphone may leave the machine: a chunk
that holds only the narrator's echo is dropped. It cannot hear the user *over* the narrator
(a chunk passes only 6 dB above the echo), so while the assistant talks the detectors that must
hear the user (the stop phrase, the wake word for a barge-in) hear the canceller's output instead:
the microphone with what the speaker played subtracted.

    canceller = build_canceller(settings.echo, delay_s=lambda: speaker.latency_s + mic.latency_s)
    canceller.played(pcm, at)        # what was written to the speaker, `at` when it was written
    clean = canceller.process(chunk, at)   # `at`: the chunk's capture stamp (MicStamps)

The reference is exactly what was written to the speaker, on the room clock the echo gate uses.
The canceller is given, for each microphone chunk, the reference written at the same clock time,
and AEC3's stream delay is the time from a write to its capture: the speaker's output latency
plus the microphone's input latency, as PortAudio's stream timestamps report them (`delay_s`),
not guessed; AEC3's own delay estimator finds the air's few milliseconds on top. Nothing played
for `idle_s`: the chunk is returned as it is, and the canceller is not run (no CPU in a quiet room).
"""

from __future__ import annotations

from typing import Any, Callable

from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, SAMPLE_WIDTH
from config.settings import EchoSettings

_SAMPLE_BYTES = SAMPLE_WIDTH


def canceller_available() -> bool:
    """`pywebrtc-audio` is installed (it has no wheel for armv7l: there the gate works alone)."""
    try:
        import pywebrtc_audio  # noqa: F401
    except ImportError:
        return False
    return True


class EchoCanceller:
    """AEC3 on 24 kHz pcm16 mono chunks, its reference kept on the caller's clock (room seconds)."""

    def __init__(self, settings: EchoSettings = EchoSettings(), delay_s: Callable[[], float] = lambda: 0.0) -> None:
        import numpy as np  # only when a canceller is built
        from pywebrtc_audio import AudioProcessor  # AEC3 (its high-pass filter on), any rate

        self._np = np
        self._aec: Any = AudioProcessor(sample_rate=SAMPLE_RATE, num_channels=1, echo_cancellation=True)
        self._delay_s = delay_s
        self._idle_s = settings.cancel_idle_s
        self._keep = int((settings.cancel_idle_s + 1.0) * BYTES_PER_SECOND)  # reference kept behind the mic
        self._ref = bytearray()  # what was written, contiguous from `_ref_at` on (silence where nothing was)
        self._ref_at: float | None = None  # clock time of `_ref[0]`
        self._last_played_end = float("-inf")
        self.stream_delay_ms = 0  # what AEC3 was last told
        self.frames = 0  # 20 ms chunks run through AEC3 (a measure of its CPU)

    def played(self, pcm: bytes, at: float) -> None:
        """`pcm` was written to the speaker at `at` (the clock `process` is stamped on)."""
        if not pcm:
            return
        if self._ref_at is None:
            self._ref_at = at
        offset = _bytes(at - self._ref_at)
        if offset > len(self._ref):
            self._ref += bytes(offset - len(self._ref))
        elif offset < len(self._ref):  # overlaps what was written before: a write replaces nothing
            pcm = pcm[len(self._ref) - offset:]
        self._ref += pcm
        self._last_played_end = max(self._last_played_end, self._ref_at + len(self._ref) / BYTES_PER_SECOND)

    def stopped(self, at: float) -> None:
        """Nothing written after `at` plays (a flush): the reference after it is silence."""
        if self._ref_at is None:
            return
        cut = max(0, _bytes(at - self._ref_at))
        if cut < len(self._ref):
            del self._ref[cut:]
        self._last_played_end = min(self._last_played_end, at)

    def active(self, at: float) -> bool:
        """Something was written in the last `idle_s` (plus the stream delay): the echo may be in the mic."""
        return at - self._last_played_end <= self._idle_s + self._delay()

    def process(self, chunk: bytes, at: float) -> bytes:
        """The microphone chunk captured at `at`, with the echo of what was played cancelled."""
        if not self.active(at):
            self._trim(at)
            return chunk
        far = self._reference(at, len(chunk))
        delay_ms = round(self._delay() * 1000)
        if delay_ms != self.stream_delay_ms:
            self._aec.stream_delay_ms = self.stream_delay_ms = delay_ms
        np = self._np
        out = self._aec.process(np.frombuffer(chunk, dtype=np.int16), np.frombuffer(far, dtype=np.int16))
        self.frames += 1
        self._trim(at)
        return out.tobytes()

    def reset(self) -> None:
        self._aec.reset()

    def _delay(self) -> float:
        return min(max(self._delay_s(), 0.0), 0.5)

    def _reference(self, at: float, length: int) -> bytes:
        """What was written to the speaker over [at, at + length) on the clock, silence elsewhere."""
        if self._ref_at is None:
            return bytes(length)
        start = _bytes(at - self._ref_at)
        piece = self._ref[max(0, start):max(0, start + length)]
        if start < 0:
            piece = bytes(min(length, -start)) + piece
        return bytes(piece) + bytes(length - len(piece))

    def _trim(self, at: float) -> None:
        if self._ref_at is None:
            return
        drop = _bytes(at - self._ref_at) - self._keep
        if drop > 0:
            drop = min(drop, len(self._ref))
            del self._ref[:drop]
            self._ref_at += drop / BYTES_PER_SECOND
            if not self._ref:
                self._ref_at = None


def _bytes(seconds: float) -> int:
    """A clock span as a whole number of samples, in bytes."""
    return round(seconds * SAMPLE_RATE) * _SAMPLE_BYTES


def stream_latency_s(device: object) -> float:
    """A device's latency as PortAudio reports it (`latency_s` of `audio_io.portaudio`'s microphone
    and speaker), through the wrappers around it (`inner`); 0 for a device that has none (memory)."""
    while not hasattr(device, "latency_s") and hasattr(device, "inner"):
        device = device.inner  # type: ignore[attr-defined]
    return float(getattr(device, "latency_s", 0.0))


def build_canceller(settings: EchoSettings, delay_s: Callable[[], float] = lambda: 0.0) -> EchoCanceller | None:
    """The canceller, or None when it is switched off or not installed (the gate works alone)."""
    if not settings.cancel or not canceller_available():
        return None
    return EchoCanceller(settings, delay_s)
