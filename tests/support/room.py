"""A simulated room for pipeline tests: what the speaker plays comes back into the microphone,
delayed and decayed (an echo and a fainter reflection), mixed with what the user says.

Both run at the same pace on the loop clock, so "room time" is one timeline: a sample the speaker
starts playing at room time t is heard by the microphone at t + the echo's delay.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from audio_io import MemorySpeaker, PushMicrophone
from audio_io.format import SAMPLE_RATE, SAMPLE_WIDTH, audioop, pcm_duration_s
from concurrency.changes import Changes

CHUNK_MS = 20


@dataclass(frozen=True)
class Heard:
    at: float  # room time of its first sample
    user: bytes
    echo: bytes
    mixed: bytes  # what the microphone gave


class RoomMicrophone(PushMicrophone):
    """A PushMicrophone that also hears the room: `echo(pcm, at)` mixes `pcm` in from room time
    `at` (seconds since the microphone started) on; `say_at(pcm, at)` starts an utterance at `at`.
    `lag_s`: each chunk is handed out this much room time after its end (a reader behind the room,
    on a busy machine); its capture time (`captured_at`) stays when it was said."""

    def __init__(self, pace: float, lag_s: float = 0.0) -> None:
        super().__init__(chunk_ms=CHUNK_MS, pace=pace)
        self._lag_s = lag_s
        self._room = bytearray()  # echo, from the microphone's first sample on
        self._voice = bytearray()  # an utterance placed with `place`, from the first sample on
        self._placed: tuple[int, int] | None = None  # its (start, end) in bytes
        self.started_at = 0.0  # loop time of the first sample
        self.heard: list[Heard] = []  # every chunk emitted: what the user said, the room's echo, the mix
        self.handed_out = Changes()  # notified as each chunk goes to the reader

    async def start(self) -> None:
        await super().start()
        self.started_at = asyncio.get_running_loop().time()

    def room_time(self) -> float:
        """Room seconds since the microphone started (by the loop clock)."""
        return (asyncio.get_running_loop().time() - self.started_at) * self.pace

    @property
    def position_s(self) -> float:
        """Room time of the next sample the microphone emits."""
        return self._read_bytes / (SAMPLE_RATE * SAMPLE_WIDTH) - CHUNK_MS / 1000

    def echo(self, pcm: bytes, at: float) -> None:
        start = _bytes_at(at)
        end = start + len(pcm)
        if len(self._room) < end:
            self._room += bytes(end - len(self._room))
        self._room[start:end] = audioop.add(bytes(self._room[start:end]), pcm, SAMPLE_WIDTH)

    def say_at(self, pcm: bytes, at: float) -> None:
        """Start `pcm` at room time `at`, rounded up to a chunk (not before what is queued already)."""
        chunk = SAMPLE_RATE * SAMPLE_WIDTH * CHUNK_MS // 1000
        start = -(-_bytes_at(at) // chunk) * chunk
        self.catch_up()  # (the silence of a late reader is queued first: `at` is a room time)
        queued_end = self._read_bytes + self.pending_bytes
        self.feed(bytes(max(0, start - queued_end)) + pcm)

    def place(self, pcm: bytes, at: float) -> float:
        """Like `say_at`, but the utterance moves to `at` each time this is called again, until its
        first sample has been heard (then it stays). Returns the room time it starts at."""
        chunk = SAMPLE_RATE * SAMPLE_WIDTH * CHUNK_MS // 1000
        if self._placed is not None:
            old_start, old_end = self._placed
            if old_start < self._read_bytes:
                return old_start / (SAMPLE_RATE * SAMPLE_WIDTH) - CHUNK_MS / 1000
            self._voice[old_start:old_end] = bytes(old_end - old_start)
        start = max(-(-_bytes_at(at) // chunk) * chunk, -(-self._read_bytes // chunk) * chunk)
        end = start + len(pcm)
        if len(self._voice) < end:
            self._voice += bytes(end - len(self._voice))
        self._voice[start:end] = pcm
        self._placed = (start, end)
        return start / (SAMPLE_RATE * SAMPLE_WIDTH) - CHUNK_MS / 1000

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in super().chunks():
            start, end = self._read_bytes - len(chunk), self._read_bytes  # (where it lies in the stream)
            voice = bytes(self._voice[start:end])
            chunk = audioop.add(chunk, voice + bytes(len(chunk) - len(voice)), SAMPLE_WIDTH)
            room = bytes(self._room[start:end])
            room += bytes(len(chunk) - len(room))
            mixed = audioop.add(chunk, room, SAMPLE_WIDTH)
            at = start / (SAMPLE_RATE * SAMPLE_WIDTH) - CHUNK_MS / 1000
            if self._lag_s:  # the device's clock, as the pacer's: not a wait for the code under test
                await asyncio.sleep(max(0.0, (at + CHUNK_MS / 1000 + self._lag_s - self.room_time()) / self.pace))
            self.heard.append(Heard(at, chunk, room, mixed))
            self.handed_out.notify()
            yield mixed


class RoomSpeaker(MemorySpeaker):
    """A MemorySpeaker at the microphone's pace whose sound comes back into it: `delay_s` later
    at `gain_db`, and a reflection `reflection_s` after that, 8 dB fainter. `draining` notes when
    the coordinator waits for playback to end, with the room time its audio ends at (`ends`).
    `late_s`: the coordinator learns that playback ended only once the microphone has given it
    this much room time after the end (a loop running late: a busy machine, a slow one).
    `write_s`: each write returns this much wall time after its audio started (a loaded machine
    takes the CPU away mid-write; the loop is blocked meanwhile, as it would be)."""

    def __init__(self, microphone: RoomMicrophone, delay_s: float = 0.05, gain_db: float = -18.0,
                 reflection_s: float = 0.03, late_s: float = 0.0, write_s: float = 0.0) -> None:
        super().__init__(pace=microphone.pace)
        self._late_s = late_s
        self._write_s = write_s
        self._microphone = microphone
        self._paths = [(delay_s, 10 ** (gain_db / 20)), (delay_s + reflection_s, 10 ** ((gain_db - 8) / 20))]
        self._end = 0.0  # room time the queued audio ends
        self.ends: list[float] = []
        self.draining = Changes()
        self.after_play: Callable[[float], None] | None = None  # told the room time the queued audio ends, after each play


    def play(self, pcm: bytes) -> None:
        now = self._microphone.room_time()
        start = max(now, self._end)
        self._end = start + pcm_duration_s(pcm)
        super().play(pcm)
        for delay, gain in self._paths:
            self._microphone.echo(audioop.mul(pcm, SAMPLE_WIDTH, gain), start + delay)
        if self.after_play is not None:
            self.after_play(self._end)
        if self._write_s:
            time.sleep(self._write_s)

    async def drained(self) -> None:
        # Where the queued audio ends: a coordinator that waits for it late (a loaded machine)
        # does not move the end of what the room heard.
        self.ends.append(self._end)
        self.draining.notify()
        await super().drained()
        if self._late_s:
            heard = self._microphone.heard
            await self._microphone.handed_out.wait_until(lambda: heard[-1].at >= self._end + self._late_s)


def _bytes_at(at: float) -> int:
    """Where room time `at` is in the microphone's stream. A chunk is emitted when its turn comes
    (PushMicrophone's pacing), so it holds the sound of the chunk's length before: a device
    delivers a chunk once it has captured it."""
    return max(0, round((at + CHUNK_MS / 1000) * SAMPLE_RATE)) * SAMPLE_WIDTH
