"""Clean stops: SIGTERM or SIGINT to `handoff run` stops its tasks' process groups, records them
as stopped by the shutdown, and exits 0; the next start says so, once (issue 13, part 3)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from realtime_sim import SimServer
from tasks.records import TaskStatus
from tasks.runner import group_alive
from tasks.store import TaskStore
from tests.support.daemon import daemon_env, running_daemon, spoken_wav

TASKS = """
[tasks.backup]
spoken = "the backup"
argv = ["sh", "-c", "echo started; sleep 300"]
cwd = "."
"""


def task_started_by_voice(tmp_path: Path, sim: SimServer, tasks_toml: str, name: str) -> tuple[dict[str, str], list[str]]:
    """The daemon's environment and arguments for a recording in which the user starts `name`."""
    (tmp_path / "tasks.toml").write_text(tasks_toml)
    env = daemon_env(tmp_path, sim.base_url, HANDOFF_TASKS_CONFIG=str(tmp_path / "tasks.toml"))
    sim.script.push_transcript(f"Computer, start the {name} task")
    sim.script.push_tool_call("start_task", {"name": name})
    wav = spoken_wav(tmp_path / "mic.wav", utterances=1, seconds_after=120)
    return env, ["--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")]


def stored_tasks(tmp_path: Path):
    store = TaskStore(tmp_path / "state" / "tasks" / "tasks.db", replace_damaged=False)
    try:
        return store.list_tasks(), store.pending_notices()
    finally:
        store.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_tasks_records_them_and_the_next_start_says_so_once(
    tmp_path: Path, sim: SimServer, sig: signal.Signals
) -> None:
    env, args = task_started_by_voice(tmp_path, sim, TASKS, "backup")
    async with running_daemon(tmp_path, env, *args) as daemon:
        await daemon.wait_line(r"task 1 \(backup\) is running")
        daemon.signal(sig)
        assert await daemon.exited(timeout=10) == 0, daemon.log
    assert "Traceback" not in daemon.log
    assert f"{sig.name}: stopping" in daemon.log
    (task,), notices = stored_tasks(tmp_path)
    assert (task.status, task.stop_reason) == (TaskStatus.STOPPED, "shutdown")
    assert task.pid and not group_alive(task.pid)  # nothing left in its process group
    assert len(notices) == 1

    # The next start says so, once: the notice is narrated, then acknowledged.
    wav = spoken_wav(tmp_path / "quiet.wav", utterances=0, seconds_after=120)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out2.wav")) as daemon:
        line = await daemon.wait_line(r"notice: ")
        assert line.split("notice: ", 1)[1].startswith("The backup was stopped after ")
        assert line.endswith(", when handoff was stopped.")
        await daemon.wait_line(r"narrated: notice")
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=10) == 0, daemon.log
    assert sum(" notice: " in line for line in daemon.lines) == 1
    _, notices = stored_tasks(tmp_path)
    assert notices == []  # heard: the start after this one has nothing to say


async def test_a_second_signal_stops_at_once(tmp_path: Path, sim: SimServer) -> None:
    stubborn = '[tasks.stubborn]\nargv = ["sh", "-c", "trap \'\' TERM; echo started; while :; do sleep 0.1; done"]\ncwd = "."\n'
    env, args = task_started_by_voice(tmp_path, sim, stubborn, "stubborn")
    async with running_daemon(tmp_path, env, *args) as daemon:
        await daemon.wait_line(r"task 1 \(stubborn\) is running")
        daemon.signal(signal.SIGTERM)  # the task ignores it: handoff waits out the grace period ...
        await daemon.wait_line(r"SIGTERM: stopping")
        daemon.signal(signal.SIGTERM)  # ... unless told again
        assert await daemon.exited(timeout=10) == 128 + signal.SIGTERM
    assert daemon.lines[-1] == "handoff: SIGTERM again: stopping at once"
