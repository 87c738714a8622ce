"""The listener's sessions by one table (decisions.listener_session): what a restart, a warm-up
and a session's end may do, and what happens to a move the table has no row for."""

from __future__ import annotations

import logging

import pytest

from decisions.errors import IllegalTransition
from decisions.listener_session import Current, ListenerSessions, Move, Standby


def test_a_session_opens_hands_over_and_the_next_opens() -> None:
    sessions = ListenerSessions(strict=True)
    assert not sessions.takes_audio
    sessions.fire(Move.OPEN)
    assert sessions.takes_audio
    sessions.fire(Move.RETIRE)  # restart(): it takes no more audio from here on
    assert sessions.current is Current.CLOSING and not sessions.takes_audio
    assert not sessions.allows(Move.RETIRE)  # a second restart while the first hands over does nothing
    assert not sessions.allows(Move.OPEN)  # ... and no next session opens before the handover
    sessions.fire(Move.HAND_OVER)
    sessions.fire(Move.OPEN)
    assert sessions.takes_audio


def test_a_session_that_closes_while_it_hands_over_is_not_handed_over() -> None:
    sessions = ListenerSessions(strict=True)
    sessions.fire(Move.OPEN)
    sessions.fire(Move.RETIRE)
    sessions.fire(Move.END)
    assert sessions.current is Current.NONE
    assert not sessions.allows(Move.HAND_OVER)
    sessions.fire(Move.OPEN)  # the next one opens as after any end


def test_the_next_session_is_warmed_once_and_taken_once() -> None:
    sessions = ListenerSessions(strict=True)
    sessions.fire(Move.WARM)
    assert not sessions.allows(Move.WARM)  # on its way: not opened twice
    assert not sessions.allows(Move.TAKE)  # the run loop waits for it instead
    sessions.fire(Move.WARMED)
    assert sessions.standby is Standby.READY and not sessions.allows(Move.WARM)
    sessions.fire(Move.TAKE)
    sessions.fire(Move.OPEN)
    assert sessions.standby is Standby.NONE and sessions.allows(Move.WARM)


def test_a_failed_warm_up_leaves_room_for_the_next() -> None:
    sessions = ListenerSessions(strict=True)
    sessions.fire(Move.WARM)
    sessions.fire(Move.WARM_FAILED)
    assert sessions.standby is Standby.NONE and not sessions.allows(Move.TAKE)
    assert sessions.allows(Move.WARM)


@pytest.mark.parametrize("move", [Move.RETIRE, Move.HAND_OVER, Move.END, Move.WARMED, Move.TAKE, Move.DISCARD])
def test_an_illegal_move_raises_in_tests(move: Move) -> None:
    sessions = ListenerSessions()  # STRICT: tests/conftest.py sets it for every test
    with pytest.raises(IllegalTransition):
        sessions.fire(move)
    assert sessions.current is Current.NONE and sessions.standby is Standby.NONE


def test_an_illegal_move_is_logged_and_counted_in_the_daemon(caplog: pytest.LogCaptureFixture) -> None:
    sessions = ListenerSessions(strict=False)
    sessions.fire(Move.OPEN)
    with caplog.at_level(logging.ERROR, logger="handoff.listener"):
        assert sessions.fire(Move.OPEN) is False  # a second session cannot be current
    assert sessions.illegal == 1 and sessions.current is Current.OPEN
    assert "illegal move" in caplog.text and "'open' is not allowed while Current is open" in caplog.text
