"""A microphone chunk's capture time comes from its place in the stream, not from when the loop got
round to reading it: the echo gate compares it with what the speaker played, and a chunk stamped
late by a busy machine let the narrator's echo through (test_pipeline_echo beside two CPU hogs)."""

from __future__ import annotations

import pytest

from audio_io.echo_reference import MicStamps
from audio_io.format import BYTES_PER_SECOND

CHUNK = bytes(BYTES_PER_SECOND // 50)  # 20 ms


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def read(stamps: MicStamps, clock: Clock, arrivals: list[float]) -> list[float]:
    out = []
    for at in arrivals:
        clock.now = at
        out.append(stamps.stamp(CHUNK))
    return out


def test_a_burst_after_the_loop_stalled_keeps_each_chunks_place_in_the_stream() -> None:
    clock = Clock()
    stamps = MicStamps(clock)
    on_time = [0.02 * (i + 1) + 0.001 for i in range(50)]  # read 1 ms after each chunk was captured
    late = [1.0 + 0.205] * 10  # the loop stood still 200 ms: ten chunks read at once
    got = read(stamps, clock, on_time + late)
    assert got[:50] == pytest.approx([0.02 * i + 0.001 for i in range(50)])
    assert got[50:] == pytest.approx([1.0 + 0.02 * i + 0.001 for i in range(10)])  # not 1.18 and on


def test_the_stamps_follow_a_device_clock_that_runs_slow_and_start_over_after_a_long_gap() -> None:
    clock = Clock()
    stamps = MicStamps(clock, window_s=2.0)
    slow = [0.02 * (i + 1) * 1.001 for i in range(1500)]  # 30 s of audio; the device 0.1 % slow
    got = read(stamps, clock, slow)
    assert got[-1] == pytest.approx(slow[-1] - 0.02, abs=0.003)  # within a few ms after 30 s
    reopened = read(stamps, clock, [100.0, 100.02])  # the device was reopened 70 s later
    assert reopened == pytest.approx([99.98, 100.0])
