"""The hub's shell around `decisions.arbitration.ArbitrationCore`: one command heard in several
rooms is taken by one room.

Each room's microphone (what its satellite streams) goes through an `ArbitratedMicrophone`. A
room wakes when its satellite says it heard its wake word (`run-pipeline`, start stage asr) or,
for a satellite that streams all the time, when speech begins after a quiet moment. From then
on the room's audio is held (not given to its coordinator) while the arbiter collects the rooms
waking within `join_s` and each one's loudness; then the winner's audio goes on at once (its
command window opens first, as it would have) and the losers' becomes silence of the same
length until their speech ends, and their satellites are told to stop streaming (an empty
`transcript`). A losing room's coordinator hears nothing: no chime, no route, no answer.

The winner's audio is late by the verdict (`join_s`, 0.35 s after its wake), then goes up in one
burst: its end of speech, and so its answer, is not later, as long as the command is longer
than that. Held audio is released at the verdict (the link's microphone is nudged to wake its
reader).
"""

from __future__ import annotations

import audioop
import enum
import logging
import math
import time
from collections import deque
from typing import AsyncIterator, Callable

import numpy as np

from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, SAMPLE_WIDTH
from concurrency.changes import Changes
from decisions.arbitration import ArbitrationCore, Signature, Verdict
from decisions.errors import IllegalTransition
from rooms.link import SatelliteMicrophone
from rooms.wire import PipelineStarted

log = logging.getLogger("handoff.rooms")

ONSET_DBFS = -40.0  # a streaming room's speech begins: a chunk this loud ...
QUIET_DBFS = -45.0  # ... after QUIET_S below this (and a losing room's speech has ended)
QUIET_S = 0.3


FRAME = SAMPLE_RATE // 50  # 20 ms
_EDGES_HZ = np.arange(100.0, 8001.0, 100.0)  # 79 bands of 100 Hz: fine enough to tell steady sounds apart
MAX_LAG_FRAMES = 5  # signatures compared at lags up to 100 ms (detections are not sample-aligned)
MIN_FRAMES = 8
MOVING_DB = 2.0  # bands that move over time by more than this (rms, dB): compared by how they move
TOP_DB = 30.0  # a steady sound: its spectrum within this of its loudest band


