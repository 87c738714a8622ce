"""In-memory audio for tests and the offline demo: `PushMicrophone`, `MemorySpeaker`, and the
modelled speaker they and `WavFileSpeaker` share (real-speaker timing, no device).

Pacing (`pace`): 1.0 real time, 4.0 four times faster, 0 = unpaced (as fast as consumed).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator, Callable

from audio_io.format import CHANNELS, SAMPLE_RATE, SAMPLE_WIDTH, check_chunk_ms, check_pace, check_pcm, pcm_duration_s
from audio_io.quiet_reads import QuietReads
from concurrency.changes import Changes


# --------------------------------------------------------------------------- pacing


def chunks_per_read(chunk_ms: int, read_ms: int | None) -> int:
    """How many chunks one read of the device holds: `read_ms` rounded down to whole chunks, at
    least one (None: one)."""
    return 1 if read_ms is None else max(1, read_ms // chunk_ms)


def split_read(pcm: bytes, chunk_ms: int) -> list[tuple[int, bytes]]:
    """A device's read as (byte offset, chunk) pieces of about `chunk_ms` (a resampled read may
    be a few samples off a whole number of chunks: the last piece takes them)."""
    chunk_bytes = SAMPLE_WIDTH * CHANNELS * round(SAMPLE_RATE * chunk_ms / 1000)
    count = max(1, round(len(pcm) / chunk_bytes))
    bounds = [i * chunk_bytes for i in range(count)] + [len(pcm)]
    return [(bounds[i], pcm[bounds[i]:bounds[i + 1]]) for i in range(count)]


class Pacer:
    """Releases chunk i at start + i * chunk duration / pace on the loop clock (no drift builds up);
    pace 0 only yields to the loop, at every chunk, so an endless source cannot starve it. stop() ends any wait.

    `read_ms` (whole chunks; None: one): the device is read that much at a time,
    so the chunks of one read are released together, when its last one is due, back to back with
    no wait (nor a turn of the loop) between them: one wake-up per read (issue 34: the silent room's
    cost is per wake-up, the decisions stay per chunk)."""

    def __init__(self, chunk_ms: int, pace: float, read_ms: int | None = None) -> None:
        check_pace(pace)
        self._chunk_s = chunk_ms / 1000
        self._pace = pace
        self._per_read = chunks_per_read(chunk_ms, read_ms)
        self._t0 = 0.0
        self._stopped = False
        self._waiter: asyncio.Future[None] | None = None  # the wait under way, released by its timer or stop()
        self._released_through = -1  # the last chunk whose turn has come (paced)

    def start(self) -> None:
        self._t0 = asyncio.get_running_loop().time()

    @property
    def started_at(self) -> float:
        """Loop time of chunk 0's turn."""
        return self._t0

    def stop(self) -> None:
        self._stopped = True
        _release(self._waiter)

    def _read_end(self, index: int) -> int:
        """The chunk whose turn releases chunk `index` (the last of its read)."""
        return -(-index // self._per_read) * self._per_read

    async def wait_for_chunk(self, index: int, hold: Callable[[int, int, bool], bool | None] | None = None) -> bool:
        """Wait for chunk `index`'s turn; False when stopped meanwhile. `hold(first, last, due)`:
        whether the read of chunks first..last may wait for the next read (`QuietReads`), None when
        it is not all known before its turn (`due` False); the reads held go with the first one not
        held, back to back, and the loop is not woken for a read known to be held (as a device's
        callback thread holds it)."""
        if self._pace > 0 and index <= self._released_through:  # the rest of a read: no turn of the loop
            return not self._stopped
        due = self._read_end(index)
        if hold is None or self._pace <= 0:
            await self._wait_until(due)
        else:
            waited = None
            while not self._stopped:
                verdict = hold(index, due, False)
                if verdict is None:  # not all of it queued yet: judged at its turn, on what came
                    await self._wait_until(due)
                    waited, verdict = due, hold(index, due, True)
                if not verdict:
                    break
                index, due = due + 1, due + self._per_read
            if waited != due:
                await self._wait_until(due)
        self._released_through = due
        return not self._stopped

    async def _wait_until(self, due: int) -> None:
        delay = 0.0
        if self._pace > 0:
            delay = self._t0 + due * self._chunk_s / self._pace - asyncio.get_running_loop().time()
        if delay <= 0:
            await asyncio.sleep(0)
        elif not self._stopped:
            # A future and a timer: a wake-up per read costs no more than a device's callback
            # (asyncio.timeout around an Event cancelled the task to end every wait).
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            timer = loop.call_later(delay, _release, self._waiter)
            try:
                await self._waiter
            finally:
                timer.cancel()
                self._waiter = None


def _release(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


# --------------------------------------------------------------------------- push microphone


# Room seconds of silence a late reader may find queued (older is skipped: its stamps move on). A
# device keeps more (audio_io.portaudio: 5 s), but at a test's 20x pace every second costs 50 chunks.
MAX_BACKLOG_S = 1.0


class PushMicrophone:
    """An in-memory microphone: `feed(pcm)` queues audio (say, an utterance); while nothing is queued
    it emits silence, so the stream never stops, like a real microphone in a quiet room.

    Every chunk has the same size; the end of fed audio is padded with silence to a whole chunk.

    Like a device, it keeps the room's time when its reader is late (a busy loop): each chunk's
    place in the stream is its capture time (`captured_at`, on the loop's clock), and audio fed
    while the reader lags starts at the stream's place for "now", after the silence the room had
    meanwhile, not right after the last chunk read (which would date it in the past).
    """

    live = True  # stands in for a room: it never pauses for a slow reader

    def __init__(self, chunk_ms: int = 20, pace: float = 1.0, read_ms: int | None = None,
                 quiet: QuietReads | None = None) -> None:
        """`read_ms`: the room is read that much at a time, in chunks of `chunk_ms` (`Pacer`).
        `quiet`: which reads of a silent room may wait for the next (paced only; None: none)."""
        check_chunk_ms(chunk_ms)
        self._chunk_bytes = SAMPLE_WIDTH * round(SAMPLE_RATE * chunk_ms / 1000)
        self._chunk_s = chunk_ms / 1000
        self._pacer = Pacer(chunk_ms, pace, read_ms)
        self.quiet_reads = quiet  # (the assistant may set its `unhurried`)
        self.pace = pace
        self._pending = bytearray()
        self._emptied = asyncio.Event()
        self._emptied.set()
        self._started = False
        self._closed = False
        self._read_bytes = 0  # bytes of the stream emitted so far
        self.captured_at: float | None = None  # loop time of the first sample of the chunk last emitted (paced only)

    async def start(self) -> None:
        self._started = True
        self._pacer.start()

    def feed(self, pcm: bytes) -> None:
        check_pcm(pcm)
        if pcm and not self._closed:
            self.catch_up()
            self._pending += pcm
            self._emptied.clear()

    def catch_up(self) -> None:
        """Queue the silence of the chunks the room has captured since the reader fell behind (at
        most `MAX_BACKLOG_S` of it: as a device's full queue, the oldest is gone)."""
        if not self._started or self.pace <= 0:
            return
        now_s = (asyncio.get_running_loop().time() - self._pacer.started_at) * self.pace  # chunk i is due at i chunks
        due = (int(now_s / self._chunk_s) + 1) * self._chunk_bytes  # the first chunk not due yet
        queued_end = self._read_bytes + len(self._pending)
        backlog = int(MAX_BACKLOG_S / self._chunk_s) * self._chunk_bytes
        if not self._pending and due - queued_end > backlog:
            self._read_bytes = queued_end = due - backlog  # (never past audio fed and not yet read)
        if queued_end < due:
            self._pending += bytes(due - queued_end)

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
        while not self._closed:
            index = self._read_bytes // self._chunk_bytes  # (a backlog dropped moves it on)
            if not await self._pacer.wait_for_chunk(index, self._quiet_read if self.quiet_reads is not None else None):
                return
            chunk = bytes(self._pending[: self._chunk_bytes])
            del self._pending[: self._chunk_bytes]
            if chunk and not self._pending:
                self._emptied.set()
            if self.pace > 0:  # chunk i is due at i chunks and holds the chunk before that
                self.captured_at = self._pacer.started_at + (self._read_bytes / self._chunk_bytes - 1) * self._chunk_s / self.pace
            self._read_bytes += self._chunk_bytes
            yield chunk + bytes(self._chunk_bytes - len(chunk))

    def _quiet_read(self, first: int, last: int, due: bool) -> bool | None:
        """Whether the read of chunks first..last may wait: judged once all of it is queued, or at its
        turn (`due`) on what is (the rest is silence); None before."""
        assert self.quiet_reads is not None
        start = (first - self._read_bytes // self._chunk_bytes) * self._chunk_bytes
        count = last - first + 1
        read = self._pending[start:start + count * self._chunk_bytes]
        if len(read) < count * self._chunk_bytes and not due:
            return None
        return self.quiet_reads.hold(read, count * self._chunk_s, count)

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

    def __init__(self, keep_intervals: bool = True) -> None:
        """`keep_intervals`: remember when each stretch played (for `intervals`); False for a
        speaker that runs for days and whose history nobody reads."""
        self._pending: deque[tuple[float, bytes]] = deque()
        self._end = 0.0
        self._intervals: list[list[float]] = []
        self._keep_intervals = keep_intervals

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
        if not self._keep_intervals:
            return
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

    _keep_intervals = True

    def __init__(self, pace: float = 0.0, *, clock: Callable[[], float] | None = None) -> None:
        check_pace(pace)
        self._pace = pace
        self._clock = clock
        self._t0 = 0.0
        self._timeline = PlaybackTimeline(keep_intervals=self._keep_intervals)
        self._changed = Changes()  # flush/close wake every drained() waiter
        self._started = False
        self._closed = False

    def _on_played(self, pcm: bytes) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        if self._clock is None:
            self._clock = asyncio.get_running_loop().time
        self._t0 = self._clock()
        self._started = True

    def clock_at(self, audio_s: float) -> float:
        """The clock time at which audio time `audio_s` plays (pace > 0, after start())."""
        return self._t0 + audio_s / self._pace

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

    def play(self, pcm: bytes) -> None:
        check_pcm(pcm)
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
        self._changed.notify()

    async def drained(self) -> None:
        while self._started and not self._closed:
            remaining = self._timeline.end - self._settle()
            if remaining <= 0:
                return
            await self._changed.wait(remaining / self._pace)

    async def close(self) -> None:
        """Stop like a real speaker: what has not played by now is dropped (await drained() first)."""
        if self._closed:
            return
        if self._started:
            self._timeline.drop_pending(self._settle())
        self._closed = True
        self._changed.notify()
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


class CountingSpeaker(_ModelledSpeaker):
    """Counts what was played and keeps nothing: for runs that last days (a soak), where keeping
    every byte, as `MemorySpeaker` does, would be the memory that grows."""

    _keep_intervals = False

    def __init__(self, pace: float = 0.0, *, clock: Callable[[], float] | None = None) -> None:
        super().__init__(pace, clock=clock)
        self.bytes_played = 0
        self.flush_count = 0

    def _on_played(self, pcm: bytes) -> None:
        self.bytes_played += len(pcm)

    def flush(self) -> None:
        self.flush_count += 1
        super().flush()
