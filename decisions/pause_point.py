"""Where in a pause inside a woken turn its route is sent provisionally (issue 33).

A provisional route the user talks past is withdrawn and its tokens bought nothing, so the later
in the pause it is sent, the fewer are: but it must leave the route and the narrator their round
trips before the turn end (`TURN_END_MS`), or the answer is late. `PausePoint` keeps the latest
round trips the core measured (a route: sent -> its call back; the narrator: asked -> its first
audio, read ahead or not) and puts the point as late as they allow: the turn end minus their
medians and a margin, in whole 20 ms chunks (the on-device VAD's step: a point between two would
be reached at the next), never sooner than `PROVISIONAL_MS` (before anything was measured: that).

It also keeps the account of what routing early costs (`account`, a `decisions.cost.Provisional`,
fed the listener's usage as it comes): every route's tokens, those of the withdrawn ones and of
the answers read ahead for them and dropped. A pause is routed early only while one more
withdrawal (as costly as the average one so far) would leave that extra share within `budget`
(`PROVISIONAL_TOKEN_BUDGET`); else it is routed at its turn end, as without provisional routes,
and the point moves to the last chunk before the turn end (`floor_s`: few pauses inside a command
last that long; a turn's end still reaches it, 60 ms early). With room for two more withdrawals
it comes back a chunk a pause. So a user who often pauses inside commands pays at most the
budget; one who does not keeps the point the round trips allow.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field, replace

from decisions.cost import Provisional
from realtime_api.wire import Usage

CHUNK_S = 0.02  # the on-device VAD's step: a pause is counted in it


@dataclass
class PausePoint:
    turn_end_s: float
    earliest_s: float  # PROVISIONAL_MS (0: no provisional routes)
    margin_s: float = 0.005  # the client's own time on the way (the tools', the speaker's), besides the rounding down
    keep: int = 9  # the latest round trips of each kind
    budget: float | None = None  # the extra share withdrawn routes may add to the routing's; None: unbounded
    account: Provisional = field(default_factory=Provisional, init=False)
    _responses: int = field(default=0, init=False)  # the listener's, for the average route
    floor_s: float = field(default=0.0, init=False)  # the point is never sooner (the budget moves it)
    _route: deque[float] = field(default_factory=deque, init=False)
    _voice: deque[float] = field(default_factory=deque, init=False)

    def __post_init__(self) -> None:
        self._route, self._voice = deque(maxlen=self.keep), deque(maxlen=self.keep)
        self.account = Provisional(budget=self.budget)

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
        point = 0.0 if lead is None else math.floor(round((self.turn_end_s - lead) / CHUNK_S, 6)) * CHUNK_S
        return round(min(self.latest_s, max(self.earliest_s, self.floor_s, point)), 3)

    @property
    def latest_s(self) -> float:
        return self.turn_end_s - 3 * CHUNK_S  # (later is the turn end: nothing to gain)

    def reached_s(self, pause_s: float) -> float:
        """The silence after which a pause of `pause_s` is signalled (a whole number of chunks)."""
        return math.ceil(round(pause_s / CHUNK_S, 6)) * CHUNK_S

    # -- the account: what routing early costs --------------------------------------------------------
    def routed(self, usage: Usage) -> None:
        """A listener response finished: a route's, provisional or not."""
        self.account = self.account.routed(usage)
        self._responses += 1

    def billed(self, usage: Usage, sent: bool, withdrawn: bool) -> None:
        """A provisional route's tokens (listener_core.ProvisionalBilled)."""
        self.account = self.account.billed(usage, sent, withdrawn)

    def read_ahead_dropped(self, usage: Usage) -> None:
        self.account = self.account.read_ahead_dropped(usage)

    def sent(self) -> None:
        self.account = replace(self.account, sent=self.account.sent + 1)

    def withdrawn(self) -> None:
        self.account = replace(self.account, withdrawn=self.account.withdrawn + 1)

    def _headroom(self) -> float:
        """How many more withdrawals (each as costly as the average so far) the budget allows, this
        command's own useful route counted (it ends in one: the route that stands, or the whole
        command's after a withdrawal)."""
        a = self.account
        if self.budget is None or a.extra_tokens == 0:  # (the first is not refused: nothing says yet
            return math.inf                               # that this user pauses inside commands)
        route = a.routing_tokens / max(1, self._responses)
        allowed = self.budget * (a.routing_tokens - a.withdrawn_tokens + route)
        return (allowed - a.extra_tokens) / (a.extra_tokens / max(1, a.withdrawn))

    @property
    def within_budget(self) -> bool:
        """Whether a route sent early now, if withdrawn, would leave the extra share within the budget."""
        return self._headroom() >= 1

    def may_route(self) -> bool:
        """A pause was reached: route it early? No, over the budget: counted as held back, and the
        point moves to the latest (`SetPause` from the core). With room for two more withdrawals,
        a point the budget moved comes back a chunk."""
        headroom = self._headroom()
        if headroom < 1:
            self.account = replace(self.account, held_back=self.account.held_back + 1)
            self.floor_s = self.latest_s
            return False
        if headroom >= 2 and self.floor_s > 0:
            self.floor_s = round(self.floor_s - CHUNK_S, 3) if self.floor_s - CHUNK_S > self.earliest_s else 0.0
        return True
