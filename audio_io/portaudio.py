"""Real audio devices through PortAudio (pyaudio callback mode): device listing and selection,
ALSA silencing, and `PyAudioMicrophone` / `PyAudioSpeaker`. A device that does not offer 24 kHz
(or mono) is opened at a format it does offer and the audio is converted (`audioop.ratecv`,
state kept across chunks).

Threads: PortAudio calls our stream callbacks on its own thread. That thread touches exactly two
things: `_LoopBridge.send` (the one place, `loop.call_soon_threadsafe`, where audio and "ran dry"
signals cross into asyncio) and the speaker's lock-guarded `_PcmBuffer`. Everything else —
conversion, queues, events — happens on the event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, AsyncIterator, Callable, Iterator, Literal, Sequence

from audio_io.format import BYTES_PER_SECOND, CHANNELS, SAMPLE_RATE, SAMPLE_WIDTH, PcmConverter, check_chunk_ms, check_pcm
from audio_io.memory import chunks_per_read, split_read
from audio_io.interface import AudioDeviceError, NoAudioDeviceError
from audio_io.quiet_reads import QuietReads

logger = logging.getLogger(__name__)

NO_INPUT_DEVICE = ("no audio input device found: connect a microphone, pick one with AUDIO_INPUT_DEVICE "
                   "(see `./run devices`), or use --input-wav")
NO_OUTPUT_DEVICE = ("no audio output device found: connect a speaker or headphones, pick one with "
                    "AUDIO_OUTPUT_DEVICE (see `./run devices`), or use --output-wav")

_PA_CONTINUE = 0  # pyaudio.paContinue, without importing pyaudio at module load

Kind = Literal["input", "output"]
DEVICE_SETTING = MappingProxyType({"input": "AUDIO_INPUT_DEVICE", "output": "AUDIO_OUTPUT_DEVICE"})
_NOTHING_FOUND = MappingProxyType({"input": NO_INPUT_DEVICE, "output": NO_OUTPUT_DEVICE})


# --------------------------------------------------------------------------- device selection


@dataclass(frozen=True)
class AudioDevice:
    """One PortAudio device, as `handoff devices` shows it."""

    index: int
    name: str
    max_input_channels: int
    max_output_channels: int
    default_rate: int
    is_default_input: bool = False
    is_default_output: bool = False

    def channels(self, kind: Kind) -> int:
        return self.max_input_channels if kind == "input" else self.max_output_channels

    def is_default(self, kind: Kind) -> bool:
        return self.is_default_input if kind == "input" else self.is_default_output


@dataclass(frozen=True)
class StreamFormat:
    """The format a device stream is opened with (always pcm16)."""

    rate: int
    channels: int


def select_device(devices: Sequence[AudioDevice], spec: str | None, kind: Kind) -> AudioDevice:
    """The device `spec` names: None = the system default, digits = an index, else a name substring.

    Name matching is case-insensitive; an exact name wins over substrings, otherwise the first
    substring match (in PortAudio's order) is used. Raises NoAudioDeviceError with the list of
    available devices when nothing fits.
    """
    candidates = [d for d in devices if d.channels(kind) > 0]
    if not candidates:
        raise NoAudioDeviceError(_NOTHING_FOUND[kind])
    wanted = (spec or "").strip()
    if not wanted:
        for device in candidates:
            if device.is_default(kind):
                return device
        # PortAudio names no default (can happen with odd ALSA setups): any working device beats none.
        return candidates[0]
    if wanted.isdigit():
        matches = [d for d in candidates if d.index == int(wanted)]
    else:
        lowered = wanted.lower()
        matches = [d for d in candidates if d.name.lower() == lowered]
        matches = matches or [d for d in candidates if lowered in d.name.lower()]
    if matches:
        return matches[0]
    available, setting = ", ".join(f"{d.index} {d.name!r}" for d in candidates), DEVICE_SETTING[kind]
    raise NoAudioDeviceError(
        f"no audio {kind} device matches {setting}={wanted!r}; available {kind} devices: {available}. "
        f"Set {setting} to one of these indexes or names (see `./run devices`)."
    )


def choose_stream_format(supports: Callable[[int, int], bool], default_rate: int, max_channels: int) -> StreamFormat | None:
    """The best format a device accepts: 24 kHz mono if offered, else its own default rate, else
    a common rate; mono before stereo. `supports(rate, channels)` asks the device. None = nothing fits.
    """
    rates = list(dict.fromkeys(r for r in (SAMPLE_RATE, default_rate, 48000, 44100, 16000) if r > 0))
    for channels in (1, 2):
        if channels > max_channels:
            break
        for rate in rates:
            if supports(rate, channels):
                return StreamFormat(rate=rate, channels=channels)
    return None


# --------------------------------------------------------------------------- quiet PortAudio

_ALSA_ERROR_HANDLER_TYPE = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p
)


def _log_alsa_error(
    filename: bytes | None, line: int, function: bytes | None, err: int, fmt: bytes | None
) -> None:
    # ALSA passes printf arguments we cannot read from Python; the format string is enough for debugging.
    logger.debug("ALSA %s:%d %s: %s", (filename or b"").decode(errors="replace"), line,
                 (function or b"").decode(errors="replace"), (fmt or b"").decode(errors="replace"))


# Created once and never replaced: ALSA keeps calling it for the life of the process, so the
# ctypes object must never be garbage collected.
_ALSA_ERROR_HANDLER = _ALSA_ERROR_HANDLER_TYPE(_log_alsa_error)


def _route_alsa_errors_to_log() -> None:
    """ALSA prints dozens of probe errors ("cannot find card '0'", ...) to stderr; log them at debug."""
    try:
        libasound = ctypes.CDLL("libasound.so.2")
    except OSError:
        return  # not Linux/ALSA: nothing to silence
    libasound.snd_lib_error_set_handler(_ALSA_ERROR_HANDLER)


@contextlib.contextmanager
def _stderr_to_devnull() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null for the duration (JACK and PortAudio write there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 2)
        finally:
            os.close(devnull)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def open_portaudio() -> Any:
    """A `pyaudio.PyAudio()` whose start-up noise (ALSA/JACK probing) stays out of the terminal.

    Blocking (tens of milliseconds); call it from the loop thread so that, while fd 2 is redirected,
    no other code of ours is running and writing log lines that would be lost.
    """
    try:
        import pyaudio
    except ImportError as exc:
        raise AudioDeviceError(
            f"pyaudio is not available ({exc}): install the requirements (pip install -r requirements.txt; "
            "it needs portaudio19-dev to build), or use --input-wav / --output-wav"
        ) from exc
    _route_alsa_errors_to_log()
    with _stderr_to_devnull():
        return pyaudio.PyAudio()


def list_devices(pa: Any) -> list[AudioDevice]:
    """Every device PortAudio reports, with the system defaults marked."""

    def default_index(getter: Callable[[], dict[str, Any]]) -> int | None:
        try:
            return int(getter()["index"])
        except OSError:
            return None  # "No Default Input Device Available"

    default_in = default_index(pa.get_default_input_device_info)
    default_out = default_index(pa.get_default_output_device_info)
    devices = []
    for index in range(pa.get_device_count()):
        info = pa.get_device_info_by_index(index)
        devices.append(
            AudioDevice(
                index=index,
                name=str(info.get("name", f"device {index}")),
                max_input_channels=int(info.get("maxInputChannels", 0)),
                max_output_channels=int(info.get("maxOutputChannels", 0)),
                default_rate=int(info.get("defaultSampleRate", 0)),
                is_default_input=index == default_in,
                is_default_output=index == default_out,
            )
        )
    return devices


def _device_supports(pa: Any, device: AudioDevice, kind: Kind) -> Callable[[int, int], bool]:
    import pyaudio

    def supports(rate: int, channels: int) -> bool:
        prefix = "input" if kind == "input" else "output"
        kwargs = {
            f"{prefix}_device": device.index,
            f"{prefix}_channels": channels,
            f"{prefix}_format": pyaudio.paInt16,
        }
        try:
            return bool(pa.is_format_supported(rate, **kwargs))
        except ValueError:  # PortAudio's "Invalid sample rate" / "Invalid number of channels"
            return False

    return supports


@dataclass(frozen=True)
class _DeviceStream:
    """An open (not yet started) PortAudio stream and the PyAudio instance that owns it."""

    pa: Any
    stream: Any
    device: AudioDevice
    format: StreamFormat

    def start(self, kind: Kind) -> None:
        try:
            self.stream.start_stream()
        except OSError as exc:
            self.stream.close()
            self.pa.terminate()
            raise AudioDeviceError(
                f"could not start the audio {kind} device {self.device.name!r} ({exc}); "
                f"pick another with {DEVICE_SETTING[kind]} (see `./run devices`)"
            ) from exc

    def is_active(self) -> bool:
        return bool(self.stream.is_active())

    def shut_down(self) -> None:
        """Blocking: Pa_StopStream waits for the running callback to return."""
        try:
            self.stream.stop_stream()
            self.stream.close()
        finally:
            self.pa.terminate()


def _open_stream(kind: Kind, spec: str | None, buffer_ms: int, callback: Callable[..., Any]) -> _DeviceStream:
    """Initialise PortAudio, pick the device and a format it accepts, open a callback stream.

    The stream is not started, so the caller can finish setting up what the callback reads first.
    """
    import pyaudio

    pa = open_portaudio()
    try:
        device = select_device(list_devices(pa), spec, kind)
        supports = _device_supports(pa, device, kind)
        fmt = choose_stream_format(supports, device.default_rate, device.channels(kind))
        if fmt is None:
            raise AudioDeviceError(
                f"the audio {kind} device {device.name!r} accepts no 16-bit mono or stereo format; "
                f"pick another with {DEVICE_SETTING[kind]} (see `./run devices`)"
            )
        try:
            stream = pa.open(
                format=pyaudio.paInt16,
                channels=fmt.channels,
                rate=fmt.rate,
                input=kind == "input",
                output=kind == "output",
                input_device_index=device.index if kind == "input" else None,
                output_device_index=device.index if kind == "output" else None,
                frames_per_buffer=max(1, round(fmt.rate * buffer_ms / 1000)),
                stream_callback=callback,
                start=False,
            )
        except (OSError, ValueError) as exc:
            raise AudioDeviceError(
                f"could not open the audio {kind} device {device.name!r} at {fmt.rate} Hz ({exc}); "
                f"is another program using it? Pick another with {DEVICE_SETTING[kind]} "
                "(see `./run devices`)."
            ) from exc
    except BaseException:
        pa.terminate()
        raise
    return _DeviceStream(pa=pa, stream=stream, device=device, format=fmt)


# --------------------------------------------------------------------------- the thread boundary


class _LoopBridge:
    """The one point where PortAudio's callback thread hands work to the asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def send(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # the loop closed while the stream was stopping: nobody is left to tell


class _PcmBuffer:
    """Audio waiting for the speaker callback: the only state both threads touch, under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = bytearray()
        self._seq = 0  # which play() the newest queued bytes came from

    def append(self, pcm: bytes, seq: int) -> None:
        with self._lock:
            self._data += pcm
            self._seq = seq

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def take(self, nbytes: int) -> tuple[bytes, int, int | None]:
        """(exactly nbytes, padded with silence; how many were real audio; the play() seq if this
        take emptied the buffer, else None)."""
        with self._lock:
            real = min(nbytes, len(self._data))
            chunk = bytes(self._data[:real])
            del self._data[:real]
            ran_dry = self._seq if real and not self._data else None
        return chunk + bytes(nbytes - real), real, ran_dry


# --------------------------------------------------------------------------- pyaudio microphone


class PyAudioMicrophone:
    """A real microphone (PortAudio callback mode), delivering pcm16 mono 24 kHz chunks.

    `device`: index or case-insensitive name substring; None = system default.
    `max_queued_s`: audio kept while nobody reads `chunks()`; beyond it the oldest is dropped
    (a stalled consumer must not grow memory for days). `stall_timeout_s`: how often a silent
    wait checks whether the device stopped (e.g. unplugged).
    """

    live = True  # a room: audio not read in time is gone
    pace = 1.0  # a device plays in real time

    def __init__(self, device: str | None, chunk_ms: int = 20, *, read_ms: int | None = None,
                 max_queued_s: float = 5.0, stall_timeout_s: float = 2.0, quiet: QuietReads | None = None) -> None:
        """`read_ms`: the device's buffer (one callback, one wake-up of the loop, per read), handed
        on in chunks of `chunk_ms`, each with its own capture time; None: the chunk. `quiet`: which
        reads of a silent room may wait for the next callback (one wake-up for both)."""
        check_chunk_ms(chunk_ms)
        self._spec = device
        self._chunk_ms = chunk_ms
        self._read_ms = chunk_ms * chunks_per_read(chunk_ms, read_ms)
        self.quiet_reads, self._held = quiet, list[tuple[bytes, float]]()  # (`_held`: the callback thread's alone)
        self._queue: deque[tuple[bytes, float]] = deque(maxlen=max(1, int(max_queued_s * 1000 / chunk_ms)))
        self._stall_timeout_s = stall_timeout_s
        self._ready = asyncio.Event()
        self._dropped = 0
        self._closed = False
        self._stream: _DeviceStream | None = None
        self._bridge: _LoopBridge | None = None
        self._converter: PcmConverter | None = None
        self.device: AudioDevice | None = None  # what start() opened, for logs and tests
        self.stream_format: StreamFormat | None = None
        # From a sound's capture to its callback, by PortAudio's timestamps (current_time less
        # input_buffer_adc_time), or the stream's reported input latency where the timestamps say
        # nothing (0, as ALSA's file plugin does). The echo canceller's stream delay reads it.
        self.latency_s = 0.0
        self._stream_latency_s = 0.0
        # Loop time of the first sample of the chunk last read: its callback's less its length (queued with it).
        self.captured_at: float | None = None

    async def start(self) -> None:
        self._bridge = _LoopBridge(asyncio.get_running_loop())
        self._stream = _open_stream("input", self._spec, self._read_ms, self._on_device_audio)
        self._stream_latency_s = self.latency_s = _reported_latency(self._stream.stream.get_input_latency)
        self.device, self.stream_format = self._stream.device, self._stream.format
        fmt = self._stream.format
        self._converter = PcmConverter(fmt.rate, SAMPLE_RATE, fmt.channels, CHANNELS)
        self._stream.start("input")
        logger.info(
            "microphone: %r at %d Hz, %d channel(s)%s", self._stream.device.name, fmt.rate, fmt.channels,
            "" if self._converter.is_identity else " (converted to 24 kHz mono)",
        )

    def _on_device_audio(
        self, in_data: bytes, frame_count: int, time_info: dict[str, float], status: int
    ) -> tuple[None, int]:
        # PortAudio's thread: hand the bytes over and return at once.
        assert self._bridge is not None
        self.latency_s = _timestamp_latency(time_info, "input_buffer_adc_time", "current_time", self._stream_latency_s)
        self._held.append((in_data, time.monotonic()))  # (the loop's clock)
        if self.quiet_reads is None or not self.quiet_reads.hold(in_data, self._read_ms / 1000, self._read_ms // self._chunk_ms):
            self._bridge.send(self._receive, self._held)
            self._held = []
        return None, _PA_CONTINUE

    def _receive(self, reads: list[tuple[bytes, float]]) -> None:
        if self._closed or self._converter is None:
            return
        for data, called_at in reads:
            pcm = self._converter.convert(data)
            for start, piece in split_read(pcm, self._chunk_ms):
                self._dropped += len(self._queue) == self._queue.maxlen
                self._queue.append((piece, called_at - (len(pcm) - start) / BYTES_PER_SECOND))
        self._ready.set()

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._stream is None and not self._closed:
            raise RuntimeError("start() the microphone before reading chunks()")
        while True:
            if self._queue:
                pcm, self.captured_at = self._queue.popleft()
                yield pcm
                continue
            if self._closed:
                return
            if self._dropped:
                logger.warning("microphone: dropped %.1f s of audio that nobody read in time",
                               self._dropped * self._chunk_ms / 1000)
                self._dropped = 0
            self._ready.clear()
            await _wait_watching_stall(self._ready, self._stall_timeout_s, self._stream, lambda name: (
                f"the audio input device {name!r} stopped delivering audio (unplugged?); check it with `handoff devices`"
            ))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.clear()
        self._ready.set()
        stream, self._stream = self._stream, None
        if stream is not None:
            await asyncio.to_thread(stream.shut_down)  # blocking: keep it off the loop


# --------------------------------------------------------------------------- pyaudio speaker


class PyAudioSpeaker:
    """A real speaker (PortAudio callback mode) pulling from a thread-safe buffer.

    The stream runs from start() to close(), playing silence when nothing is queued, so playback
    starts without the latency of reopening the device. `drained()` resolves when the callback has
    taken the last queued bytes and, by PortAudio's clock, they have reached the device's output.
    """

    def __init__(self, device: str | None, *, buffer_ms: int = 20, stall_timeout_s: float = 2.0) -> None:
        check_chunk_ms(buffer_ms)
        self._spec = device
        self._buffer_ms = buffer_ms
        self._stall_timeout_s = stall_timeout_s
        self._buffer = _PcmBuffer()
        self._seq = 0  # bumped by every play() and flush(); a "ran dry" signal for an older seq is stale
        self._idle = asyncio.Event()
        self._idle.set()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._stream: _DeviceStream | None = None
        self._bridge: _LoopBridge | None = None
        self._converter: PcmConverter | None = None
        self._frame_bytes = SAMPLE_WIDTH * CHANNELS  # of the device stream; read by the callback
        self._device_rate = SAMPLE_RATE
        self.device: AudioDevice | None = None  # what start() opened, for logs and tests
        self.stream_format: StreamFormat | None = None
        # From a callback to its first sample leaving the device, by PortAudio's timestamps
        # (output_buffer_dac_time less current_time), or the stream's reported output latency.
        self.latency_s = 0.0
        self._stream_latency_s = 0.0

    async def start(self) -> None:
        self._bridge = _LoopBridge(asyncio.get_running_loop())
        self._stream = _open_stream("output", self._spec, self._buffer_ms, self._on_device_wants_audio)
        self._stream_latency_s = self.latency_s = _reported_latency(self._stream.stream.get_output_latency)
        self.device, self.stream_format = self._stream.device, self._stream.format
        fmt = self._stream.format
        self._converter = PcmConverter(SAMPLE_RATE, fmt.rate, CHANNELS, fmt.channels)
        self._frame_bytes = SAMPLE_WIDTH * fmt.channels
        self._device_rate = fmt.rate
        self._stream.start("output")
        logger.info(
            "speaker: %r at %d Hz, %d channel(s)%s", self._stream.device.name, fmt.rate, fmt.channels,
            "" if self._converter.is_identity else " (converted from 24 kHz mono)",
        )

    def play(self, pcm: bytes) -> None:
        check_pcm(pcm)
        if self._closed:
            return  # shutting down: nothing will play it
        if self._converter is None:
            raise RuntimeError("start() the speaker before play()")
        if not pcm:
            return
        self._seq += 1
        self._cancel_idle_timer()
        self._idle.clear()
        self._buffer.append(self._converter.convert(pcm), self._seq)

    def flush(self) -> None:
        self._buffer.clear()
        if self._converter is not None:
            self._converter.reset()
        self._seq += 1  # anything already on its way back from the callback is now stale
        self._cancel_idle_timer()
        self._idle.set()

    async def drained(self) -> None:
        while not self._idle.is_set() and not self._closed:
            await _wait_watching_stall(self._idle, self._stall_timeout_s, self._stream, lambda name: (
                f"the audio output device {name!r} stopped playing (unplugged?); check it with `handoff devices`"
            ))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._buffer.clear()
        self._cancel_idle_timer()
        self._idle.set()
        stream, self._stream = self._stream, None
        if stream is not None:
            await asyncio.to_thread(stream.shut_down)  # blocking: keep it off the loop

    def _on_device_wants_audio(
        self, in_data: None, frame_count: int, time_info: dict[str, float], status: int
    ) -> tuple[bytes, int]:
        # PortAudio's thread: take from the locked buffer; tell the loop when it ran dry.
        data, real, ran_dry = self._buffer.take(frame_count * self._frame_bytes)
        self.latency_s = _timestamp_latency(time_info, "current_time", "output_buffer_dac_time", self._stream_latency_s)
        if ran_dry is not None and self._bridge is not None:
            self._bridge.send(self._ran_dry, ran_dry, self.latency_s + real / self._frame_bytes / self._device_rate)
        return data, _PA_CONTINUE

    def _ran_dry(self, seq: int, delay_s: float) -> None:
        if seq != self._seq or self._closed:
            return  # newer audio was queued (or flushed) since: not drained
        self._cancel_idle_timer()
        self._idle_timer = asyncio.get_running_loop().call_later(delay_s, self._mark_idle, seq)

    def _mark_idle(self, seq: int) -> None:
        self._idle_timer = None
        if seq == self._seq:
            self._idle.set()

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None


def _timestamp_latency(time_info: dict[str, float], earlier: str, later: str, reported: float) -> float:
    """A callback's latency from its PortAudio timestamps (`later` less `earlier`); where they say
    nothing (0, or nonsense: some backends), the stream's reported latency. Bounded to 0-0.5 s."""
    first, second = time_info.get(earlier, 0.0), time_info.get(later, 0.0)
    latency = second - first if first > 0 and second > 0 else 0.0
    return min(latency, 0.5) if 0 < latency else reported


def _reported_latency(getter: Callable[[], float]) -> float:
    try:
        return min(max(float(getter()), 0.0), 0.5)
    except (OSError, ValueError, TypeError):
        return 0.0


async def _wait_watching_stall(
    event: asyncio.Event, timeout_s: float, stream: _DeviceStream | None, problem: Callable[[str], str]
) -> None:
    """Wait for `event`, at most `timeout_s`; then, if the device stream stopped (unplugged),
    raise AudioDeviceError(problem(device name)). A silent but healthy device just returns."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        if stream is not None and not stream.is_active():
            raise AudioDeviceError(problem(stream.device.name)) from None
