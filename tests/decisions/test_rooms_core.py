"""decisions.rooms: a satellite link's one transition table, and who hears a notice."""

from __future__ import annotations

import pytest

from decisions.errors import IllegalTransition
from decisions.rooms import TRANSITIONS, LinkCore, LinkEvent, LinkState, NoticeTargets


@pytest.mark.parametrize(("state", "event"), sorted(TRANSITIONS, key=lambda k: (k[0].value, k[1].value)))
def test_every_row_moves_as_the_table_says(state: LinkState, event: LinkEvent) -> None:
    core = LinkCore("kitchen", state=state, down_since=None if state is LinkState.UP else 100.0)
    core.handle(event, 101.0)
    assert core.state is TRANSITIONS[(state, event)]


@pytest.mark.parametrize(("state", "event"), [(s, e) for s in LinkState for e in LinkEvent if (s, e) not in TRANSITIONS])
def test_every_missing_row_is_a_bug_and_moves_nothing(state: LinkState, event: LinkEvent) -> None:
    core = LinkCore("kitchen", state=state)
    with pytest.raises(IllegalTransition):
        core.handle(event, 1.0)
    assert core.state is state and core.illegal == 1


def test_a_blip_is_not_announced_but_a_long_absence_is_once_and_its_return_too() -> None:
    core = LinkCore("kitchen", announce_after_s=30.0)
    assert core.handle(LinkEvent.CONNECTED, 0.0) == []
    assert core.handle(LinkEvent.LOST, 10.0) == []
    assert core.retry_in() == 0.0  # at once after a drop
    assert core.handle(LinkEvent.FAILED, 10.1) == []
    assert core.handle(LinkEvent.CONNECTED, 12.0) == []  # a reboot: nobody hears of it
    core.handle(LinkEvent.LOST, 20.0)
    for t in (20.5, 21.0, 22.0):
        assert core.handle(LinkEvent.FAILED, t) == []
    assert core.next_deadline() == 50.0
    said = core.handle(LinkEvent.TICK, 50.0)
    assert [a.text for a in said] == ["The kitchen satellite is unreachable."]
    assert core.handle(LinkEvent.FAILED, 60.0) == [] and core.handle(LinkEvent.TICK, 90.0) == []  # once
    assert [a.text for a in core.handle(LinkEvent.CONNECTED, 95.0)] == ["The kitchen satellite is back."]


def test_backoff_doubles_up_to_its_cap() -> None:
    core = LinkCore("kitchen", initial_s=0.25, max_s=4.0)
    waits = []
    for t in range(8):
        core.handle(LinkEvent.FAILED, float(t))
        waits.append(core.retry_in())
    assert waits == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]


def test_a_connection_that_ends_at_once_backs_off_and_one_that_lasted_retries_at_once() -> None:
    core = LinkCore("kitchen", initial_s=0.25, max_s=4.0, healthy_after_s=2.0)
    waits = []
    for t in range(4):  # accepted, then closed at once (a bad frame): each counts as a failure
        core.handle(LinkEvent.CONNECTED, 10.0 * t)
        core.handle(LinkEvent.LOST, 10.0 * t + 0.01)
        waits.append(core.retry_in())
    assert waits == [0.25, 0.5, 1.0, 2.0]
    core.handle(LinkEvent.CONNECTED, 100.0)
    core.handle(LinkEvent.LOST, 160.0)  # up for a minute: a reboot, found again at once
    assert core.retry_in() == 0.0


def test_a_notice_goes_to_its_origin_and_is_done_once_heard_there() -> None:
    targets = NoticeTargets(("kitchen", "office"))
    targets.started(7, "kitchen")
    assert targets.wants("kitchen", 1, 7) and not targets.wants("office", 1, 7)
    assert targets.heard_by("kitchen", 1, 7)
    # A task from before this run (or started from the command line): everyone.
    assert targets.wants("office", 2, 99) and targets.wants("kitchen", 2, 99)
    assert not targets.heard_by("office", 2, 99)
    assert not targets.wants("office", 2, 99) and targets.wants("kitchen", 2, 99)
    assert targets.heard_by("kitchen", 2, 99)


def test_notices_to_all_or_to_one_room() -> None:
    everyone = NoticeTargets(("kitchen", "office"), to_all=True)
    everyone.started(7, "kitchen")
    assert everyone.wants("office", 1, 7)
    one = NoticeTargets(("kitchen", "office"), fixed_room="office")
    one.started(7, "kitchen")
    assert one.wants("office", 1, 7) and not one.wants("kitchen", 1, 7)


def test_an_addressed_notice_skips_the_room_it_is_about() -> None:
    targets = NoticeTargets(("kitchen", "office", "bedroom"))
    targets.address(-1, frozenset({"office", "bedroom"}))
    assert not targets.wants("kitchen", -1, 0)
    assert not targets.heard_by("office", -1, 0)
    assert targets.heard_by("bedroom", -1, 0)
