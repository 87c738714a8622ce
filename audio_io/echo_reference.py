"""The echo gate's two clocks, kept on one timeline: what the speaker plays (the reference) and
when each microphone chunk was captured, both in "room seconds" (the loop clock times the
microphone's pace: real seconds for a device, faster for a paced test microphone).

- `ReferencedSpeaker` wraps the speaker: every `play(pcm)` is handed to the gate stamped with the
  moment it starts leaving the speaker (right away, or when what is queued ahead of it ends);
  `flush()` and the end of `drained()` tell the gate that nothing stamped later was played.
- `MicStamps` stamps each mic chunk with the capture time of its first sample.
- `RoomEcho` puts them together for a room: the gate, the canceller and the speaker that feeds them.
"""

from __future__ import annotations

from typing import Callable

from audio_io.echo import EchoSuppressor
from audio_io.echo_cancel import EchoCanceller, build_canceller, stream_latency_s
from audio_io.format import BYTES_PER_SECOND, pcm_duration_s
from audio_io.interface import SpeakerSink
from config.settings import EchoSettings
from decisions.mute import MutedTail


class ReferencedSpeaker:
    """A SpeakerSink that plays through `inner` and gives the echo gate what it plays, and when."""

    def __init__(self, inner: SpeakerSink, echo: EchoSuppressor | None, now: Callable[[], float],
                 canceller: EchoCanceller | None = None) -> None:
        self.inner = inner
        self._echo = echo
        self._canceller = canceller  # the same reference, for the echo canceller
        self._now = now
        self._end = 0.0  # when what was played so far stops leaving the speaker (room seconds)
        self.cut = False  # the last audio played was flushed before its end

    @property
    def audio_end(self) -> float:
        """When what was played so far stops leaving the speaker (room seconds; a flush or a
        drain seen early brings it forward to that moment)."""
        return self._end

    async def start(self) -> None:
        await self.inner.start()

    def play(self, pcm: bytes) -> None:
        # The clock before the write: the audio leaves from now (or when what is queued ends). A
        # write (the resampling in it, a busy machine taking the CPU away meanwhile) can take a
        # while, and a stamp read after it dates the audio late: the mute then takes the user's
        # first word after the answer for the narrator's, and the gate learns too short an echo.
        now = self._now()
        self.inner.play(pcm)  # a closed or failing device plays (and stamps) nothing
        if pcm:
            self.cut = False
            at = max(now, self._end)
            self._end = at + pcm_duration_s(pcm)
            if self._echo is not None:
                self._echo.played(pcm, at)
            if self._canceller is not None:
                self._canceller.played(pcm, at)

    def flush(self) -> None:
        self.inner.flush()
        self.cut = self.cut or self._end > self._now()
        self._stopped()

    async def drained(self) -> None:
        await self.inner.drained()
        self._stopped()

    async def close(self) -> None:
        await self.inner.close()

    def _stopped(self) -> None:
        """Nothing plays after now: a speaker may finish sooner than the stamps said (a modelled
        one that plays at once), and flushed audio never plays."""
        now = self._now()
        if self._end > now:
            if self._echo is not None:
                self._echo.stopped(now)
            if self._canceller is not None:
                self._canceller.stopped(now)
            self._end = now


class RoomEcho:
    """A room's echo, as the coordinator and `handoff satellite` both hear it: the echo gate in
    front (the raw microphone against what was played), the canceller (when installed; its stream
    delay: the devices' PortAudio latencies) and the speaker that tells both what it plays, on one
    clock (`now`: room seconds; a paced test microphone runs faster than real time by `pace`)."""

    def __init__(self, speaker: SpeakerSink, microphone: object, settings: EchoSettings,
                 now: Callable[[], float], pace: float = 1.0) -> None:
        self.gate = EchoSuppressor(settings)
        self.canceller = build_canceller(settings, lambda: stream_latency_s(speaker) + stream_latency_s(microphone),
                                         self.gate.echo_gain_db)
        self.speaker = ReferencedSpeaker(speaker, self.gate, now, self.canceller)
        self._stamps = MicStamps(now, microphone, pace)
        self._heard_to = (0, 0.0)  # the end of the last chunk heard: bytes into the mic's stream, and when captured
        self._muted = MutedTail()

    def hear(self, chunk: bytes) -> tuple[bool, bytes]:
        """Whether the gate in front passed the chunk (it is not the narrator's echo alone), and
        the canceller's output (the chunk itself without one). Every chunk, played over or not:
        the gate learns the room."""
        at = self._stamps.stamp(chunk)
        self._heard_to = (self._heard_to[0] + len(chunk), at + len(chunk) / BYTES_PER_SECOND)
        heard = chunk if self.canceller is None else self.canceller.process(chunk, at)
        return self.gate.process(chunk, at) is not None, heard

    def muted(self, offset: int, chunk: bytes) -> list[bytes]:
        """A chunk the mute drops (`offset` bytes into the microphone's stream), kept a moment in
        case it was captured after the audio ended (`MutedTail`). Returns those dropped for good."""
        return self._muted.hold(self._captured(offset, chunk), offset, chunk)

    def played_over(self, offset: int, chunk: bytes, released: bool) -> bool:
        """A chunk read after the mute lifted, but captured while the speaker's audio played (a
        reader behind the room): to be dropped as muted (`MutedTail.played_over`)."""
        if not self._muted.judging_reads:  # (every chunk asks: most of them long after any release)
            return False
        return self._muted.played_over(self._captured(offset, chunk)[1], released)

    def _captured(self, offset: int, chunk: bytes) -> tuple[float, float]:
        """When the chunk at `offset` bytes into the microphone's stream was captured (start, end)."""
        read, read_at = self._heard_to  # (a piece the ear held back lies before the last chunk heard)
        captured_at = read_at - (read - offset) / BYTES_PER_SECOND
        return captured_at, captured_at + len(chunk) / BYTES_PER_SECOND

    @property
    def holding_muted(self) -> bool:
        """Chunks the mute dropped are kept, waiting for `unmuted` when it lifts."""
        return self._muted.holding

    def unmuted(self) -> tuple[list[bytes], list[tuple[int, bytes]]]:
        """The mute lifted: what it kept stays dropped, but for what was captured after the
        speaker's audio ended (stream offset, chunk): the user's, to go up first."""
        return self._muted.release(self.speaker.audio_end, self.speaker.cut)

class MicStamps:
    """The capture time of each chunk's first sample (room seconds). From the microphone when it
    says (`captured_at`: the device's own time for the chunk, on the loop's clock), which a busy
    loop reading late does not move; else its arrival less its length. Kept contiguous with the
    chunk before when they overlap by less than a chunk (scheduling jitter), never drifting more
    than a chunk from the clock (a device's clock is not the loop's)."""

    def __init__(self, now: Callable[[], float], microphone: object = None, pace: float = 1.0) -> None:
        """`now`: room seconds; `microphone`: read for `captured_at` (loop seconds, times `pace`)."""
        self._now = now
        self._microphone = microphone
        self._pace = pace
        self._end: float | None = None

    def stamp(self, chunk: bytes) -> float:
        length = len(chunk) / BYTES_PER_SECOND
        captured = getattr(self._microphone, "captured_at", None)
        at = self._now() - length if captured is None else captured * self._pace
        if self._end is not None and 0 < self._end - at < length:
            at = self._end
        self._end = at + length
        return at
