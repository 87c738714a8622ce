"""The coordinator's decisions: a synchronous core fed typed events, returning actions.

The async shell (`handoff.Coordinator`) does the I/O: it feeds every listener event, finished
route, tool run, narration and clock tick to `CoordinatorCore.handle` and carries out the actions
that come back. The core never waits; it says when it next needs the clock (`next_deadline`), and
the shell sleeps until then or until something changes. Nothing here polls.

The state is eight small machines, each an Enum, and `TRANSITIONS` is the one table of every legal
move, keyed by (state, event). An event moves every machine that has a row for it; if one of those
machines is in a state with no row for the event, `IllegalTransition` is raised and nothing moves.
The phase logged and shown to people (listening, routing, narrating, restarting) is derived from
them.
"""

from __future__ import annotations

import dataclasses
import enum
import heapq
import itertools
import json
import logging
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from config.settings import FollowUp
from decisions.errors import IllegalTransition
from decisions.cost import CostMeter, RealtimeRole
from decisions.listener_core import (
    CommandCommitted, CommandConfirmed, CommandRejected, Stages,
    CommandHeard, ConnectFailed, Fatal, Heard, QuietChanged, RoutingFailed, RunTools, SessionEnd, SessionReady, SpeakText,
    TranscriptionBilled, UsageReported,
)
from decisions.mute import MuteHolders
from decisions.stages import Stage, StageTimes
from decisions.timeline import Timeline, TimelineKind
from decisions.uplink import Uplink
from decisions.wake_gate import Command, Ignore, WakeGate, WakeOnly
from realtime_api.fatal import SPOKEN, ErrorKind

if TYPE_CHECKING:
    from realtime_api.wire import FunctionCall

log = logging.getLogger("handoff.coordinator")


# --- the machines --------------------------------------------------------------------------------


class ListenerState(enum.Enum):
    DOWN = "down"  # no configured session (connecting, or reconnecting)
    UP = "up"  # a configured session takes our audio
    CLOSING = "closing"  # we asked for a fresh session; this one takes nothing more


class VoiceState(enum.Enum):
    QUIET = "quiet"
    CHIME = "chime"  # the wake chime plays
    STATUS = "status"  # only messages about the connection so far: the listener carries on after
    NOTICE = "notice"  # a notice was said: a clean listener restart follows
    ANSWER = "answer"  # an answer to a command was said: a restart follows, and a follow-up window
    CUT = "cut"  # "computer, stop": the narration is being cut; a restart follows, no follow-up window


class RouteState(enum.Enum):
    IDLE = "idle"
    SENDING = "sending"  # the command is on its way to the listener session
    AWAITING_RESPONSE = "awaiting response"  # the route watchdog runs
    RUNNING_TOOLS = "running tools"


class AnnounceState(enum.Enum):
    NOTHING_SAID = "nothing said"
    TROUBLE = "trouble announced"  # "I can't reach OpenAI right now" was said
    CONFIRMING = "confirming"  # a session is up; "connected again" once it proves healthy


class WorkingState(enum.Enum):
    """Whether the user hears that a command is being worked on."""

    IDLE = "idle"  # no command waits for its answer
    WAITING = "waiting"  # routed; the answer may well come before the working sound is due
    PLAYING = "playing"  # the working sound plays (between narrations)
    TOLD = "told"  # "Still working on it." was said once; the sound plays on


class BudgetState(enum.Enum):
    WITHIN = "within"  # no budget, or today's spend is below it
    PAUSED = "paused"  # today's budget is spent: nothing is uploaded until the next local day


class NoticeState(enum.Enum):
    NONE = "none"
    PENDING = "pending"  # notices wait for an idle moment
    FETCHING = "fetching"
    QUEUED = "queued"  # a batch is queued or being narrated; acknowledged when said


class LifeState(enum.Enum):
    RUNNING = "running"
    FINISHING = "finishing"  # a finite microphone ended: settle, then stop
    STOPPING = "stopping"  # a fatal error


class Event(enum.Enum):
    LISTENER_READY = "listener_ready"
    LISTENER_LOST = "listener_lost"
    RESTART_REQUESTED = "restart_requested"
    CHIME_STARTED = "chime_started"
    CHIME_FINISHED = "chime_finished"
    STATUS_STARTED = "status_started"
    NOTICE_STARTED = "notice_started"
    ANSWER_STARTED = "answer_started"
    NARRATIONS_FINISHED = "narrations_finished"
    STOP_HEARD = "stop_heard"  # the on-device detector heard the wake phrase and a stop word
    COMMAND_ROUTED = "command_routed"
    ROUTE_SENT = "route_sent"
    ROUTE_NOT_SENT = "route_not_sent"
    ROUTE_INTERRUPTED = "route_interrupted"
    TOOLS_REQUESTED = "tools_requested"
    ROUTE_ANSWERED = "route_answered"  # text instead of a call, or the route failed
    ROUTE_TIMED_OUT = "route_timed_out"
    TOOLS_FINISHED = "tools_finished"
    ROUTE_CANCELLED = "route_cancelled"  # routed by its audio, and its transcript says it was not addressed
    WORKING_DUE = "working_due"
    STILL_WORKING_DUE = "still_working_due"
    BUDGET_REACHED = "budget_reached"
    NEW_DAY = "new_day"
    TROUBLE_ANNOUNCED = "trouble_announced"
    HEALTHY = "healthy"
    NOTICES_PENDING = "notices_pending"
    NOTICES_FETCH = "notices_fetch"
    NOTICES_NONE = "notices_none"
    NOTICES_QUEUED = "notices_queued"
    NOTICES_NARRATED = "notices_narrated"
    NOTICES_REQUEUED = "notices_requeued"  # a stop cut the narration before a queued batch was said
    INPUT_ENDED = "input_ended"
    FATAL = "fatal"


