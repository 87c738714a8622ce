"""The listener's sessions, in one table: the current session (none, open, closing while it hands
over) and the next one opened ahead of need (none, warming, ready).

Two machines move by one table (`decisions.machines`). The shell (`main_agent.Listener`) fires a
move where it changes what it holds (a link, a core, the standby) and asks the table what it may
do: only an open session takes audio and routes; a restart begins only from an open session; a
warm-up only when no next session is on its way. Sessions already handed over ("retired", open
until what they heard is transcribed) are the shell's deadline tasks, not states of this table.

`ListenerSessions` fires the moves and counts the illegal ones. In tests an illegal move raises
(`STRICT`, set by tests/conftest.py for the whole process); in the daemon it is logged with its
traceback and counted (`illegal`), and nothing moves.
"""

from __future__ import annotations

import enum
import logging

from decisions.errors import IllegalTransition
from decisions.machines import Machines, Table

log = logging.getLogger("handoff.listener")


class Current(enum.Enum):
    NONE = "none"  # no session: one is being opened (or the listener is not running)
    OPEN = "open"  # configured: takes the microphone's audio and routes commands
    CLOSING = "closing"  # a restart has begun: it takes no more audio; the next one opens once it is handed over


class Standby(enum.Enum):
    NONE = "none"
    WARMING = "warming"  # the next session is being opened and configured (while the narrator speaks)
    READY = "ready"  # the next session waits, configured: a restart switches to it at once


class Move(enum.Enum):
    OPEN = "open"  # a configured session became the current one (a fresh one, or the standby taken)
    RETIRE = "retire"  # restart(): the current session is to hand over
    HAND_OVER = "hand over"  # it let go: the run loop opens the next; the old one serves on, retired
    END = "end"  # the current session closed (dropped, expired, refused, or its task ended)
    WARM = "warm"  # warm_up() began opening the next session
    WARMED = "warmed"  # ... and it is ready
    WARM_FAILED = "warm failed"  # ... and it could not be opened (the run loop opens one when needed)
    TAKE = "take"  # the run loop took the ready standby as its next session
    DISCARD = "discard"  # the run loop ended: the ready standby is closed unused


M = Move

TABLE = Table(
    {
        (Current.NONE, M.OPEN): Current.OPEN,
        (Current.OPEN, M.RETIRE): Current.CLOSING,
        (Current.CLOSING, M.HAND_OVER): Current.NONE,
        (Current.OPEN, M.END): Current.NONE,
        (Current.CLOSING, M.END): Current.NONE,  # it closed while handing over: nothing is left to hand over
        (Standby.NONE, M.WARM): Standby.WARMING,
        (Standby.WARMING, M.WARMED): Standby.READY,
        (Standby.WARMING, M.WARM_FAILED): Standby.NONE,
        (Standby.READY, M.TAKE): Standby.NONE,
        (Standby.READY, M.DISCARD): Standby.NONE,
    },
    initial={Current: Current.NONE, Standby: Standby.NONE},
    events=Move,
)


class ListenerSessions:
    """The listener's current and next session, moved by `TABLE`. `strict`: an illegal move
    raises (tests); otherwise it is logged and counted. `STRICT` is the default."""

    STRICT = False

    def __init__(self, strict: bool | None = None) -> None:
        self._machines: Machines[Move] = Machines(TABLE)
        self.strict = self.STRICT if strict is None else strict
        self.illegal = 0  # moves the table refused (bugs), counted

    @property
    def current(self) -> Current:
        current: Current = self._machines[Current]
        return current

    @property
    def standby(self) -> Standby:
        standby: Standby = self._machines[Standby]
        return standby

    @property
    def takes_audio(self) -> bool:
        """An open session: audio, routes and the device's wake go to it."""
        return self.current is Current.OPEN

    def allows(self, move: Move) -> bool:
        return self._machines.allows(move)

    def fire(self, move: Move) -> bool:
        """Fire `move`; False (and nothing moves) if the table has no row for it now."""
        try:
            self._machines.fire(move)
        except IllegalTransition:
            if self.strict:
                raise
            self.illegal += 1
            log.exception("listener sessions: an illegal move (a bug; %d so far; nothing moved)", self.illegal)
            return False
        return True
