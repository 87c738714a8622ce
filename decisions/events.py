"""The typed events of the timeline: what happened, as data. The history, the status file, the
page and /metrics match on these classes and read their fields; the log line is one rendering
of an event (`text`), and nobody parses it back (tests/test_architecture.py checks that).

Each event names its `kind` (the timeline's `TimelineKind`, what the log line starts with) and
renders its `text`. `Note` is an event with nothing more to it than its words (a chime, the
working sound, a replay).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import ClassVar

from decisions.lifecycle import CommandRecord
from decisions.timeline_kind import TimelineKind

ROUTED_BY_AUDIO = "(routed by its audio; its words follow)"
UNADDRESSED_WORDS = "(answered before its transcript came, which did not show the wake phrase: its words are not kept)"
UNCONFIRMED_ANSWER = "(an answer said before its command's transcript came: not logged)"


class NarrationKind(enum.Enum):
    ANSWER = "answer"
    FALLBACK = "fallback"  # the model's own text, when it called no tool
    ERROR = "error"
    NOTICE = "notice"
    STATUS = "status"  # about the connection itself: no listener restart after it
    PROGRESS = "progress"  # "Still working on it.": the answer is still to come


class LossCause(enum.Enum):
    DROPPED = "dropped"  # the connection went (the network, the server)
    EXPIRED = "expired"  # the server's session time limit
    RECYCLED = "recycled"  # we closed it before that limit, at a quiet moment


@dataclass(frozen=True)
class Note:
    kind: TimelineKind
    text: str


@dataclass(frozen=True)
class Overheard:
    """An utterance not addressed to us: its words stay in memory only if LOG_OVERHEARD says so."""

    words: str
    kind: ClassVar[TimelineKind] = TimelineKind.IGNORED

    @property
    def text(self) -> str:
        return self.words


# --- a command's life (decisions.lifecycle) -----------------------------------------------------------


@dataclass(frozen=True)
class CommandRouted:
    command: CommandRecord
    kind: ClassVar[TimelineKind] = TimelineKind.COMMAND

    @property
    def text(self) -> str:
        return self.command.words if self.command.words is not None else ROUTED_BY_AUDIO


@dataclass(frozen=True)
class CommandConfirmed:
    """Its words came (after it was routed by its audio): what it asked."""

    command: CommandRecord
    kind: ClassVar[TimelineKind] = TimelineKind.CONFIRMED

    @property
    def text(self) -> str:
        return self.command.words or ""


@dataclass(frozen=True)
class AnswerKept:
    """The answer said before its command's words came, logged once they did."""

    command: CommandRecord
    kind: ClassVar[TimelineKind] = TimelineKind.SAID

    @property
    def text(self) -> str:
        return self.command.said


@dataclass(frozen=True)
class CommandWithdrawn:
    command: CommandRecord
    why: str
    kind: ClassVar[TimelineKind] = TimelineKind.WITHDRAWN

    @property
    def text(self) -> str:
        return self.why


@dataclass(frozen=True)
class CommandClosed:
    """Its life is over and nothing more will be known of it: what the history keeps."""

    command: CommandRecord
    kind: ClassVar[TimelineKind] = TimelineKind.CLOSED

    @property
    def text(self) -> str:
        return f"command {self.command.id} {self.command.step.value} ({self.command.verdict.value})"


@dataclass(frozen=True)
class ToolRan:
    command: int  # the command's id
    name: str
    arguments: str | None  # None: not logged (its command's words are not known yet)
    kind: ClassVar[TimelineKind] = TimelineKind.TOOL

    @property
    def text(self) -> str:
        return f"{self.name}({'...' if self.arguments is None else self.arguments})"


class ToolOutcome(enum.Enum):
    OK = "ok"
    FAILED = "failed"
    CRASHED = "crashed"


