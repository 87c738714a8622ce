"""The audio interface every microphone and speaker implements, and its errors."""

from __future__ import annotations

from typing import AsyncIterator, Protocol, runtime_checkable


class AudioDeviceError(Exception):
    """A device could not be found, opened or kept running; the message says what to do."""


class NoAudioDeviceError(AudioDeviceError):
    """No device of the wanted kind exists, or none matches the configured name/index."""


class AudioFileError(Exception):
    """A WAV file cannot be used as audio input; the message says how to convert it."""




@runtime_checkable
class MicrophoneSource(Protocol):
    live: bool  # a room (True: audio not read in time is gone) or a recording (False: reading may pause)
    pace: float  # seconds of audio per second of the clock: 1.0 for a device; tests run faster; 0 unpaced

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
