"""The coordinator's commands: queued by their words, routed one at a time (by their words, or
by their audio when the device heard the wake), held for their words, run, answered, withdrawn;
each through its lifecycle (`decisions.lifecycle`), with every step told as a typed event.

`CommandRouting` is the part of `CoordinatorCore` (decisions.coordinator) that owns the commands;
the core's machines (RouteState, WorkingState) say where the routing is, and each command's own
table says where the command is. Split from the core only to keep each file readable: it uses
the core's machines, queue and timeline.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any, Callable, Container

from decisions.coordinator_messages import (
    DECLINED_MESSAGE, ROUTING_FAILED_MESSAGE, AbandonRoute, CommandTaken, DropNarration, NarrationRequest, PrepareNarration,
    PrepareTools, SendRoute, SetPause, StartTools, UtteranceRejected, WithdrawRoute,
)
from decisions.coordinator_table import E, RA, RI, RS, RT, VQ, WI, LifeState, RouteState, VoiceState, WorkingState, XS
from decisions.consent import is_yes, question_for
from decisions.dismissal import dismisses
from decisions.events import UNADDRESSED_WORDS, UNCONFIRMED_ANSWER
from decisions.events import (
    AnswerKept, CommandClosed, Overheard, CommandConfirmed as Confirmed, CommandRouted, CommandWithdrawn, Note, NarrationKind,
    RoutingError, ToolFinished, ToolOutcome, ToolRan,
)
from decisions.lifecycle import ENDS, Command, CommandBook, Move, RouteMode, Step, Turn, Verdict
from decisions.listener_core import RoutingFailed, RunTools, SpeakText, Stages
from decisions.pause_point import PausePoint
from decisions.stages import Stage, StageTimes
from decisions.timeline import TimelineKind

if TYPE_CHECKING:
    from decisions.coordinator_messages import Action, CoordinatorTimings
    from decisions.coordinator_table import Machines
    from decisions.cost import CostMeter
    from decisions.timeline import Timeline
    from realtime_api.wire import FunctionCall

log = logging.getLogger("handoff.coordinator")

EXECUTED_CALLS_KEPT = 1000  # call ids remembered so none runs twice; ids are unique per response


def just_to_be_sure(question: str) -> str:
    """A tool's own question ("Unlock the front door?") as the assistant asks it."""
    return f"Just to be sure: {question[:1].lower()}{question[1:]}"


