"""Sound made on this machine, without any service: the wake chime, the working and done earcons,
and a local voice (espeak-ng)
for the moments the narrator cannot speak (no connection, bad key), so failures are still heard.

All output is pcm16 mono 24 kHz, the format of the audio interface.
"""

from __future__ import annotations

import array
import asyncio
import logging
import math
import shutil
import tempfile
from pathlib import Path

from audio_io.format import SAMPLE_RATE
from speech.synth import SpeechSynthesizer, resample, wav_to_pcm

log = logging.getLogger("handoff.local_voice")


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


def working_earcon() -> bytes:
    """While a command is worked on: two soft low ticks, 220 ms in all (quieter than the chime)."""
    tick = tone([440.0], 0.06, volume=0.12)
    return tick + bytes(2 * int(SAMPLE_RATE * 0.1)) + tick


def done_earcon() -> bytes:
    """Done, your turn again: a soft rising C-E-G, 180 ms in all."""
    return tone([523.25, 659.25, 783.99], 0.06, volume=0.15)


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def flite_available() -> bool:
    return shutil.which("flite") is not None


async def flite_speech(text: str, voice: str = "slt") -> bytes:
    """flite's reading of `text` (the offline demo's user: a voice the wake-word model hears, which
    espeak-ng's mostly is not; benchmarks/wake_choice.py)."""
    with tempfile.TemporaryDirectory(prefix="handoff-flite-") as tmp:
        out = Path(tmp) / "said.wav"
        process = await asyncio.create_subprocess_exec(
            "flite", "-voice", voice, "-t", text, "-o", str(out),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"flite could not say {text!r}: {err.decode(errors='replace').strip()}")
        rate, pcm = wav_to_pcm(out.read_bytes())
    return resample(pcm, rate)


async def synthesize(text: str, voice: str = "en-us", words_per_minute: int = 165) -> bytes:
    """Speech for `text`: espeak-ng when installed, else a synthetic voice of the same length."""
    synthesizer = SpeechSynthesizer(voice=voice, words_per_minute=words_per_minute)
    try:
        return await synthesizer.synthesize(text)
    finally:
        synthesizer.close()


async def speak_locally(text: str) -> bytes:
    """The local voice: espeak-ng when installed, else an alert tone so the moment is still heard."""
    if not espeak_available():
        log.warning("espeak-ng is not installed (apt-get install espeak-ng); playing an alert tone instead")
        return tone([660.0, 440.0, 660.0, 440.0], 0.15)
    return await synthesize(text)
