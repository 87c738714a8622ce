"""Sound made on this machine, without any service: the wake chime, and a local voice (espeak-ng)
for the moments the narrator cannot speak (no connection, bad key), so failures are still heard.

All output is pcm16 mono 24 kHz, the format of the audio interface.
"""

from __future__ import annotations

import array
import asyncio
import io
import logging
import math
import shutil
import wave

from audio_devices import SAMPLE_RATE, PcmConverter

log = logging.getLogger("handoff.local_voice")

ESPEAK_TIMEOUT_S = 20.0


def tone(frequencies_hz: list[float], note_s: float, volume: float = 0.3) -> bytes:
    """Consecutive sine notes with short fades (no clicks)."""
    samples = array.array("h")
    per_note = int(SAMPLE_RATE * note_s)
    fade = max(1, int(SAMPLE_RATE * 0.01))
    for freq in frequencies_hz:
        for i in range(per_note):
            envelope = min(1.0, i / fade, (per_note - i) / fade)
            samples.append(int(32767 * volume * envelope * math.sin(2 * math.pi * freq * i / SAMPLE_RATE)))
    return samples.tobytes()


def chime() -> bytes:
    """The wake confirmation: two rising notes, 160 ms in all."""
    return tone([880.0, 1320.0], 0.08)


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def wav_bytes_to_pcm24k(data: bytes) -> bytes:
    """Any pcm16 WAV (espeak-ng writes 22050 Hz mono) to the interface format."""
    with wave.open(io.BytesIO(data)) as wav:
        if wav.getsampwidth() != 2:
            raise ValueError("expected 16-bit audio")
        frames = wav.readframes(wav.getnframes())
        converter = PcmConverter(wav.getframerate(), SAMPLE_RATE, wav.getnchannels(), 1)
        return converter.convert(frames)


async def synthesize(text: str, voice: str = "en-us", words_per_minute: int = 165) -> bytes:
    """Speech for `text` from espeak-ng; raises RuntimeError when it cannot be made."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed (apt-get install espeak-ng)")
    process = await asyncio.create_subprocess_exec(
        exe, "-v", voice, "-s", str(words_per_minute), "--stdout", "--", text,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), ESPEAK_TIMEOUT_S)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise RuntimeError("espeak-ng took too long") from None
    if process.returncode != 0 or not out:
        raise RuntimeError(f"espeak-ng failed (exit {process.returncode})")
    return wav_bytes_to_pcm24k(out)


async def speak_locally(text: str) -> bytes:
    """The local voice: espeak-ng when installed, else an alert tone so the moment is still heard."""
    try:
        return await synthesize(text)
    except (RuntimeError, OSError, ValueError, wave.Error) as exc:
        log.warning("local voice unavailable (%s); playing an alert tone instead", exc)
        return tone([660.0, 440.0, 660.0, 440.0], 0.15)
