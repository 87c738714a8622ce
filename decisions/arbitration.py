"""One command, one answer: which room takes a wake heard in several rooms at once.

A person in the kitchen says "hey jarvis, unlock the front door" with the office door open: the
office hears it too, quieter and a little later. Every room that wakes within `join_s` of the
first is a candidate of the same episode; each candidate's loudness is measured over its first
`measure_s` of speech; then one room wins and the others lose (the hub drops what they heard and
tells their satellites to stop streaming: no chime, no answer, the command runs once). A room
that wakes after the episode was decided starts an episode of its own: two people in two rooms a
second apart are two commands.

Only rooms that heard the same sound lose to the winner: each candidate brings a signature of its
first `measure_s` (from the shell: band energies of 20 ms frames), and a room whose signature does
not match the winner's (`similar`, the shell's `rooms.arbiter.similarity`, below `same_above`) is
another person talking: its command goes on as well (three people in three rooms at once are three
commands).

Who wins (`Pick`, chosen by measurement in benchmarks/adjacent_rooms.py): the loudest room,
unless another is within `tie_db` of it, then the first of those to wake.

`ArbitrationCore` is synchronous: events in, verdicts out, one transition table; the shell
(`rooms.arbiter.Arbiter`) calls `tick` at `next_deadline`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Callable

from decisions.errors import IllegalTransition


class Pick(enum.Enum):
    FIRST = "first"  # the room that woke first
    LOUDEST = "loudest"  # the loudest speech in its first measure_s
    LOUDEST_THEN_FIRST = "loudest, then first"  # the loudest; within tie_db of it, the first


class EpisodeState(enum.Enum):
    IDLE = "idle"  # no room is waking
    COLLECTING = "collecting"  # a room woke: others may join until join_s, levels are measured


class ArbitrationEvent(enum.Enum):
    WOKE = "woke"  # a room's satellite woke (or its speech began)
    LEVEL = "level"  # a candidate's loudness is measured
    TICK = "tick"  # time passed (the shell calls at next_deadline)


I, C = EpisodeState.IDLE, EpisodeState.COLLECTING
TRANSITIONS: dict[tuple[EpisodeState, ArbitrationEvent], EpisodeState] = {
    (I, ArbitrationEvent.WOKE): C,  # an episode begins
    (I, ArbitrationEvent.TICK): I,
    (I, ArbitrationEvent.LEVEL): I,  # a level measured after its episode was decided: too late, ignored
    (C, ArbitrationEvent.WOKE): C,  # another room joins (or, a room already in: ignored)
    (C, ArbitrationEvent.LEVEL): C,  # or IDLE once every level is in after join_s (see _decide)
    (C, ArbitrationEvent.TICK): C,  # or IDLE at the deadline
}


Signature = tuple[tuple[float, ...], ...]  # frames x bands, dB


Similarity = Callable[[Signature, Signature], float]  # -1 to 1: how alike two rooms' sounds are


@dataclass(frozen=True)
class Verdict:
    """The episode is decided: `winner` goes on, `losers` hear and play nothing of it."""

    winner: str
    losers: frozenset[str]
    why: str  # for the log: "kitchen -4.1 dBFS, office -16.0 dBFS: loudest"
    late: bool = False  # the losers woke after `winner`'s episode was decided (it goes on as it was)


@dataclass
class Candidate:
    room: str
    woke_at: float
    level_db: float | None = None  # dBFS of its first measure_s; None until measured
    signature: Signature = ()  # band energies (dB) per frame of its first measure_s


@dataclass
class ArbitrationCore:
    join_s: float = 0.35  # rooms waking this long after the first are the same command
    measure_s: float = 0.25  # each candidate's loudness over this much of its speech
    grace_s: float = 1.5  # ... arriving this much later at worst (a busy hub, a slow network): decided
    # as soon as every level is in, so this only holds the winner back while audio is late
    tie_db: float = 3.0  # louder by less than this: not nearer, the first wins
    same_above: float = 0.6  # signatures this alike: the same sound, heard in two rooms
    # A measure this quiet heard no sound (the pause after "computer," when a room's satellite
    # streams from its own wake): each room's signature is its own noise, which tells nothing.
    heard_above_db: float = -45.0
    # A room that wakes after an episode was decided, this soon after its winner woke, and heard
    # the same sound (its signature matches), is that command heard late (a satellite behind real
    # time, a slow network): it loses to that winner. Two people a second apart sound unlike.
    late_s: float = 2.0
    similar: Similarity | None = None  # None: every candidate heard the same (nothing to compare with)
    pick: Pick = Pick.LOUDEST_THEN_FIRST
    state: EpisodeState = EpisodeState.IDLE
    opened_at: float = 0.0
    candidates: dict[str, Candidate] = field(default_factory=dict)
    queued: dict[str, Candidate] = field(default_factory=dict)  # woke too late for the open episode
    winners: list[Candidate] = field(default_factory=list)  # of the episodes decided within late_s
    decided: int = 0  # episodes decided
    contested: int = 0  # ... of them with more than one room
    illegal: int = 0

    def _move(self, event: ArbitrationEvent) -> EpisodeState:
        row = TRANSITIONS.get((self.state, event))
        if row is None:
            self.illegal += 1
            raise IllegalTransition(f"arbitration: {event.value} in {self.state.value}")
        self.state = row
        return row

    def woke(self, room: str, now: float) -> list[Verdict]:
        """`room` woke now: it joins the episode open, or opens one. One that wakes after the
        open episode stopped taking rooms (still measuring) is another command: it waits (its
        level measured meanwhile) and opens the next episode once this one is decided."""
        self._move(ArbitrationEvent.WOKE)
        if room in self.candidates or room in self.queued:
            return self._decide(now)
        if not self.candidates:
            self.opened_at = now
        if now > self.opened_at + self.join_s:
            self.queued[room] = Candidate(room, now)
        else:
            self.candidates[room] = Candidate(room, now)
        return self._decide(now)

    def level(self, room: str, level_db: float, now: float, signature: Signature = ()) -> list[Verdict]:
        self._move(ArbitrationEvent.LEVEL)
        candidate = self.candidates.get(room) or self.queued.get(room)
        if candidate is not None and candidate.level_db is None:
            candidate.level_db, candidate.signature = level_db, signature
        return self._decide(now)

    def tick(self, now: float) -> list[Verdict]:
        self._move(ArbitrationEvent.TICK)
        return self._decide(now)

    def pending(self, room: str) -> bool:
        """`room` woke and waits for the verdict."""
        return room in self.candidates or room in self.queued

    def next_deadline(self) -> float | None:
        """When the episode is decided: at `join_s` if every candidate is measured by then (no
        later: the winner's audio is held meanwhile), else once every candidate has had its
        measure_s and `grace_s` more for its audio to arrive (one still not measured then counts
        as silence, and as the same sound: run once rather than twice)."""
        if self.state is C:
            joined_at = self.opened_at + self.join_s
            if all(c.level_db is not None for c in self.candidates.values()):
                return joined_at
            last = max([self.opened_at] + [c.woke_at for c in self.candidates.values()])
            return max(joined_at, last + self.measure_s + self.grace_s)
        return None

    def _decide(self, now: float) -> list[Verdict]:
        said: list[Verdict] = []
        while self.state is C:
            joined = now >= self.opened_at + self.join_s
            measured = all(c.level_db is not None for c in self.candidates.values())
            due = self.next_deadline()
            if not (joined and measured) and (due is None or now < due):
                break
            said += self._verdicts()
            if self.queued:  # the rooms that woke meanwhile: the next episode, from the first of them
                self.candidates, self.queued = self.queued, {}
                self.opened_at = min(c.woke_at for c in self.candidates.values())
                self.state = EpisodeState.COLLECTING
        return said

    def _verdicts(self) -> list[Verdict]:
        """One verdict per sound: the winner among all, with the rooms that heard the same; then
        the same among the rooms left (another person, another command)."""
        left = sorted(self.candidates.values(), key=lambda c: c.woke_at)
        said = self._heard_late(left)
        left = [c for c in left if not any(c.room in v.losers for v in said)]
        while left:
            winner = self._choose(left)
            same = [c for c in left if c is winner or self._same(winner, c)]
            why = ", ".join(f"{c.room} {c.level_db if c.level_db is not None else -math.inf:.1f} dBFS "
                            f"+{1000 * (c.woke_at - left[0].woke_at):.0f} ms" for c in same)  # fmt: skip
            said.append(Verdict(winner.room, frozenset(c.room for c in same) - {winner.room}, f"{why}: {self.pick.value}"))
            left = [c for c in left if c not in same]
            self.winners.append(winner)
        self.state, self.candidates = EpisodeState.IDLE, {}
        self.decided += 1
        self.contested += any(v.losers for v in said)
        return said

    def _heard_late(self, rooms: list[Candidate]) -> list[Verdict]:
        """The rooms that heard a command already decided (see `late_s`): they lose to its winner."""
        if rooms:
            self.winners = [w for w in self.winners if rooms[0].woke_at - w.woke_at <= self.late_s]
        said: list[Verdict] = []
        for c in rooms:
            earlier = next((w for w in self.winners if w.room != c.room and 0.0 <= c.woke_at - w.woke_at <= self.late_s
                            and self._alike(w, c)), None)  # fmt: skip
            if earlier is not None:
                said.append(Verdict(earlier.room, frozenset({c.room}), f"{c.room} +{1000 * (c.woke_at - earlier.woke_at):.0f} "
                                    f"ms after {earlier.room}, the same sound: heard late", late=True))  # fmt: skip
        return said

    def _alike(self, a: Candidate, b: Candidate) -> bool:
        """Both heard a sound, and the same one (nothing to compare: not shown to be the same)."""
        return (bool(a.signature) and bool(b.signature) and self.similar is not None and not self._quiet(a)
                and not self._quiet(b) and a.level_db is not None and b.level_db is not None
                and self.similar(a.signature, b.signature) >= self.same_above)  # fmt: skip

    def _same(self, a: Candidate, b: Candidate) -> bool:
        if not a.signature or not b.signature or self.similar is None or self._quiet(a) or self._quiet(b):
            return True  # nothing to compare (no audio came, or no sound in it): one wake, as far as anyone can tell
        return self.similar(a.signature, b.signature) >= self.same_above

    def _quiet(self, candidate: Candidate) -> bool:
        return candidate.level_db is not None and candidate.level_db < self.heard_above_db

    def _choose(self, rooms: list[Candidate]) -> Candidate:
        # (A measure that heard no sound says nothing of how near the room is: its mic's own noise.)
        level = {c.room: c.level_db if c.level_db is not None and not self._quiet(c) else -math.inf for c in rooms}
        if self.pick is Pick.FIRST:
            return rooms[0]
        if self.pick is Pick.LOUDEST:
            return max(rooms, key=lambda c: level[c.room])
        loudest = max(level.values())
        return next(c for c in rooms if level[c.room] >= loudest - self.tie_db)
