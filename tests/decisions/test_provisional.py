"""A route sent at a pause inside a command, before its turn is over (issue 33): the lifecycle's
Turn rows, the coordinator core, the listener core, the pause signal and the cost meter, fed by hand."""

from __future__ import annotations

from datetime import datetime

import pytest

from config.settings import CostSettings
from decisions.coordinator import (
    CommandTaken, CoordinatorCore, CoordinatorTimings, DropNarration, NarrationDone, NarrationKind, NarrationsFinished,
    PrepareNarration, PrepareTools, RouteSent, RouteState, SendRoute, SpeechResumed, StartTools, ToolsFinished, TurnEnded, TurnPaused,
    WithdrawRoute, WorkingState,
)
from decisions.cost import CostMeter
from decisions.errors import IllegalTransition
from decisions.lifecycle import CommandBook, Move, RouteMode, Step, Turn
from decisions.listener_core import (
    CommandConfirmed, ListenerCore, ProvisionalBilled, RunTools, Send, SessionReady, SpeakText, UsageReported,
)
from decisions.timeline import Timeline
from decisions.uplink import Uplink
from decisions.wake_gate import WakeGate
from detectors.turn_pause import TurnFollower, TurnSignal
from realtime_api import wire
from realtime_api.wire import FunctionCall

TIMINGS = CoordinatorTimings(route_timeout_s=10.0, recycle_after_s=1000.0, healthy_after_s=5.0, chime=False,
                             follow_up_s=0, working_after_s=1000, still_working_after_s=1000, turn_end_s=0.46,
                             provisional_s=0.16)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


# --- the lifecycle's rows -----------------------------------------------------------------------------


def provisional_command():
    book = CommandBook(strict=True)
    command = book.open(RouteMode.AUDIO, None, provisional=True)
    book.move(command, Move.ROUTE)
    return book, command


def test_only_read_only_tools_run_on_a_provisional_route_and_nothing_of_it_is_said():
    book, command = provisional_command()
    assert command.turn is Turn.PROVISIONAL
    for move in (Move.RUN, Move.ASK):  # a tool that changes something; a spoken yes
        with pytest.raises(IllegalTransition):
            book.move(command, move)
    book.move(command, Move.READ)
    book.move(command, Move.ANSWER)  # its script is made ready...
    with pytest.raises(IllegalTransition):
        book.move(command, Move.BEGIN)  # ... but not said
    assert command.step is Step.ANSWERING


def test_the_turn_end_confirms_a_provisional_route_and_then_it_acts_and_speaks():
    book, command = provisional_command()
    book.move(command, Move.TURN_END)
    assert command.turn is Turn.CONFIRMED and not command.provisional
    book.move(command, Move.RUN)
    book.move(command, Move.ANSWER)
    book.move(command, Move.BEGIN)
    with pytest.raises(IllegalTransition):
        book.move(command, Move.RESUME)  # said: the user going on is another utterance


@pytest.mark.parametrize("moves", [(), (Move.HOLD,), (Move.READ,), (Move.READ, Move.ANSWER)])
def test_speech_coming_back_withdraws_a_provisional_route_wherever_it_is(moves):
    book, command = provisional_command()
    for move in moves:
        book.move(command, move)
    book.move(command, Move.RESUME)
    assert command.step is Step.WITHDRAWN and command.turn is Turn.WITHDRAWN
    with pytest.raises(IllegalTransition):
        book.move(command, Move.TURN_END)  # withdrawn stays withdrawn


def test_a_command_routed_once_its_turn_was_over_cannot_be_withdrawn_by_speech():
    book = CommandBook(strict=True)
    command = book.open(RouteMode.AUDIO, None)
    book.move(command, Move.ROUTE)
    with pytest.raises(IllegalTransition):
        book.move(command, Move.RESUME)
    book.move(command, Move.RUN)  # (a route by audio at the turn end, as before)


# --- the coordinator core --------------------------------------------------------------------------


