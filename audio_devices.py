"""Audio in and out: one small interface, fixed at the Realtime format (pcm16, mono, 24 kHz).

Implementations:
- `PyAudioMicrophone`, `PyAudioSpeaker`: real devices through PortAudio (pyaudio callback mode).
  A device that does not offer 24 kHz (or mono) is opened at a format it does offer and the
  audio is converted (`audioop.ratecv`, state kept across chunks).
- `WavFileMicrophone`, `WavFileSpeaker`: WAV files instead of devices (`--input-wav`, `--output-wav`).
- `PushMicrophone`, `MemorySpeaker`: in memory, for tests and the offline demo.
- `open_audio(settings.audio)` picks between them; `handoff devices` lists what PortAudio sees.

Threads: PortAudio calls our stream callbacks on its own thread. That thread touches exactly two
things: `_LoopBridge.send` (the one place, `loop.call_soon_threadsafe`, where audio and "ran dry"
signals cross into asyncio) and the speaker's lock-guarded `_PcmBuffer`. Everything else —
conversion, queues, events — happens on the event loop thread.

Pacing (`pace`): 1.0 real time, 4.0 four times faster, 0 = unpaced (as fast as consumed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import math
import os
import sys
import threading
import wave
import warnings
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import (
    TYPE_CHECKING, Any, AsyncIterator, Callable, Iterator, Literal, Protocol, Sequence, runtime_checkable,
)

with warnings.catch_warnings():
    # Deprecated in 3.11-3.12, gone in 3.13 where the audioop-lts package provides the same module.
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

if TYPE_CHECKING:
    from settings import AudioSettings

logger = logging.getLogger(__name__)

SAMPLE_RATE = 24000
SAMPLE_WIDTH = 2
CHANNELS = 1
BYTES_PER_SECOND = SAMPLE_RATE * SAMPLE_WIDTH * CHANNELS

NO_INPUT_DEVICE = (
    "no audio input device found: connect a microphone, pick one with AUDIO_INPUT_DEVICE "
    "(see `handoff devices`), or use --input-wav"
)
NO_OUTPUT_DEVICE = (
    "no audio output device found: connect a speaker or headphones, pick one with "
    "AUDIO_OUTPUT_DEVICE (see `handoff devices`), or use --output-wav"
)
NO_DEVICES_LINE = (
    "no audio devices found (PortAudio sees no input or output device): connect a microphone and "
    "a speaker, or run with --input-wav / --output-wav"
)

_PA_CONTINUE = 0  # pyaudio.paContinue, without importing pyaudio at module load

Kind = Literal["input", "output"]
_SETTING_FOR = MappingProxyType({"input": "AUDIO_INPUT_DEVICE", "output": "AUDIO_OUTPUT_DEVICE"})
_NOTHING_FOUND = MappingProxyType({"input": NO_INPUT_DEVICE, "output": NO_OUTPUT_DEVICE})


class AudioDeviceError(Exception):
    """A device could not be found, opened or kept running; the message says what to do."""


class NoAudioDeviceError(AudioDeviceError):
    """No device of the wanted kind exists, or none matches the configured name/index."""


class AudioFileError(Exception):
    """A WAV file cannot be used as audio input; the message says how to convert it."""


@runtime_checkable
class MicrophoneSource(Protocol):
    async def start(self) -> None:
        """Open the device / file."""

    def chunks(self) -> AsyncIterator[bytes]:
        """pcm16 mono 24 kHz chunks (~chunk_ms each) until the source ends or is closed."""

    async def close(self) -> None: ...


@runtime_checkable
class SpeakerSink(Protocol):
    async def start(self) -> None: ...

    def play(self, pcm: bytes) -> None:
        """Enqueue pcm16 mono 24 kHz audio; never blocks."""

    def flush(self) -> None:
        """Drop everything queued and not yet played."""

    async def drained(self) -> None:
        """Return when all queued audio has actually played."""

    async def close(self) -> None: ...


def pcm_duration_s(pcm: bytes) -> float:
    """Seconds of audio in interface-format pcm."""
    return len(pcm) / BYTES_PER_SECOND


def _check_pcm(pcm: bytes) -> None:
    if len(pcm) % (SAMPLE_WIDTH * CHANNELS):
        raise ValueError(f"pcm16 mono audio has an even number of bytes, got {len(pcm)}")


def _check_chunk_ms(chunk_ms: int) -> None:
    if not 1 <= chunk_ms <= 1000:
        raise ValueError(f"chunk_ms must be between 1 and 1000, got {chunk_ms}")


def _check_pace(pace: float) -> None:
    if pace < 0 or not math.isfinite(pace):
        raise ValueError(f"pace must be 0 (unpaced) or a positive speed factor, got {pace}")


class PcmConverter:
    """Converts a stream of pcm16 between two rates / channel counts (1 or 2), chunk by chunk.

    The resampler's state is carried from chunk to chunk, so a stream converted in pieces has no
    clicks at the seams. Sync and pure: used on the event loop thread only.
    """

    def __init__(self, in_rate: int, out_rate: int, in_channels: int = 1, out_channels: int = 1) -> None:
        if in_channels not in (1, 2) or out_channels not in (1, 2):
            raise ValueError("only mono and stereo are converted")
        self.in_rate, self.out_rate = in_rate, out_rate
        self.in_channels, self.out_channels = in_channels, out_channels
        self._state: Any = None

    @property
    def is_identity(self) -> bool:
        return self.in_rate == self.out_rate and self.in_channels == self.out_channels

    def convert(self, pcm: bytes) -> bytes:
        if self.in_channels == 2 and self.out_channels == 1:
            pcm = audioop.tomono(pcm, SAMPLE_WIDTH, 0.5, 0.5)
        if self.in_rate != self.out_rate:
            pcm, self._state = audioop.ratecv(pcm, SAMPLE_WIDTH, 1, self.in_rate, self.out_rate, self._state)
        if self.in_channels == 1 and self.out_channels == 2:
            pcm = audioop.tostereo(pcm, SAMPLE_WIDTH, 1, 1)
        return pcm

    def reset(self) -> None:
        """Forget the resampler's history (after a flush the next audio is unrelated)."""
        self._state = None


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
    available = ", ".join(f"{d.index} {d.name!r}" for d in candidates)
    setting = _SETTING_FOR[kind]
    raise NoAudioDeviceError(
        f"no audio {kind} device matches {setting}={wanted!r}; available {kind} devices: {available}. "
        f"Set {setting} to one of these indexes or names (see `handoff devices`)."
    )


