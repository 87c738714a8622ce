"""A line that repeats is bounded (issue 27: a connection flood wrote 408,747 identical lines,
181 MB, in 70 s); different lines are all kept, and what was left out is said."""

from __future__ import annotations

import logging

from config.logging_setup import RepeatFilter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("handoff.web", logging.ERROR, __file__, 1, message, args, None)


def test_a_flood_of_one_line_is_cut_to_the_burst_and_the_rest_counted() -> None:
    clock = Clock()
    repeats = RepeatFilter(burst=5, window_s=60.0, clock=clock)
    passed = [repeats.filter(record("socket.accept() out of system resource")) for _ in range(100_000)]
    assert sum(passed) == 5 and repeats.left_out == 99_995
    clock.now = 61.0
    after = record("socket.accept() out of system resource")
    assert repeats.filter(after)
    assert after.getMessage().endswith("[99995 more like this left out in the last 60 s]")


def test_different_lines_are_all_kept() -> None:
    repeats = RepeatFilter(burst=5, window_s=60.0, clock=Clock())
    assert all(repeats.filter(record("heard: %s", f"command {n}")) for n in range(1000))