def call(name="get_time", call_id="c1"):
    return FunctionCall(call_id=call_id, name=name, arguments="{}", item_id="fc_1")


@pytest.fixture
def clock():
    return Clock()


def paused(clock, cost=None):
    core = CoordinatorCore(TIMINGS, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(500, 48000), clock,
                           read_only_tools=frozenset({"get_time"}), cost=cost)
    core.handle(SessionReady(1))
    (send,) = core.handle(TurnPaused(b"\x01" * 960))
    assert send == SendRoute(1, "", audio=b"\x01" * 960, provisional=True)  # no CommandTaken: the turn may go on
    core.handle(RouteSent(send.route, "item_1"))
    return core, send


def test_a_paused_command_runs_its_read_only_tool_makes_its_answer_ready_and_says_it_at_the_turn_end(clock):
    core, send = paused(clock)
    (start,) = core.handle(RunTools("", (call(),), session=1))
    assert isinstance(start, StartTools) and start.unconfirmed
    prepared = core.handle(ToolsFinished(send.route, ("It is noon.",)))
    assert prepared == [PrepareNarration(core.provisional_command.id, "It is noon.")]
    assert core.next_narration() is None  # nothing is said before the turn is over
    clock.t += 0.3
    assert core.handle(TurnEnded(b"\x01" * 2000)) == [CommandTaken()]  # not routed again
    request = core.next_narration()
    assert request is not None and request.script == "It is noon." and request.command.turn is Turn.CONFIRMED
    core.handle(NarrationDone(request, "ok"))
    core.handle(NarrationsFinished())
    assert core.timeline.count("narrated") == 1 and core.book.illegal == 0


def test_speech_after_the_pause_drops_the_answer_made_ready_and_the_whole_command_is_routed_at_its_end(clock):
    core, send = paused(clock)
    core.handle(RunTools("", (call(),), session=1))
    ((prepare),) = core.handle(ToolsFinished(send.route, ("It is noon.",)))
    withdrawn = core.handle(SpeechResumed())
    assert withdrawn == [WithdrawRoute(), DropNarration(prepare.command_id)]
    assert core.machines[WorkingState] is WorkingState.IDLE and core.provisional_command is None
    (again, taken) = core.handle(TurnEnded(b"\x02" * 4000))
    assert again == SendRoute(2, "", audio=b"\x02" * 4000) and isinstance(taken, CommandTaken)  # whole, as before
    core.handle(RouteSent(again.route, "item_1"))
    core.handle(RunTools("", (call(call_id="c2"),), session=1))
    core.handle(ToolsFinished(again.route, ("It is five past noon.",)))
    request = core.next_narration()
    assert request.script == "It is five past noon." and core.next_narration() is None  # answered once


def test_a_tool_that_changes_something_never_runs_on_a_provisional_route(clock):
    core, send = paused(clock)
    assert core.handle(RunTools("", (call("set_timer"),), session=1)) == []  # held, not run
    assert core.handle(SpeechResumed()) == [WithdrawRoute()]
    (again, _) = core.handle(TurnEnded(b"\x02" * 4000))
    core.handle(RouteSent(again.route, "item_1"))
    held = core.handle(RunTools("", (call("set_timer", "c2"),), session=1))  # the whole command's: held too
    assert held == [PrepareTools((call("set_timer", "c2"),))]  # (its turn is over: what it may do first starts)
    (start,) = core.handle(CommandConfirmed("item_1", "set a timer for ten minutes"))
    assert start.calls == (call("set_timer", "c2"),) and start.route == again.route  # once, the whole command's


def test_a_held_call_on_a_provisional_route_confirmed_by_the_turn_end_still_waits_for_the_transcript(clock):
    core, send = paused(clock)
    assert core.handle(RunTools("", (call("set_timer"),), session=1)) == []  # the turn not over: nothing prepared
    # Over: it still waits for its words, and what it may do first starts now (the brain's pick).
    assert core.handle(TurnEnded(b"\x01" * 2000)) == [CommandTaken(), PrepareTools((call("set_timer"),))]
    (start,) = core.handle(CommandConfirmed("item_1", "set a timer"))
    assert start.calls == (call("set_timer"),)


