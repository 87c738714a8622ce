"""Where in a pause inside a woken turn its route is sent provisionally (issue 33).

A provisional route the user talks past is withdrawn and its tokens bought nothing, so the later
in the pause it is sent, the fewer are: but it must leave the route and the narrator their round
trips before the turn end (`TURN_END_MS`), or the answer is late. `PausePoint` keeps the latest
round trips the core measured (a route: sent -> its call back; the narrator: asked -> its first
audio, read ahead or not) and puts the point as late as they allow: the turn end minus their
medians and a margin, in whole 20 ms chunks (the on-device VAD's step: a point between two would
be reached at the next), never sooner than `PROVISIONAL_MS` (before anything was measured: that).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field

CHUNK_S = 0.02  # the on-device VAD's step: a pause is counted in it


@dataclass
class PausePoint:
    turn_end_s: float
    earliest_s: float  # PROVISIONAL_MS (0: no provisional routes)
    margin_s: float = 0.005  # the client's own time on the way (the tools', the speaker's), besides the rounding down
    keep: int = 9  # the latest round trips of each kind
    _route: deque[float] = field(default_factory=deque, init=False)
    _voice: deque[float] = field(default_factory=deque, init=False)

    def __post_init__(self) -> None:
        self._route, self._voice = deque(maxlen=self.keep), deque(maxlen=self.keep)

    def route_answered(self, seconds: float) -> None:
        self._route.append(max(0.0, seconds))

    def voice_ready(self, seconds: float) -> None:
        self._voice.append(max(0.0, seconds))

    @property
    def lead_s(self) -> float | None:
        """What an answer needs before the turn end, once both round trips were measured."""
        if not self._route or not self._voice:
            return None
        return statistics.median(self._route) + statistics.median(self._voice) + self.margin_s

    @property
    def pause_s(self) -> float | None:
        """The pause that sends the route provisionally now (None: never)."""
        if not 0 < self.earliest_s < self.turn_end_s:
            return None
        lead = self.lead_s
        if lead is None:
            return self.earliest_s
        latest = self.turn_end_s - 3 * CHUNK_S  # (later is the turn end: nothing to gain)
        point = math.floor(round((self.turn_end_s - lead) / CHUNK_S, 6)) * CHUNK_S
        return round(min(latest, max(self.earliest_s, point)), 3)

    def reached_s(self, pause_s: float) -> float:
        """The silence after which a pause of `pause_s` is signalled (a whole number of chunks)."""
        return math.ceil(round(pause_s / CHUNK_S, 6)) * CHUNK_S
