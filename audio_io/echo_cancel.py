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

Two filters, to follow a room that changes (someone moves, the laptop is turned): speexdsp,
once converged, adapts slowly, and after the echo path changes it takes seconds to take more
than a few dB off again, while a fresh filter converges in one or two. So a *shadow* filter runs
beside the *main* one on the same input and is restarted every `_SHADOW_RESTART_S`; when its
output held `_SWAP_MARGIN_DB` less energy than the main's over the last `_SWAP_WINDOW_S`, it
becomes the main and a fresh shadow starts. Each chunk returned is whichever of the two outputs
holds less energy (the user's voice is in both, so the lower one holds less echo). Measured on
`benchmarks/barge_in.py`'s rooms (docs/PERFORMANCE.md, "Barge-in: following the room's change"):
where the user speaks, 2-5 s after the path changed, the echo taken off went from a median 8.6 dB
to 13 dB, what a filter reset at the moment of the change gets; it costs twice the filter's CPU.

Its CPU (issue 34, session 22; docs/PERFORMANCE.md, "The echo canceller's CPU"): speexdsp's cost
per frame is its FFTs of two frames and a pass over the filter's blocks of a frame each, so a 20 ms
frame costs far less than two 10 ms ones (`cancel_frame_ms`; a chunk that is not whole frames of
it gets 10 ms ones). Measured and kept as options, not switched on: 20 ms frames (0.81-0.84 of
the CPU per chunk) weaken speexdsp's residual echo suppressor (the by-level one above) and lost
barge-in trials at 0 dB on one of two sets of rooms; the shadow run only while the main filter
looks misadjusted (`cancel_shadow_always` False: it takes little off an echo it estimates) follows
a room's change more slowly (1-2 dB less where the user speaks, in the worst rooms).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
from collections import deque
from typing import Any, Callable

from audio_io.echo import EchoSuppressor
from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, SAMPLE_WIDTH, audioop
from config.settings import EchoSettings

_SAMPLE_BYTES = SAMPLE_WIDTH
_FRAME_BYTES_10MS = SAMPLE_RATE // 100 * SAMPLE_WIDTH  # the frame where a chunk is not whole frames of `cancel_frame_ms`
_SET_SAMPLING_RATE = 24  # SPEEX_ECHO_SET_SAMPLING_RATE (speex/speex_echo.h)
_LIBRARY = "libspeexdsp.so.1"
_SHADOW_RESTART_S = 1.5  # the shadow filter starts afresh this often unless it took over
_SWAP_WINDOW_S = 0.5  # the span over which the two filters' outputs are compared
_SWAP_MARGIN_DB = 3.0  # the shadow takes over when its output held this much less energy
# (`cancel_shadow_always` False) the shadow runs while the main takes less than this off the
# microphone over `_SWAP_WINDOW_S` ...
_SUSPECT_UNDER_DB = 12.0
_ESTIMATE_OVER_DB = -6.0  # ... and its estimate of the echo holds more than this of the microphone's energy
_MAX_DELAY_S = 0.5  # the stream delay is bounded here (PortAudio's figures are too)


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
    lib.speex_preprocess_state_init.restype = ctypes.c_void_p
    lib.speex_preprocess_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.speex_preprocess_state_destroy.argtypes = [ctypes.c_void_p]
    lib.speex_preprocess_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.speex_preprocess_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return lib


def canceller_available() -> bool:
    """speexdsp's library is installed (`apt-get install libspeexdsp1`; scripts/setup.sh does)."""
    return _load() is not None


# speex/speex_preprocess.h's requests (the residual echo suppressor, measured: `suppress`)
_PRE_SET_DENOISE, _PRE_SET_AGC, _PRE_SET_DEREVERB = 0, 2, 8
_PRE_SET_NOISE_SUPPRESS, _PRE_SET_ECHO_SUPPRESS, _PRE_SET_ECHO_SUPPRESS_ACTIVE, _PRE_SET_ECHO_STATE = 18, 20, 22, 24
# The suppressor switched on by the echo's level (`EchoSettings.cancel_suppress_over_db`): the library's
# defaults, echo -40 dB, -15 dB while the near end talks, no noise suppression (issue 32, session 19)
_SUPPRESS = (-40, -15, 0)
# ... judged on the gain's lowest over this span: a voice over the echo raises the gate's estimate
# (by up to 4 dB in the benchmark's rooms), never lowers it, so the lowest is the echo's own
_SUPPRESS_WINDOW_S = 3.0


class _Filter:
    """One speexdsp echo state: `run` cancels whole frames (`frame_bytes`), a shorter tail passes as it is.
    `suppress` (echo, echo while the near end talks, noise: the most each is taken down, dB): speexdsp's
    preprocessor after it, its residual echo suppressor fed the filter's estimate of what it left
    (measured for issue 32, session 19; not used unless asked)."""

    def __init__(self, lib: Any, taps: int, suppress: tuple[int, int, int] | None = None,
                 frame_bytes: int = _FRAME_BYTES_10MS) -> None:
        self._lib = lib
        self.frame_bytes = frame_bytes
        self._state = lib.speex_echo_state_init(frame_bytes // _SAMPLE_BYTES, taps)
        lib.speex_echo_ctl(self._state, _SET_SAMPLING_RATE, ctypes.byref(ctypes.c_int(SAMPLE_RATE)))
        self._out = ctypes.create_string_buffer(frame_bytes)
        self._pre = None
        if suppress is not None:
            self._pre = lib.speex_preprocess_state_init(frame_bytes // _SAMPLE_BYTES, SAMPLE_RATE)
            # (Its VAD is off from the start and left so: asking, even for off, prints a warning on stderr.)
            for request, value in ((_PRE_SET_DENOISE, 1), (_PRE_SET_AGC, 0), (_PRE_SET_DEREVERB, 0),
                                   (_PRE_SET_ECHO_SUPPRESS, suppress[0]), (_PRE_SET_ECHO_SUPPRESS_ACTIVE, suppress[1]),
                                   (_PRE_SET_NOISE_SUPPRESS, suppress[2])):
                lib.speex_preprocess_ctl(self._pre, request, ctypes.byref(ctypes.c_int(value)))
            lib.speex_preprocess_ctl(self._pre, _PRE_SET_ECHO_STATE, ctypes.c_void_p(self._state))
        self.suppressed = b""  # the last `run`'s output after the suppressor (with one)

    @property
    def suppressing(self) -> bool:
        return self._pre is not None

    def run(self, near: bytes, far: bytes, suppress: bool = True) -> bytes:
        """`suppress` False: the preprocessor is not run (its output is left empty)."""
        out = bytearray(near)
        suppressed = bytearray(near) if self._pre is not None and suppress else None
        size = self.frame_bytes
        for i in range(0, len(near) - size + 1, size):
            self._lib.speex_echo_cancellation(self._state, near[i:i + size], far[i:i + size], self._out)
            out[i:i + size] = self._out.raw
            if suppressed is not None:
                self._lib.speex_preprocess_run(self._pre, self._out)  # in place
                suppressed[i:i + size] = self._out.raw
        self.suppressed = bytes(suppressed) if suppressed is not None else b""
        return bytes(out)

    def reset(self) -> None:
        self._lib.speex_echo_state_reset(self._state)

    def __del__(self) -> None:
        pre, self._pre = getattr(self, "_pre", None), None
        if pre:
            self._lib.speex_preprocess_state_destroy(pre)
        state, self._state = getattr(self, "_state", None), None
        if state:
            self._lib.speex_echo_state_destroy(state)


class EchoCanceller:
    """speexdsp's filter (a main and a shadow) on 24 kHz pcm16 mono chunks, its reference kept on
    the caller's clock (room seconds). `shadow=False`: the main filter alone (before session 11).
    `suppress`: speexdsp's residual echo suppressor on every chunk (measured, `benchmarks/barge_in.py
    --suppress`); else, with `settings.cancel_suppress_over_db`, only while `echo_gain_db()` (the
    echo gate in front's learnt echo path, the microphone over what was played; None: not learnt)
    is above it: a loud echo, where the filter's residue hides the user (issue 32, session 20)."""

    def __init__(self, settings: EchoSettings = EchoSettings(), delay_s: Callable[[], float] = lambda: 0.0,
                 shadow: bool = True, suppress: tuple[int, int, int] | None = None,
                 echo_gain_db: Callable[[], float | None] = lambda: None) -> None:
        lib = _load()
        if lib is None:
            raise RuntimeError(f"{_LIBRARY} is missing: apt-get install libspeexdsp1 (scripts/setup.sh does)")
        taps = round(SAMPLE_RATE * settings.cancel_filter_ms / 1000)
        self._suppress_over = None if suppress is not None else settings.cancel_suppress_over_db
        self._echo_gain_db = echo_gain_db
        if suppress is None and self._suppress_over is not None:
            suppress = _SUPPRESS
        self.suppressed_chunks = 0  # chunks returned through the suppressor
        self._gains: deque[tuple[float, float]] = deque()  # (at, gain): the echo gain's lowest first (a sliding minimum)
        self._gains_from: float | None = None  # since when the gain has been known without a break
        self._lib, self._taps, self._suppress = lib, taps, suppress
        self._frame_bytes = _bytes(settings.cancel_frame_ms / 1000)
        self._with_shadow, self._shadow_always = shadow, settings.cancel_shadow_always
        # The filters, made for the first chunk run on (`_filters`): its frame is `cancel_frame_ms`
        # where the chunks are whole frames of it, else 10 ms
        self._main: _Filter | None = None
        self._shadow: _Filter | None = None
        self._shadow_running = False  # (`cancel_shadow_always` False) it runs while the main looks misadjusted
        self._suspected = False  # ... which it did since the shadow last started afresh
        self._since_restart = 0.0  # seconds of audio the shadow has run since it started afresh
        self._main_energy: deque[float] = deque()  # (per chunk, the span `_SWAP_WINDOW_S`)
        self._shadow_energy: deque[float] = deque()
        self._mic_energy: deque[float] = deque()  # the microphone's, and the main's estimate of the echo (the
        self._estimate_energy: deque[float] = deque()  # microphone less its output), over the same span
        self.swaps = 0  # times the shadow took over
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
        return self._active(at) is not None

    def _active(self, at: float) -> float | None:
        """The stream delay when `active` (None: idle). Past the longest delay the devices are
        not asked for theirs: a quiet room's every chunk read their wrappers twice (issue 34)."""
        since = at - self._last_played_end
        if since > self._idle_s + _MAX_DELAY_S:
            return None
        delay = self._delay()
        return delay if since <= self._idle_s + delay else None

    def process(self, chunk: bytes, at: float) -> bytes:
        """The microphone chunk captured at `at`, with the echo of what was played cancelled."""
        delay = self._active(at)
        if delay is None:
            self._trim(at)
            self.passed, self.far = True, b""
            return chunk
        self.stream_delay_ms = round(delay * 1000)
        far = self._reference(at - delay, len(chunk))  # what was written as this was captured, less the devices' latency
        self.far = far
        self.frames += 1
        self._trim(at - delay)
        cancelled = self._cancel(chunk, far, self._loud(at))
        # The gate behind it (its own path: the reference lined up as the gate's own, by the clock).
        self.passed = self.residual.process(cancelled, at) is not None
        return cancelled

    def _loud(self, at: float) -> bool:
        """The suppressor runs now: always when asked for, else while the echo gain's lowest over
        the last `_SUPPRESS_WINDOW_S` (known all that while) is above `cancel_suppress_over_db`."""
        if self._suppress_over is None:
            return True
        gain, gains = self._echo_gain_db(), self._gains
        if gain is None:
            gains.clear()
            self._gains_from = None
            return False
        if self._gains_from is None:
            self._gains_from = at
        while gains and gains[-1][1] >= gain:
            gains.pop()
        gains.append((at, gain))
        while gains[0][0] < at - _SUPPRESS_WINDOW_S:
            gains.popleft()
        return at - self._gains_from >= _SUPPRESS_WINDOW_S and gains[0][1] > self._suppress_over

    def _filters(self, length: int) -> tuple[_Filter, _Filter | None]:
        if self._main is None:
            size = self._frame_bytes if length % self._frame_bytes == 0 else _FRAME_BYTES_10MS
            self._main = _Filter(self._lib, self._taps, self._suppress, size)
            self._shadow = _Filter(self._lib, self._taps, self._suppress, size) if self._with_shadow else None
            self._shadow_running = self._shadow_always
        return self._main, self._shadow

    def _cancel(self, near: bytes, far: bytes, loud: bool = True) -> bytes:
        """The filters: `near` less the echo of `far` (the same length, lined up); `loud`: through
        the suppressor too (when there is one)."""
        main_filter, shadow_filter = self._filters(len(near))
        if loud and main_filter.suppressing:
            self.suppressed_chunks += 1
        main = main_filter.run(near, far, loud)
        if shadow_filter is None:
            return main_filter.suppressed or main
        main_energy = _energy(main)
        window = max(1, round(_SWAP_WINDOW_S * BYTES_PER_SECOND / max(len(near), 1)))
        _slide(self._main_energy, main_energy, window)
        if not self._shadow_always:
            _slide(self._mic_energy, _energy(near), window)
            _slide(self._estimate_energy, _energy(audioop.add(near, audioop.mul(main, _SAMPLE_BYTES, -1.0), _SAMPLE_BYTES)), window)
            misadjusted = self._misadjusted(window)
            self._suspected |= misadjusted
            if not self._shadow_running:
                if misadjusted:
                    self._restart_shadow()
                    self._shadow_running = True
                return main_filter.suppressed or main
        shadow = shadow_filter.run(near, far, loud)
        shadow_energy = _energy(shadow)
        _slide(self._shadow_energy, shadow_energy, window)
        self._since_restart += len(near) / BYTES_PER_SECOND
        full = len(self._shadow_energy) == window
        if full and sum(self._shadow_energy) * 10 ** (_SWAP_MARGIN_DB / 10) < sum(self._main_energy):
            self._main, self._shadow = shadow_filter, main_filter  # the shadow follows the room better: it leads
            self._main_energy, self._shadow_energy = self._shadow_energy, deque()
            self._restart_shadow()
            self.swaps += 1
        elif self._since_restart >= _SHADOW_RESTART_S:
            self._restart_shadow()
            # (on demand) it runs on while the main looked misadjusted in the period it ran
            self._shadow_running = self._shadow_always or self._suspected
        if main_energy <= shadow_energy:  # (chosen on the linear outputs; with a suppressor, its output of that one)
            return main_filter.suppressed or main
        return shadow_filter.suppressed or shadow

    @property
    def shadow_running(self) -> bool:
        """The shadow filter runs beside the main one on the chunks now (`cancel_shadow_always`: whenever it runs)."""
        return self._shadow is not None and self._shadow_running

    def _misadjusted(self, window: int) -> bool:
        """Over the last `_SWAP_WINDOW_S`, the main filter took less than `_SUSPECT_UNDER_DB` off the
        microphone while its estimate of the echo held more than `_ESTIMATE_OVER_DB` of it: an echo
        it has not learnt (the room changed, or it is still learning; a voice over the echo too).
        Not where it estimates no echo (none comes back, or a pause)."""
        if len(self._mic_energy) < window:
            return False
        mic, main, estimate = sum(self._mic_energy), sum(self._main_energy), sum(self._estimate_energy)
        return mic < main * 10 ** (_SUSPECT_UNDER_DB / 10) and estimate > mic * 10 ** (_ESTIMATE_OVER_DB / 10)

    def _restart_shadow(self) -> None:
        if self._shadow is not None:
            self._shadow.reset()
        self._shadow_energy.clear()
        self._since_restart = 0.0
        self._suspected = False

    def reset(self) -> None:
        if self._main is not None:
            self._main.reset()
        self._restart_shadow()
        self._shadow_running = self._shadow_always
        for energies in (self._main_energy, self._mic_energy, self._estimate_energy):
            energies.clear()

    def _delay(self) -> float:
        return min(max(self._delay_s(), 0.0), _MAX_DELAY_S)

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


def _slide(energies: deque[float], energy: float, window: int) -> None:
    energies.append(energy)
    while len(energies) > window:
        energies.popleft()


def _energy(pcm: bytes) -> float:
    """The chunk's energy (a sum of squares; rms squared times its length)."""
    return float(audioop.rms(pcm, _SAMPLE_BYTES)) ** 2 * len(pcm) + 1.0


def _bytes(seconds: float) -> int:
    """A clock span as a whole number of samples, in bytes."""
    return round(seconds * SAMPLE_RATE) * _SAMPLE_BYTES


def stream_latency_s(device: object) -> float:
    """A device's latency as PortAudio reports it (`latency_s` of `audio_io.portaudio`'s microphone
    and speaker), through the wrappers around it (`inner`); 0 for a device that has none (memory)."""
    while not hasattr(device, "latency_s") and hasattr(device, "inner"):
        device = getattr(device, "inner")
    return float(getattr(device, "latency_s", 0.0))


def build_canceller(settings: EchoSettings, delay_s: Callable[[], float] = lambda: 0.0,
                    echo_gain_db: Callable[[], float | None] = lambda: None) -> EchoCanceller | None:
    """The canceller, or None when it is switched off or not installed (the gate works alone).
    `echo_gain_db`: the echo gate in front's learnt gain (`EchoCanceller`'s suppressor by level)."""
    if not settings.cancel or not canceller_available():
        return None
    return EchoCanceller(settings, delay_s, echo_gain_db=echo_gain_db)