LD, LU, LC = ListenerState.DOWN, ListenerState.UP, ListenerState.CLOSING
VQ, VC, VS, VA = VoiceState.QUIET, VoiceState.CHIME, VoiceState.STATUS, VoiceState.ANSWER
VN, VX = VoiceState.NOTICE, VoiceState.CUT
WI, WW, WP, WT = WorkingState.IDLE, WorkingState.WAITING, WorkingState.PLAYING, WorkingState.TOLD
BW, BP = BudgetState.WITHIN, BudgetState.PAUSED
RI, RS, RA, RT = RouteState.IDLE, RouteState.SENDING, RouteState.AWAITING_RESPONSE, RouteState.RUNNING_TOOLS
AN, AT, AC = AnnounceState.NOTHING_SAID, AnnounceState.TROUBLE, AnnounceState.CONFIRMING
NN, NP, NF, NQ = NoticeState.NONE, NoticeState.PENDING, NoticeState.FETCHING, NoticeState.QUEUED
XR, XF, XS = LifeState.RUNNING, LifeState.FINISHING, LifeState.STOPPING
E = Event

# (state, event) -> next state, for every machine. Anything not listed is a bug and raises.
TRANSITIONS: dict[tuple[enum.Enum, Event], enum.Enum] = {
    # the listener session
    (LD, E.LISTENER_READY): LU,
    (LU, E.LISTENER_LOST): LD,  # drop, expiry
    (LC, E.LISTENER_LOST): LD,  # the close we asked for
    (LD, E.LISTENER_LOST): LD,  # its end was already evident (a route it could not take)
    (LU, E.RESTART_REQUESTED): LC,  # after an answer, a recycle, an abandoned route
    (LU, E.ROUTE_NOT_SENT): LD,  # the session is gone: nothing more goes to it
    (LC, E.ROUTE_NOT_SENT): LD,
    (LD, E.ROUTE_NOT_SENT): LD,
    # the one voice (the reader lock serialises these in the shell)
    (VQ, E.CHIME_STARTED): VC,
    (VC, E.CHIME_FINISHED): VQ,
    (VQ, E.STATUS_STARTED): VS,
    (VS, E.STATUS_STARTED): VS,
    (VN, E.STATUS_STARTED): VN,
    (VA, E.STATUS_STARTED): VA,
    (VQ, E.NOTICE_STARTED): VN,
    (VS, E.NOTICE_STARTED): VN,
    (VN, E.NOTICE_STARTED): VN,
    (VA, E.NOTICE_STARTED): VA,
    (VQ, E.ANSWER_STARTED): VA,
    (VS, E.ANSWER_STARTED): VA,
    (VN, E.ANSWER_STARTED): VA,
    (VA, E.ANSWER_STARTED): VA,
    (VS, E.NARRATIONS_FINISHED): VQ,  # the listener carries on
    (VN, E.NARRATIONS_FINISHED): VQ,  # a clean listener restart follows
    (VA, E.NARRATIONS_FINISHED): VQ,  # a restart, and the follow-up window opens
    (VX, E.NARRATIONS_FINISHED): VQ,  # a stop cut it: a restart, no follow-up window
    # "computer, stop" while it talks: what is being said is cut; anything else is ignored
    (VS, E.STOP_HEARD): VX,
    (VN, E.STOP_HEARD): VX,
    (VA, E.STOP_HEARD): VX,
    (VX, E.STOP_HEARD): VX,  # said twice, or heard again in the echo of the first: cut once
    (VQ, E.STOP_HEARD): VQ,  # nothing is being said (the narration just ended): ignored
    (VC, E.STOP_HEARD): VC,  # an earcon is no narration: ignored
    # hearing it work: a sound while an answer is late, one spoken line when a tool is slow
    (WI, E.COMMAND_ROUTED): WW,
    (WW, E.COMMAND_ROUTED): WW,  # routed again after a lost session: still the same wait
    (WP, E.COMMAND_ROUTED): WP,
    (WT, E.COMMAND_ROUTED): WT,
    (WW, E.WORKING_DUE): WP,
    (WW, E.STILL_WORKING_DUE): WT,
    (WP, E.STILL_WORKING_DUE): WT,
    (WI, E.ANSWER_STARTED): WI,
    (WW, E.ANSWER_STARTED): WI,
    (WP, E.ANSWER_STARTED): WI,
    (WT, E.ANSWER_STARTED): WI,
    (WI, E.ROUTE_CANCELLED): WI,  # no answer is coming: nothing to wait for
    (WW, E.ROUTE_CANCELLED): WI,
    (WP, E.ROUTE_CANCELLED): WI,
    (WT, E.ROUTE_CANCELLED): WI,
    # the command being routed (one at a time; others wait in order)
    (RI, E.COMMAND_ROUTED): RS,
    (RS, E.ROUTE_SENT): RA,
    (RS, E.ROUTE_NOT_SENT): RI,  # the session vanished first: the command waits for the next
    (RS, E.ROUTE_INTERRUPTED): RI,  # lost with the session before its response: routed again
    (RA, E.ROUTE_INTERRUPTED): RI,
    (RS, E.TOOLS_REQUESTED): RT,  # a fast response can beat the send's own completion
    (RA, E.TOOLS_REQUESTED): RT,
    (RS, E.ROUTE_ANSWERED): RI,
    (RA, E.ROUTE_ANSWERED): RI,
    (RS, E.ROUTE_TIMED_OUT): RI,  # the watchdog is armed before the send: a send that hangs is caught too
    (RA, E.ROUTE_TIMED_OUT): RI,  # abandoned: apology, fresh session, not routed again
    (RT, E.TOOLS_FINISHED): RI,  # the answer is queued for the narrator
    # routed by its audio at the commit, and its transcript says it was not addressed: cancelled,
    # nothing acts (read-only tools that already ran: their answer is not said)
    (RS, E.ROUTE_CANCELLED): RI,
    (RA, E.ROUTE_CANCELLED): RI,
    (RT, E.ROUTE_CANCELLED): RI,
    # the daily budget (said once each way)
    (BW, E.BUDGET_REACHED): BP,
    (BP, E.NEW_DAY): BW,
    # what the user was told about the connection
    (AN, E.TROUBLE_ANNOUNCED): AT,
    (AN, E.LISTENER_READY): AN,
    (AN, E.LISTENER_LOST): AN,
    (AT, E.LISTENER_READY): AC,
    (AC, E.LISTENER_LOST): AT,  # it did not last: still in trouble
    (AC, E.HEALTHY): AN,  # "I'm connected again."
    # background-task notices (exactly once: acknowledged only after they were said)
    (NN, E.NOTICES_PENDING): NP,
    (NP, E.NOTICES_FETCH): NF,
    (NF, E.NOTICES_NONE): NN,
    (NF, E.NOTICES_QUEUED): NQ,
    (NQ, E.NOTICES_NARRATED): NN,
    (NQ, E.NOTICES_REQUEUED): NP,  # not said, not acknowledged: fetched again at the next idle moment
    # the process
    (XR, E.INPUT_ENDED): XF,
    (XR, E.FATAL): XS,
    (XF, E.FATAL): XS,
    (XS, E.FATAL): XS,  # the first reason wins
}

