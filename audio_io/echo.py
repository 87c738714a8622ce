"""Echo suppression for the listener's mic path: a reference-energy gate (pure, no asyncio).

The narrator's voice comes back into the microphone delayed (device buffers, the air) and
decayed (distance, volume); without care the listener would hear the assistant talking to
itself. Instead of muting the mic for a fixed margin after playback (which also drops the user's
first words), `EchoSuppressor` decides per 20 ms chunk from the signal: the audio we know we
played is the reference; a chunk passes when it is louder than the echo that reference can
explain, else it is dropped as echo.

How the expected echo is found, per 10 ms slot of the mic:
- the reference's energy per 10 ms slot, kept for `max_delay_ms` plus the reverberation tail;
- the echo path (delay and gain) is learnt while the reference plays: for each candidate delay
  the log ratio mic/reference is tracked over the recent loud slots; the delay whose ratio is
  steadiest is the path, and the ratio's median its gain. Until it has learnt one (the first
  second of the first narration), the worst case is assumed: every delay up to `max_delay_ms`,
  at `unlearnt_gain_db`;
- the expected echo is that gain times the loudest reference within one slot of the delay,
  decaying by `decay_db_per_s` after the reference falls silent (the room's reverberation);
- a slot is speech when the mic beats the expected echo by `margin_db`, or when the expected
  echo is below `floor_rms` (a quiet room: nothing to suppress).

Times are the caller's monotonic clock: `played(pcm, at)` with `at` the moment its first sample
leaves the speaker; `process(chunk, at)` with `at` the moment its first sample was captured.
Chosen over an echo canceller by measurement (docs/PERFORMANCE.md, "Echo gate").
"""

from __future__ import annotations

import math
import operator
import sys
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass
from math import log10

from audio_io.format import SAMPLE_RATE, SAMPLE_WIDTH
from config.settings import EchoSettings

if sys.version_info >= (3, 13):  # audioop left the standard library; audioop-lts is the same module
    import audioop  # type: ignore[import-not-found]
else:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop

SLOT_S = 0.01  # the envelope's resolution: 10 ms
_SLOT_BYTES = int(SAMPLE_RATE * SLOT_S) * SAMPLE_WIDTH
_TRACKED_SLOTS = 150  # loud slots per candidate delay the path estimate looks back over (1.5 s)
_MIN_TRACKED = 50  # loud slots at every candidate delay before an estimate is made
_CONFIDENT = 0.5  # the path's ratio variance must be at most this share of the typical delay's
_REESTIMATE_EVERY = 10  # slots between path estimates (100 ms): the path changes slowly
_MIN_BOUNDED = 10  # loud slots at every candidate delay before the gain is bounded from above
_SILENT_ENERGY = 1.0  # a digitally silent mic slot counts as this (rms 1, -90 dBFS): silence is evidence too


@dataclass(frozen=True)
class EchoPath:
    delay_s: float
    gain_db: float


