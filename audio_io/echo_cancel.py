"""Echo cancellation for the on-device detectors: speexdsp's adaptive filter, sync, no asyncio.

The echo gate (`audio_io.echo`) decides what of the microphone may leave the machine: a chunk
that holds only the narrator's echo is dropped. It cannot hear the user *over* the narrator
(a chunk passes only 6 dB above the echo), so while the assistant talks the detectors that must
hear the user (the stop phrase, the wake word for a barge-in) hear the canceller's output instead:
the microphone with what the speaker played subtracted.

    canceller = build_canceller(settings.echo, delay_s=lambda: speaker.latency_s + mic.latency_s)
    canceller.played(pcm, at)        # what was written to the speaker, `at` when it was written
    clean = canceller.process(chunk, at)   # `at`: the chunk's capture stamp (MicStamps)

The canceller is Xiph's speexdsp (`libspeexdsp.so.1`, Debian's `libspeexdsp1`, through ctypes:
its C API has not changed since 2008): a frequency-domain adaptive filter (MDF) of
`cancel_filter_ms`, linear only. WebRTC's AEC3 (`pywebrtc-audio`, and livekit's
AudioProcessingModule: the same AEC3) was measured first and rejected: its residual-echo
suppressor removes the first 300 ms of the user's speech over a playing narration (-40 dB), which
is the "hey" of "hey jarvis", and the wake model then scores it near 0 (docs/HANDOFF.md,
"Dependencies"; `benchmarks/barge_in.py --aec3`).

The reference is exactly what was written to the speaker, on the room clock the echo gate uses.
For each microphone chunk the filter is given what was written `delay_s` earlier: the speaker's
output latency plus the microphone's input latency, as PortAudio's stream timestamps report
them, not guessed (`stream_delay_ms`); the filter's length covers the air and the room's
reverberation on top. Nothing played for `cancel_idle_s`: the chunk is returned as it is, and the
filter is not run (no CPU in a quiet room).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
from typing import Any, Callable

from audio_io.echo import EchoSuppressor
from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, SAMPLE_WIDTH
from config.settings import EchoSettings

_SAMPLE_BYTES = SAMPLE_WIDTH
_FRAME = SAMPLE_RATE // 100  # speexdsp works on 10 ms frames
_FRAME_BYTES = _FRAME * SAMPLE_WIDTH
_SET_SAMPLING_RATE = 24  # SPEEX_ECHO_SET_SAMPLING_RATE (speex/speex_echo.h)
_LIBRARY = "libspeexdsp.so.1"


def _load() -> Any | None:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("speexdsp") or _LIBRARY)
    except OSError:
        return None
    lib.speex_echo_state_init.restype = ctypes.c_void_p
    lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.speex_echo_state_destroy.argtypes = [ctypes.c_void_p]
    lib.speex_echo_state_reset.argtypes = [ctypes.c_void_p]
    lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    return lib


def canceller_available() -> bool:
    """speexdsp's library is installed (`apt-get install libspeexdsp1`; scripts/setup.sh does)."""
    return _load() is not None


