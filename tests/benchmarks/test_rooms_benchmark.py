"""benchmarks.rooms runs end to end (one room, one command): its figures are the benchmark's."""

from __future__ import annotations

import asyncio

from benchmarks.rooms import measure, report


def test_the_rooms_benchmark_measures_a_room() -> None:
    run = asyncio.run(measure(1, 1, seed=1))
    assert run.lost == 0 and len(run.latencies_s) == 1
    assert run.latencies_s[0] > 0 and run.active_cpu > 0
    assert "| 1 | 1 | 0 |" in report([run])
