"""Background tasks by voice, end to end: start, notice, list, cancel (real subprocesses)."""

from __future__ import annotations

import asyncio
import time

from commands import cli
from tests.support.pipeline_harness import narrated_scripts, running_pipeline

TASKS = """
[tasks.backup]
description = "Copy the documents"
spoken = "the backup"
argv = ["sh", "-c", "sleep {seconds}; echo copied 3 files"]
cwd = "."
timeout_s = 60
[tasks.backup.params]
seconds = { description = "how long it takes", default = "0.3" }
"""



async def test_start_then_completion_notice_then_fresh_listener(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, tasks_toml=TASKS) as p:
        before = await p.ask("Computer, start the backup task")
        assert "backup" in narrated_scripts(p)[-1].lower() and "start" in narrated_scripts(p)[-1].lower()
        # The notice arrives by itself once the task is done, then the listener is fresh again.
        await p.wait(lambda t: t.count("notice") == 1 and t.count("narrated") == before["narrated"] + 2
                     and t.count("listening") >= before["listening"] + 2)
        notice = narrated_scripts(p)[-1]
        assert "backup finished" in notice.lower() and "copied 3 files" in notice
        assert p.timeline.count("tool") == before["tool"] + 1


async def test_list_and_cancel_by_voice(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, tasks_toml=TASKS) as p:
        sim.script.push_tool_call("start_task", {"name": "backup", "seconds": "30"})
        before = await p.ask("Computer, start the backup task")

        before = await p.ask("Computer, list my tasks")
        assert "backup is still going" in narrated_scripts(p)[-1].lower()

        before = await p.ask("Computer, cancel the backup")
        assert "cancel" in narrated_scripts(p)[-1].lower() or "stopped" in narrated_scripts(p)[-1].lower()
        tools = [e.text for e in p.timeline.entries if e.kind == "tool"]
        assert [t.split("(")[0] for t in tools] == ["start_task", "list_tasks", "cancel_task"]
        # A cancel the user asked for is not announced again: nothing is waiting to be narrated.
        assert p.coordinator.parts.notices.next_batch(time.time()) is None
        assert p.timeline.count("notice") == 0


# --- the command line reaches the running assistant ----------------------------------------------


async def handoff_tasks(capsys, p, *argv: str) -> tuple[int, str, str]:
    """`handoff tasks ARGV...` as a user runs it while the assistant is running (in a thread:
    the command blocks on the socket the assistant serves on this event loop)."""
    code = await asyncio.to_thread(cli.main, ["tasks", "--state-dir", str(p.settings.state_dir), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_a_task_started_from_the_command_line_is_announced_exactly_once(tmp_path, sim, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("HANDOFF_TASKS_CONFIG", str(tmp_path / "tasks.toml"))
    async with running_pipeline(tmp_path, sim, tasks_toml=TASKS) as p:
        code, out, err = await handoff_tasks(capsys, p, "start", "backup", "seconds=0.2")
        assert (code, out, err) == (0, "1\n", "")
        await p.wait(lambda t: t.count("notice") == 1 and t.count("narrated") == 1 and t.count("listening") >= 2)
        assert "backup finished" in narrated_scripts(p)[-1].lower() and "copied 3 files" in narrated_scripts(p)[-1]
        await p.ask("Computer, list my tasks")  # another full cycle: nothing is announced again
        assert p.timeline.count("notice") == 1 and p.coordinator.parts.notices.next_batch(time.time()) is None

        code, out, err = await handoff_tasks(capsys, p, "start", "deploy")
        assert code == 1 and out == "" and err.startswith("handoff tasks: There is no task template called 'deploy'.")
        code, out, err = await handoff_tasks(capsys, p, "start", "backup", "speed=9")
        assert (code, err) == (1, "handoff tasks: The backup has no parameter 'speed'. It takes: seconds.\n")
        code, out, err = await handoff_tasks(capsys, p, "start", "backup", "seconds")
        assert (code, err) == (2, "handoff tasks start: 'seconds' is not PARAM=VALUE.\n")


async def test_a_task_is_cancelled_from_the_command_line(tmp_path, sim, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HANDOFF_TASKS_CONFIG", str(tmp_path / "tasks.toml"))
    async with running_pipeline(tmp_path, sim, tasks_toml=TASKS) as p:
        code, out, _ = await handoff_tasks(capsys, p, "start", "backup", "seconds=30")
        assert (code, out) == (0, "1\n")
        code, out, err = await handoff_tasks(capsys, p, "cancel", "1")
        assert (code, out, err) == (0, "Cancelled task 1 (backup).\n", "")
        code, out, err = await handoff_tasks(capsys, p, "cancel", "1")
        assert (code, err) == (1, "handoff tasks: task 1 (backup) had already ended: cancelled.\n")
        code, out, err = await handoff_tasks(capsys, p, "cancel", "7")
        assert (code, err) == (1, "handoff tasks: There is no task number 7.\n")
        code, out, err = await handoff_tasks(capsys, p, "show", "7")
        assert (code, err) == (1, "handoff tasks: there is no task number 7; the tasks are: backup.\n")
        assert p.timeline.count("notice") == 0  # a cancel is not announced
    # The assistant has stopped: nothing can run the task, and the command says so.
    code = await asyncio.to_thread(cli.main, ["tasks", "--state-dir", str(p.settings.state_dir), "start", "backup"])
    err = capsys.readouterr().err
    assert code == 3 and err.startswith("handoff tasks: handoff is not running on ") and len(err.splitlines()) == 1


async def test_a_task_whose_program_is_missing_is_said_once_and_logged_as_failed(tmp_path, sim, caplog):
    ghost = '[tasks.ghost]\nspoken = "the ghost"\nargv = ["no-such-program-xyz"]\ncwd = "."\n'
    async with running_pipeline(tmp_path, sim, tasks_toml=ghost) as p:
        sim.script.push_tool_call("start_task", {"name": "ghost"})
        with caplog.at_level("INFO", logger="handoff"):
            before = await p.ask("Computer, start the ghost task")
        said = narrated_scripts(p)[-1]
        assert said == "The ghost could not start: the program no-such-program-xyz was not found."
        assert "result: start_task failed: " in caplog.text and "start_task ok" not in caplog.text
        assert "succeeded" not in caplog.text
        # Told in the reply, so nothing more is queued: it is not announced a second time.
        assert p.coordinator.parts.notices.next_batch(time.time()) is None
        assert p.timeline.count("notice") == 0 and p.timeline.count("narrated") == before["narrated"] + 1
