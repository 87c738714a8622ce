"""A command's life, in one table: from the moment it is heard (by its words, or by its audio
when the device heard the wake phrase) to its one verdict and its end.

Three machines move together (`decisions.machines`): `Step` (where it is: queued, routed, held for
its words, asking for a spoken yes, running its tools, answering, and how it ended), `Verdict`
(whether it was addressed: its words not known yet, addressed, withdrawn, or answered before its
words came, so that the answer stands whatever they say) and `Turn` (whether its turn was over
when it was routed: a command routed at a pause inside it is `provisional` until the turn end
confirms it or the user goes on and it is withdrawn; only read-only tools run on it, and nothing
of it is said, until it is confirmed). The table is what makes "one verdict"
hold: a command whose answer has begun can no longer be withdrawn (there is no row for it), and
one withdrawn can no longer be answered.

`CommandBook` owns the commands of one coordinator: it fires the moves, keeps the records the
history, the page and the metrics subscribe to (`CommandRecord`, a frozen snapshot carried by the
typed events of `decisions.events`), and counts illegal moves. In tests an illegal move raises
(`strict`); in the daemon it is logged with its traceback and counted, and the command is left
as it was.
"""

from __future__ import annotations

import enum
import itertools
import logging
from dataclasses import dataclass, field

from decisions.errors import IllegalTransition
from decisions.machines import Machines, Table
from decisions.stages import StageTimes

log = logging.getLogger("handoff.coordinator")


class RouteMode(enum.Enum):
    WORDS = "words"  # its transcript said it was addressed: routed by its words
    AUDIO = "audio"  # the device heard the wake: routed by its audio, before its transcript


class Step(enum.Enum):
    QUEUED = "queued"  # addressed by its words; waits its turn (one command is routed at a time)
    ROUTED = "routed"  # put to the model; its response is awaited
    HELD = "held"  # routed by its audio: what its response asks (an act, the model's words) waits for its words
    ASKING = "asking"  # a tool that cannot be undone waits for a spoken yes
    RUNNING = "running"  # its tools run
    ANSWERING = "answering"  # its answer (or an apology) is queued for the narrator, or being said
    SAID = "said"  # the answer was said to its end
    STOPPED = "stopped"  # "stop" cut the answer
    DECLINED = "declined"  # no yes came: nothing ran
    DISMISSED = "dismissed"  # it asked for nothing ("stop", "never mind"): nothing ran, nothing was said
    WITHDRAWN = "withdrawn"  # not addressed after all, before anything of it was said
    LOST = "lost"  # routed by its audio and lost with its session: its words route it again, as a new command


ENDS = frozenset({Step.SAID, Step.STOPPED, Step.DECLINED, Step.DISMISSED, Step.WITHDRAWN, Step.LOST})


class Verdict(enum.Enum):
    UNHEARD = "words not yet"  # routed by its audio; its transcript will say
    ADDRESSED = "addressed"  # its words say it was a command (or it was routed by them)
    STANDS = "answered before its words"  # its answer began first: it stands, whatever they say
    WITHDRAWN = "withdrawn"


class Turn(enum.Enum):
    OVER = "over"  # routed once its turn was over (every command but one routed at a pause)
    PROVISIONAL = "provisional"  # routed at a pause inside it: the user may go on talking
    CONFIRMED = "confirmed"  # the turn ended with no more speech: its route is the command's
    WITHDRAWN = "withdrawn"  # the user went on: its route, tool results and script are dropped


class Move(enum.Enum):
    ROUTE = "route"
    REQUEUE = "requeue"  # its session went before the route was answered: routed again, first in line
    LOSE = "lose"  # routed by its audio, its session went: the replay brings its words back
    HOLD = "hold"
    ASK = "ask"
    RUN = "run"  # its tools run (any tool: never on a provisional route)
    READ = "read"  # its tools run, all of them read-only (tools.registry Effect.READS)
    ANSWER = "answer"  # a script for it is queued (a result, the model's own words, an apology)
    BEGIN = "begin"  # the narrator began saying it
    FINISH = "finish"
    CUT = "cut"
    CONFIRM = "confirm"  # its words came and say it was addressed (or the answer stands: they are its words)
    WITHDRAW = "withdraw"
    DECLINE = "decline"
    DISMISS = "dismiss"  # the model's one call was `dismiss` (decisions.dismissal): the user asked for nothing
    TURN_END = "turn end"  # the turn ended with no more speech after the pause it was routed at
    RESUME = "resume"  # the user went on talking after that pause


