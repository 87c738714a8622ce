"""A benchmark's part in a process of its own (benchmarks.spawned): a read of the pipe ends when the
child is gone, so a benchmark that fails mid-read cannot hang its test (and the suite) for ever."""

from __future__ import annotations

from multiprocessing.connection import Connection

import pytest

from benchmarks.spawned import spawned


def _dies_unheard(conn: Connection) -> None:
    """A child that fails before it answers (as a hub or simulator that crashed at start)."""


def _echoes_until_stop(conn: Connection) -> None:
    while (message := conn.recv()) != "stop":
        conn.send(message)


def test_a_read_ends_when_the_child_dies_without_answering() -> None:
    with spawned(_dies_unheard, stop="stop") as conn:
        assert conn.poll(60), "the read still waits although the child is gone"
        with pytest.raises(EOFError):
            conn.recv()


def test_the_child_answers_then_is_stopped_on_the_way_out() -> None:
    with spawned(_echoes_until_stop, stop="stop") as conn:
        conn.send("cpu")
        assert conn.recv() == "cpu"
    # Told to stop and joined: its end is closed, so this side reads the end of the pipe.
    assert conn.poll(60)
    with pytest.raises(EOFError):
        conn.recv()