def choose_stream_format(
    supports: Callable[[int, int], bool], default_rate: int, max_channels: int
) -> StreamFormat | None:
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

    def default_index(getter: Callable[[], dict]) -> int | None:
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
                f"pick another with {_SETTING_FOR[kind]} (see `handoff devices`)"
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
                f"pick another with {_SETTING_FOR[kind]} (see `handoff devices`)"
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
                f"is another program using it? Pick another with {_SETTING_FOR[kind]} "
                "(see `handoff devices`)."
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

    def __init__(
        self,
        device: str | None,
        chunk_ms: int = 20,
        *,
        max_queued_s: float = 5.0,
        stall_timeout_s: float = 2.0,
    ) -> None:
        _check_chunk_ms(chunk_ms)
        self._spec = device
        self._chunk_ms = chunk_ms
        self._queue: deque[bytes] = deque(maxlen=max(1, int(max_queued_s * 1000 / chunk_ms)))
        self._stall_timeout_s = stall_timeout_s
        self._ready = asyncio.Event()
        self._dropped = 0
        self._closed = False
        self._stream: _DeviceStream | None = None
        self._bridge: _LoopBridge | None = None
        self._converter: PcmConverter | None = None
        self.device: AudioDevice | None = None  # what start() opened, for logs and tests
        self.stream_format: StreamFormat | None = None

    async def start(self) -> None:
        self._bridge = _LoopBridge(asyncio.get_running_loop())
        self._stream = _open_stream("input", self._spec, self._chunk_ms, self._on_device_audio)
        self.device, self.stream_format = self._stream.device, self._stream.format
        fmt = self._stream.format
        self._converter = PcmConverter(fmt.rate, SAMPLE_RATE, fmt.channels, CHANNELS)
        self._stream.start("input")
        logger.info(
            "microphone: %r at %d Hz, %d channel(s)%s", self._stream.device.name, fmt.rate, fmt.channels,
            "" if self._converter.is_identity else " (converted to 24 kHz mono)",
        )

    def _on_device_audio(
        self, in_data: bytes, frame_count: int, time_info: dict, status: int
    ) -> tuple[None, int]:
        # PortAudio's thread: hand the bytes over and return at once.
        assert self._bridge is not None
        self._bridge.send(self._receive, in_data)
        return None, _PA_CONTINUE

    def _receive(self, data: bytes) -> None:
        if self._closed or self._converter is None:
            return
        if len(self._queue) == self._queue.maxlen:
            self._dropped += 1
        self._queue.append(self._converter.convert(data))
        self._ready.set()

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._stream is None and not self._closed:
            raise RuntimeError("start() the microphone before reading chunks()")
        while True:
            if self._queue:
                yield self._queue.popleft()
                continue
            if self._closed:
                return
            if self._dropped:
                logger.warning("microphone: dropped %.1f s of audio that nobody read in time",
                               self._dropped * self._chunk_ms / 1000)
                self._dropped = 0
            self._ready.clear()
            try:
                async with asyncio.timeout(self._stall_timeout_s):
                    await self._ready.wait()
            except TimeoutError:
                if self._stream is not None and not self._stream.is_active():
                    raise AudioDeviceError(
                        f"the audio input device {self._stream.device.name!r} stopped delivering audio "
                        "(unplugged?); check it with `handoff devices`"
                    ) from None

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
        _check_chunk_ms(buffer_ms)
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

    async def start(self) -> None:
        self._bridge = _LoopBridge(asyncio.get_running_loop())
        self._stream = _open_stream("output", self._spec, self._buffer_ms, self._on_device_wants_audio)
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
        _check_pcm(pcm)
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
            try:
                async with asyncio.timeout(self._stall_timeout_s):
                    await self._idle.wait()
            except TimeoutError:
                if self._stream is not None and not self._stream.is_active():
                    raise AudioDeviceError(
                        f"the audio output device {self._stream.device.name!r} stopped playing (unplugged?); "
                        "check it with `handoff devices`"
                    ) from None

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
        self, in_data: None, frame_count: int, time_info: dict, status: int
    ) -> tuple[bytes, int]:
        # PortAudio's thread: take from the locked buffer; tell the loop when it ran dry.
        data, real, ran_dry = self._buffer.take(frame_count * self._frame_bytes)
        if ran_dry is not None and self._bridge is not None:
            latency = time_info.get("output_buffer_dac_time", 0.0) - time_info.get("current_time", 0.0)
            # Some backends report 0 or nonsense here; bound what we trust.
            latency = min(max(latency, 0.0), 0.5)
            self._bridge.send(self._ran_dry, ran_dry, latency + real / self._frame_bytes / self._device_rate)
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


