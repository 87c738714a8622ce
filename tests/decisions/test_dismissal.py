"""A command that asks for nothing ("stop", "never mind"; decisions.dismissal): the model's only
call is `dismiss`, so nothing runs, nothing is said and the routing is free again. Before, the
core ran the call and queued its empty script, and a real model with no such tool answered the
word "stop" with whatever tool fitted least badly."""

from __future__ import annotations

import pytest

from decisions.coordinator import RouteSent, RouteState, SendRoute, StartTools, ToolsFinished, WorkingState
from decisions.dismissal import DISMISS_TOOL, dismisses
from decisions.errors import IllegalTransition
from decisions.events import CommandClosed
from decisions.lifecycle import CommandBook, Move, RouteMode, Step, Verdict
from decisions.listener_core import CommandConfirmed, CommandHeard, CommandRejected, RunTools
from service.history import HistoryTracker, Outcome
from tests.decisions.test_coordinator_core import by_audio, call, routed, say_all
from tests.decisions.test_coordinator_core import clock, core  # noqa: F401  (fixtures)


def closed(core):
    return [e.event.command for e in core.timeline.entries if isinstance(e.event, CommandClosed)]


def test_a_command_that_asks_for_nothing_runs_nothing_says_nothing_and_the_next_one_is_routed(core):
    send = routed(core, "never mind")
    core.handle(RouteSent(send.route))
    assert core.handle(CommandHeard("what time is it")) == []  # waits behind the one being routed
    actions = core.handle(RunTools("never mind", (call("d1", DISMISS_TOOL),), session=1))
    assert not [a for a in actions if isinstance(a, StartTools)]  # nothing runs
    (next_route,) = [a for a in actions if isinstance(a, SendRoute)]  # the routing is free at once
    assert next_route.command == "what time is it"
    assert core.next_narration() is None  # nothing is said
    (record,) = closed(core)
    assert (record.words, record.step, record.said, record.kept) == ("never mind", Step.DISMISSED, "", True)


def test_a_dismissal_stops_the_working_sound_and_leaves_no_narration_to_wait_for(core):
    send = routed(core, "stop")
    core.handle(RouteSent(send.route))
    assert core.machines[WorkingState] is WorkingState.WAITING
    core.handle(RunTools("stop", (call("d1", DISMISS_TOOL),), session=1))
    assert core.machines[WorkingState] is WorkingState.IDLE and core.machines[RouteState] is RouteState.IDLE
    assert core.next_narration() is None and core.idle(core._clock())


def test_a_call_beside_dismiss_is_a_command_and_runs(core):
    send = routed(core, "stop and tell me the time")
    core.handle(RouteSent(send.route))
    (start,) = core.handle(RunTools("stop and tell me the time", (call("d1", DISMISS_TOOL), call("t1")), session=1))
    assert isinstance(start, StartTools) and [c.name for c in start.calls] == [DISMISS_TOOL, "get_time"]
    core.handle(ToolsFinished(send.route, ("", "It is noon.")))
    said, _ = say_all(core)
    assert [r.script.strip() for r in said] == ["It is noon."]


def test_a_dismissal_routed_by_its_audio_is_closed_with_its_words_or_withdrawn_by_them(clock):  # noqa: F811
    core, send = by_audio(clock, read_only=frozenset({"get_time", DISMISS_TOOL}))
    core.handle(RunTools("", (call("d1", DISMISS_TOOL),), session=1))
    assert closed(core) == [] and core.next_narration() is None  # its words are to come
    core.handle(CommandConfirmed("item_1", "stop"))
    (record,) = closed(core)
    assert (record.words, record.step, record.verdict) == ("stop", Step.DISMISSED, Verdict.ADDRESSED)

    core, send = by_audio(clock, read_only=frozenset({"get_time", DISMISS_TOOL}))
    core.handle(RunTools("", (call("d1", DISMISS_TOOL),), session=1))
    core.handle(CommandRejected("item_1", "the bus stops here"))  # not addressed after all
    (record,) = closed(core)
    assert (record.step, record.kept) == (Step.WITHDRAWN, False)


def test_the_lifecycle_ends_a_dismissed_command_and_lets_only_its_words_or_more_speech_withdraw_it():
    book = CommandBook(strict=True)
    command = book.open(RouteMode.AUDIO, None, provisional=True)
    book.move(command, Move.ROUTE)
    book.move(command, Move.DISMISS)
    for move in (Move.ANSWER, Move.RUN, Move.BEGIN, Move.ASK):  # nothing of it runs or is said
        with pytest.raises(IllegalTransition):
            book.move(command, move)
    book.move(command, Move.RESUME)  # the user went on after the pause: the whole utterance is routed
    assert command.step is Step.WITHDRAWN


def test_only_a_response_of_dismiss_calls_alone_dismisses():
    assert dismisses([call("d1", DISMISS_TOOL)]) and dismisses([call("d1", DISMISS_TOOL), call("d2", DISMISS_TOOL)])
    assert not dismisses([]) and not dismisses([call("d1", DISMISS_TOOL), call("t1")])


def test_the_history_keeps_a_dismissed_command_as_asked_with_nothing_said(core):
    done = []
    tracker = HistoryTracker(done.append, keep_overheard=False, clock=lambda: 0.0)
    core.timeline.on_add.append(tracker.observe)
    send = routed(core, "never mind")
    core.handle(RouteSent(send.route))
    core.handle(RunTools("never mind", (call("d1", DISMISS_TOOL),), session=1))
    assert [(e.heard, e.said, e.outcome) for e in done] == [("never mind", "", Outcome.DISMISSED)]