Q, R, H, A, U, N = Step.QUEUED, Step.ROUTED, Step.HELD, Step.ASKING, Step.RUNNING, Step.ANSWERING
UNHEARD, ADDRESSED, STANDS = Verdict.UNHEARD, Verdict.ADDRESSED, Verdict.STANDS
OVER, PROVISIONAL, CONFIRMED = Turn.OVER, Turn.PROVISIONAL, Turn.CONFIRMED
M = Move

LIFECYCLE = Table(
    {
        (Q, M.ROUTE): R,
        (R, M.REQUEUE): Q,
        (R, M.LOSE): Step.LOST,
        (H, M.LOSE): Step.LOST,
        (R, M.HOLD): H,
        (R, M.ASK): A,
        (H, M.ASK): A,
        (U, M.ASK): A,  # a call the brain picked answered that it needs a yes (the listener could not know)
        (R, M.RUN): U,
        (H, M.RUN): U,
        (A, M.RUN): U,  # the spoken yes
        (R, M.READ): U,
        (H, M.READ): U,
        (A, M.DECLINE): Step.DECLINED,  # "no", silence, anything else
        (R, M.ANSWER): N,  # the model's own words, or an apology
        (H, M.ANSWER): N,
        (U, M.ANSWER): N,
        (A, M.ANSWER): N,
        (N, M.BEGIN): N,
        (N, M.FINISH): Step.SAID,
        (N, M.CUT): Step.STOPPED,
        # not addressed after all: only while nothing of it was said (the verdict's rows say so)
        (R, M.WITHDRAW): Step.WITHDRAWN,
        (H, M.WITHDRAW): Step.WITHDRAWN,
        (U, M.WITHDRAW): Step.WITHDRAWN,  # read-only tools already running finish unheard
        (N, M.WITHDRAW): Step.WITHDRAWN,  # queued, not begun
        # "hey jarvis, stop" (a barge-in the hold let through), "never mind": nothing runs, nothing
        # is said; its words may yet say it was not addressed, or the user may go on after the pause
        (R, M.DISMISS): Step.DISMISSED,
        (Step.DISMISSED, M.WITHDRAW): Step.WITHDRAWN,
        (Step.DISMISSED, M.RESUME): Step.WITHDRAWN,
        # the verdict
        (UNHEARD, M.CONFIRM): ADDRESSED,
        (STANDS, M.CONFIRM): ADDRESSED,  # the words of an answer that stands
        (UNHEARD, M.WITHDRAW): Verdict.WITHDRAWN,
        (UNHEARD, M.BEGIN): STANDS,  # from here on, one verdict: answered
        (ADDRESSED, M.BEGIN): ADDRESSED,
        # nothing acts on a guess: a spoken yes is asked only of a command whose words are known
        (ADDRESSED, M.ASK): ADDRESSED,
        # the turn: a route sent at a pause inside the command is provisional; read-only tools
        # run on it and its script is made, but nothing that changes something runs, nothing is
        # asked and nothing is said until the turn end confirms it (there are no such rows)
        (PROVISIONAL, M.TURN_END): CONFIRMED,
        (PROVISIONAL, M.RESUME): Turn.WITHDRAWN,
        (R, M.RESUME): Step.WITHDRAWN,  # its response is cancelled (or ignored when it comes)
        (H, M.RESUME): Step.WITHDRAWN,  # what it held never runs
        (U, M.RESUME): Step.WITHDRAWN,  # read-only tools already running finish unheard
        (N, M.RESUME): Step.WITHDRAWN,  # its script, made ahead, is dropped unsaid
        (OVER, M.RUN): OVER,
        (CONFIRMED, M.RUN): CONFIRMED,
        (OVER, M.ASK): OVER,
        (CONFIRMED, M.ASK): CONFIRMED,
        (OVER, M.BEGIN): OVER,
        (CONFIRMED, M.BEGIN): CONFIRMED,
    },
    initial={Step: Q, Verdict: ADDRESSED, Turn: OVER},
    events=Move,
)


