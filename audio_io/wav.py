"""WAV files instead of devices: `WavFileMicrophone` (--input-wav) and `WavFileSpeaker` (--output-wav);
`read_wav` for short sounds (the wake, working and done sounds)."""

from __future__ import annotations

import math
import wave
from pathlib import Path
from typing import AsyncIterator, BinaryIO, Callable, Literal

from audio_io.format import CHANNELS, SAMPLE_RATE, SAMPLE_WIDTH, PcmConverter, audioop, check_chunk_ms
from audio_io.interface import AudioFileError
from audio_io.memory import Pacer, _ModelledSpeaker


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
        read_ms: int | None = None,
    ) -> None:
        """`read_ms`: paced reads of that much, in chunks of `chunk_ms` (`audio_io.memory.Pacer`)."""
        check_chunk_ms(chunk_ms)
        if then not in ("end", "silence"):
            raise ValueError(f'then must be "end" or "silence", got {then!r}')
        self._path = Path(path)
        self._chunk_ms = chunk_ms
        self._pacer = Pacer(chunk_ms, pace, read_ms)
        self.pace = pace
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
        return self._converter.convert(_to_pcm16(data, self._width))

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


def _to_pcm16(data: bytes, width: int) -> bytes:
    if width == 1:
        data = audioop.bias(data, 1, -128)  # 8-bit WAV is unsigned
    if width != SAMPLE_WIDTH:
        data = audioop.lin2lin(data, width, SAMPLE_WIDTH)
    return data


def read_wav(path: str | Path) -> bytes:
    """A whole WAV file as interface audio (pcm16 mono 24 kHz), converted from any PCM WAV the
    microphone can read; AudioFileError (one line, with the sox command) otherwise."""
    reader = _open_wav_for_reading(Path(path))
    try:
        data = reader.readframes(reader.getnframes())
        converter = PcmConverter(reader.getframerate(), SAMPLE_RATE, reader.getnchannels(), CHANNELS)
        return converter.convert(_to_pcm16(data, reader.getsampwidth()))
    except (wave.Error, EOFError) as exc:
        raise AudioFileError(f"{path} cannot be read as a WAV file ({exc})") from None
    finally:
        reader.close()


def _open_wav_for_reading(path: Path) -> wave.Wave_read:
    convert_hint = (
        f"convert it with: sox {path} -r {SAMPLE_RATE} -c 1 -b 16 -e signed-integer -t wavpcm converted.wav"
    )
    try:
        reader = wave.open(str(path), "rb")
    except FileNotFoundError:
        raise AudioFileError(f"the WAV file {path} does not exist") from None
    except IsADirectoryError:
        raise AudioFileError(f"{path} is a folder, not a WAV file") from None
    except PermissionError:
        raise AudioFileError(f"the WAV file {path} cannot be read: permission denied") from None
    except (wave.Error, EOFError) as exc:
        raise AudioFileError(_not_a_wav(path, exc, convert_hint)) from None
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


def _not_a_wav(path: Path, exc: Exception, convert_hint: str) -> str:
    """Why `path` is no WAV file this program reads, and a command that converts it (sox reads
    MP3 only with its MP3 handler installed: the bare command would fail)."""
    try:
        with path.open("rb") as file:
            head = file.read(4)
    except OSError:
        head = b""
    if not head:
        return f"{path} is empty: there is no audio in it; give a WAV file that holds the recording"
    if head[:3] == b"ID3" or (head[0] == 0xFF and head[1] & 0xE0 == 0xE0) or path.suffix.lower() == ".mp3":
        return (f"{path} is an MP3 file, not a WAV file; install sox's MP3 support "
                f"(sudo apt-get install libsox-fmt-mp3), then {convert_hint}")
    if head != b"RIFF":
        return f"{path} is not a WAV file (it does not start like one); {convert_hint}"
    return f"{path} is a WAV file this program cannot read ({exc or exc.__class__.__name__}); {convert_hint}"


class WavFileSpeaker(_ModelledSpeaker):
    """Writes what is played to a WAV file (pcm16 mono 24 kHz). With pace > 0 the file receives
    audio as it would have played, so a flush cuts it where a real speaker would have stopped."""

    def __init__(
        self, path: str | Path, pace: float = 0.0, *, clock: Callable[[], float] | None = None
    ) -> None:
        super().__init__(pace, clock=clock)
        self._path = Path(path)
        self._writer: wave.Wave_write | None = None
        self._handle: BinaryIO | None = None  # the file under the writer (wave does not close what it did not open)

    async def start(self) -> None:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            # Opened here, not by wave.open: a path it cannot open (a folder) would leave a
            # half-built Wave_write whose __del__ then fails noisily.
            handle = open(self._path, "wb")
        except OSError as exc:
            raise AudioFileError(
                f"cannot write the output WAV file {self._path}: {exc.strerror or exc}"
            ) from None
        writer = wave.open(handle, "wb")
        writer.setnchannels(CHANNELS)
        writer.setsampwidth(SAMPLE_WIDTH)
        writer.setframerate(SAMPLE_RATE)
        self._writer, self._handle = writer, handle
        await super().start()

    def _on_played(self, pcm: bytes) -> None:
        if self._writer is not None:
            self._writer.writeframes(pcm)

    def _finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None
