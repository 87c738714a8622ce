"""Today is a calendar day, whatever restarts (issue 28, item 2): a restarted daemon's cost today
and its daily budget start from what the day already spent, not from zero."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from realtime_sim import SimServer
from service.status import read_status
from tests.support.daemon import daemon_env, running_daemon, spoken_wav
from tests.support.awaiting import file_written


def recorded_today(state: Path) -> float:
    """What the cost-days file holds for its one day, all runs together."""
    days = json.loads((state / "cost-days.json").read_text())["days"]
    assert len(days) == 1, days
    return sum(sum(parts.values()) for runs in days.values() for parts in runs.values())


async def test_a_restart_keeps_today_s_cost_and_the_budget_holds(tmp_path: Path, sim: SimServer) -> None:
    state = tmp_path / "state"
    sim.script.push_transcript("Computer, what time is it?")
    sim.script.push_tool_call("get_time", {})
    wav = spoken_wav(tmp_path / "mic.wav", utterances=1, seconds_after=120)
    out = str(tmp_path / "out.wav")
    async with running_daemon(tmp_path, daemon_env(tmp_path, sim.base_url), "--input-wav", str(wav), "--output-wav", out) as first:
        await first.wait_line(r"narrated: answer")
        first.signal(signal.SIGTERM)
        assert await first.exited(timeout=30) == 0, first.log
    spent = recorded_today(state)
    status = read_status(state / "status.json")
    assert status is not None and status.cost_today_usd is not None
    assert spent > 0 and abs(spent - status.cost_today_usd) < 1e-9  # every cent the first run spent is kept

    # The same day, a budget below what was spent: the second run is over it from its start, and
    # its cost today starts where the first run's ended.
    env = daemon_env(tmp_path, sim.base_url, DAILY_BUDGET_USD=f"{spent / 2:.8f}")
    sim.script.push_transcript("Computer, what time is it?")
    sim.script.push_tool_call("get_time", {})
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", out) as second:
        await second.wait_line(r"today's budget is spent; pausing uploads until tomorrow")
        await second.wait_line(r"narrat(ing|ed): .*budget")  # it says so, once

        def counted() -> bool:
            status = read_status(state / "status.json")
            return status is not None and status.pid == second.process.pid and status.cost_today_usd is not None \
                and status.cost_today_usd >= spent

        await file_written(state, counted, timeout=30)
        second.signal(signal.SIGTERM)
        assert await second.exited(timeout=30) == 0, second.log
    assert "get_time" not in second.log  # nothing was routed: the microphone stayed home
    assert recorded_today(state) >= spent  # and the day's record still holds the first run's spend