class CommandRouting:
    """Mixed into `CoordinatorCore`: its commands, from heard to closed. What it uses of the core
    is declared here (and defined there)."""

    machines: Machines
    timeline: Timeline
    timings: CoordinatorTimings
    read_only_tools: frozenset[str]
    needs_yes_tools: Container[str]
    ask_about: Callable[[str, str], str | None]
    _session: int
    _narrations: list[NarrationRequest]
    _route_deadline: float | None
    _routed_at: float
    _tools_at: float
    cost: CostMeter | None

    @property
    def listener_up(self) -> bool:
        raise NotImplementedError

    _clock: Callable[[], float]

    def _fire(self, event: E, why: str) -> None:
        raise NotImplementedError

    def _queue(self, script: str, kind: NarrationKind, notice_ids: tuple[int, ...] = (), command: Any = None) -> None:
        raise NotImplementedError

    def _restart(self, reason: str) -> list[Action]:
        raise NotImplementedError

    def _init_commands(self, strict: bool | None) -> None:
        self.book = CommandBook(strict=strict)
        self._pending: deque[Command] = deque()  # addressed by their words, waiting their turn
        self._current: Command | None = None  # the one being routed (RouteState is not IDLE)
        self._open: dict[int, Command] = {}  # every command not closed yet, by id
        self._routes = itertools.count(1)
        self._executed_calls: OrderedDict[str, None] = OrderedDict()
        self._asking: Command | None = None  # a command waiting for a spoken yes
        self._asking_until: float | None = None  # from when its question was said
        self._pending_question = ""  # asked once a command's tools are done (a call the brain picked)
        self._outbox: list[Action] = []  # what a handler that returns nothing asks the shell to do
        self._dropped_routes: set[int] = set()  # withdrawn provisional routes whose tools still run
        self.pause_point = PausePoint(self.timings.turn_end_s, self.timings.provisional_s,
                                      budget=self.timings.provisional_budget)  # (the account lasts as long as the core)
        self._pause_told = self.pause_point.pause_s  # (what the upload filter was built with)

    def _take_outbox(self) -> list[Action]:
        pause = self.pause_point.pause_s
        if pause is not None and pause != self._pause_told:  # the round trips moved it
            self._pause_told = pause
            self._outbox.append(SetPause(pause))
        actions, self._outbox = self._outbox, []
        return actions

    # -- what others read ---------------------------------------------------------------------------
    @property
    def current_command(self) -> Command | None:
        return self._current

    @property
    def provisional_command(self) -> Command | None:
        """The command routed at a pause inside it whose turn is not over yet (at most one)."""
        return next((c for c in self._open.values() if c.provisional), None)

    def _find(self, item: str) -> Command | None:
        """The open command routed by the audio item `item`."""
        return next((c for c in self._open.values() if c.item == item), None)

    def _is_current(self, route: int, state: RouteState) -> bool:
        return self._current is not None and self._current.route == route and self.machines[RouteState] is state

    # -- opening, moving and closing ----------------------------------------------------------------
    def _open_command(self, mode: RouteMode, words: str | None, marks: Stages, provisional: bool = False) -> Command:
        for older in list(self._open.values()):  # an answer whose words never came: kept as it is
            if older.step in ENDS:
                self._close(older)
        command = self.book.open(mode, words, StageTimes(dict(marks)), provisional)
        self._open[command.id] = command
        return command

    def _move(self, command: Command, move: Move) -> bool:
        moved = self.book.move(command, move)
        if moved and command.step in ENDS and (command.words is not None or command.step in (Step.WITHDRAWN, Step.LOST)):
            self._close(command)
        return moved

    def _close(self, command: Command) -> None:
        if not command.closed:
            command.closed = True
            self._open.pop(command.id, None)
            self.timeline.emit(CommandClosed(command.record()))

    def settle_commands(self) -> None:
        """The assistant is stopping: every command answered whose words never came is closed as
        it is (kept in the history with what was said), so none is lost."""
        for command in list(self._open.values()):
            if command.step in ENDS or command.step is Step.ANSWERING:
                self._close(command)

    # -- heard --------------------------------------------------------------------------------------
    def _command_heard(self, text: str, marks: Stages, now: float) -> list[Action]:
        if self._asking is not None and self._asking_until is not None:
            return self._reply_to_question(text, now)  # the reply to "shall I ...?", not a command
        self._pending.append(self._open_command(RouteMode.WORDS, text, marks))
        return []

    def _route_next(self, now: float) -> list[Action]:
        """Route the first command waiting, if nothing else is going on."""
        m = self.machines
        if not (self.listener_up and m[VoiceState] is VQ and m[RouteState] is RI and self._pending
                and not self._narrations and m[LifeState] is not XS  # an answer first, then a fresh session
                and self.provisional_command is None):  # (its turn is over within TURN_END_MS)
            return []
        command = self._pending.popleft()
        self._start_route(command, now)
        self._fire(E.COMMAND_ROUTED, command.words or "")
        self.timeline.emit(CommandRouted(command.record()))
        return [SendRoute(command.route, command.words or "")]

    def _start_route(self, command: Command, now: float, move: bool = True) -> None:
        command.route = next(self._routes)
        if move:  # (a yes runs what was asked: no route to the model, the route state only carries it)
            self._move(command, Move.ROUTE)
        self._current = command
        if self.machines[WorkingState] is WI:
            self._routed_at = now
        self._route_deadline = now + self.timings.route_timeout_s  # armed before the send

    def _route_by_audio(self, item: str | None, marks: Stages, now: float,
                        audio: bytes | None = None, provisional: bool = False) -> list[Action]:  # fmt: skip
        """Route an utterance the device heard the wake in now, by its audio, if nothing else is
        going on (else its transcript routes it, as any other). `provisional`: at a pause inside
        it, with its audio so far (`_turn_ended` confirms it, `_speech_resumed` withdraws it)."""
        m = self.machines
        if not (
            self.timings.route_at_commit and self.listener_up and m[VoiceState] is VQ and m[RouteState] is RI
            and not self._pending and not self._narrations and m[LifeState] is not XS
        ):
            return []
        command = self._open_command(RouteMode.AUDIO, None, marks, provisional)
        command.item = item  # (inline: the listener names it once sent, RouteSent)
        self._start_route(command, now)
        self._fire(E.COMMAND_ROUTED, "provisionally, at a pause inside it" if provisional else "by its audio, at the commit")
        self.timeline.emit(CommandRouted(command.record()))
        if provisional:
            self.pause_point.sent()
            if self.cost is not None:
                self.cost.provisional_sent()
            return [SendRoute(command.route, "", audio=audio, provisional=True)]
        return [SendRoute(command.route, "", item=item, audio=audio), CommandTaken()]

    def _end_route(self) -> Command | None:
        command, self._current = self._current, None
        return command

    # -- the model's response -------------------------------------------------------------------------
    def _response(self, event: RunTools | SpeakText | RoutingFailed, now: float) -> list[Action]:
        command = self._current
        if command is None:  # (a withdrawn route's, on its way before the listener heard it was)
            log.info("a route's response came with no command being routed: ignored")
            return []
        command.stages.mark(Stage.CALL_RECEIVED, now)
        if (sent := command.stages.times.get(Stage.ROUTE_SENT)) is not None:
            self.pause_point.route_answered(now - sent)
        if self._awaits_verdict(command, event):
            command.held = event  # acts, or speaks to someone who may not have asked: its words decide
            if command.step is Step.ROUTED:
                self._move(command, Move.HOLD)
            log.info("routed by its audio: waiting for the transcript before acting")
            return [] if command.provisional else self._prepare(command)  # (provisional: at its turn end)
        return self._route_outcome(event)

    @staticmethod
    def _prepare(command: Command) -> list[Action]:
        """A command whose turn is over holds calls for its words: what they may do first starts now."""
        return [PrepareTools(command.held.calls)] if isinstance(command.held, RunTools) else []

    def _awaits_verdict(self, command: Command, event: RunTools | SpeakText | RoutingFailed) -> bool:
        """A route by audio not confirmed yet (or sent at a pause, the turn not over yet): only
        read-only calls go ahead; a call that changes something, the model's own text and an
        apology wait for the transcript."""
        if command.provisional and self.machines[RouteState] in (RS, RA):
            return not (isinstance(event, RunTools) and all(c.name in self.read_only_tools for c in event.calls))
        if command.words is not None or self.machines[RouteState] not in (RS, RA):
            return False  # (a route by its words, or one its transcript confirmed)
        return not (isinstance(event, RunTools) and all(c.name in self.read_only_tools for c in event.calls))

    def _route_outcome(self, event: Any) -> list[Action]:
        match event:
            case RunTools(command=words, calls=calls, session=session):
                return self._tools_requested(words, calls, session)
            case SpeakText(command=words, text=text):
                command = self._route_answered()
                self.timeline.add(TimelineKind.FALLBACK, f"no tool call for {words!r}; narrating the model's text")
                self._answer(command, text, NarrationKind.FALLBACK)
            case RoutingFailed(command=words, reason=reason):
                command = self._route_answered()
                self._routing_failed(command, words, reason)
        return []

    def _tools_requested(self, words: str, calls: tuple[FunctionCall, ...], session: int) -> list[Action]:
        command = self._current
        if command is None or self.machines[RouteState] not in (RS, RA):
            log.warning("ignoring tool calls for %r: no command is being routed", words)
            return []
        fresh = tuple(c for c in calls if c.call_id not in self._executed_calls)
        if len(fresh) < len(calls):
            log.warning("ignoring %d call(s) that already ran", len(calls) - len(fresh))
        if not fresh:
            self._route_answered()
            self._routing_failed(command, words, "the model repeated a call that already ran")
            return []
        for call in fresh:
            self._executed_calls[call.call_id] = None
        while len(self._executed_calls) > EXECUTED_CALLS_KEPT:
            self._executed_calls.popitem(last=False)
        if dismisses(fresh):
            return self._dismissed(command, words)
        needs_yes = any(c.name in self.needs_yes_tools for c in fresh)
        if needs_yes and self._asking not in (None, command) and self._asking_until is not None \
                and command.words is not None:
            self._drop_question("a new command came instead")  # the user moved on: asked again below
        if needs_yes and self._asking is None and self.book.allows(command, Move.ASK):
            return self._ask(command, RunTools(words, fresh, session))
        if needs_yes:  # (its words unknown, or a question open)
            self._route_answered()
            self._routing_failed(command, words, "a tool that needs a spoken yes, and none can be asked now")
            return []
        self._move(command, Move.READ if all(c.name in self.read_only_tools for c in fresh) else Move.RUN)
        self._fire(E.TOOLS_REQUESTED, "")
        self._tools_at = self._clock()
        return [StartTools(command.route, words, fresh, session, unconfirmed=command.words is None, command_id=command.id)]

    def _dismissed(self, command: Command, words: str) -> list[Action]:
        """It asked for nothing ("stop", "never mind"): nothing runs and nothing is said; the
        working sound stops. Its words, if they come, may still say it was not addressed."""
        self._end_route()
        self._fire(E.ROUTE_CANCELLED, "")
        self._move(command, Move.DISMISS)
        self.timeline.add(TimelineKind.DISMISSED, f"{words or 'a command'!r} asked for nothing: nothing ran or was said")
        return []

    # -- a spoken yes before anything that cannot be undone ---------------------------------------------
    def _ask(self, command: Command, calls: RunTools) -> list[Action]:
        """A call that cannot be undone: ask first ("Just to be sure: shall I unlock the front
        door?"); the answer's follow-up window takes the reply, and only a spoken yes runs it, once."""
        self._route_answered()
        command.held = calls
        self._move(command, Move.ASK)
        self._asking, self._asking_until = command, None  # (the wait starts once the question was said)
        asked = [q for c in calls.calls if c.name in self.needs_yes_tools and (q := self.ask_about(c.name, c.arguments))]
        question = just_to_be_sure(asked[0]) if len(asked) == 1 else question_for(command.words or "")
        self.timeline.add(TimelineKind.ASKING, f"{', '.join(c.name for c in calls.calls)} needs a spoken yes: {question!r}")
        self._queue(question, NarrationKind.ANSWER)
        return []

    def _tool_needs_yes(self, command_id: int, call: FunctionCall, question: str) -> None:
        """A call the brain picked needs a yes: asked once its command's tools are done."""
        command = self._open.get(command_id)
        if command is None or self._asking is not None or not self.book.allows(command, Move.ASK):
            return  # (its result already says nothing was done; it is said as it is)
        self._move(command, Move.ASK)
        command.held = RunTools(command.words or "", (call,), self._session)
        self._asking, self._asking_until = command, None
        self._pending_question = just_to_be_sure(question)

    def _question_said(self, now: float) -> None:
        if self._asking is not None and self._asking_until is None:
            self._asking_until = now + max(self.timings.follow_up_s, 6.0) + self.timings.yes_grace_s

    def _reply_to_question(self, reply: str, now: float) -> list[Action]:
        command, self._asking, self._asking_until = self._asking, None, None
        assert command is not None and isinstance(command.held, RunTools)
        calls, command.held = command.held, None
        if not is_yes(reply) or self.machines[RouteState] is not RI:
            self._move(command, Move.DECLINE)
            self.timeline.add(TimelineKind.ASKING, f"{reply!r} is no yes: nothing ran")
            self._queue(DECLINED_MESSAGE, NarrationKind.ANSWER)
            return []
        self.timeline.add(TimelineKind.ASKING, f"{reply!r}: going ahead")
        self._start_route(command, now, move=False)
        self._fire(E.COMMAND_ROUTED, "a spoken yes")
        self._move(command, Move.RUN)
        self._fire(E.TOOLS_REQUESTED, "")
        self._tools_at = now
        return [StartTools(command.route, calls.command, calls.calls, calls.session, confirmed=True, command_id=command.id)]

    def _no_reply(self, now: float) -> None:
        if self._asking is not None and self._asking_until is not None and now >= self._asking_until:
            self._drop_question("no yes came")

    def _drop_question(self, why: str) -> None:
        """The question asked goes unanswered: its command declined, nothing ran."""
        command, self._asking, self._asking_until = self._asking, None, None
        assert command is not None
        command.held = None
        self._move(command, Move.DECLINE)
        self.timeline.add(TimelineKind.ASKING, f"{why}: nothing ran")

    def _tool_ran(self, command_id: int, name: str, arguments: str) -> None:
        command = self._open.get(command_id)
        shown = None if command is None or command.words is None else arguments
        event = ToolRan(command_id, name, shown)
        if command is not None:
            command.tools.append(event.text)
        self.timeline.emit(event)

    def _tool_done(self, command_id: int, name: str, outcome: ToolOutcome, found: str) -> None:
        command = self._open.get(command_id)
        if command is None or command.words is None:  # it may turn out overheard: not kept
            found = "(before its transcript: not kept)" if outcome is not ToolOutcome.CRASHED else found
        event = ToolFinished(command_id, name, outcome, found)
        if command is not None:
            command.results.append(event.text)
        self.timeline.emit(event)

    def _tools_finished(self, route: int, scripts: tuple[str, ...], now: float) -> None:
        if route in self._dropped_routes:  # a withdrawn provisional route's read-only tools: unheard
            self._dropped_routes.discard(route)
            return
        current = self._is_current(route, RT)
        command = self._current if current else None
        if command is not None:
            command.stages.mark(Stage.TOOL_DONE, now)
            self._end_route()
            if command.step is Step.WITHDRAWN:  # read-only tools ran for a false local wake
                self._fire(E.ROUTE_CANCELLED, "")
                return
            self._fire(E.TOOLS_FINISHED, "")
            if command.step is Step.ASKING:  # a call it ran needs a yes: ask (nothing else was done)
                question, self._pending_question = self._pending_question, ""
                self.timeline.add(TimelineKind.ASKING, f"a call needs a spoken yes: {question!r}")
                self._queue(question, NarrationKind.ANSWER)
                return
        self._answer(command, " ".join(scripts), NarrationKind.ANSWER)

    def _route_answered(self) -> Command | None:
        if self.machines[RouteState] in (RS, RA):
            command = self._end_route()
            self._fire(E.ROUTE_ANSWERED, "")
            return command
        return None

    def _routing_failed(self, command: Command | None, words: str, reason: str) -> None:
        self.timeline.emit(RoutingError(words, reason))
        self._answer(command, ROUTING_FAILED_MESSAGE, NarrationKind.ERROR)

    def _answer(self, command: Command | None, script: str, kind: NarrationKind) -> None:
        """Queue what is said for `command` (a result, the model's text, an apology)."""
        if command is not None and not self._move(command, Move.ANSWER):
            command = None  # (a bug, logged: said, but not as this command's)
        if command is not None:
            command.said, command.apology = script, kind is NarrationKind.ERROR
        if command is not None and command.provisional:  # made ready now, said once its turn is over
            command.prepared = kind
            self._outbox.append(PrepareNarration(command.id, script))
            return
        self._queue(script, kind, command=command)

    # -- the words come (routed by its audio) -----------------------------------------------------------
    def _confirmed(self, item: str, text: str, marks: Stages) -> list[Action]:
        command = self._find(item)
        if command is None or command.verdict not in (Verdict.UNHEARD, Verdict.STANDS):
            # Given up on (timed out, lost with its session), or confirmed already: never routed twice.
            self.timeline.add(TimelineKind.CONFIRMED, text)
            return []
        actions = self._turn_confirmed(command) if command.provisional else []  # (the server ended its turn)
        command.words = text
        for stage, at in marks:
            command.stages.mark(stage, at)
        self.timeline.emit(Confirmed(command.record()))
        if command.verdict is Verdict.STANDS:  # addressed after all: its answer may be logged and kept now
            self.timeline.emit(AnswerKept(command.record()))
        self._move(command, Move.CONFIRM)
        held, command.held = command.held, None
        if held is None or command is not self._current:
            return actions
        return actions + self._route_outcome(dataclasses.replace(held, command=text))  # type: ignore[type-var]

    def _rejected(self, item: str, transcript: str) -> list[Action]:
        """The transcript of a command routed by its audio has nothing like the wake phrase: one
        verdict for it. Nothing of an answer said yet: withdrawn (what has not acted is dropped,
        an answer queued is not said). Its answer already begun: answered as heard, and the
        transcript is what it was asked, never "overheard" after it was answered."""
        command = self._find(item)
        if command is None:
            return []  # (given up on already: timed out, or lost with its session, and not answered)
        if not self.book.allows(command, Move.WITHDRAW):
            # One verdict: answered. But its words do not show the wake phrase (a false wake, or a
            # transcriber's garble): they, and the answer made of them, are not kept anywhere.
            log.info("a command answered before its transcript came: the transcript does not show the wake "
                     "phrase; the answer stands, its words are not kept")
            command.words, command.said = UNADDRESSED_WORDS, UNCONFIRMED_ANSWER
            self._move(command, Move.CONFIRM)
            return []
        why = "not addressed after all: the routing was cancelled, nothing ran"
        if command is self._current and self.machines[RouteState] is RT:
            why = "not addressed after all: its answer is not said"  # (its read-only tools finish unheard)
        elif command is self._current:
            self._end_route()
            self._fire(E.ROUTE_CANCELLED, "")
        elif command.step is Step.ANSWERING:  # queued, not begun: not said
            why = "not addressed after all: its answer is not said"
            self._narrations = [r for r in self._narrations if r.command is not command]
            heapq.heapify(self._narrations)
        dropped = [DropNarration(command.id)] if command.prepared is not None else []
        self._move(command, Move.WITHDRAW)
        self.timeline.emit(Overheard(transcript))  # what it was: speech not addressed to us (its words not kept)
        self.timeline.emit(CommandWithdrawn(command.record(), why))
        return [UtteranceRejected(), *dropped]

    def _route_withdrawn(self, route: int) -> None:
        """A route by audio was not sent: its transcript came first (its words route it), or, inline,
        the session knows no woken utterance in progress (its commit or its words route it)."""
        if self._is_current(route, RS):
            command = self._end_route()
            assert command is not None
            self._move(command, Move.LOSE)
            self._fire(E.ROUTE_CANCELLED, "not sent: its words or its commit route it")

    def _route_not_sent(self, route: int) -> None:
        if self._is_current(route, RS):
            command = self._end_route()
            assert command is not None
            if command.words is not None:  # first in line for the next session
                self._move(command, Move.REQUEUE)
                self._pending.appendleft(command)
            else:  # routed by its audio, unconfirmed: its transcript routes it
                self._move(command, Move.LOSE)
            self._fire(E.ROUTE_NOT_SENT, "")

    def _route_lost_with_session(self, interrupted: str | None) -> None:
        """The listener session went before the route's response came: a command routed by its
        words is routed again, first in line; one routed by its audio comes back by its words
        (the replay of what the session never transcribed)."""
        command = self._current
        if command is None or self.machines[RouteState] not in (RS, RA):
            return
        if interrupted is not None and command.words is not None:
            self._end_route()
            self._move(command, Move.REQUEUE)
            self._pending.appendleft(command)
            self._fire(E.ROUTE_INTERRUPTED, "")
        elif command.words is None:
            self._end_route()
            self._move(command, Move.LOSE)
            self._fire(E.ROUTE_INTERRUPTED, "")

    def _route_timed_out(self, now: float) -> list[Action]:
        if not (self.machines[RouteState] in (RS, RA) and self._route_deadline is not None and now >= self._route_deadline):
            return []
        command = self._end_route()
        assert command is not None
        self._fire(E.ROUTE_TIMED_OUT, "")
        self._routing_failed(command, command.words or "", f"no answer from the model in {self.timings.route_timeout_s:g} s")
        return [AbandonRoute(), *self._restart("the model did not answer a command")]

    # -- said ---------------------------------------------------------------------------------------
    def _answer_begun(self, request: NarrationRequest) -> None:
        if request.command is not None:
            self._move(request.command, Move.BEGIN)

    def _answer_ended(self, request: NarrationRequest, stopped: bool, offsets: dict[str, float]) -> None:
        command = request.command
        if command is not None:
            command.offsets = offsets
            self._move(command, Move.CUT if stopped else Move.FINISH)

    # -- routed at a pause inside it (issue 33) ----------------------------------------------------------
    def _turn_paused(self, audio: bytes, now: float) -> list[Action]:
        """A pause inside a woken utterance, after a command's worth of speech: route it now, on its
        audio so far, provisionally. Read-only tools run on it and its answer is made ready (the
        narrator reads it into a held speaker); nothing that changes something runs, nothing is
        asked and nothing is said until the turn end confirms it (the table has no such rows)."""
        if self.provisional_command is not None:
            return []
        if not self.pause_point.may_route():  # the extra share is at its budget: routed at the turn end
            log.info("a pause inside a command: not routed early (provisional routes are at their token budget)")
            if self.cost is not None:
                self.cost.provisional_held_back()
            return []
        paused_s = self.pause_point.reached_s(self._pause_told or self.timings.provisional_s)  # (the filter's)
        marks = ((Stage.END_OF_SPEECH, now - paused_s),)
        return self._route_by_audio(None, marks, now, audio, provisional=True)

    def _turn_ended(self, audio: bytes, now: float) -> list[Action]:
        """The device heard the turn end: the provisional route, if one was sent at its last
        pause, is the command's (its answer, if ready, is said now); else route it now."""
        command = self.provisional_command
        if command is None:
            return self._route_by_audio(None, ((Stage.END_OF_SPEECH, now - self.timings.turn_end_s),), now, audio)
        return self._turn_confirmed(command)

    def _turn_confirmed(self, command: Command) -> list[Action]:
        self._move(command, Move.TURN_END)
        log.info("the turn ended at the pause: its provisional route stands (command %d)", command.id)
        if isinstance(command.prepared, NarrationKind) and command.step is Step.ANSWERING:
            self._queue(command.said, command.prepared, command=command)  # the narrator read it already
        return [CommandTaken(), *self._prepare(command)]

    def _speech_resumed(self) -> list[Action]:
        """The user went on after the pause: the provisional route is withdrawn. Its response is
        cancelled (or ignored), its read-only tools finish unheard, its answer is dropped unsaid,
        and what it held never runs; the whole utterance is routed at its end, as any other."""
        command = self.provisional_command
        if command is None:
            return []
        actions: list[Action] = [WithdrawRoute()]
        if command is self._current:
            self._end_route()
            self._dropped_routes.add(command.route)
            self._fire(E.PROVISIONAL_WITHDRAWN, "the user went on talking")
        elif self.machines[RouteState] is RI:
            self._fire(E.PROVISIONAL_WITHDRAWN, "the user went on talking")
        if command.prepared is not None:
            actions.append(DropNarration(command.id))
        command.held = None
        self._move(command, Move.RESUME)
        self.pause_point.withdrawn()
        if self.cost is not None:
            self.cost.provisional_withdrawn()
        self.timeline.emit(CommandWithdrawn(command.record(), "the user went on after a pause: its provisional route "
                                            "is dropped; the whole command is routed at its end"))
        return actions