# --------------------------------------------------------------------------- pacing


class _Pacer:
    """Releases chunk i at start + i * chunk duration / pace on the loop clock (no drift builds up);
    pace 0 only yields to the loop so an endless source cannot starve it. stop() ends any wait."""

    def __init__(self, chunk_ms: int, pace: float) -> None:
        _check_pace(pace)
        self._chunk_s = chunk_ms / 1000
        self._pace = pace
        self._t0 = 0.0
        self._stopped = asyncio.Event()

    def start(self) -> None:
        self._t0 = asyncio.get_running_loop().time()

    def stop(self) -> None:
        self._stopped.set()

    async def wait_for_chunk(self, index: int) -> bool:
        """Wait for chunk `index`'s turn; False when stopped meanwhile."""
        delay = 0.0
        if self._pace > 0:
            delay = self._t0 + index * self._chunk_s / self._pace - asyncio.get_running_loop().time()
        if delay <= 0:
            await asyncio.sleep(0)
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopped.wait()
        return not self._stopped.is_set()


# --------------------------------------------------------------------------- WAV microphone


class WavFileMicrophone:
    """A WAV file as the microphone. pcm16 mono 24 kHz is used as is; other PCM WAVs (8/16/24/32-bit,
    mono/stereo, any rate) are converted. `then="end"` ends `chunks()` with the file;
    `then="silence"` continues with silence for `silence_s` seconds (None = until close())."""

    live = False  # a recording, not a room: consumers may pause reading instead of dropping audio

    def __init__(
        self,
        path: str | Path,
        chunk_ms: int = 20,
        pace: float = 1.0,
        then: Literal["end", "silence"] = "end",
        silence_s: float | None = None,
    ) -> None:
        _check_chunk_ms(chunk_ms)
        if then not in ("end", "silence"):
            raise ValueError(f'then must be "end" or "silence", got {then!r}')
        self._path = Path(path)
        self._chunk_ms = chunk_ms
        self._pacer = _Pacer(chunk_ms, pace)
        self._then = then
        self._silence_s = silence_s
        self._reader: wave.Wave_read | None = None
        self._width = SAMPLE_WIDTH
        self._channels = CHANNELS
        self._converter: PcmConverter | None = None
        self._closed = False

    async def start(self) -> None:
        self._reader = _open_wav_for_reading(self._path)
        self._width = self._reader.getsampwidth()
        self._channels = self._reader.getnchannels()
        self._converter = PcmConverter(self._reader.getframerate(), SAMPLE_RATE, self._channels, CHANNELS)
        self._pacer.start()

    def _read_chunk(self) -> bytes:
        assert self._reader is not None and self._converter is not None
        frames = max(1, round(self._converter.in_rate * self._chunk_ms / 1000))
        data = self._reader.readframes(frames)
        if not data:
            return b""
        if self._width == 1:
            data = audioop.bias(data, 1, -128)  # 8-bit WAV is unsigned
        if self._width != SAMPLE_WIDTH:
            data = audioop.lin2lin(data, self._width, SAMPLE_WIDTH)
        return self._converter.convert(data)

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._reader is None and not self._closed:
            raise RuntimeError("start() the microphone before reading chunks()")
        index = 0
        while not self._closed:
            chunk = self._read_chunk()
            if not chunk:
                break
            if not await self._pacer.wait_for_chunk(index):
                return
            yield chunk
            index += 1
        if self._then == "end":
            return
        silence = bytes(SAMPLE_WIDTH * round(SAMPLE_RATE * self._chunk_ms / 1000))
        remaining = math.inf
        if self._silence_s is not None:
            remaining = math.ceil(self._silence_s * 1000 / self._chunk_ms)
        while remaining > 0 and not self._closed:
            if not await self._pacer.wait_for_chunk(index):
                return
            yield silence
            index += 1
            remaining -= 1

    async def close(self) -> None:
        self._closed = True
        self._pacer.stop()
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _open_wav_for_reading(path: Path) -> wave.Wave_read:
    convert_hint = (
        f"convert it with: sox {path} -r 24000 -c 1 -b 16 -e signed-integer -t wavpcm converted.wav"
    )
    try:
        reader = wave.open(str(path), "rb")
    except FileNotFoundError:
        raise AudioFileError(f"the input WAV file {path} does not exist") from None
    except (wave.Error, EOFError) as exc:
        raise AudioFileError(
            f"{path} is not a PCM WAV file this program can read ({exc}); {convert_hint}"
        ) from None
    problem = None
    if reader.getnchannels() not in (1, 2):
        problem = f"it has {reader.getnchannels()} channels (mono or stereo are read)"
    elif reader.getsampwidth() not in (1, 2, 3, 4):
        problem = f"its samples are {reader.getsampwidth() * 8}-bit"
    elif reader.getframerate() < 1000:
        problem = f"its sample rate is {reader.getframerate()} Hz"
    if problem:
        reader.close()
        raise AudioFileError(f"{path} cannot be used as input: {problem}; {convert_hint}")
    return reader


