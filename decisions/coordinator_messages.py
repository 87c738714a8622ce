"""What the coordinator's shell and core say to each other: the events the shell reports
(besides the listener's own, from `decisions.listener_core`), the actions the core returns, the
narration queue's requests, the spoken messages, and the core's clock settings."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from config.settings import FollowUp
from decisions.coordinator_table import Event
from decisions.events import ROUTED_BY_AUDIO, UNCONFIRMED_ANSWER, NarrationKind, ToolOutcome
from decisions.lifecycle import Command
from decisions.listener_core import (
    CommandCommitted, CommandConfirmed, CommandHeard, CommandRejected, ConnectFailed, Fatal, Heard, ProvisionalBilled,
    QuietChanged, RoutingFailed, RunTools, SessionEnd, SessionReady, SpeakText, TranscriptionBilled, UsageReported,
)
from realtime_api.fatal import SPOKEN, ErrorKind
from realtime_api.wire import Usage

from realtime_api.wire import FunctionCall


# --- events the shell reports (besides the listener's own, from decisions.listener_core) -----------


@dataclass(frozen=True)
class Tick:
    """The clock moved (a deadline passed, or something changed): re-evaluate."""


@dataclass(frozen=True)
class RouteSent:
    route: int
    item: str | None = None  # a route inline: the utterance (server item) it carries


@dataclass(frozen=True)
class RouteNotSent:
    route: int


@dataclass(frozen=True)
class TurnEnded:
    """The device heard the end of an utterance it heard the wake in (its own VAD's silence):
    `audio` is what was sent of it, to route inline now, before the server ends the turn."""

    audio: bytes = field(repr=False)


@dataclass(frozen=True)
class TurnPaused:
    """A pause inside an utterance the device heard the wake in, after a command's worth of speech
    (`PROVISIONAL_MS` of silence, less than the turn end): it may be the end. `audio`: what was
    sent of it so far, routed provisionally (issue 33)."""

    audio: bytes = field(repr=False)


@dataclass(frozen=True)
class SpeechResumed:
    """The user went on talking after a `TurnPaused` (or the turn was dropped): the provisional
    route is withdrawn; the whole utterance is routed at its end."""


@dataclass(frozen=True)
class ReadAheadBilled:
    """What the narrator used for an answer read ahead for a provisional route that was withdrawn
    (its narration dropped: those tokens bought nothing)."""

    usage: Usage


@dataclass(frozen=True)
class RouteWithdrawn:
    """A route by audio was not sent: the utterance's transcript came first (it is routed by its
    words instead, from the queue)."""

    route: int


@dataclass(frozen=True)
class ToolsFinished:
    route: int
    scripts: tuple[str, ...]


@dataclass(frozen=True)
class NarrationDone:
    request: NarrationRequest
    summary: str  # how it went, for the timeline ("similarity 1.00, attempts 1")
    first_audio_at: float | None = None  # the clock when its first audio went to the speaker
    stopped_after_s: float | None = None  # "stop" cut it, after this much of its audio
    ready_after_s: float | None = None  # the narrator's first audio came this long after it was asked (read ahead or not)


@dataclass(frozen=True)
class ToolStarted:
    """The shell starts one of a command's calls (`arguments` as the model gave them)."""

    command: int
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolNeedsYes:
    """A call the shell ran answered that it needs a spoken yes first (a tool the brain picked:
    `use_device`): `call` is what runs after the yes, `question` what is asked."""

    command: int
    call: FunctionCall
    question: str


@dataclass(frozen=True)
class ToolDone:
    command: int
    name: str
    outcome: ToolOutcome
    found: str  # what it found, short (or the exception's class, when it crashed)


@dataclass(frozen=True)
class NarrationsFinished:
    """The narration worker found nothing more to say and let go of the voice."""


class Earcon(enum.Enum):
    WAKE = "wake"  # the wake phrase alone: say the command
    FOLLOW_UP = "follow-up"  # an answer was said: a follow-up needs no wake phrase for a moment


@dataclass(frozen=True)
class ChimeStarted:
    pass


@dataclass(frozen=True)
class ChimeFinished:
    earcon: Earcon


@dataclass(frozen=True)
class StopHeard:
    """The on-device stop detector heard "computer, stop" (or another stop word) on the microphone."""

    phrase: str


@dataclass(frozen=True)
class NoticesPending:
    pass


@dataclass(frozen=True)
class NoticeBatchFetched:
    ids: tuple[int, ...]
    script: str  # empty when there was nothing to say after all


@dataclass(frozen=True)
class InputEnded:
    """A finite microphone (a WAV file) ended: finish what it said, then stop."""


@dataclass(frozen=True)
class AudioHeard:
    """The listener session confirmed it has taken in the audio sent to it (`sent`: the uplink's
    chunks sent when it was asked); `sent` None: the session went away before it answered."""

    sent: int | None