class EchoCanceller:
    """AEC3 on 24 kHz pcm16 mono chunks, its reference kept on the caller's clock (room seconds)."""

    def __init__(self, settings: EchoSettings = EchoSettings(), delay_s: Callable[[], float] = lambda: 0.0) -> None:
        lib = _load()
        if lib is None:
            raise RuntimeError(f"{_LIBRARY} is missing: apt-get install libspeexdsp1 (scripts/setup.sh does)")
        self._lib = lib
        taps = round(SAMPLE_RATE * settings.cancel_filter_ms / 1000)
        self._state = lib.speex_echo_state_init(_FRAME, taps)
        lib.speex_echo_ctl(self._state, _SET_SAMPLING_RATE, ctypes.byref(ctypes.c_int(SAMPLE_RATE)))
        self._out = ctypes.create_string_buffer(_FRAME_BYTES)
        self._delay_s = delay_s
        self._idle_s = settings.cancel_idle_s
        self._keep = int((settings.cancel_idle_s + 1.0) * BYTES_PER_SECOND)  # reference kept behind the mic
        self._ref = bytearray()  # what was written, contiguous from `_ref_at` on (silence where nothing was)
        self._ref_at: float | None = None  # clock time of `_ref[0]`
        self._last_played_end = float("-inf")
        self.stream_delay_ms = 0  # the devices' latency last used to line the reference up
        self.frames = 0  # chunks run through the filter
        # The echo gate behind the canceller: it learns the path from the reference to what the
        # filter left (the residual) and says whether a cancelled chunk holds more than that.
        self.residual = EchoSuppressor(dataclasses.replace(settings, margin_db=settings.cancel_margin_db))
        self.passed = True  # the last chunk `process` returned beat the residual (or nothing played)
        self.far = b""  # what the filter was given as played for that chunk (b"": it did not run)

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
        self.residual.played(pcm, at)
        self._last_played_end = max(self._last_played_end, self._ref_at + len(self._ref) / BYTES_PER_SECOND)

    def stopped(self, at: float) -> None:
        """Nothing written after `at` plays (a flush): the reference after it is silence."""
        if self._ref_at is None:
            return
        cut = max(0, _bytes(at - self._ref_at))
        if cut < len(self._ref):
            del self._ref[cut:]
        self.residual.stopped(at)
        self._last_played_end = min(self._last_played_end, at)

    def active(self, at: float) -> bool:
        """Something was written in the last `idle_s` (plus the stream delay): the echo may be in the mic."""
        return at - self._last_played_end <= self._idle_s + self._delay()

    def process(self, chunk: bytes, at: float) -> bytes:
        """The microphone chunk captured at `at`, with the echo of what was played cancelled."""
        if not self.active(at):
            self._trim(at)
            self.passed, self.far = True, b""
            return chunk
        delay = self._delay()
        self.stream_delay_ms = round(delay * 1000)
        far = self._reference(at - delay, len(chunk))  # what was written as this was captured, less the devices' latency
        self.far = far
        self.frames += 1
        self._trim(at - delay)
        cancelled = self._cancel(chunk, far)
        # The gate behind it (its own path: the reference lined up as the gate's own, by the clock).
        self.passed = self.residual.process(cancelled, at) is not None
        return cancelled

    def _cancel(self, near: bytes, far: bytes) -> bytes:
        """The filter itself: `near` less the echo of `far` (the same length, lined up)."""
        out = bytearray(near)  # a tail shorter than a frame (a chunk not a multiple of 10 ms) passes as it is
        for i in range(0, len(near) - _FRAME_BYTES + 1, _FRAME_BYTES):
            self._lib.speex_echo_cancellation(self._state, near[i:i + _FRAME_BYTES], far[i:i + _FRAME_BYTES], self._out)
            out[i:i + _FRAME_BYTES] = self._out.raw
        return bytes(out)

    def reset(self) -> None:
        self._lib.speex_echo_state_reset(self._state)

    def __del__(self) -> None:
        state, self._state = getattr(self, "_state", None), None
        if state:
            self._lib.speex_echo_state_destroy(state)

    def _delay(self) -> float:
        return min(max(self._delay_s(), 0.0), 0.5)  # (PortAudio's figures are bounded there too)

    def _reference(self, at: float, length: int) -> bytes:
        """What was written to the speaker over [at, at + length) on the clock, silence elsewhere."""
        if self._ref_at is None:
            return bytes(length)
        start = _bytes(at - self._ref_at)
        piece = bytes(self._ref[max(0, start):max(0, start + length)])
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
        device = getattr(device, "inner")
    return float(getattr(device, "latency_s", 0.0))


def build_canceller(settings: EchoSettings, delay_s: Callable[[], float] = lambda: 0.0) -> EchoCanceller | None:
    """The canceller, or None when it is switched off or not installed (the gate works alone)."""
    if not settings.cancel or not canceller_available():
        return None
    return EchoCanceller(settings, delay_s)
