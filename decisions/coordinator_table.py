"""The coordinator's machines and its one transition table (`TRANSITIONS`): eight small
machines, each an Enum, moved together by `Machines.fire` (decisions.machines). An event moves
every machine that has a row for it; if one of those machines has no row for its current state,
the event is a bug (`IllegalTransition`) and nothing moves. The phase people see is derived."""

from __future__ import annotations

import enum
from typing import Any

from decisions import machines as _machines

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
    # routed by its audio, and its transcript says it was not addressed; or it asked for nothing ("stop")
    ROUTE_CANCELLED = "route_cancelled"
    PROVISIONAL_WITHDRAWN = "provisional_withdrawn"  # routed at a pause, and the user went on talking
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
    (WI, E.PROVISIONAL_WITHDRAWN): WI,  # the whole utterance is routed anew at its end
    (WW, E.PROVISIONAL_WITHDRAWN): WI,
    (WP, E.PROVISIONAL_WITHDRAWN): WI,
    (WT, E.PROVISIONAL_WITHDRAWN): WI,
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
    # routed at a pause inside the command, and the user went on talking: whatever it was doing
    # (sending, awaiting its response, running read-only tools, its answer made ready) is dropped
    (RS, E.PROVISIONAL_WITHDRAWN): RI,
    (RA, E.PROVISIONAL_WITHDRAWN): RI,
    (RT, E.PROVISIONAL_WITHDRAWN): RI,
    (RI, E.PROVISIONAL_WITHDRAWN): RI,
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
TABLE = _machines.Table(TRANSITIONS, INITIAL, Event)
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


class Machines(_machines.Machines["Event"]):
    """The coordinator's machines; `phase` is what people see in the log."""

    def __init__(self, states: dict[type[enum.Enum], enum.Enum] | None = None) -> None:
        super().__init__(TABLE, states)

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