MACHINES: tuple[type[enum.Enum], ...] = (
    ListenerState, VoiceState, RouteState, WorkingState, BudgetState, AnnounceState, NoticeState, LifeState,
)
INITIAL: dict[type[enum.Enum], enum.Enum] = {
    ListenerState: LD, VoiceState: VQ, RouteState: RI, WorkingState: WI, BudgetState: BW, AnnounceState: AN,
    NoticeState: NN,
    LifeState: XR,
}
# Which machines an event moves, derived from the table.
EVENT_MACHINES: dict[Event, frozenset[type[enum.Enum]]] = {
    event: frozenset(type(state) for (state, ev) in TRANSITIONS if ev is event) for event in Event
}


class Phase(enum.Enum):
    """What people see in the log: derived from the machines, never set directly."""

    LISTENING = "listening"
    ROUTING = "routing"
    NARRATING = "narrating"
    RESTARTING = "restarting"
    STOPPING = "stopping"


class Machines:
    """The machines and the table. `fire` moves all that an event concerns, or none."""

    def __init__(self, states: dict[type[enum.Enum], enum.Enum] | None = None) -> None:
        self.states = dict(INITIAL if states is None else states)

    def __getitem__(self, machine: type[enum.Enum]) -> Any:
        return self.states[machine]

    def fire(self, event: Event) -> None:
        moves = {}
        for machine in EVENT_MACHINES[event]:
            current = self.states[machine]
            try:
                moves[machine] = TRANSITIONS[(current, event)]
            except KeyError:
                raise IllegalTransition(f"{event.value!r} is not allowed while {machine.__name__} is {current.value}") from None
        self.states.update(moves)

    @property
    def phase(self) -> Phase:
        if self.states[LifeState] is XS:
            return Phase.STOPPING
        if self.states[VoiceState] in (VS, VN, VA, VX):
            return Phase.NARRATING
        if self.states[ListenerState] is not LU:
            return Phase.RESTARTING
        if self.states[RouteState] is not RI:
            return Phase.ROUTING
        return Phase.LISTENING


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
    | RoutingFailed | Fatal | Tick | RouteSent | RouteNotSent | RouteWithdrawn | TurnEnded
    | CommandCommitted | CommandConfirmed | CommandRejected | ToolsFinished | NarrationDone | NarrationsFinished
    | ChimeStarted | ChimeFinished | StopHeard | NoticesPending | NoticeBatchFetched | InputEnded | DeviceFailed
    | AudioHeard
)


# --- actions the shell carries out ----------------------------------------------------------------


@dataclass(frozen=True)
class SendRoute:
    route: int
    command: str  # "" when routed by its audio (`item`), before its transcript
    item: str | None = None  # the committed audio item, routed by reference
    audio: bytes | None = field(default=None, repr=False)  # or the utterance's audio, inline (the device's end of turn)


@dataclass(frozen=True)
class StartTools:
    route: int
    command: str
    calls: tuple[FunctionCall, ...]
    session: int
    # Read-only calls of a route by audio before its transcript: it may have been overheard (a
    # false local wake), so their arguments and results are neither logged nor kept.
    unconfirmed: bool = False


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
class Stop:
    """Stop the assistant: `message` (when set) is said in the local voice first."""

    exit_code: int
    message: str | None


Action = (
    SendRoute | StartTools | AbandonRoute | RestartListener | PlayChime | CutNarration | FetchNotices | AckNotices | Stop
    | UtteranceRejected | ConfirmHeard | OpenFollowUp | CommandTaken
)


# --- narration requests ----------------------------------------------------------------------------


class NarrationKind(enum.Enum):
    ANSWER = "answer"
    FALLBACK = "fallback"  # the model's own text, when it called no tool
    ERROR = "error"
    NOTICE = "notice"
    STATUS = "status"  # about the connection itself: no listener restart after it
    PROGRESS = "progress"  # "Still working on it.": the answer is still to come


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
    stages: StageTimes | None = field(default=None, compare=False)  # the command it answers


def asks_the_user(script: str) -> bool:
    """The script ends with a question (closing quotes and brackets aside): the user is invited
    to answer without the wake phrase."""
    return script.rstrip().rstrip("\"'”’)]").endswith("?")


ROUTED_BY_AUDIO = "(routed by its audio; its words follow)"
UNCONFIRMED_ANSWER = "(an answer said before its command's transcript came: not logged)"
CONNECTION_LOST_MESSAGE = "I lost my connection for a moment. I'm listening again."
CANNOT_CONNECT_MESSAGE = "I can't reach OpenAI right now. I'll keep trying and tell you when I'm back."
RECONNECTED_MESSAGE = "I'm connected again."
RATE_LIMITED_MESSAGE = SPOKEN[ErrorKind.RATE_LIMITED]
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
EXECUTED_CALLS_KEPT = 1000  # call ids remembered so none runs twice; ids are unique per response


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
        )


# --- the core --------------------------------------------------------------------------------------


