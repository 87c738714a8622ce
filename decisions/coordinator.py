"""The coordinator's decisions: a synchronous core fed typed events, returning actions.

The async shell (`handoff.Coordinator`) does the I/O: it feeds every listener event, finished
route, tool run, narration and clock tick to `CoordinatorCore.handle` and carries out the actions
that come back. The core never waits; it says when it next needs the clock (`next_deadline`), and
the shell sleeps until then or until something changes. Nothing here polls.

The state is eight small machines and one table (`decisions.coordinator_table`), and each
command's own lifecycle table (`decisions.lifecycle`, driven by `decisions.command_routing`).
What happened goes to the timeline as typed events (`decisions.events`). What the shell and the
core say to each other is in `decisions.coordinator_messages`; this module re-exports it all.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
from collections import deque
from typing import Any, Callable, Container

from decisions.command_routing import EXECUTED_CALLS_KEPT, CommandRouting
from decisions.coordinator_messages import *  # noqa: F403 (the shell's and the tests' one import)
from decisions.coordinator_messages import (
    BUDGET_REACHED_MESSAGE, CANNOT_CONNECT_MESSAGE, CONNECTION_LOST_MESSAGE, COST_LOG_EVERY_S, RATE_LIMITED_MESSAGE,
    RECONNECTED_MESSAGE, STILL_WORKING_MESSAGE, UNPROMPTED, _STARTED_EVENT, AckNotices, Action, AudioHeard, ChimeFinished,
    ChimeStarted, ConfirmHeard, CoordinatorEvent, CoordinatorTimings, CutNarration, DeviceFailed, Earcon, FetchNotices,
    InputEnded, NarrationDone, NarrationRequest, NarrationsFinished, NoticeBatchFetched, NoticesPending, OpenFollowUp,
    PlayChime, Priority, RestartListener, RouteNotSent, RouteSent, RouteWithdrawn, Stop, StopHeard, Tick, ToolDone,
    ToolNeedsYes, ToolStarted, ToolsFinished, TurnEnded, CommandTaken, UtteranceRejected, asks_the_user, TurnPaused,
    SpeechResumed, ReadAheadBilled,
)
from decisions.coordinator_table import *  # noqa: F403
from decisions.coordinator_table import (
    AC, AN, AT, BP, BW, E, LD, LU, NF, NN, NP, NQ, RA, RI, RS, RT, VA, VC, VN, VQ, VS, VX, WI, WP, WT, WW, XF, XR, XS,
    AnnounceState, BudgetState, LifeState, ListenerState, Machines, NoticeState, Phase, RouteState, VoiceState,
    WorkingState, Event,
)
from config.settings import FollowUp
from decisions.cost import CostMeter, RealtimeRole
from decisions.events import (
    ROUTED_BY_AUDIO, UNCONFIRMED_ANSWER, ConnectAttemptFailed, FatalError, ListenerLost, ListenerReady, LossCause,
    NarrationCut, NarrationKind, Narrated, NarrationStarted, StagesMeasured,
)
from decisions.listener_core import (
    CommandCommitted, CommandConfirmed, CommandHeard, CommandRejected, ConnectFailed, Fatal, Heard, QuietChanged,
    RoutingFailed, RunTools, SessionEnd, SessionReady, SpeakText, TranscriptionBilled, UsageReported, ProvisionalBilled,
)
from decisions.mute import MuteHolders
from decisions.stages import Stage
from decisions.timeline import Timeline, TimelineKind
from decisions.uplink import Uplink
from decisions.wake_gate import Command, Ignore, WakeGate, WakeOnly

log = logging.getLogger("handoff.coordinator")





class CoordinatorCore(CommandRouting):
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
        strict: bool | None = None,
        needs_yes_tools: Container[str] = frozenset(),
        ask_about: Callable[[str, str], str | None] = lambda name, arguments: None,
    ) -> None:
        """`read_only_tools`: the tools that only read (tools.registry Effect.READS): they may run
        before the transcript confirms a command routed by its audio; any other waits for it.
        `needs_yes_tools`: those that cannot be undone: they run only after a spoken yes.
        `strict`: a command's illegal move raises (tests); otherwise it is logged and counted."""
        self.timings = timings
        self.read_only_tools = read_only_tools
        self.needs_yes_tools = needs_yes_tools  # (a live view: MCP servers add and drop tools)
        self.ask_about = ask_about  # (tool, arguments) -> the question asked before it runs
        self.gate = gate
        self.timeline = timeline
        self.uplink = uplink
        self._clock = clock
        self.mute = MuteHolders(clock=clock, on_change=on_mute_change)
        self.machines = Machines()
        self.revision = 0  # bumped on every change the shell's waiters may care about
        self._narrations: list[NarrationRequest] = []
        self._seq = itertools.count()
        self._init_commands(strict)
        self.stage_log: deque[dict[str, float]] = deque(maxlen=200)  # the latest commands' stage offsets
        self._route_deadline: float | None = None
        self._routed_at = 0.0  # when the command now waiting for its answer was first routed
        self._tools_at = 0.0  # when its tools started
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
        if cost is not None:
            cost.provisional_budget(timings.provisional_budget)
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
            and self.provisional_command is None  # nor a command routed at a pause
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
            self._asking_until,
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
                self.pause_point.routed(usage)
                if self.cost is not None:
                    self.cost.response_usage(RealtimeRole.LISTENER, usage)
            case TranscriptionBilled(seconds=seconds):
                if self.cost is not None:
                    self.cost.transcription(seconds)
            case Heard(transcript=transcript, decision=decision):
                actions += self._heard(transcript, decision)
            case CommandHeard(text=text, stages=marks):
                actions += self._command_heard(text, marks, now)
            case CommandCommitted(item_id=item, stages=marks):
                actions += self._route_by_audio(item, marks, now)
            case TurnEnded(audio=audio):
                actions += self._turn_ended(audio, now)
            case TurnPaused(audio=audio):
                actions += self._turn_paused(audio, now)
            case SpeechResumed():
                actions += self._speech_resumed()
            case ProvisionalBilled():
                self.pause_point.billed(event.usage, event.sent, event.withdrawn)
                if self.cost is not None:
                    self.cost.provisional_billed(event.usage, event.sent, event.withdrawn)
            case ReadAheadBilled(usage=usage):
                self.pause_point.read_ahead_dropped(usage)
                if self.cost is not None:
                    self.cost.provisional_read_ahead(usage)
            case CommandConfirmed(item_id=item, text=text, stages=marks):
                actions += self._confirmed(item, text, marks)
            case CommandRejected(item_id=item, transcript=transcript):
                actions += self._rejected(item, transcript)
            case RunTools() | SpeakText() | RoutingFailed():
                actions += self._response(event, now)
            case RouteWithdrawn(route=route):
                self._route_withdrawn(route)
            case ToolStarted(command=command, name=name, arguments=arguments):
                self._tool_ran(command, name, arguments)
            case ToolNeedsYes(command=command, call=call, question=question):
                self._tool_needs_yes(command, call, question)
            case ToolDone(command=command, name=name, outcome=outcome, found=found):
                self._tool_done(command, name, outcome, found)
            case Fatal(message=message) | DeviceFailed(message=message):
                actions += self._fatal(message)
            case RouteSent(route=route, item=item):
                if self._current is not None and self._current.route == route:
                    if item is not None:
                        self._current.item = item  # routed inline: the server's segment it is
                    self._current.stages.mark(Stage.ROUTE_SENT, now)
                if self._is_current(route, RS):  # else the response beat us, or the session is gone
                    self._fire(E.ROUTE_SENT, "")
            case RouteNotSent(route=route):
                self._route_not_sent(route)
            case ToolsFinished(route=route, scripts=scripts):
                self._tools_finished(route, scripts, now)
            case NarrationDone(request=request, summary=summary, first_audio_at=first_audio_at,
                               stopped_after_s=stopped_after_s, ready_after_s=ready_after_s):
                if ready_after_s is not None and request.command is not None:  # (an answer's: warm, as they are)
                    self.pause_point.voice_ready(ready_after_s)
                actions += self._narration_done(request, summary, first_audio_at, stopped_after_s, now)
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
        actions += self._evaluate(now) + self._take_outbox()
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
        private = request.command is not None and request.command.words is None
        self._answer_begun(request)
        self.timeline.emit(NarrationStarted(request.kind, request.script, private))
        self.revision += 1
        return request

    # -- handlers -----------------------------------------------------------------------------------
    def _fire(self, event: Event, why: str) -> None:
        old = self.machines.phase
        self.machines.fire(event)
        new = self.machines.phase
        if new is not old:
            log.info("state %s -> %s (%s%s)", old.value, new.value, event.value, f": {why}" if why else "")

    def _queue(self, script: str, kind: NarrationKind, notice_ids: tuple[int, ...] = (), command: Any = None) -> None:
        priority = {NarrationKind.NOTICE: Priority.NOTICE, NarrationKind.STATUS: Priority.STATUS}.get(kind, Priority.ANSWER)
        # (PROGRESS shares the answers' priority: it is about the command being answered.)
        heapq.heappush(self._narrations, NarrationRequest(priority, next(self._seq), script, kind, notice_ids, command))

    def _listener_ready(self, session: int, now: float) -> None:
        self._session = session
        self._session_ready_at = now
        self._listener_quiet = True
        self.uplink.new_session()
        self._confirming = False  # a confirmation asked of the last session is not coming
        self.timeline.emit(ListenerReady(session))
        self._fire(E.LISTENER_READY, "")
        if self.machines[AnnounceState] is AC:
            self._confirm_at = now + self.timings.healthy_after_s  # said only once it proves healthy

    def _listener_lost(self, end: SessionEnd) -> None:
        replayed = self.uplink.session_lost(end.replay_from_ms, self.timings.chunk_ms, end.heard_spans, end.untold_from_ms)
        if end.replay_from_ms is not None or replayed:
            # The session went away before transcribing what was said (or, dropped, before it
            # could say that speech began): that audio goes to the next session first, so the
            # user's words are not lost (and nothing heard is re-sent).
            what = "speech the session never transcribed" if end.replay_from_ms is not None else "audio sent just before the drop"
            self.timeline.add(TimelineKind.REPLAYING, f"{replayed} ms of {what}")
            if replayed:
                self.revision += 1  # audio to send, even when no state changed (a retired session's end)
        self._route_lost_with_session(end.interrupted_command)
        if end.expired:
            self.timeline.emit(ListenerLost(LossCause.EXPIRED, end.closed.code))
        elif not end.by_us:
            self.timeline.emit(ListenerLost(LossCause.DROPPED, end.closed.code))
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
        self.timeline.emit(ConnectAttemptFailed(attempt, error))
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

    def _fatal(self, message: str) -> list[Action]:
        first = self.machines[LifeState] is not XS
        self._fire(E.FATAL, message)
        if not first:
            return []
        self.fatal_message = message
        self.timeline.emit(FatalError(message))
        return [Stop(3, message)]

    def _narration_done(self, request: NarrationRequest, summary: str, first_audio_at: float | None,
                        stopped_after_s: float | None, now: float) -> list[Action]:  # fmt: skip
        command = request.command
        offsets: dict[str, float] = {}
        if command is not None:
            if first_audio_at is not None:
                command.stages.mark(Stage.FIRST_AUDIO, first_audio_at)
            command.stages.mark(Stage.LAST_AUDIO, now)
            offsets = command.stages.offsets()
            self.stage_log.append(offsets)
            self.timeline.emit(StagesMeasured(command.id, offsets))  # before "narrated": history keeps it
        private = command is not None and command.words is None
        self.timeline.emit(Narrated(request.kind, "" if private else request.script, summary, stopped_after_s))
        self._answer_ended(request, stopped_after_s is not None, offsets)
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
        self.timeline.emit(NarrationCut(phrase, was.value))
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
        self._question_said(now)
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
        actions += self._route_timed_out(now)
        self._no_reply(now)
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
        actions += self._route_next(now)
        idle = self.idle(now)
        if idle and m[NoticeState] is NP and now >= self._notices_after:
            self._fire(E.NOTICES_FETCH, "")
            actions.append(FetchNotices())
        elif idle and now - self._session_ready_at >= self.timings.recycle_after_s:
            self.timeline.emit(ListenerLost(LossCause.RECYCLED))
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