@pytest.mark.parametrize("late", [RunTools("", (call("set_timer"),), session=1), SpeakText("", "Hello.")])
def test_a_response_of_a_route_withdrawn_before_it_came_does_nothing(clock, late):
    core, send = paused(clock)
    assert core.handle(SpeechResumed()) == [WithdrawRoute()]
    assert core.machines[RouteState] is RouteState.IDLE
    assert core.handle(late) == [] and core.next_narration() is None


def test_read_only_tools_of_a_withdrawn_route_finish_unheard_while_the_whole_command_is_routed(clock):
    core, send = paused(clock)
    core.handle(RunTools("", (call(),), session=1))
    assert core.handle(SpeechResumed()) == [WithdrawRoute()]
    (again, _) = core.handle(TurnEnded(b"\x02" * 4000))  # not waiting for them
    assert core.handle(ToolsFinished(send.route, ("It is noon.",))) == [] and core.next_narration() is None
    assert core.machines[RouteState] is RouteState.SENDING  # the whole command's route carries on


def test_provisional_routes_are_counted_in_the_cost_meter(clock):
    meter = CostMeter(CostSettings(), clock=lambda: datetime(2026, 1, 1, 12))
    core, send = paused(clock, meter)
    core.handle(SpeechResumed())
    core.handle(UsageReported(wire.Usage(input_audio_tokens=30, input_text_tokens=70)))
    core.handle(ProvisionalBilled(wire.Usage(input_audio_tokens=30, input_text_tokens=70), sent=True, withdrawn=True))
    core.handle(UsageReported(wire.Usage(input_audio_tokens=50, input_text_tokens=70)))  # the whole command's
    p = meter.summary().provisional
    assert (p.sent, p.withdrawn, p.tokens, p.withdrawn_tokens, p.routing_tokens) == (1, 1, 100, 100, 220)
    assert p.extra_share == pytest.approx(100 / 120)
    assert "1 provisional routes, 1 withdrawn" in meter.summary().line()
    from web.feed import WebFeed
    from web.metrics import render
    metrics = render(WebFeed(current_command=lambda: None), meter.summary).decode()
    assert 'handoff_provisional_routes_total{outcome="withdrawn"} 1.0' in metrics
    assert 'handoff_provisional_route_tokens_total{outcome="withdrawn"} 100.0' in metrics
    assert 'handoff_provisional_route_tokens_total{outcome="all_routing"} 220.0' in metrics


# --- the listener core ---------------------------------------------------------------------------------


def listening():
    core = ListenerCore(gate=WakeGate("computer", window_s=8.0), clock=lambda: 0.0)
    core.local_wake(0.4)
    core.feed(wire.SpeechStarted("item_1", 1000))
    return core


def test_a_withdrawn_provisional_route_is_cancelled_and_its_utterance_routed_whole_later():
    core = listening()
    (route,) = core.route_inline(b"\x01" * 960, [], provisional=True)
    assert route.event["response"]["metadata"] == {"handoff_route": "route-1"}
    assert core.feed(wire.ResponseCreated("resp_1", {"handoff_route": "route-1"})) == []
    withdrawn = core.withdraw_provisional()
    assert withdrawn == [Send({"type": "response.cancel", "response_id": "resp_1"})] and core.in_flight is None
    usage = wire.Usage(input_audio_tokens=10, input_text_tokens=90)
    done = core.feed(wire.ResponseDone("resp_1", "cancelled", (call("set_timer"),), "", "", {"handoff_route": "route-1"},
                                       None, usage=usage))
    assert ProvisionalBilled(usage, sent=True, withdrawn=True) in done
    assert not [a for a in done if isinstance(a, RunTools)]  # nothing of it runs
    assert core.route_inline(b"\x02" * 4000, []) is not None  # the whole utterance, at its end