class CoordinatorCore:
    def __init__(
        self,
        timings: CoordinatorTimings,
        gate: WakeGate,
        timeline: Timeline,
        uplink: Uplink,
        clock: Callable[[], float],
        on_mute_change: Callable[[], None] = lambda: None,
        cost: CostMeter | None = None,
        read_only_tools: frozenset[str] = frozenset(),
    ) -> None:
        """`read_only_tools`: the tools that only read (tools.registry Effect.READS): they may run
        before the transcript confirms a command routed by its audio; any other waits for it."""
        self.timings = timings
        self.read_only_tools = read_only_tools
        self.gate = gate
        self.timeline = timeline
        self.uplink = uplink
        self._clock = clock
        self.mute = MuteHolders(clock=clock, on_change=on_mute_change)
        self.machines = Machines()
        self.revision = 0  # bumped on every change the shell's waiters may care about
        self._pending: deque[str] = deque()
        self._narrations: list[NarrationRequest] = []
        self._seq = itertools.count()
        self._routes = itertools.count(1)
        self._route: tuple[int, str] | None = None  # (id, command) while RouteState is not IDLE
        # A route by audio (at the commit): its item, whether its transcript confirmed it, what
        # waits for that verdict (a call that acts, the model's text, a failure), and whether it
        # was not addressed after all while read-only tools ran.
        self._route_item: str | None = None
        self._route_confirmed = False
        self._held: RunTools | SpeakText | RoutingFailed | None = None
        self._route_rejected = False
        self._stages: StageTimes | None = None  # the command being routed
        self._pending_stages: dict[str, Stages] = {}  # commands waiting, by their words
        self.stage_log: deque[dict[str, float]] = deque(maxlen=200)  # the latest commands' stage offsets
        # (item, narration seq, script): an answer to a command whose transcript has not come yet
        self._private_answer: tuple[str | None, int, str] | None = None
        self._route_deadline: float | None = None
        self._routed_at = 0.0  # when the command now waiting for its answer was first routed
        self._tools_at = 0.0  # when its tools started
        self._executed_calls: OrderedDict[str, None] = OrderedDict()
        self._session = 0
        self._session_ready_at = 0.0
        self._confirm_at: float | None = None
        self._listener_quiet = True
        # The mute's release count when the utterance in progress began (None: it began muted).
        self._speech_began_at_release: int | None = None
        self._idle_since: float | None = None
        # A finished file: the uplink's chunks the listener session confirmed it took in, and
        # whether a confirmation is being asked for.
        self._heard_through = 0
        self._confirming = False
        self.fatal_message: str | None = None
        self.cost = cost  # what the API says it used, priced; None: not counted
        self._cost_log_at = clock() + COST_LOG_EVERY_S
        self._budget_resume_at = 0.0  # when a paused budget may start again (the next local day)
        self._notices_after = 0.0  # a stop asked for quiet: no notice is fetched before this
        self.stops = 0  # narrations cut by "computer, stop"
        self._asked = False  # the answer being said asks the user something: it invites a follow-up

    # -- what the shell reads ---------------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        return self.machines.phase

    @property
    def listener_up(self) -> bool:
        return self.machines[ListenerState] is LU

    @property
    def session(self) -> int:
        """The number of the latest listener session that became ready (0: none yet)."""
        return self._session

    @property
    def finishing(self) -> bool:
        return self.machines[LifeState] is XF

    @property
    def uploads_paused(self) -> bool:
        """Today's budget is spent: the microphone stays home until tomorrow."""
        return self.machines[BudgetState] is BP

    @property
    def restart_owed(self) -> bool:
        """What is being said will end in a fresh listener session (an answer, a notice, a cut)."""
        return self.machines[VoiceState] in (VA, VN, VX)

    @property
    def working_sound_on(self) -> bool:
        """The working sound should play now (a command's answer is late; nothing is being said)."""
        return self.machines[WorkingState] in (WP, WT) and self.machines[VoiceState] is VQ

    @property
    def narrating(self) -> bool:
        """A narration is being said (the stop detector listens only now)."""
        return self.machines[VoiceState] in (VS, VN, VA)

    @property
    def narration_waiting(self) -> bool:
        """A narration may start now."""
        return bool(self._narrations) and self._may_start(self._narrations[0])

    def _may_start(self, request: NarrationRequest) -> bool:
        # Nobody asked for a message about the connection: it waits until whoever is talking has
        # finished (its mute would cut them off). Answers were asked for; notices wait for idle.
        return request.kind not in UNPROMPTED or not self.listener_up or self._listener_quiet

    @property
    def notices_settled(self) -> bool:
        """No notice batch under way: the feeder may wait for the next one."""
        return self.machines[NoticeState] is NN

    @property
    def stopping(self) -> bool:
        return self.machines[LifeState] is XS

    def idle(self, now: float) -> bool:
        """Nothing heard, said, routed or about to be: the moment a notice may speak."""
        m = self.machines
        return (
            m[ListenerState] is LU
            and m[VoiceState] is VQ
            and m[RouteState] is RI
            and not self._pending
            and not self._narrations
            and self._listener_quiet  # nobody mid-sentence, no transcript pending
            and not self.gate.window_open_at(now)  # nor a command about to come
        )

    @property
    def speech_began_unmuted(self) -> bool:
        """The user is mid-utterance and no mute has cut it: it began after the last mute ended.
        A handover sends such an utterance whole to the next session; one cut by a narration's
        mute is a fragment, dropped."""
        return (not self._listener_quiet and not self.mute.muted
                and self._speech_began_at_release == self.mute.releases)

    def next_deadline(self, now: float) -> float | None:
        """When the core next needs a Tick even if nothing else happens (None: only on a change).
        Deadlines that passed but wait on a condition (recycle waits for quiet) are not repeated."""
        candidates = [
            self._route_deadline if self.machines[RouteState] in (RS, RA) else None,
            self.gate.window_until,
            self._session_ready_at + self.timings.recycle_after_s if self.listener_up else None,
            self._confirm_at if self.machines[AnnounceState] is AC else None,
            self._cost_log_at if self.cost is not None else None,
            self._notices_after if self.machines[NoticeState] is NP else None,
            self._budget_resume_at if self.machines[BudgetState] is BP else None,
            self._routed_at + self.timings.working_after_s if self.machines[WorkingState] is WW else None,
            self._tools_at + self.timings.still_working_after_s
            if self.machines[RouteState] is RT and self.machines[WorkingState] in (WW, WP) else None,
            self._idle_since + self.timings.settle_quiet_s
            if self.machines[LifeState] is XF and self._idle_since is not None else None,
        ]
        future = [d for d in candidates if d is not None and d > now]
        return min(future) if future else None

    # -- the one entry point ----------------------------------------------------------------------
    def handle(self, event: CoordinatorEvent) -> list[Action]:
        now = self._clock()
        actions: list[Action] = []
        before = (dict(self.machines.states), len(self._narrations), len(self._pending), self._listener_quiet)
        match event:
            case SessionReady(session=session):
                self._listener_ready(session, now)
            case SessionEnd():
                self._listener_lost(event)
            case ConnectFailed(attempt=attempt, error=error, rate_limited=rate_limited):
                self._connect_failed(attempt, error, rate_limited)
            case QuietChanged(quiet=quiet):
                self._listener_quiet = quiet
                if not quiet:
                    self._speech_began_at_release = None if self.mute.muted else self.mute.releases
            case UsageReported(usage=usage):
                if self.cost is not None:
                    self.cost.response_usage(RealtimeRole.LISTENER, usage)
            case TranscriptionBilled(seconds=seconds):
                if self.cost is not None:
                    self.cost.transcription(seconds)
            case Heard(transcript=transcript, decision=decision):
                actions += self._heard(transcript, decision)
            case CommandHeard(text=text, stages=marks):
                self._pending.append(text)
                self._pending_stages[text] = marks
                while len(self._pending_stages) > 50:  # (commands routed long ago)
                    self._pending_stages.pop(next(iter(self._pending_stages)))
            case CommandCommitted(item_id=item, stages=marks):
                actions += self._route_by_audio(item, marks, now)
            case TurnEnded(audio=audio):
                actions += self._route_by_audio(None, ((Stage.END_OF_SPEECH, now - self.timings.turn_end_s),), now,
                                                audio)
            case CommandConfirmed(item_id=item, text=text, stages=marks):
                actions += self._confirmed(item, text, marks)
            case CommandRejected(item_id=item, transcript=transcript):
                actions += self._rejected(item, transcript)
            case RunTools() | SpeakText() | RoutingFailed():
                if self._stages is not None and self._route is not None:
                    self._stages.mark(Stage.CALL_RECEIVED, now)
                if self._awaits_verdict(event):
                    self._held = event  # acts, or speaks to someone who may not have asked: the transcript decides
                    log.info("routed by its audio: waiting for the transcript before acting")
                else:
                    actions += self._route_outcome(event)
            case RouteWithdrawn(route=route):
                if self._is_current(route, RS):  # its words are queued: routed by them instead
                    self._end_route()
                    self._fire(E.ROUTE_CANCELLED, "its transcript came first")
            case Fatal(message=message) | DeviceFailed(message=message):
                actions += self._fatal(message)
            case RouteSent(route=route, item=item):
                if item is not None and self._route is not None and self._route[0] == route:
                    self._route_item = item  # routed inline: the server's segment it is
                if self._route is not None and self._route[0] == route and self._stages is not None:
                    self._stages.mark(Stage.ROUTE_SENT, now)
                if self._is_current(route, RS):  # else the response beat us, or the session is gone
                    self._fire(E.ROUTE_SENT, "")
            case RouteNotSent(route=route):
                if self._is_current(route, RS):
                    assert self._route is not None
                    if self._route[1]:  # (routed by its audio, unconfirmed: its transcript routes it)
                        self._pending.appendleft(self._route[1])  # first in line for the next session
                    self._end_route()
                    self._fire(E.ROUTE_NOT_SENT, "")
            case ToolsFinished(route=route, scripts=scripts):
                current = self._is_current(route, RT)
                if current and self._stages is not None:
                    self._stages.mark(Stage.TOOL_DONE, now)
                if current and self._route_rejected:  # read-only tools ran for a false local wake
                    self._end_route()
                    self.timeline.add(TimelineKind.WITHDRAWN, "not addressed after all: its answer is not said")
                    self._fire(E.ROUTE_CANCELLED, "")
                else:
                    unconfirmed = current and self._route is not None and not self._route[1]
                    self._queue(" ".join(scripts), NarrationKind.ANSWER, stages=self._stages if current else None)
                    if unconfirmed:  # its words may be overheard ones (a false wake): not logged until confirmed
                        self._private_answer = (self._route_item, max(self._narrations).seq, " ".join(scripts))
                    if current:
                        self._end_route()
                        self._fire(E.TOOLS_FINISHED, "")
            case NarrationDone(request=request, summary=summary, first_audio_at=first_audio_at):
                actions += self._narration_done(request, summary, first_audio_at, now)
            case NarrationsFinished():
                actions += self._narrations_finished(now)
            case ChimeStarted():
                self._fire(E.CHIME_STARTED, "")
            case StopHeard(phrase=phrase):
                actions += self._stop_heard(phrase)
            case ChimeFinished(earcon=earcon):
                self._fire(E.CHIME_FINISHED, "")
                if earcon is Earcon.WAKE:
                    self.timeline.add(TimelineKind.CHIME, f"listening for a command for {self.gate.window_s:g} s")
                else:
                    self.timeline.add(TimelineKind.FOLLOW_UP, f"listening for a follow-up for {self.timings.follow_up_s:g} s")
            case NoticesPending():
                self._fire(E.NOTICES_PENDING, "")
            case NoticeBatchFetched(ids=ids, script=script):
                if script:
                    self.timeline.add(TimelineKind.NOTICE, script)
                    self._queue(script, NarrationKind.NOTICE, ids)
                    self._fire(E.NOTICES_QUEUED, "")
                else:
                    self._fire(E.NOTICES_NONE, "")
            case InputEnded():
                self.timeline.add(TimelineKind.MICROPHONE, "the input ended; finishing what it said")
                self._fire(E.INPUT_ENDED, "")
            case AudioHeard(sent=sent):
                if sent is not None:  # else asked again once the next session is ready
                    self._confirming = False
                    self._heard_through = max(self._heard_through, sent)
                    self.revision += 1  # the settle deadline may start now: wake the clock
            case Tick():
                pass
            case _:
                raise TypeError(f"not a coordinator event: {event!r}")
        actions += self._evaluate(now)
        if (dict(self.machines.states), len(self._narrations), len(self._pending), self._listener_quiet) != before:
            self.revision += 1
        return actions

    def next_narration(self) -> NarrationRequest | None:
        """The narration worker holds the voice: the next script to say, if any (nothing more
        once stopping: the final message comes next)."""
        if not self.narration_waiting or self.machines[LifeState] is XS or self.machines[VoiceState] is VX:
            return None  # (a cut narration ends the worker's turn: it lets go of the voice first)
        request = heapq.heappop(self._narrations)
        self._fire(_STARTED_EVENT[request.kind], request.kind.value)
        if request.kind in (NarrationKind.ANSWER, NarrationKind.FALLBACK, NarrationKind.ERROR):
            self._asked = asks_the_user(request.script)  # the last answer said decides
        private = self._private_answer is not None and self._private_answer[1] == request.seq
        self.timeline.add(TimelineKind.NARRATING, UNCONFIRMED_ANSWER if private else request.script)
        self.revision += 1
        return request

    # -- handlers -----------------------------------------------------------------------------------
    def _fire(self, event: Event, why: str) -> None:
        old = self.machines.phase
        self.machines.fire(event)
        new = self.machines.phase
        if new is not old:
            log.info("state %s -> %s (%s%s)", old.value, new.value, event.value, f": {why}" if why else "")

    def _is_current(self, route: int, state: RouteState) -> bool:
        return self._route is not None and self._route[0] == route and self.machines[RouteState] is state

    def _queue(self, script: str, kind: NarrationKind, notice_ids: tuple[int, ...] = (),
               stages: StageTimes | None = None) -> None:
        priority = {NarrationKind.NOTICE: Priority.NOTICE, NarrationKind.STATUS: Priority.STATUS}.get(kind, Priority.ANSWER)
        # (PROGRESS shares the answers' priority: it is about the command being answered.)
        heapq.heappush(self._narrations, NarrationRequest(priority, next(self._seq), script, kind, notice_ids, stages))

    def _listener_ready(self, session: int, now: float) -> None:
        self._session = session
        self._session_ready_at = now
        self._listener_quiet = True
        self.uplink.new_session()
        self._confirming = False  # a confirmation asked of the last session is not coming
        self.timeline.add(TimelineKind.LISTENING, f"listener session {session} ready")
        self._fire(E.LISTENER_READY, "")
        if self.machines[AnnounceState] is AC:
            self._confirm_at = now + self.timings.healthy_after_s  # said only once it proves healthy

    def _listener_lost(self, end: SessionEnd) -> None:
        replayed = self.uplink.session_lost(end.replay_from_ms, self.timings.chunk_ms, end.heard_spans)
        if end.replay_from_ms is not None:
            # The session went away before transcribing what was said: that audio goes to the
            # next session first, so the user's words are not lost (and nothing heard is re-sent).
            self.timeline.add(TimelineKind.REPLAYING, f"{replayed} ms of speech the session never transcribed")
            if replayed:
                self.revision += 1  # audio to send, even when no state changed (a retired session's end)
        if end.interrupted_command is not None and self.machines[RouteState] in (RS, RA):
            # Not run yet (tools run only on a completed response): route it again, first in line.
            self._pending.appendleft(end.interrupted_command)
            self._end_route()
            self._fire(E.ROUTE_INTERRUPTED, "")
        elif self._route is not None and not self._route[1] and self.machines[RouteState] in (RS, RA):
            # Routed by its audio, its words unknown: the replay of what the session never
            # transcribed brings it back (routed by its words then).
            self._end_route()
            self._fire(E.ROUTE_INTERRUPTED, "")
        if end.expired:
            self.timeline.add(TimelineKind.RESTARTING, "listener session expired; reconnecting")
        elif not end.by_us:
            self.timeline.add(TimelineKind.ERROR, f"listener connection dropped (code {end.closed.code}); reconnecting")
            # Said once, for a good session that dropped, and only when nothing else will tell the
            # user: a cut command, replayed speech or a running tool is answered anyway. Sessions
            # that die young count as failed attempts and are announced after a few of those.
            quiet_loss = not (end.interrupted_command or end.replay_from_ms is not None
                              or self.machines[RouteState] is not RI or self._pending)
            if end.healthy and quiet_loss and self.machines[VoiceState] not in (VS, VN, VA):
                self._queue(CONNECTION_LOST_MESSAGE, NarrationKind.STATUS)
        self._listener_quiet = True
        self._fire(E.LISTENER_LOST, f"code {end.closed.code}")

    def _connect_failed(self, attempt: int, error: str, rate_limited: bool) -> None:
        self.timeline.add(TimelineKind.ERROR, f"listener connection attempt {attempt} failed: {error}")
        if self.machines[AnnounceState] is not AN or attempt < self.timings.announce_after_failures:
            return  # said already, once; or a blip not worth a word (a message mutes the mic)
        # A rate limit gets its own line: why the wait, and that it is not the network.
        self._queue(RATE_LIMITED_MESSAGE if rate_limited else CANNOT_CONNECT_MESSAGE, NarrationKind.STATUS)
        self._fire(E.TROUBLE_ANNOUNCED, "")

    def _heard(self, transcript: str, decision: Any) -> list[Action]:
        match decision:
            case Ignore():
                self.timeline.add(TimelineKind.IGNORED, transcript)
                return [UtteranceRejected()]
            case WakeOnly():
                self.timeline.add(TimelineKind.WAKE, transcript)
                return [PlayChime(Earcon.WAKE)] if self.timings.chime else []
            case Command():
                self.timeline.add(TimelineKind.HEARD, transcript)
                return [CommandTaken()]
        return []

    def _tools_requested(self, command: str, calls: tuple[FunctionCall, ...], session: int) -> list[Action]:
        if self._route is None or self.machines[RouteState] not in (RS, RA):
            log.warning("ignoring tool calls for %r: no command is being routed", command)
            return []
        fresh = tuple(c for c in calls if c.call_id not in self._executed_calls)
        if len(fresh) < len(calls):
            log.warning("ignoring %d call(s) that already ran", len(calls) - len(fresh))
        if not fresh:
            self._route_answered()
            self._routing_failed(command, "the model repeated a call that already ran")
            return []
        for call in fresh:
            self._executed_calls[call.call_id] = None
        while len(self._executed_calls) > EXECUTED_CALLS_KEPT:
            self._executed_calls.popitem(last=False)
        self._fire(E.TOOLS_REQUESTED, "")
        self._tools_at = self._clock()
        return [StartTools(self._route[0], command, fresh, session, unconfirmed=not self._route[1])]

    def _route_answered(self) -> None:
        if self.machines[RouteState] in (RS, RA):
            self._end_route()
            self._fire(E.ROUTE_ANSWERED, "")

    def _routing_failed(self, command: str, reason: str) -> None:
        self.timeline.add(TimelineKind.ERROR, f"routing {command!r} failed: {reason}")
        self._queue(ROUTING_FAILED_MESSAGE, NarrationKind.ERROR, stages=self._stages)

    def _end_route(self) -> None:
        self._route = self._route_item = self._held = None
        self._route_confirmed = self._route_rejected = False

    # -- routing at the commit (the wake heard on the device) ---------------------------------------
    def _route_by_audio(self, item: str | None, marks: Stages, now: float, audio: bytes | None = None) -> list[Action]:
        """Route an utterance the device heard the wake in now, by its audio, if nothing else is
        going on (else its transcript routes it, as any other)."""
        m = self.machines
        if not (
            self.timings.route_at_commit and self.listener_up and m[VoiceState] is VQ and m[RouteState] is RI
            and not self._pending and not self._narrations and m[LifeState] is not XS
        ):
            return []
        self._route = (next(self._routes), "")
        self._route_item = item  # (inline: the listener names it once sent, RouteSent)
        self._stages = StageTimes(dict(marks))
        if m[WorkingState] is WI:
            self._routed_at = now
        self._route_deadline = now + self.timings.route_timeout_s
        self._fire(E.COMMAND_ROUTED, "by its audio, at the commit")
        self.timeline.add(TimelineKind.COMMAND, ROUTED_BY_AUDIO)
        return [SendRoute(self._route[0], "", item=item, audio=audio), CommandTaken()]

    def _awaits_verdict(self, event: RunTools | SpeakText | RoutingFailed) -> bool:
        """A route by audio not confirmed yet: only read-only calls go ahead; a call that changes
        something, the model's own text and an apology wait for the transcript."""
        if self._route is None or self._route[1] or self.machines[RouteState] not in (RS, RA):
            return False  # (a route by its words, or one its transcript confirmed)
        return not (isinstance(event, RunTools) and all(c.name in self.read_only_tools for c in event.calls))

    def _route_outcome(self, event: RunTools | SpeakText | RoutingFailed) -> list[Action]:
        match event:
            case RunTools(command=command, calls=calls, session=session):
                return self._tools_requested(command, calls, session)
            case SpeakText(command=command, text=text):
                stages = self._stages
                self._route_answered()
                self.timeline.add(TimelineKind.FALLBACK, f"no tool call for {command!r}; narrating the model's text")
                self._queue(text, NarrationKind.FALLBACK, stages=stages)
            case RoutingFailed(command=command, reason=reason):
                self._routing_failed(command, reason)
                self._route_answered()
        return []

    def _confirmed(self, item: str, text: str, marks: Stages) -> list[Action]:
        self.timeline.add(TimelineKind.CONFIRMED, text)
        if self._private_answer is not None and self._private_answer[0] == item:
            # Addressed after all: its answer may be logged and kept (said already: history gets it now).
            _, seq, script = self._private_answer
            self._private_answer = None
            if all(request.seq != seq for request in self._narrations):
                self.timeline.add(TimelineKind.SAID, script)
        if self._route is None or self._route_item != item:
            # Answered already (a read-only answer said before its words came), or given up on
            # (timed out, lost with its session): never routed a second time.
            return []
        self._route = (self._route[0], text)
        self._route_confirmed = True
        if self._stages is not None:
            for stage, at in marks:
                self._stages.mark(stage, at)
        held, self._held = self._held, None
        if held is None:
            return []
        held = dataclasses.replace(held, command=text)
        return self._route_outcome(held)

    def _rejected(self, item: str, transcript: str) -> list[Action]:
        """The transcript of a command routed by its audio has nothing like the wake phrase: one
        verdict for it. Nothing of an answer said yet: withdrawn (what has not acted is dropped,
        an answer queued is not said). Its answer already begun: answered as heard, and the
        transcript is what it was asked, never "overheard" after it was answered."""
        if self._route is not None and self._route_item == item:
            if self.machines[RouteState] is RT:  # read-only tools run: their answer is not said
                self._route_rejected = True
                return [UtteranceRejected()]
            self._end_route()
            self.timeline.add(TimelineKind.WITHDRAWN, "not addressed after all: the routing was cancelled, nothing ran")
            self._fire(E.ROUTE_CANCELLED, "")
            return [UtteranceRejected()]
        if self._private_answer is None or self._private_answer[0] != item:
            return []  # (given up on already: timed out, or lost with its session, and not answered)
        _, seq, script = self._private_answer
        queued = [request for request in self._narrations if request.seq == seq]
        if queued:  # not begun: withdrawn before anything of it is said
            self._private_answer = None
            self._narrations = [request for request in self._narrations if request.seq != seq]
            heapq.heapify(self._narrations)
            self.timeline.add(TimelineKind.WITHDRAWN, "not addressed after all: its answer is not said")
            return [UtteranceRejected()]
        # Begun: the answer stands, and the transcript is what it answered.
        log.info("a command answered before its transcript came: the transcript does not show the wake phrase; "
                 "the answer stands")
        return self._confirmed(item, transcript.strip(), ())

    def _fatal(self, message: str) -> list[Action]:
        first = self.machines[LifeState] is not XS
        self._fire(E.FATAL, message)
        if not first:
            return []
        self.fatal_message = message
        self.timeline.add(TimelineKind.ERROR, f"fatal: {message}")
        return [Stop(3, message)]

    def _narration_done(self, request: NarrationRequest, summary: str, first_audio_at: float | None,
                        now: float) -> list[Action]:
        if request.stages is not None:
            if first_audio_at is not None:
                request.stages.mark(Stage.FIRST_AUDIO, first_audio_at)
            request.stages.mark(Stage.LAST_AUDIO, now)
            offsets = request.stages.offsets()
            self.stage_log.append(offsets)
            self.timeline.add(TimelineKind.STAGES, json.dumps(offsets))  # before "narrated": history keeps it
        self.timeline.add(TimelineKind.NARRATED, f"{request.kind.value} ({summary})")
        if request.notice_ids:
            # Said (by the narrator or the local voice): acknowledged, so never heard again.
            self._fire(E.NOTICES_NARRATED, "")
            return [AckNotices(request.notice_ids)]
        return []

    def _stop_heard(self, phrase: str) -> list[Action]:
        """"Computer, stop": cut what is being said; a queued notice goes back to the notice queue
        (not said, so not acknowledged: it is fetched again at an idle moment, after a pause)."""
        was = self.machines[VoiceState]
        self._fire(E.STOP_HEARD, phrase)
        if was not in (VS, VN, VA):
            log.info("stop word %r while nothing is being said (%s): ignored", phrase, was.value)
            return []
        self.stops += 1
        self.timeline.add(TimelineKind.STOPPED, f"{phrase!r}: cutting the {was.value}")
        self._notices_after = self._clock() + self.timings.notices_after_stop_s
        queued = [r for r in self._narrations if r.kind is NarrationKind.NOTICE]
        if queued:
            self._narrations = [r for r in self._narrations if r.kind is not NarrationKind.NOTICE]
            heapq.heapify(self._narrations)
            self._fire(E.NOTICES_REQUEUED, "")
        return [CutNarration(phrase)]

    def _narrations_finished(self, now: float) -> list[Action]:
        said = self.machines[VoiceState]
        self._fire(E.NARRATIONS_FINISHED, "")
        actions: list[Action] = []
        asked, self._asked = self._asked, False
        if said is VA and self._follow_up_invited(asked) and self.machines[LifeState] is not XS:
            # A follow-up needs no wake phrase for a moment (not after a notice: nobody asked).
            self.gate.open_window(now + self.timings.follow_up_s, since=now)  # said before the answer ended: no follow-up
            actions += [OpenFollowUp(self.timings.follow_up_s), PlayChime(Earcon.FOLLOW_UP)]
        if said in (VA, VN):
            actions += self._restart("after a narration")
        elif said is VX:
            actions += self._restart("after a stop")
        return actions

    def _follow_up_invited(self, asked: bool) -> bool:
        """Only an answer that asked the user something takes the next utterance without the
        wake phrase (unless FOLLOW_UP says always or never): otherwise what the room says after an
        answer, to someone else, stays overheard."""
        if self.timings.follow_up_s <= 0 or self.timings.follow_up is FollowUp.NEVER:
            return False
        return asked or self.timings.follow_up is FollowUp.ALWAYS

    def _restart(self, reason: str) -> list[Action]:
        """A clean listener: close this session, the shell's loop opens and configures a fresh one.
        A listener that is down or closing is getting a fresh session anyway."""
        if not self.listener_up:
            return []
        self._fire(E.RESTART_REQUESTED, reason)
        return [RestartListener(reason)]

    def _mind_the_cost(self, now: float) -> None:
        assert self.cost is not None
        if now >= self._cost_log_at:
            self._cost_log_at = now + COST_LOG_EVERY_S
            log.info("cost: %s", self.cost.summary().line())
        budget = self.machines[BudgetState]
        if budget is BW and self.cost.over_budget:
            self._fire(E.BUDGET_REACHED, "")
            self._budget_resume_at = now + self.cost.seconds_to_rollover()
            log.warning("cost: today's budget is spent; pausing uploads until tomorrow (%s)", self.cost.summary().line())
            self._queue(BUDGET_REACHED_MESSAGE, NarrationKind.STATUS)
        elif budget is BP and now >= self._budget_resume_at and not self.cost.over_budget:
            self._fire(E.NEW_DAY, "")
            log.info("cost: a new day; uploads resume")

    def _evaluate(self, now: float) -> list[Action]:
        """Everything that follows from the state and the clock, whatever event came in."""
        actions: list[Action] = []
        m = self.machines
        if m[RouteState] in (RS, RA) and self._route_deadline is not None and now >= self._route_deadline:
            assert self._route is not None
            command = self._route[1]
            self._end_route()
            self._fire(E.ROUTE_TIMED_OUT, "")
            self._routing_failed(command, f"no answer from the model in {self.timings.route_timeout_s:g} s")
            actions += [AbandonRoute(), *self._restart("the model did not answer a command")]
        if m[WorkingState] is WW and now >= self._routed_at + self.timings.working_after_s:
            self._fire(E.WORKING_DUE, "")
            self.timeline.add(TimelineKind.WORKING, "the answer is taking a moment: playing the working sound")
        if (
            m[RouteState] is RT and m[WorkingState] in (WW, WP)
            and now >= self._tools_at + self.timings.still_working_after_s
        ):
            self._fire(E.STILL_WORKING_DUE, "")
            self._queue(STILL_WORKING_MESSAGE, NarrationKind.PROGRESS)
        if self.cost is not None:
            self._mind_the_cost(now)
        if m[AnnounceState] is AC and self._confirm_at is not None and now >= self._confirm_at and self.listener_up:
            self._fire(E.HEALTHY, "")
            self._queue(RECONNECTED_MESSAGE, NarrationKind.STATUS)
        if (
            self.listener_up and m[VoiceState] is VQ and m[RouteState] is RI and self._pending
            and not self._narrations and m[LifeState] is not XS  # an answer first, then a fresh session
        ):
            command = self._pending.popleft()
            self._route = (next(self._routes), command)
            self._stages = StageTimes(dict(self._pending_stages.pop(command, ())))
            if m[WorkingState] is WI:
                self._routed_at = now
            self._route_deadline = now + self.timings.route_timeout_s  # armed before the send
            self._fire(E.COMMAND_ROUTED, command)
            self.timeline.add(TimelineKind.COMMAND, command)
            actions.append(SendRoute(self._route[0], command))
        idle = self.idle(now)
        if idle and m[NoticeState] is NP and now >= self._notices_after:
            self._fire(E.NOTICES_FETCH, "")
            actions.append(FetchNotices())
        elif idle and now - self._session_ready_at >= self.timings.recycle_after_s:
            self.timeline.add(TimelineKind.RESTARTING, "recycling the listener session before its time limit")
            actions += self._restart("recycle before the session limit")
        settled = self.idle(now) and self.uplink.empty  # nothing left to send either
        if settled and m[LifeState] is XF and self._heard_through < self.uplink.stats.chunks_sent:
            # Quiet on our side proves nothing while the server may not have heard the last audio
            # yet (a starved machine, a slow network): its VAD events would still be on their way.
            settled = False
            if not self._confirming:
                self._confirming = True
                actions.append(ConfirmHeard(self.uplink.stats.chunks_sent))
        self._idle_since = (self._idle_since or now) if settled else None
        if m[LifeState] is XF and self._idle_since is not None and now - self._idle_since >= self.timings.settle_quiet_s:
            actions.append(Stop(0, None))
        return actions