# --------------------------------------------------------------------------- push microphone


class PushMicrophone:
    """An in-memory microphone: `feed(pcm)` queues audio (say, an utterance); while nothing is queued
    it emits silence, so the stream never stops, like a real microphone in a quiet room.

    Every chunk has the same size; the end of fed audio is padded with silence to a whole chunk.
    """

    def __init__(self, chunk_ms: int = 20, pace: float = 1.0) -> None:
        _check_chunk_ms(chunk_ms)
        self._chunk_bytes = SAMPLE_WIDTH * round(SAMPLE_RATE * chunk_ms / 1000)
        self._pacer = _Pacer(chunk_ms, pace)
        self._pending = bytearray()
        self._emptied = asyncio.Event()
        self._emptied.set()
        self._started = False
        self._closed = False

    async def start(self) -> None:
        self._started = True
        self._pacer.start()

    def feed(self, pcm: bytes) -> None:
        _check_pcm(pcm)
        if pcm and not self._closed:
            self._pending += pcm
            self._emptied.clear()

    @property
    def pending_bytes(self) -> int:
        """Fed audio not yet emitted."""
        return len(self._pending)

    async def emitted(self) -> None:
        """Return when everything fed so far has been emitted by `chunks()` (or the mic closed)."""
        await self._emptied.wait()

    async def chunks(self) -> AsyncIterator[bytes]:
        if not self._started:
            raise RuntimeError("start() the microphone before reading chunks()")
        index = 0
        while not self._closed:
            if not await self._pacer.wait_for_chunk(index):
                return
            chunk = bytes(self._pending[: self._chunk_bytes])
            del self._pending[: self._chunk_bytes]
            if chunk and not self._pending:
                self._emptied.set()
            yield chunk + bytes(self._chunk_bytes - len(chunk))
            index += 1

    async def close(self) -> None:
        self._closed = True
        self._pacer.stop()
        self._pending.clear()
        self._emptied.set()


