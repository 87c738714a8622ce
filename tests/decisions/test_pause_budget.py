"""What routing early may cost (issue 33): `PausePoint`'s token account and budget, alone and
through the coordinator's core, and where it shows (the cost meter, /metrics)."""

from __future__ import annotations

from datetime import datetime

import pytest

from config.settings import CostSettings
from decisions.coordinator import (
    CommandTaken, CoordinatorCore, CoordinatorTimings, ReadAheadBilled, RouteSent, SendRoute, SetPause, SpeechResumed,
    TurnEnded, TurnPaused,
)
from decisions.cost import CostMeter
from decisions.listener_core import ProvisionalBilled, SessionReady, UsageReported
from decisions.pause_point import PausePoint
from decisions.timeline import Timeline
from decisions.uplink import Uplink
from decisions.wake_gate import WakeGate
from realtime_api.wire import Usage

ROUTE = Usage(input_text_tokens=1000)  # one route's tokens


def budgeted(budget: float | None = 0.15) -> PausePoint:
    return PausePoint(turn_end_s=0.46, earliest_s=0.14, budget=budget)


def withdraw(point: PausePoint, usage: Usage = ROUTE) -> None:
    """A provisional route the user talked past, billed as the listener reports it."""
    assert point.may_route()
    point.sent()
    point.withdrawn()
    point.routed(usage)
    point.billed(usage, sent=True, withdrawn=True)


def useful(point: PausePoint, routes: int) -> None:
    for _ in range(routes):
        point.routed(ROUTE)


def test_a_user_who_never_talks_past_a_pause_is_never_held_back():
    point = budgeted()
    for _ in range(50):
        assert point.may_route()
        point.sent()
        point.routed(ROUTE)
        point.billed(ROUTE, sent=True, withdrawn=False)
    assert point.account.held_back == 0 and point.pause_s == 0.14 and point.account.extra_share == 0


def test_after_a_withdrawal_pauses_are_routed_at_their_end_until_useful_routing_makes_room_for_another():
    point = budgeted()
    withdraw(point)  # the first is not refused: nothing said yet that this user pauses
    useful(point, 1)  # the whole command, routed at its end
    # Another withdrawal would make 2,000 extra tokens: within 15 % only of 13,334 useful ones
    # (the next command's own route counted): 14 routes.
    for _ in range(12):
        assert not point.may_route()
        useful(point, 1)
    assert point.account.held_back == 12
    assert point.pause_s == 0.4  # meanwhile only a pause nearly as long as the turn end is routed early
    assert point.may_route()
    withdraw(point)
    useful(point, 1)
    assert point.account.extra_share == pytest.approx(2000 / 14000)
    assert not point.may_route()  # a third would be 3,000 of 15,000


def test_the_point_comes_back_a_chunk_a_pause_once_there_is_room_for_two_more_withdrawals():
    point = budgeted()
    withdraw(point)
    assert not point.may_route() and point.pause_s == 0.4
    useful(point, 13)  # 0.15 * 14,000 = 2,100: room for one more (2,000) but not two (3,000)
    assert point.may_route() and point.pause_s == 0.4
    useful(point, 7)
    moved = []
    for _ in range(14):
        assert point.may_route()
        moved.append(point.pause_s)
    assert moved[:3] == [0.38, 0.36, 0.34] and moved[-1] == 0.14  # back to where the round trips put it


def test_a_dropped_read_ahead_counts_against_the_budget_too():
    point = budgeted()
    withdraw(point)
    useful(point, 13)
    assert point.within_budget
    point.read_ahead_dropped(Usage(input_text_tokens=100, output_audio_tokens=300))
    assert point.account.extra_tokens == 1400 and not point.within_budget


def test_without_a_budget_nothing_is_held_back():
    point = budgeted(None)
    for _ in range(10):
        withdraw(point)
    assert point.account.held_back == 0 and point.pause_s == 0.14


# --- through the coordinator's core -----------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_core_routes_a_pause_over_the_budget_at_the_turn_end_and_says_so_on_the_metrics():
    clock = Clock()
    meter = CostMeter(CostSettings(), clock=lambda: datetime(2026, 1, 1, 12))
    timings = CoordinatorTimings(chime=False, follow_up_s=0, turn_end_s=0.46, provisional_s=0.14,
                                 provisional_budget=0.15)
    core = CoordinatorCore(timings, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(500, 48000), clock,
                           read_only_tools=frozenset({"get_time"}), cost=meter)
    core.handle(SessionReady(1))
    (send,) = core.handle(TurnPaused(b"\x01" * 960))
    assert send.provisional
    core.handle(RouteSent(send.route, "item_1"))
    core.handle(SpeechResumed())  # the user went on: withdrawn, and its response billed as such
    core.handle(UsageReported(ROUTE))
    core.handle(ProvisionalBilled(ROUTE, sent=True, withdrawn=True))
    core.handle(ReadAheadBilled(Usage(output_audio_tokens=60)))
    assert core.pause_point.account.extra_tokens == 1060
    # The next pause in it: one more withdrawal would cost far more than 15 % of the routing.
    assert core.handle(TurnPaused(b"\x02" * 2000)) == [SetPause(0.4)]  # not routed; the point moves
    (again, taken) = core.handle(TurnEnded(b"\x02" * 4000))
    assert again == SendRoute(2, "", audio=b"\x02" * 4000) and isinstance(taken, CommandTaken)  # at its end
    p = meter.summary().provisional
    assert (p.sent, p.withdrawn, p.held_back, p.read_ahead_tokens, p.budget) == (1, 1, 1, 60, 0.15)
    assert "1 held back by the 15 % budget" in meter.summary().line()
    from web.feed import WebFeed
    from web.metrics import render
    metrics = render(WebFeed(current_command=lambda: None), meter.summary).decode()
    assert 'handoff_provisional_routes_total{outcome="held_back"} 1.0' in metrics
    assert 'handoff_provisional_route_tokens_total{outcome="read_ahead_dropped"} 60.0' in metrics
    assert 'handoff_provisional_extra_share{of="budget"} 0.15' in metrics