class EchoSuppressor:
    """Feed it what was played (`played`) and every mic chunk (`process`): a chunk comes back
    unchanged when it holds more than the narrator's echo, or None (drop it as echo)."""

    def __init__(self, settings: EchoSettings = EchoSettings()) -> None:
        self.settings = settings
        self._max_delay = max(1, round(settings.max_delay_ms / 1000 / SLOT_S))
        self._decay_per_slot = 10 ** (-settings.decay_db_per_s * SLOT_S / 10)  # energy ratio per slot
        floor = settings.floor_rms**2
        # Slots after the loudest possible reference until its tail is below the floor.
        self._tail = math.ceil(math.log(floor / 32768.0**2) / math.log(self._decay_per_slot)) + 1
        self._floor = floor
        self._loud = settings.loud_rms**2
        self._margin = 10 ** (settings.margin_db / 10)
        self._unlearnt_gain = 10 ** (settings.unlearnt_gain_db / 10)
        # The decay of the reverberation k + 1 slots older than the path, multiplied up one slot at a
        # time (as a loop over the slots would).
        self._decays = [self._decay_per_slot]
        for _ in range(self._tail):
            self._decays.append(self._decays[-1] * self._decay_per_slot)
        # A list, not a deque: the lookups below take whole spans of it at once (issue 34: the gate's
        # Python loops were a tenth of a talking room's CPU).
        self._ref: list[float] = []  # reference energy per slot, oldest first
        self._ref_start = 0  # absolute slot index of self._ref[0]
        self._ratios: list[deque[float]] = [deque() for _ in range(self._max_delay + 1)]  # log10 mic/ref per delay
        self._ordered: list[list[float]] = [[] for _ in range(self._max_delay + 1)]  # the same, kept sorted
        self._sums = [0.0] * (self._max_delay + 1)
        self._squares = [0.0] * (self._max_delay + 1)
        self._path: tuple[int, float] | None = None  # (delay in slots, energy gain)
        # Until a path is learnt: the largest median mic/reference ratio over the candidate delays
        # lately. The echo is no louder than that, so a mic that stays quiet while the narrator
        # speaks (no echo, or a faint one) is trusted from the start, before the path is clear.
        self._bound: float | None = None
        self._since_estimate = 0
        self._last_loud_slot: int | None = None
        self.passed = 0  # chunks let through
        self.dropped = 0  # chunks dropped as echo
        # By how much the last chunk's loudest 10 ms beat the echo expected there (dB; inf: none
        # was expected): how sure a pass was (`detectors.barge_in.PrerollStopListener`).
        self.margin_db = math.inf

    # -- the reference --------------------------------------------------------------------------

    def played(self, pcm: bytes, at: float) -> None:
        """`pcm` starts leaving the speaker at `at`."""
        first = _slot(at)
        energies = [audioop.rms(pcm[i : i + _SLOT_BYTES], SAMPLE_WIDTH) ** 2 for i in range(0, len(pcm), _SLOT_BYTES)]
        if not self._ref:
            self._ref_start = first
        end = self._ref_start + len(self._ref)
        if first > end:
            self._ref.extend([0.0] * (first - end))  # silence between two plays
        for offset, energy in enumerate(energies):
            index = first + offset - self._ref_start
            if index < 0:
                continue  # older than what is kept: no longer matters
            if index < len(self._ref):
                self._ref[index] += energy  # overlapping plays add up
            else:
                self._ref.append(energy)
            if energy >= self._loud:
                self._last_loud_slot = max(self._last_loud_slot or 0, first + offset)

    def stopped(self, at: float) -> None:
        """Playback ended at `at`: reference stamped later never left the speaker (flushed, or a
        speaker that finished sooner than its stamps said)."""
        keep = _slot(at) - self._ref_start
        if 0 <= keep < len(self._ref):
            del self._ref[keep:]
            if self._last_loud_slot is not None and self._last_loud_slot >= _slot(at):
                loud = [i for i, e in enumerate(self._ref) if e >= self._loud]
                self._last_loud_slot = self._ref_start + loud[-1] if loud else None

    def _span(self, oldest: int, newest: int) -> list[float]:
        """The reference's energy over slots `oldest`..`newest` (inclusive), oldest first; 0 where none."""
        start, end = oldest - self._ref_start, newest - self._ref_start + 1
        if start >= 0 and end <= len(self._ref):
            return self._ref[start:end]
        known = self._ref[max(0, start):max(0, end)]
        before = min(end, 0) - start if start < 0 else 0
        return [0.0] * before + known + [0.0] * (end - start - before - len(known))

    def _forget_before(self, slot: int) -> None:
        drop = min(slot - self._ref_start, len(self._ref))
        if drop > 0:
            del self._ref[:drop]
            self._ref_start += drop
        if not self._ref:
            self._ref_start = slot

    # -- the microphone -------------------------------------------------------------------------

    def process(self, chunk: bytes, at: float) -> bytes | None:
        """The chunk, if it holds more than echo; None to drop it."""
        first = _slot(at)
        if not self._ref:  # nothing played lately: nothing to learn or suppress
            self.passed += 1
            self.margin_db = math.inf
            return chunk
        speech = False
        best = 0.0  # the largest energy / expected echo over the chunk's slots
        for offset, start in enumerate(range(0, len(chunk), _SLOT_BYTES)):
            slot = first + offset
            energy = audioop.rms(chunk[start : start + _SLOT_BYTES], SAMPLE_WIDTH) ** 2
            self._learn(slot, energy)
            expected = self._expected(slot)
            if expected < self._floor or energy > expected * self._margin:
                speech = True
            best = math.inf if expected < self._floor else max(best, energy / expected)
        self._forget_before(first - self._max_delay - self._tail - 2)
        self.margin_db = 10 * math.log10(best) if 0 < best < math.inf else (-math.inf if best == 0 else math.inf)
        if speech:
            self.passed += 1
            return chunk
        self.dropped += 1
        return None

    def quiet_after_s(self, now: float) -> float:
        """Seconds from `now` until no echo of anything played so far can be expected (0: quiet
        now): a caller may skip `process` after that, or know when a fixed mute could end."""
        if self._last_loud_slot is None:
            return 0.0
        delay = self._path[0] if self._path is not None else self._max_delay
        quiet = (self._last_loud_slot + delay + 2 + self._tail) * SLOT_S
        return max(0.0, quiet - now)

    @property
    def has_evidence(self) -> bool:
        """It has heard enough of the reference to judge the room (a learnt path, or a bound on
        the echo's gain); until then it assumes the worst: every delay at `unlearnt_gain_db`."""
        return self._path is not None or self._bound is not None

    @property
    def path(self) -> EchoPath | None:
        """The learnt echo path, once there is one."""
        if self._path is None:
            return None
        delay, gain = self._path
        return EchoPath(delay * SLOT_S, 10 * math.log10(gain))

    def echo_gain_db(self) -> float | None:
        """The learnt echo path's gain, dB (None: none learnt yet): what the canceller behind it
        switches its residual echo suppressor by (`EchoSettings.cancel_suppress_over_db`)."""
        return None if self._path is None else 10 * math.log10(self._path[1])

    def _learn(self, slot: int, energy: float) -> None:
        # Only the delays whose reference was loud learn; each delay's figures move alone, so the
        # order they are visited in changes nothing. Names bound once: this runs for every 10 ms slot
        # while the narrator plays, twice (issue 34: the gate's Python was a tenth of a talking room).
        log_energy = math.log10(max(energy, _SILENT_ENERGY))
        top, loud = self._max_delay, self._loud
        references = self._span(slot - top, slot)  # [max_delay - delay]: the reference `delay` slots back
        learnt = [(top - back, log_energy - log10(reference)) for back, reference in enumerate(references) if reference >= loud]
        all_ratios, all_ordered, sums, squares = self._ratios, self._ordered, self._sums, self._squares
        for delay, ratio in learnt:
            ratios, ordered = all_ratios[delay], all_ordered[delay]
            ratios.append(ratio)
            insort(ordered, ratio)
            sums[delay] += ratio
            squares[delay] += ratio * ratio
            if len(ratios) > _TRACKED_SLOTS:
                old = ratios.popleft()
                del ordered[bisect_left(ordered, old)]
                sums[delay] -= old
                squares[delay] -= old * old
        self._since_estimate += 1
        if self._since_estimate >= _REESTIMATE_EVERY:
            self._since_estimate = 0
            self._estimate()

    def _estimate(self) -> None:
        """The delay whose mic/reference ratio varies least is the echo path; the median ratio
        there is its gain (speech over the echo only raises ratios, so the median holds)."""
        fewest = min(len(ratios) for ratios in self._ratios)
        if fewest >= _MIN_BOUNDED:
            # At the true delay the median ratio is the gain; elsewhere it is no lower (the
            # reference does not line up): the largest median bounds the gain from above.
            self._bound = 10 ** max(ordered[len(ordered) // 2] for ordered in self._ordered)
        if fewest < _MIN_TRACKED:
            return  # compare delays on like amounts of evidence only
        variances = []
        for delay, ratios in enumerate(self._ratios):
            mean = self._sums[delay] / len(ratios)
            variances.append(max(0.0, self._squares[delay] / len(ratios) - mean * mean))
        delay = min(range(len(variances)), key=variances.__getitem__)
        if variances[delay] > _CONFIDENT * sorted(variances)[len(variances) // 2]:
            return  # no delay stands out (no echo, or speech over it): keep what we had
        ordered = self._ordered[delay]
        self._path = (delay, 10 ** ordered[len(ordered) // 2])

    def _expected(self, slot: int) -> float:
        """The loudest echo the reference can put into this mic slot."""
        if self._path is not None:
            delay, gain = self._path
            newest, oldest = slot - max(0, delay - 1), slot - delay - 1
        else:
            gain = self._unlearnt_gain if self._bound is None else min(self._unlearnt_gain, self._bound)
            newest, oldest = slot, slot - self._max_delay
        loudest = max(0.0, *self._span(oldest, newest))
        # Older than the path: only its reverberation remains (`_decays`, newest first).
        fading = self._span(oldest - self._tail, oldest - 1)
        fading.reverse()
        return float(gain * max(loudest, *map(operator.mul, fading, self._decays)))


def _slot(at: float) -> int:
    return round(at / SLOT_S)