def test_a_provisional_route_withdrawn_after_its_response_bills_its_tokens_as_withdrawn_then():
    core = listening()
    core.route_inline(b"\x01" * 960, [], provisional=True)
    usage = wire.Usage(input_audio_tokens=10, input_text_tokens=90)
    done = core.feed(wire.ResponseDone("resp_1", "completed", (call(),), "", "", {"handoff_route": "route-1"}, None,
                                       usage=usage))
    assert ProvisionalBilled(usage, sent=True, withdrawn=False) in done and RunTools("", (call(),), 0) in done
    assert core.withdraw_provisional() == [ProvisionalBilled(usage, sent=False, withdrawn=True)]
    assert core.withdraw_provisional() == []  # once


# --- the pause signal ----------------------------------------------------------------------------------


def follow(pattern: str, pause_s: float | None = 0.16) -> list[tuple[int, TurnSignal]]:
    """`pattern`: one character per 20 ms chunk after the accepted wake, "s" speech, "." silence."""
    follower = TurnFollower(0.0, 0.46, pause_s)
    signals = []
    for index, chunk in enumerate(pattern):
        signal = follower.feed(chunk == "s", (index + 1) * 0.02, 0.02)
        if signal is not None:
            signals.append((index + 1, signal))
        if signal in (TurnSignal.ENDED, TurnSignal.DROPPED):
            break  # (the upload filter lets go of the turn here)
    return signals


def test_a_pause_inside_the_command_is_signalled_once_and_speech_after_it_resumes():
    P, R, E = TurnSignal.PAUSED, TurnSignal.RESUMED, TurnSignal.ENDED
    assert follow("s" * 20 + "." * 10 + "s" * 10 + "." * 30) == [(28, P), (31, R), (48, P), (63, E)]
    assert follow("s" * 20 + "." * 30, pause_s=None) == [(43, E)]  # none asked for: only the end


def test_no_pause_is_signalled_before_a_command_was_said():
    assert follow("." * 12 + "s" * 20 + "." * 30)[0] == (40, TurnSignal.PAUSED)  # the pause after the phrase: none


# --- where in the pause ------------------------------------------------------------------------------


def test_the_pause_point_is_as_late_as_the_round_trips_allow_never_sooner_than_the_setting():
    from decisions.pause_point import PausePoint
    point = PausePoint(turn_end_s=0.46, earliest_s=0.14)
    assert point.pause_s == 0.14  # nothing measured yet
    point.route_answered(0.055)
    assert point.pause_s == 0.14  # the narrator's not yet
    point.voice_ready(0.06)
    assert point.pause_s == 0.34  # a near server: late in the pause (0.46 - 0.12, in whole 20 ms chunks)
    point.voice_ready(0.07)
    point.voice_ready(0.07)
    assert point.pause_s == 0.32  # (0.46 - 0.055 - 0.07 - 0.005 = 0.33: the chunk before)
    for _ in range(9):
        point.route_answered(0.4)  # a far one: as soon as the setting allows
    assert point.pause_s == 0.14
    assert point.reached_s(0.15) == pytest.approx(0.16)
    assert PausePoint(0.46, 0.0).pause_s is None and PausePoint(0.46, 0.5).pause_s is None  # off


def test_the_core_moves_the_pause_point_by_what_its_routes_and_narrations_took(clock):
    from decisions.coordinator import SetPause
    core, send = paused(clock)
    clock.t += 0.05
    core.handle(RunTools("", (call(),), session=1))
    assert core.pause_point.pause_s == 0.16  # (TIMINGS: the earliest) the narrator not measured yet
    (prepare,) = core.handle(ToolsFinished(send.route, ("It is noon.",)))
    core.handle(TurnEnded(b"\x01" * 2000))
    request = core.next_narration()
    actions = core.handle(NarrationDone(request, "ok", ready_after_s=0.06))
    assert actions == [SetPause(0.34)]  # 0.46 - 0.05 - 0.06 - 0.005, in whole chunks
    assert not [a for a in core.handle(NarrationsFinished()) if isinstance(a, SetPause)]  # told once