@dataclass(frozen=True)
class ToolFinished:
    command: int
    name: str
    outcome: ToolOutcome
    found: str  # what it found, short ("(before its transcript: not kept)" while unconfirmed)

    @property
    def kind(self) -> TimelineKind:
        return TimelineKind.ERROR if self.outcome is ToolOutcome.CRASHED else TimelineKind.RESULT

    @property
    def text(self) -> str:
        if self.outcome is ToolOutcome.CRASHED:
            return f"tool {self.name} crashed: {self.found}"
        return f"{self.name} {self.outcome.value}: {self.found}"


@dataclass(frozen=True)
class StagesMeasured:
    command: int
    offsets: dict[str, float] = field(hash=False)
    kind: ClassVar[TimelineKind] = TimelineKind.STAGES

    @property
    def text(self) -> str:
        return json.dumps(self.offsets)


# --- the voice -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NarrationStarted:
    narration: NarrationKind
    script: str
    private: bool = False  # its command's words are not known yet: the script is not logged
    kind: ClassVar[TimelineKind] = TimelineKind.NARRATING

    @property
    def text(self) -> str:
        return UNCONFIRMED_ANSWER if self.private else self.script


@dataclass(frozen=True)
class Narrated:
    narration: NarrationKind
    script: str  # what was read ("" for an answer whose command's words are not known yet)
    summary: str  # how it went ("similarity 1.00, attempts 1")
    stopped_after_s: float | None = None  # "stop" cut it after this much audio
    kind: ClassVar[TimelineKind] = TimelineKind.NARRATED

    @property
    def text(self) -> str:
        return f"{self.narration.value} ({self.summary})"


@dataclass(frozen=True)
class NarrationCut:
    phrase: str
    what: str  # the voice's state: "answer", "notice", "status"
    kind: ClassVar[TimelineKind] = TimelineKind.STOPPED

    @property
    def text(self) -> str:
        return f"{self.phrase!r}: cutting the {self.what}"


@dataclass(frozen=True)
class NarratorFailed:
    error: str
    kind: ClassVar[TimelineKind] = TimelineKind.ERROR

    @property
    def text(self) -> str:
        return f"narrator failed ({self.error}); using the local voice"


# --- the listener's connection ------------------------------------------------------------------------


@dataclass(frozen=True)
class ListenerReady:
    session: int
    kind: ClassVar[TimelineKind] = TimelineKind.LISTENING

    @property
    def text(self) -> str:
        return f"listener session {self.session} ready"


@dataclass(frozen=True)
class ListenerLost:
    cause: LossCause
    code: int | None = None

    @property
    def kind(self) -> TimelineKind:
        return TimelineKind.ERROR if self.cause is LossCause.DROPPED else TimelineKind.RESTARTING

    @property
    def text(self) -> str:
        match self.cause:
            case LossCause.DROPPED:
                return f"listener connection dropped (code {self.code}); reconnecting"
            case LossCause.EXPIRED:
                return "listener session expired; reconnecting"
            case LossCause.RECYCLED:
                return "recycling the listener session before its time limit"


@dataclass(frozen=True)
class ConnectAttemptFailed:
    attempt: int
    error: str
    kind: ClassVar[TimelineKind] = TimelineKind.ERROR

    @property
    def text(self) -> str:
        return f"listener connection attempt {self.attempt} failed: {self.error}"


@dataclass(frozen=True)
class RoutingError:
    words: str
    reason: str
    kind: ClassVar[TimelineKind] = TimelineKind.ERROR

    @property
    def text(self) -> str:
        return f"routing {self.words!r} failed: {self.reason}"


@dataclass(frozen=True)
class FatalError:
    message: str
    kind: ClassVar[TimelineKind] = TimelineKind.ERROR

    @property
    def text(self) -> str:
        return f"fatal: {self.message}"


TimelineEvent = (
    Note | Overheard | CommandRouted | CommandConfirmed | AnswerKept | CommandWithdrawn | CommandClosed | ToolRan
    | ToolFinished | StagesMeasured | NarrationStarted | Narrated | NarrationCut | NarratorFailed | ListenerReady
    | ListenerLost | ConnectAttemptFailed | RoutingError | FatalError
)
