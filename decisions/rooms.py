"""Rooms' decisions, synchronous: one satellite link's state (`LinkCore`, with its one transition
table) and who hears a notice (`NoticeTargets`).

A satellite that drops is reconnected at once and then with backoff; nothing is said for a blip
(a reboot, a restart) so the other rooms never notice. Only a satellite gone for
`announce_after_s` is announced, once, in the other rooms ("The kitchen is unreachable."), and
again once it is back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from decisions.errors import IllegalTransition


class LinkState(enum.Enum):
    NEVER = "never connected"  # since the hub started
    UP = "connected"
    RECONNECTING = "reconnecting"  # lost, not announced (yet)
    UNREACHABLE = "unreachable"  # gone long enough to be announced


class LinkEvent(enum.Enum):
    CONNECTED = "connected"  # the connection is open and run-satellite was sent
    LOST = "lost"  # it closed, or stopped answering
    FAILED = "failed"  # an attempt to connect failed
    TICK = "tick"  # time passed (the shell calls at next_deadline)


N, U, R, X = LinkState.NEVER, LinkState.UP, LinkState.RECONNECTING, LinkState.UNREACHABLE
TRANSITIONS: dict[tuple[LinkState, LinkEvent], LinkState] = {
    (N, LinkEvent.CONNECTED): U,
    (N, LinkEvent.FAILED): N,
    (N, LinkEvent.TICK): N,  # or X once the grace period is over (see LinkCore.handle)
    (U, LinkEvent.LOST): R,
    (U, LinkEvent.TICK): U,
    (R, LinkEvent.CONNECTED): U,
    (R, LinkEvent.FAILED): R,
    (R, LinkEvent.TICK): R,  # or X
    (X, LinkEvent.CONNECTED): U,
    (X, LinkEvent.FAILED): X,
    (X, LinkEvent.TICK): X,
}


@dataclass(frozen=True)
class Announce:
    """Say this in the other rooms (and log it)."""

    room: str
    text: str
    reachable: bool = False  # it is back (else: it is gone)


@dataclass
class LinkCore:
    """One satellite's connection: when to try again, and what to say about it."""

    room: str
    initial_s: float = 0.25
    max_s: float = 4.0
    announce_after_s: float = 30.0
    state: LinkState = LinkState.NEVER
    healthy_after_s: float = 2.0  # a connection that lasted less was a failure too (backoff, not at once)
    failures: int = 0  # attempts failed in a row (and connections that ended at once)
    up_since: float | None = None  # clock time of the current connection
    down_since: float | None = None  # clock time it went, or of the first failed attempt (None: up)
    last_error: str = ""
    illegal: int = 0  # transitions the table has no row for (a bug, counted)

    def handle(self, event: LinkEvent, now: float, error: str = "") -> list[Announce]:
        row = TRANSITIONS.get((self.state, event))
        if row is None:
            self.illegal += 1
            raise IllegalTransition(f"link {self.room}: {event.value} in {self.state.value}")
        said: list[Announce] = []
        if event is LinkEvent.CONNECTED:
            if self.state is LinkState.UNREACHABLE:
                said.append(Announce(self.room, f"The {self.room} satellite is back.", reachable=True))
            self.up_since, self.down_since = now, None
        elif event is LinkEvent.LOST:
            lasted = self.up_since is not None and now - self.up_since >= self.healthy_after_s
            self.failures = 0 if lasted else self.failures + 1
            self.up_since, self.down_since, self.last_error = None, now, error or "the connection closed"
        elif event is LinkEvent.FAILED:
            self.failures += 1
            if self.down_since is None:
                self.down_since = now
            self.last_error = error
        if (row in (N, R) and self.down_since is not None and now - self.down_since >= self.announce_after_s):
            row = LinkState.UNREACHABLE
            said.append(Announce(self.room, f"The {self.room} satellite is unreachable."))
        self.state = row
        return said

    def retry_in(self) -> float:
        """How long to wait before the next attempt: at once after a connection that lasted,
        then doubling (a satellite that accepts and closes at once is not hammered)."""
        if self.failures == 0:
            return 0.0
        return min(self.max_s, self.initial_s * 2 ** min(self.failures - 1, 30))  # (no overflow however many)

    def next_deadline(self) -> float | None:
        """When a TICK may announce the room unreachable (None: nothing due)."""
        if self.state in (N, R) and self.down_since is not None:
            return self.down_since + self.announce_after_s
        return None


@dataclass
class NoticeTargets:
    """Which rooms hear which notice, and which have heard it: a notice is acknowledged (never
    offered again) once every room it is for has heard it."""

    rooms: tuple[str, ...]
    to_all: bool = False  # NOTICES_TO=all
    fixed_room: str = ""  # NOTICES_TO=<room>
    origins: dict[int, str] = field(default_factory=dict)  # task id -> the room that started it
    heard: dict[int, set[str]] = field(default_factory=dict)  # notice id -> rooms that heard it
    addressed: dict[int, frozenset[str]] = field(default_factory=dict)  # notice id -> its rooms, when named
    gone: set[str] = field(default_factory=set)  # rooms whose satellite was announced unreachable

    def started(self, task_id: int, room: str) -> None:
        self.origins[task_id] = room

    def address(self, notice_id: int, rooms: frozenset[str]) -> None:
        """This notice (a satellite gone or back) is for these rooms only."""
        self.addressed[notice_id] = rooms

    def targets(self, notice_id: int, task_id: int) -> frozenset[str]:
        if notice_id in self.addressed:
            return self.addressed[notice_id]
        if self.fixed_room:
            return frozenset({self.fixed_room})
        origin = self.origins.get(task_id)
        if self.to_all or origin is None:  # from before this run, or `handoff tasks start`: everyone
            return frozenset(self.rooms)
        if origin in self.gone:  # its room is gone (a timer must ring somewhere): every room still here
            return frozenset(self.rooms) - self.gone or frozenset(self.rooms)
        return frozenset({origin})

    def wants(self, room: str, notice_id: int, task_id: int) -> bool:
        return room in self.targets(notice_id, task_id) and room not in self.heard.get(notice_id, set())

    def heard_by(self, room: str, notice_id: int, task_id: int) -> bool:
        """Record it; True when every room it is for has now heard it."""
        heard = self.heard.setdefault(notice_id, set())
        heard.add(room)
        if self.targets(notice_id, task_id) <= heard:
            del self.heard[notice_id]
            self.addressed.pop(notice_id, None)
            return True
        return False