def signature(pcm: bytes) -> Signature:
    """Band energies (dB) of each 20 ms frame: what `decisions.arbitration.similarity` compares."""
    samples = np.frombuffer(pcm[: len(pcm) // (2 * FRAME) * 2 * FRAME], dtype="<i2").astype(np.float32)
    if samples.size < FRAME:
        return ()
    frames = samples.reshape(-1, FRAME) * np.hanning(FRAME)
    power = np.abs(np.fft.rfft(frames, n=512)) ** 2
    freqs = np.fft.rfftfreq(512, 1 / SAMPLE_RATE)
    index = np.digitize(freqs, _EDGES_HZ) - 1
    bands = np.stack([power[:, index == b].sum(axis=1) for b in range(len(_EDGES_HZ) - 1)], axis=1)
    return tuple(tuple(float(v) for v in row) for row in 10 * np.log10(bands + 1e-3))


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    norm = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum()) / norm if norm > 0 else 0.0


def similarity(first: Signature, second: Signature) -> float:
    """How alike two rooms' sounds are, -1 to 1, the best over lags: where each frame's energy is
    (within TOP_DB of its loudest band), and for a sound that changes (speech) also how each band
    rises and falls (each band's mean over time removed), the lower of the two. A level
    difference between rooms changes neither."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    best = -1.0
    for lag in range(-MAX_LAG_FRAMES, MAX_LAG_FRAMES + 1):
        xa, xb = (a[lag:], b) if lag >= 0 else (a, b[-lag:])
        n = min(len(xa), len(xb))
        if n < MIN_FRAMES:
            continue
        fa, fb = xa[:n], xb[:n]
        score = _pearson(np.maximum(fa, fa.max(axis=1, keepdims=True) - TOP_DB),
                         np.maximum(fb, fb.max(axis=1, keepdims=True) - TOP_DB))  # fmt: skip
        da, db = fa - fa.mean(axis=0), fb - fb.mean(axis=0)
        if min(float((da * da).mean()), float((db * db).mean())) > MOVING_DB ** 2:
            score = min(score, _pearson(da, db))  # and it must move alike (an onset alone is not the same sound)
        best = max(best, score)
    return best


def dbfs(pcm: bytes) -> float:
    rms = audioop.rms(pcm, SAMPLE_WIDTH) if pcm else 0
    return 20 * math.log10(rms / 32768) if rms > 0 else -120.0


class Gate(enum.Enum):
    FREE = "free"  # audio goes on to the room
    HELD = "held"  # woke: held until the verdict
    DROPPING = "dropping"  # lost: silence instead, until its speech ends


class ArbitratedMicrophone:
    """A room's microphone, as its coordinator reads it (a `MicrophoneSource`)."""

    live = True
    pace = 0.0

    def __init__(self, room: str, inner: SatelliteMicrophone, arbiter: Arbiter,
                 on_win: Callable[[PipelineStarted], None], on_lose: Callable[[], None]) -> None:  # fmt: skip
        self.room, self._inner, self._arbiter = room, inner, arbiter
        self._on_win, self._on_lose = on_win, on_lose
        self.state = Gate.FREE
        # The room is muted (its answer plays): its sound is its own echo, or "computer, stop",
        # which must reach the stop detector at once: no onset is a wake then. (The hub sets it.)
        self.muted: Callable[[], bool] = lambda: False
        self.streams_always = False  # its run-pipeline started at the wake stage: onsets are its wakes
        self._held: list[bytes] = []
        self._ready: deque[bytes] = deque()  # released, not yet read
        self._started: PipelineStarted | None = None
        self._measured = bytearray()  # the first measure_s after the wake
        self._quiet_s = QUIET_S
        self.held_s_total = 0.0  # audio held until a verdict (for the benchmark)

    # -- what the link and the arbiter say ---------------------------------------------------------
    def pipeline(self, started: PipelineStarted) -> None:
        """The satellite's `run-pipeline`: a woken satellite woke now."""
        if not started.woken:
            self.streams_always = True
            self._on_win(started)  # nothing to decide: the hub's own detection decides, per room
            return
        if self.state is Gate.HELD:
            return  # one wake at a time
        self._wake(started)

    def won(self) -> None:
        if self._started is not None:
            self._on_win(self._started)
        self._ready.extend(self._held)
        self._held, self.state = [], Gate.FREE
        self._inner.nudge()

    def lost(self) -> None:
        self._ready.extend(bytes(len(chunk)) for chunk in self._held)  # the stream's time goes on
        self._held, self.state, self._quiet_s = [], Gate.DROPPING, 0.0
        self._inner.nudge()
        self._on_lose()

    # -- the coordinator's side ---------------------------------------------------------------------
    async def start(self) -> None:
        await self._inner.start()

    async def close(self) -> None:
        await self._inner.close()

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner.chunks():
            if chunk:  # (empty: a nudge, the verdict released what was held)
                self._take(chunk)
            while self._ready:
                yield self._ready.popleft()

    def _take(self, chunk: bytes) -> None:
        seconds = len(chunk) / BYTES_PER_SECOND
        level = dbfs(chunk)
        if (self.state is Gate.FREE and self.streams_always and self._quiet_s >= QUIET_S and level >= ONSET_DBFS
                and not self.muted()):
            self._wake(None)
        self._quiet_s = self._quiet_s + seconds if level < QUIET_DBFS else 0.0
        match self.state:
            case Gate.FREE:
                self._ready.append(chunk)
            case Gate.DROPPING:
                self._ready.append(bytes(len(chunk)))
                if self._quiet_s >= QUIET_S:
                    self.state = Gate.FREE
            case Gate.HELD:
                self._held.append(chunk)
                self.held_s_total += seconds
                self._measure(chunk)

    def _wake(self, started: PipelineStarted | None) -> None:
        self.state, self._started, self._held = Gate.HELD, started, []
        self._measured = bytearray()
        self._arbiter.woke(self.room)

    def _measure(self, chunk: bytes) -> None:
        """Its first measure_s of sound: a satellite streams from its own wake, and what follows
        "computer," may be a pause (digital silence, or the room's noise), which says nothing of
        how near the room is; the measure begins with the first chunk above heard_above_db."""
        core = self._arbiter.core
        wanted = int(core.measure_s * BYTES_PER_SECOND)
        if len(self._measured) >= wanted or (not self._measured and dbfs(chunk) < core.heard_above_db):
            return
        self._measured += chunk
        if len(self._measured) >= wanted:
            heard = bytes(self._measured)
            self._arbiter.level(self.room, dbfs(heard), signature(heard))


class Arbiter:
    """Every room's microphone reports its wakes and levels here; verdicts go back to them.
    `run` wakes the core at its deadline."""

    def __init__(self, core: ArbitrationCore, clock: Callable[[], float] = time.monotonic) -> None:
        self.core, self._clock = core, clock
        self.rooms: dict[str, ArbitratedMicrophone] = {}
        self.changes = Changes()  # an episode opened or was decided
        self.verdicts: deque[Verdict] = deque(maxlen=50)  # the latest, for the tests and the log
        self.illegal = 0

    def microphone(self, room: str, inner: SatelliteMicrophone, on_win: Callable[[PipelineStarted], None],
                   on_lose: Callable[[], None]) -> ArbitratedMicrophone:  # fmt: skip
        mic = self.rooms[room] = ArbitratedMicrophone(room, inner, self, on_win, on_lose)
        return mic

    def woke(self, room: str) -> None:
        self._apply(lambda now: self.core.woke(room, now))

    def level(self, room: str, level_db: float, heard: Signature = ()) -> None:
        self._apply(lambda now: self.core.level(room, level_db, now, heard))

    def _apply(self, step: Callable[[float], list[Verdict]]) -> None:
        try:
            verdicts = step(self._clock())
        except IllegalTransition:
            self.illegal += 1
            log.exception("arbitration: a bug in its state; carrying on")
            return
        for verdict in verdicts:
            self.verdicts.append(verdict)
            if verdict.losers:
                log.info("one command heard in %d rooms: %s answers (%s)", 1 + len(verdict.losers), verdict.winner,
                         verdict.why)  # fmt: skip
            if not verdict.late:  # (a late loser's winner went on at its own verdict)
                self.rooms[verdict.winner].won()
            for room in verdict.losers:
                self.rooms[room].lost()
        self.changes.notify()

    async def run(self) -> None:
        while True:
            deadline = self.core.next_deadline()
            now = self._clock()
            await self.changes.wait(None if deadline is None else max(0.0, deadline - now))
            if deadline is not None and self._clock() >= deadline:
                self._apply(self.core.tick)