# --------------------------------------------------------------------------- modelled speakers


class PlaybackTimeline:
    """Where queued audio sits on a modelled speaker's timeline, in seconds of audio ("audio time").

    Audio queued while the speaker is busy starts when the previous audio ends; audio queued while
    idle starts at `now`. Pure and synchronous: the caller supplies `now`.
    """

    def __init__(self) -> None:
        self._pending: deque[tuple[float, bytes]] = deque()
        self._end = 0.0
        self._intervals: list[list[float]] = []

    @property
    def end(self) -> float:
        """When the last queued audio finishes playing."""
        return self._end

    def queue(self, pcm: bytes, now: float) -> None:
        if not pcm:
            return
        start = max(now, self._end)
        self._end = start + pcm_duration_s(pcm)
        self._pending.append((start, pcm))
        if self._intervals and abs(self._intervals[-1][1] - start) < 1e-9:
            self._intervals[-1][1] = self._end  # back to back: one continuous interval
        else:
            self._intervals.append([start, self._end])

    def advance(self, now: float) -> bytes:
        """Remove and return the audio that has played by `now` (whole frames)."""
        played = bytearray()
        while self._pending:
            start, pcm = self._pending[0]
            if now >= start + pcm_duration_s(pcm):
                played += pcm
                self._pending.popleft()
                continue
            if now > start:
                cut = int((now - start) * SAMPLE_RATE) * SAMPLE_WIDTH * CHANNELS
                played += pcm[:cut]
                self._pending[0] = (start + pcm_duration_s(pcm[:cut]), pcm[cut:])
            break
        return bytes(played)

    def drop_pending(self, now: float) -> None:
        """Forget audio not yet played at `now` (call advance(now) first to keep what played)."""
        self._pending.clear()
        if self._end > now:
            self._end = now
            self._intervals = [iv for iv in self._intervals if iv[0] < now]
            if self._intervals and self._intervals[-1][1] > now:
                self._intervals[-1][1] = now

    def intervals(self, now: float) -> list[tuple[float, float]]:
        """(start, end) of what has played by `now`, contiguous audio merged."""
        return [(s, min(e, now)) for s, e in self._intervals if s < now]


