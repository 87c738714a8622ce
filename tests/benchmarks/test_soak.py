"""The simulated week's small run (`benchmarks.soak --quick`): the whole assistant against the
simulator with seeded faults of every kind, brain failures, tasks and notices, and scheduled
expiries; every goal figure is asserted (the full week is the benchmark's, see docs/PERFORMANCE.md)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.soak import QUICK, run_soak


@pytest.mark.timeout(400)  # 120 commands at 20x: about two minutes on a busy machine, more beside CPU hogs
async def test_quick_soak_answers_every_command_once_with_flat_resources(tmp_path):
    report = await run_soak(dataclasses.replace(QUICK, seed=7), tmp_path)
    print(report.table())
    assert report.commands == QUICK.commands
    assert report.answered == report.commands, report.table()  # answered, or a spoken error
    assert report.unanswered == 0 and report.answered_twice == 0, report.table()
    assert report.duplicate_tools == 0 and report.overlaps == 0, report.table()
    assert report.tasks_started > 0 and report.notices_lost == 0 and report.notices_doubled == 0, report.table()
    assert report.crashes == [], report.crashes
    assert report.expiries >= QUICK.expiries, report.table()
    # The run really went through trouble: most fault kinds struck, and the brain failed both ways.
    assert len(report.faults) >= 8, report.faults
    assert set(report.brain_faults) == {"429 then answer", "timeouts"}, report.brain_faults
    assert report.narrated["error"] + report.narrated["answer"] == report.commands, report.narrated
    # Nothing piles up: fds and asyncio tasks at the end as half way (give or take the connections
    # and tasks of the moment: a simulated connection is about ten tasks, and a warm listener
    # session may be open beside the one in use). One leaked task a command would add sixty.
    middle, end = report.samples[len(report.samples) // 2], report.samples[-1]
    assert 0 < middle.commands < end.commands
    assert end.fds <= middle.fds + 4 and end.tasks <= middle.tasks + 12, report.table()
    assert report.goals_met