@dataclass(frozen=True)
class DeviceFailed:
    message: str


CoordinatorEvent = (
    SessionReady | SessionEnd | ConnectFailed | QuietChanged | Heard | CommandHeard | RunTools | SpeakText
    | UsageReported | TranscriptionBilled
    | RoutingFailed | Fatal | Tick | RouteSent | RouteNotSent | RouteWithdrawn | TurnEnded | TurnPaused | SpeechResumed
    | ProvisionalBilled | ReadAheadBilled
    | CommandCommitted | CommandConfirmed | CommandRejected | ToolsFinished | NarrationDone | NarrationsFinished
    | ChimeStarted | ChimeFinished | StopHeard | NoticesPending | NoticeBatchFetched | InputEnded | DeviceFailed
    | AudioHeard | ToolStarted | ToolDone | ToolNeedsYes
)


# --- actions the shell carries out ----------------------------------------------------------------


@dataclass(frozen=True)
class SendRoute:
    route: int
    command: str  # "" when routed by its audio (`item`), before its transcript
    item: str | None = None  # the committed audio item, routed by reference
    audio: bytes | None = field(default=None, repr=False)  # or the utterance's audio, inline (the device's end of turn)
    provisional: bool = False  # sent at a pause inside it, with its audio so far (`WithdrawRoute` may follow)


@dataclass(frozen=True)
class WithdrawRoute:
    """The user went on after the pause the provisional route was sent at: cancel its response
    (the listener core ignores it when it comes) and make its utterance routable again, whole."""


@dataclass(frozen=True)
class PrepareNarration:
    """A provisional command's answer is ready: the narrator reads it now, into a held speaker;
    nothing of it plays until its `NarrationRequest` is queued (the turn end confirmed it)."""

    command_id: int
    script: str


@dataclass(frozen=True)
class SetPause:
    """Send routes provisionally after this much of a pause from now on (decisions.pause_point)."""

    seconds: float


@dataclass(frozen=True)
class DropNarration:
    """A prepared answer's command was withdrawn: stop reading it, and play none of it."""

    command_id: int


@dataclass(frozen=True)
class StartTools:
    route: int
    command: str
    calls: tuple[FunctionCall, ...]
    session: int
    # Read-only calls of a route by audio before its transcript: it may have been overheard (a
    # false local wake), so their arguments and results are neither logged nor kept.
    unconfirmed: bool = False
    confirmed: bool = False  # the user said yes to these calls (tools.registry run_confirmed)
    command_id: int = field(default=0, compare=False)  # the command's id (decisions.lifecycle), for the tools' events


@dataclass(frozen=True)
class AbandonRoute:
    """Tell the listener to stop waiting for the route's response (it is not routed again)."""


@dataclass(frozen=True)
class RestartListener:
    reason: str


@dataclass(frozen=True)
class PlayChime:
    earcon: Earcon


@dataclass(frozen=True)
class CutNarration:
    """Cut what is being said now: stop the narrator's response, flush the speaker, and say
    nothing more of that script (the narration worker then lets go of the voice)."""

    phrase: str


@dataclass(frozen=True)
class FetchNotices:
    pass


@dataclass(frozen=True)
class UtteranceRejected:
    """The transcript gate ignored an utterance: the microphone's upload filter closes a command
    window that a false on-device wake opened (nothing more of the room goes up for it)."""


@dataclass(frozen=True)
class ConfirmHeard:
    """Ask the listener session whether it has taken in all the audio sent to it (a finished
    file is done only once the server heard all of it, however late the server runs)."""

    sent: int  # the uplink's chunks sent so far


@dataclass(frozen=True)
class CommandTaken:
    """The transcript gate took an utterance as a command: the microphone's upload filter lets the
    command window its wake opened lapse with the answer's mute (speech after an answer stays
    home unless the answer asked something)."""


@dataclass(frozen=True)
class OpenFollowUp:
    """An answer invited a follow-up: the microphone's upload filter lets the next utterance
    within `seconds` go up without an on-device wake (nothing else after an answer does)."""

    seconds: float


@dataclass(frozen=True)
class AckNotices:
    ids: tuple[int, ...]


@dataclass(frozen=True)
class PrepareTools:
    """Calls held for their command's words (its turn over): start what they may do before they
    run and that changes nothing (tools.registry `prepare`: the brain's pick behind `use_device`)."""

    calls: tuple[FunctionCall, ...]


@dataclass(frozen=True)
class Stop:
    """Stop the assistant: `message` (when set) is said in the local voice first."""

    exit_code: int
    message: str | None


Action = (
    SendRoute | StartTools | AbandonRoute | RestartListener | PlayChime | CutNarration | FetchNotices | AckNotices | Stop
    | UtteranceRejected | ConfirmHeard | OpenFollowUp | CommandTaken | WithdrawRoute | PrepareNarration | DropNarration
    | SetPause | PrepareTools
)