class _ModelledSpeaker:
    """A speaker that plays nowhere but keeps real-speaker timing: with pace > 0, audio takes
    duration / pace seconds of loop time to play, `flush()` keeps only what had played, and
    `drained()` waits for the modelled end. pace 0 plays everything the moment it is queued.

    `clock` (seconds, default: the loop's clock) can be injected by tests.
    """

    def __init__(self, pace: float = 0.0, *, clock: Callable[[], float] | None = None) -> None:
        _check_pace(pace)
        self._pace = pace
        self._clock = clock
        self._t0 = 0.0
        self._timeline = PlaybackTimeline()
        self._changed = asyncio.Event()  # replaced after each set, so every waiter wakes exactly once
        self._started = False
        self._closed = False

    def _on_played(self, pcm: bytes) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        if self._clock is None:
            self._clock = asyncio.get_running_loop().time
        self._t0 = self._clock()
        self._started = True

    def audio_time(self) -> float:
        """Now, in seconds of audio since start() (pace 0: the end of everything played so far)."""
        if self._pace == 0 or self._clock is None:
            return self._timeline.end
        return (self._clock() - self._t0) * self._pace

    def _settle(self) -> float:
        now = self.audio_time()
        played = self._timeline.advance(now)
        if played:
            self._on_played(played)
        return now

    def _wake_waiters(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def play(self, pcm: bytes) -> None:
        _check_pcm(pcm)
        if self._closed:
            return
        if not self._started:
            raise RuntimeError("start() the speaker before play()")
        self._timeline.queue(pcm, self._settle())
        self._settle()

    def flush(self) -> None:
        if not self._started or self._closed:
            return
        self._timeline.drop_pending(self._settle())
        self._wake_waiters()

    async def drained(self) -> None:
        while self._started and not self._closed:
            remaining = self._timeline.end - self._settle()
            if remaining <= 0:
                return
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining / self._pace):
                    await changed.wait()

    async def close(self) -> None:
        """Stop like a real speaker: what has not played by now is dropped (await drained() first)."""
        if self._closed:
            return
        if self._started:
            self._timeline.drop_pending(self._settle())
        self._closed = True
        self._wake_waiters()
        self._finish()

    def _finish(self) -> None:
        pass


class MemorySpeaker(_ModelledSpeaker):
    """Keeps everything played in memory, with when it played (for tests of the pipeline)."""

    def __init__(self, pace: float = 0.0, *, clock: Callable[[], float] | None = None) -> None:
        super().__init__(pace, clock=clock)
        self._played = bytearray()
        self.flush_count = 0

    def _on_played(self, pcm: bytes) -> None:
        self._played += pcm

    @property
    def played(self) -> bytes:
        """All audio played so far."""
        if self._started and not self._closed:
            self._settle()
        return bytes(self._played)

    @property
    def intervals(self) -> list[tuple[float, float]]:
        """(start, end) in audio time of each stretch of continuous playback so far."""
        now = self._settle() if self._started and not self._closed else self._timeline.end
        return self._timeline.intervals(now)

    def flush(self) -> None:
        self.flush_count += 1
        super().flush()