@dataclass(frozen=True)
class CommandRecord:
    """A command as the history, the page and the metrics see it (a snapshot)."""

    id: int
    mode: RouteMode
    words: str | None  # None: not known yet (routed by its audio)
    step: Step
    verdict: Verdict
    tools: tuple[str, ...] = ()  # "name(arguments)" per call ("name(...)" while its words are not known)
    results: tuple[str, ...] = ()  # "name ok: what it found"
    said: str = ""  # the script the narrator read for it
    apology: bool = False  # what was said was an apology (routing failed, or timed out)
    stages: tuple[tuple[str, float], ...] = ()  # decisions.stages offsets, once said
    turn: Turn = Turn.OVER

    @property
    def ended(self) -> bool:
        return self.step in ENDS

    @property
    def kept(self) -> bool:
        """Whether it belongs in the history: it was addressed (or answered), not withdrawn or lost."""
        return self.step not in (Step.WITHDRAWN, Step.LOST)


@dataclass(eq=False)
class Command:
    """One command's state, owned by the `CommandBook` (the coordinator reads it)."""

    id: int
    mode: RouteMode
    words: str | None
    machines: Machines[Move] = field(default_factory=lambda: Machines(LIFECYCLE))
    stages: StageTimes = field(default_factory=StageTimes)
    item: str | None = None  # the server's audio item it was routed by (by its audio)
    route: int = 0  # the route now carrying it (a command routed again gets a new one)
    held: object | None = None  # what its response asked, held for its words (listener_core's RunTools, ...)
    tools: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    said: str = ""
    apology: bool = False
    prepared: object | None = None  # provisional: its script (`said`) was given to the narrator, of this NarrationKind
    offsets: dict[str, float] = field(default_factory=dict)
    closed: bool = False

    @property
    def step(self) -> Step:
        step: Step = self.machines[Step]
        return step

    @property
    def verdict(self) -> Verdict:
        verdict: Verdict = self.machines[Verdict]
        return verdict

    @property
    def turn(self) -> Turn:
        turn: Turn = self.machines[Turn]
        return turn

    @property
    def provisional(self) -> bool:
        """Routed at a pause inside it, and the turn is not over yet."""
        return self.turn is Turn.PROVISIONAL

    def record(self) -> CommandRecord:
        return CommandRecord(
            self.id, self.mode, self.words, self.step, self.verdict, tuple(self.tools), tuple(self.results), self.said,
            self.apology, tuple(self.offsets.items()), self.turn,
        )


class CommandBook:
    """Opens commands and moves them by the table. `strict`: an illegal move raises (tests);
    otherwise it is logged and counted.
    `STRICT` is the default (tests/conftest.py sets it for every test in the process)."""

    STRICT = False

    def __init__(self, strict: bool | None = None) -> None:
        self._ids = itertools.count(1)
        self.strict = self.STRICT if strict is None else strict
        self.illegal = 0  # moves the table refused (bugs), counted
        self.opened = 0

    def open(self, mode: RouteMode, words: str | None, stages: StageTimes | None = None,
             provisional: bool = False) -> Command:
        """`provisional`: routed at a pause inside it (by its audio so far): the turn may go on."""
        command = Command(next(self._ids), mode, words, stages=stages or StageTimes())
        if mode is RouteMode.AUDIO:
            command.machines.states[Verdict] = UNHEARD
        if provisional:
            command.machines.states[Turn] = PROVISIONAL
        self.opened += 1
        return command

    def move(self, command: Command, move: Move) -> bool:
        """Fire `move`; False (and nothing moves) if the table has no row for it now."""
        try:
            command.machines.fire(move)
        except IllegalTransition:
            if self.strict:
                raise
            self.illegal += 1
            log.exception("command %d: an illegal move (a bug; the command is left as it was)", command.id)
            return False
        return True

    def allows(self, command: Command, move: Move) -> bool:
        return command.machines.allows(move)