# --- narration requests ----------------------------------------------------------------------------


class Priority(enum.IntEnum):
    ANSWER = 0  # answers to commands first
    STATUS = 1  # then what we have to say about the connection
    NOTICE = 2


@dataclass(order=True, frozen=True)
class NarrationRequest:
    priority: Priority
    seq: int
    script: str = field(compare=False)
    kind: NarrationKind = field(compare=False)
    notice_ids: tuple[int, ...] = field(default=(), compare=False)
    command: Command | None = field(default=None, compare=False)  # the command it answers, if any


def asks_the_user(script: str) -> bool:
    """The script ends with a question (closing quotes and brackets aside): the user is invited
    to answer without the wake phrase."""
    return script.rstrip().rstrip("\"'”’)]").endswith("?")


CONNECTION_LOST_MESSAGE = "I lost my connection for a moment. I'm listening again."
CANNOT_CONNECT_MESSAGE = "I can't reach OpenAI right now. I'll keep trying and tell you when I'm back."
RECONNECTED_MESSAGE = "I'm connected again."
RATE_LIMITED_MESSAGE = SPOKEN[ErrorKind.RATE_LIMITED]
DECLINED_MESSAGE = "Okay, I won't."
ROUTING_FAILED_MESSAGE = "Sorry, I couldn't work out what to do with that. Please say it again."
STILL_WORKING_MESSAGE = "Still working on it."
COST_LOG_EVERY_S = 3600.0  # the cost line in the log, hourly
BUDGET_REACHED_MESSAGE = (
    "I've used today's budget for OpenAI, so I'll stop listening until midnight. "
    "Raise DAILY_BUDGET_USD if you need me sooner."
)
UNPROMPTED = frozenset({NarrationKind.STATUS, NarrationKind.PROGRESS})  # nobody asked for these just now
_STARTED_EVENT = {  # what starting to say each kind does to the voice machine
    NarrationKind.STATUS: Event.STATUS_STARTED,
    NarrationKind.PROGRESS: Event.STATUS_STARTED,
    NarrationKind.NOTICE: Event.NOTICE_STARTED,
    NarrationKind.ANSWER: Event.ANSWER_STARTED,
    NarrationKind.FALLBACK: Event.ANSWER_STARTED,
    NarrationKind.ERROR: Event.ANSWER_STARTED,
}


@dataclass(frozen=True)
class CoordinatorTimings:
    """The coordinator's clock settings (seconds). Tests pass milliseconds."""

    route_timeout_s: float = 30.0
    recycle_after_s: float = 55 * 60.0
    healthy_after_s: float = 30.0
    announce_after_failures: int = 3
    settle_quiet_s: float = 1.5  # a finished input is done after this long with nothing going on
    chunk_ms: int = 20
    chime: bool = True
    follow_up_s: float = 6.0  # 0: no follow-up window
    follow_up: FollowUp = FollowUp.INVITED  # after which answers the window opens
    working_after_s: float = 1.0
    still_working_after_s: float = 8.0
    notices_after_stop_s: float = 5.0  # after "computer, stop", a notice waits this long (the user asked for quiet)
    route_at_commit: bool = True  # route an utterance the device heard the wake in at its commit, by its audio
    turn_end_s: float = 0.0  # the device's own end of turn (its silence), when it ends turns
    provisional_s: float = 0.0  # the pause inside a woken turn a provisional route is sent at (0: none)
    provisional_budget: float | None = None  # the extra routing share withdrawn ones may add (None: unbounded)
    yes_grace_s: float = 4.0  # after the follow-up window, how long a reply begun in it may take to be heard

    @classmethod
    def from_settings(cls, settings: Any, chime: bool) -> CoordinatorTimings:
        return cls(
            route_timeout_s=settings.listener.route_timeout_s,
            recycle_after_s=settings.listener.recycle_after_s,
            healthy_after_s=settings.reconnect.healthy_after_s,
            announce_after_failures=settings.reconnect.announce_after_failures,
            settle_quiet_s=settings.listener.vad_silence_ms / 1000 + 1.0,
            chunk_ms=settings.audio.chunk_ms,
            chime=chime,
            follow_up_s=settings.conversation.follow_up_s,
            follow_up=settings.conversation.follow_up,
            working_after_s=settings.conversation.working_sound_after_s,
            still_working_after_s=settings.conversation.still_working_after_s,
            notices_after_stop_s=settings.stop.notices_after_s,
            route_at_commit=settings.listener.route_at_commit,
            turn_end_s=settings.listener.turn_end_ms / 1000,
            provisional_s=settings.listener.provisional_ms / 1000,
            provisional_budget=settings.listener.provisional_token_budget / 100,
        )