class WavFileSpeaker(_ModelledSpeaker):
    """Writes what is played to a WAV file (pcm16 mono 24 kHz). With pace > 0 the file receives
    audio as it would have played, so a flush cuts it where a real speaker would have stopped."""

    def __init__(
        self, path: str | Path, pace: float = 0.0, *, clock: Callable[[], float] | None = None
    ) -> None:
        super().__init__(pace, clock=clock)
        self._path = Path(path)
        self._writer: wave.Wave_write | None = None

    async def start(self) -> None:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            writer = wave.open(str(self._path), "wb")
        except OSError as exc:
            raise AudioFileError(
                f"cannot write the output WAV file {self._path}: {exc.strerror or exc}"
            ) from None
        writer.setnchannels(CHANNELS)
        writer.setsampwidth(SAMPLE_WIDTH)
        writer.setframerate(SAMPLE_RATE)
        self._writer = writer
        await super().start()

    def _on_played(self, pcm: bytes) -> None:
        if self._writer is not None:
            self._writer.writeframes(pcm)

    def _finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


# --------------------------------------------------------------------------- factory


WAV_TAIL_SILENCE_S = 2.0


def open_audio(audio: "AudioSettings") -> tuple[MicrophoneSource, SpeakerSink]:
    """The microphone and speaker the settings ask for (not started: call start() on each).

    WAV input is paced like a real microphone when `realtime_wav_input` is set (unpaced
    otherwise); after the file come `WAV_TAIL_SILENCE_S` of silence, so the VAD can end the last
    utterance, and then the input ends: the assistant finishes what it heard and exits. A WAV
    speaker runs in real time unless the input is unpaced, so the microphone stays muted for as
    long as the answer would really take to play.
    """
    if audio.input_wav is not None:
        paced = audio.realtime_wav_input
        mic: MicrophoneSource = WavFileMicrophone(
            audio.input_wav, chunk_ms=audio.chunk_ms, pace=1.0 if paced else 0.0,
            then="silence", silence_s=WAV_TAIL_SILENCE_S,
        )
        speaker_pace = 1.0 if paced else 0.0
    else:
        mic = PyAudioMicrophone(audio.input_device, chunk_ms=audio.chunk_ms)
        speaker_pace = 1.0
    speaker: SpeakerSink
    if audio.output_wav is not None:
        speaker = WavFileSpeaker(audio.output_wav, pace=speaker_pace)
    else:
        speaker = PyAudioSpeaker(audio.output_device)
    return mic, speaker


# --------------------------------------------------------------------------- handoff devices


def add_devices_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Set AUDIO_INPUT_DEVICE / AUDIO_OUTPUT_DEVICE (in .env or the environment) to an index or part "
        "of a name shown here. Exit status 0 even when no device is found (that is an answer, not a "
        "failure); 1 when PortAudio itself cannot be used."
    )


def format_device_list(devices: Sequence[AudioDevice]) -> str:
    """The `handoff devices` listing."""
    if not any(d.max_input_channels or d.max_output_channels for d in devices):
        return NO_DEVICES_LINE
    lines = []
    for kind in ("input", "output"):
        lines.append(f"{kind.capitalize()} devices (set {_SETTING_FOR[kind]} to an index or part of a name):")
        of_kind = [d for d in devices if d.channels(kind) > 0]
        if not of_kind:
            lines.append("    none")
        for d in of_kind:
            mark = "*" if d.is_default(kind) else " "
            details = f"{d.channels(kind)} channels, {d.default_rate} Hz"
            lines.append(f"  {mark} {d.index:>3}  {d.name}  ({details})")
    lines.append("  (* = system default)")
    return "\n".join(lines)


def run_devices(args: argparse.Namespace) -> int:
    try:
        pa = open_portaudio()
    except AudioDeviceError as exc:
        print(f"handoff: {exc}", file=sys.stderr)
        return 1
    try:
        devices = list_devices(pa)
    finally:
        pa.terminate()
    print(format_device_list(devices))
    return 0
