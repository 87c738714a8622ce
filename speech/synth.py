"""Text to speech audio on this machine: pcm16, mono, 24 kHz (the audio interface's format).

Used by the simulator (what its model "says") and by the local voice (what handoff says when
the narrator cannot).

espeak-ng (run as a subprocess, resampled from its 22.05 kHz) when installed, otherwise a
synthetic voiced signal whose length follows the text (about 60 ms per character), so a
client's playback timing and echo handling see realistic durations either way.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import struct
import tempfile

import numpy as np

from audio_io.format import SAMPLE_RATE, PcmConverter

log = logging.getLogger(__name__)

BYTES_PER_MS = SAMPLE_RATE * 2 // 1000


def duration_ms(pcm: bytes) -> float:
    return len(pcm) / BYTES_PER_MS


def silence(ms: float) -> bytes:
    return b"\x00\x00" * int(SAMPLE_RATE * ms / 1000)


def resample(pcm: bytes, from_rate: int, to_rate: int = SAMPLE_RATE) -> bytes:
    return PcmConverter(from_rate, to_rate).convert(pcm[: len(pcm) - len(pcm) % 2])


def wav_to_pcm(wav: bytes) -> tuple[int, bytes]:
    """(sample rate, pcm16 mono) from a WAV file's bytes. The data size field is ignored because
    espeak-ng writing to stdout cannot know it in advance."""
    if wav[:4] != b"RIFF" or wav[8:12] != b"WAVE":
        raise ValueError("not a WAV file (no RIFF/WAVE header)")
    rate = 0
    offset = 12
    while offset + 8 <= len(wav):
        chunk_id = wav[offset : offset + 4]
        (size,) = struct.unpack("<I", wav[offset + 4 : offset + 8])
        body = offset + 8
        if chunk_id == b"fmt ":
            _format, channels, rate, _byte_rate, _align, bits = struct.unpack("<HHIIHH", wav[body : body + 16])
            if channels != 1 or bits != 16:
                raise ValueError(f"expected 16-bit mono WAV, got {bits}-bit with {channels} channels")
        elif chunk_id == b"data":
            if not rate:
                raise ValueError("WAV data chunk comes before its fmt chunk")
            data = wav[body:]
            return rate, data[: len(data) - len(data) % 2]
        offset = body + size + (size % 2)
    raise ValueError("WAV file has no data chunk")


def synthetic_speech(text: str, ms_per_char: float = 60.0) -> bytes:
    """A voiced, syllable-shaped signal lasting about `ms_per_char` per character.

    Words are 120 Hz harmonic bursts with a smooth envelope; spaces and punctuation are quiet
    gaps, so an energy VAD and a level meter both see speech-like audio.
    """
    period = SAMPLE_RATE // 120  # 200 samples: one cycle of the fundamental
    phase = 2 * np.pi * np.arange(period) / period
    cycle = 0.6 * np.sin(phase) + 0.3 * np.sin(2 * phase) + 0.15 * np.sin(3 * phase)
    char_samples = int(SAMPLE_RATE * ms_per_char / 1000)
    pieces: list[np.ndarray] = []
    position = 0
    # Vectorised per word: a narrator's answer is synthesised in about a millisecond, so the
    # simulator's first audio is not held back by its own synthesis (voice-to-voice is measured).
    for token in _tokens(text):
        count = len(token) * char_samples
        if token.strip(" ,.;:!?-\n\t") == "":
            pieces.append(np.zeros(count, dtype="<i2"))  # a pause between words
        else:
            n = np.arange(count)
            envelope = np.sqrt(np.sin(np.pi * n / count))
            pieces.append((9000 * envelope * cycle[(position + n) % period]).astype("<i2"))
        position += count
    return np.concatenate(pieces).tobytes() if pieces else b""


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    current = ""
    for char in text:
        is_gap = char in " ,.;:!?-\n\t"
        if current and (current[-1] in " ,.;:!?-\n\t") != is_gap:
            tokens.append(current)
            current = ""
        current += char
    if current:
        tokens.append(current)
    return tokens


class SpeechSynthesizer:
    """Turns text into 24 kHz pcm16. Owns a private runtime folder for espeak-ng; close() removes it."""

    def __init__(
        self,
        *,
        use_espeak: bool = True,
        voice: str = "en-us",
        words_per_minute: int = 175,
        ms_per_char: float = 60.0,
        espeak_path: str | None = None,
    ) -> None:
        self._espeak = (espeak_path or shutil.which("espeak-ng")) if use_espeak else None
        self._voice = voice
        self._wpm = words_per_minute
        self._ms_per_char = ms_per_char
        self._runtime_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def uses_espeak(self) -> bool:
        return self._espeak is not None

    async def synthesize(self, text: str) -> bytes:
        if not text.strip():
            return b""
        if self._espeak is not None:
            try:
                return await self._espeak_speech(text)
            except (OSError, ValueError) as exc:
                log.warning("espeak-ng failed (%s); using the synthetic voice instead", exc)
        return synthetic_speech(text, self._ms_per_char)

    async def _espeak_speech(self, text: str) -> bytes:
        assert self._espeak is not None
        if self._runtime_dir is None:
            # espeak-ng creates a pulse folder under XDG_RUNTIME_DIR (or /tmp): keep it private.
            self._runtime_dir = tempfile.TemporaryDirectory(prefix="handoff-espeak-")
        process = await asyncio.create_subprocess_exec(
            self._espeak,
            "--stdout",
            "-v",
            self._voice,
            "-s",
            str(self._wpm),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"XDG_RUNTIME_DIR": self._runtime_dir.name, "PATH": "/usr/bin:/bin"},
        )
        try:
            wav, err = await process.communicate(text.encode("utf-8"))
        except asyncio.CancelledError:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        if process.returncode != 0:
            raise OSError(f"espeak-ng exited with {process.returncode}: {err.decode(errors='replace').strip()}")
        rate, pcm = wav_to_pcm(wav)
        return resample(pcm, rate)

    def close(self) -> None:
        if self._runtime_dir is not None:
            self._runtime_dir.cleanup()
            self._runtime_dir = None
