"""The task manager with real subprocesses: outcomes, stopping process groups, the concurrency
cap, bounded memory, restarts, and parameters that must never reach a shell."""

from __future__ import annotations

import asyncio
import contextlib
import re
import json
import resource
import sys
import time
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest

from tasks import (
    ParameterError,
    ShellNotAllowed,
    TaskConfig,
    TaskManager,
    TaskParam,
    TaskRecord,
    TaskSettings,
    TaskStatus,
    TaskStore,
    TaskTemplate,
)
from tasks.errors import AmbiguousTask, UnknownTask, UnknownTemplate
from tests.support.awaiting import file_written


def settings_for(state_dir: Path, **changes: object) -> TaskSettings:
    values = dict(max_concurrent=5, default_timeout_s=30.0, kill_grace_s=0.3, drain_s=1.0, tail_lines=50)
    values.update(changes)
    return TaskSettings(state_dir=state_dir, **values)


def sh(name: str, script: str, cwd: Path | None = None, **kwargs: object) -> TaskTemplate:
    return TaskTemplate(name=name, argv=("sh", "-c", script), cwd=cwd, **kwargs)


@contextlib.asynccontextmanager
async def running_manager(
    state_dir: Path,
    templates: tuple[TaskTemplate, ...],
    on_change: Callable[[TaskRecord], None] | None = None,
    allow_shell: bool = False,
    shell_cwd: Path | None = None,
    shutdown: bool = False,
    **settings: object,
) -> AsyncIterator[TaskManager]:
    task_settings = settings_for(state_dir, **settings)
    config = TaskConfig(templates=templates, allow_shell=allow_shell, shell_cwd=shell_cwd, source=state_dir / "tasks.toml")
    store = TaskStore(task_settings.db_path)
    manager = TaskManager(config, store, task_settings, on_change=on_change)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.close(shutdown=shutdown)
        store.close()


def alive(pid: int) -> bool:
    """Running (zombies are dead: this container's init never reaps adopted children)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def printed(record: TaskRecord, text: str) -> Callable[[], bool]:
    """The task wrote `text` to its log (the file the manager's tail reads)."""
    log = Path(record.log_path)
    return lambda: log.exists() and text in log.read_text(errors="replace")


# --- outcomes -------------------------------------------------------------------------------------


async def test_a_task_that_succeeds_is_recorded_logged_and_announced(tmp_path: Path) -> None:
    async with running_manager(tmp_path, (sh("hello", "echo hello; echo world", spoken="the greeting"),)) as manager:
        started = await manager.start_task("hello")
        assert started.status is TaskStatus.RUNNING and started.pid
        done = await manager.wait(started.id)
        assert (done.status, done.exit_code, done.tail, done.line_count) == (TaskStatus.SUCCEEDED, 0, ("hello", "world"), 2)
        assert Path(done.log_path) == tmp_path / "tasks" / "logs" / f"{done.id}.log"
        assert Path(done.log_path).read_text() == "hello\nworld\n"
        await asyncio.wait_for(manager.wait_pending(), 5)
        batch = manager.next_batch()
        assert batch.script.startswith("The greeting finished in ")
        assert batch.script.endswith("The last output was: hello. world.")


async def test_a_non_zero_exit_is_a_failure_with_its_last_output(tmp_path: Path) -> None:
    script = "echo 'collected 3 items'; echo '1 failed, 2 passed'; exit 3"
    async with running_manager(tmp_path, (sh("tests", script, spoken="the test run"),)) as manager:
        done = await manager.wait((await manager.start_task("tests")).id)
        assert (done.status, done.exit_code) == (TaskStatus.FAILED, 3)
        script_text = manager.next_batch().script
        assert script_text.startswith("The test run failed after ")
        assert ", with exit code 3. The last output was: collected 3 items. 1 failed, 2 passed." in script_text


async def test_a_missing_program_fails_at_once_with_a_reason(tmp_path: Path) -> None:
    template = TaskTemplate(name="ghost", argv=("no-such-program-xyz",), cwd=tmp_path)
    async with running_manager(tmp_path, (template,)) as manager:
        record = await manager.start_task("ghost")
        assert record.status is TaskStatus.FAILED
        assert record.error == "the program no-such-program-xyz was not found"
        # The caller was told (the voice tool says it); it is not announced a second time.
        assert manager.next_batch() is None


async def test_a_task_past_its_time_limit_is_stopped(tmp_path: Path) -> None:
    template = sh("slow", "echo started; sleep 30", timeout_s=0.2)
    async with running_manager(tmp_path, (template,)) as manager:
        done = await manager.wait((await manager.start_task("slow")).id)
        assert done.status is TaskStatus.TIMED_OUT
        assert done.tail == ("started",)
        assert manager.next_batch().script.startswith(
            "The slow task was stopped when it ran past its time limit of less than a second."
        )


# --- stopping process groups --------------------------------------------------------------------


async def test_cancel_kills_a_process_that_ignores_sigterm(tmp_path: Path) -> None:
    stubborn = sh("stubborn", "trap '' TERM; echo ready; while :; do sleep 0.05; done")
    async with running_manager(tmp_path, (stubborn,), kill_grace_s=0.3) as manager:
        record = await manager.start_task("stubborn")
        await file_written(Path(record.log_path).parent, printed(record, "ready"))
        outcome = await manager.cancel("stubborn")
        cancelled = outcome.record
        assert outcome.stopped and cancelled.status is TaskStatus.CANCELLED
        assert cancelled.exit_code == -9  # SIGTERM was ignored; SIGKILL ended it
        assert not alive(record.pid)
        assert manager.next_batch() is None  # the user asked for it and heard the reply: no notice


async def test_cancel_stops_every_child_and_grandchild(tmp_path: Path) -> None:
    # Three descendants write their pids: a child, a child that ignores SIGTERM, a grandchild.
    script = r"""
sh -c 'echo $$ >> pids; exec sleep 30' &
sh -c 'trap "" TERM; echo $$ >> pids; exec sleep 30' &
sh -c 'sh -c "echo \$\$ >> pids; exec sleep 30" & wait' &
echo $$ >> pids
while [ "$(wc -l < pids)" -lt 4 ]; do sleep 0.01; done
echo ready
wait
"""
    async with running_manager(tmp_path, (sh("family", script, cwd=tmp_path),)) as manager:
        record = await manager.start_task("family")
        await file_written(Path(record.log_path).parent, printed(record, "ready"))
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        assert len(pids) == 4 and all(alive(p) for p in pids)
        assert (await manager.cancel(str(record.id))).record.status is TaskStatus.CANCELLED
        assert [p for p in pids if alive(p)] == []


async def test_cancelling_a_queued_task_never_starts_it(tmp_path: Path) -> None:
    templates = (sh("first", "echo ready; sleep 30"), sh("second", "touch started", cwd=tmp_path))
    async with running_manager(tmp_path, templates, max_concurrent=1) as manager:
        first = await manager.start_task("first")
        second = await manager.start_task("second")
        assert second.status is TaskStatus.QUEUED
        cancelled = (await manager.cancel("second")).record
        assert cancelled.status is TaskStatus.CANCELLED and cancelled.started_at is None
        assert (await manager.cancel("first")).stopped
        assert not (await manager.cancel("first")).stopped  # already ended: nothing to do
        assert not (tmp_path / "started").exists()
        assert (await manager.list_tasks())[1].status is TaskStatus.CANCELLED
        assert first.id != second.id


async def test_the_queue_of_waiting_tasks_is_bounded(tmp_path: Path) -> None:
    """Issue 23, defect 4: a runaway model could queue tasks without end."""
    from tasks.errors import TooMany
    from tasks.manager import MAX_QUEUED_TASKS

    templates = (sh("first", "echo ready; sleep 30"), sh("later", "true"))
    async with running_manager(tmp_path, templates, max_concurrent=1) as manager:
        await manager.start_task("first")
        for _ in range(MAX_QUEUED_TASKS):
            assert (await manager.start_task("later")).status is TaskStatus.QUEUED
        with pytest.raises(TooMany, match=f"^{MAX_QUEUED_TASKS} tasks are already waiting to start"):
            await manager.start_task("later")
        assert manager.queued_count == MAX_QUEUED_TASKS
        await manager.cancel("first")


async def test_the_bound_on_waiting_tasks_holds_for_starts_at_the_same_moment(tmp_path: Path) -> None:
    """Issue 27: the bound was checked before an await, so 40 starts at once queued 22."""
    from tasks.errors import TooMany
    from tasks.manager import MAX_QUEUED_TASKS

    templates = (sh("first", "echo ready; sleep 30"), sh("later", "true"))
    async with running_manager(tmp_path, templates, max_concurrent=1) as manager:
        await manager.start_task("first")
        results = await asyncio.gather(*(manager.start_task("later") for _ in range(40)), return_exceptions=True)
        refused = [r for r in results if isinstance(r, TooMany)]
        assert manager.queued_count == MAX_QUEUED_TASKS and len(refused) == 40 - MAX_QUEUED_TASKS, manager.queued_count
        await manager.cancel("first")


async def test_programs_that_leave_children_behind_do_not_leak_them(tmp_path: Path) -> None:
    script = "sh -c 'echo $$ > orphan; exec sleep 30' & while [ ! -s orphan ]; do sleep 0.01; done; echo done"
    async with running_manager(tmp_path, (sh("leaky", script, cwd=tmp_path),)) as manager:
        done = await manager.wait((await manager.start_task("leaky")).id)
        assert done.status is TaskStatus.SUCCEEDED
        assert not alive(int((tmp_path / "orphan").read_text()))


# --- the concurrency cap ------------------------------------------------------------------------


async def test_a_hundred_tasks_never_run_more_than_five_at_once(tmp_path: Path) -> None:
    # Each process also records its own start and end, an account independent of the manager's.
    script = 'echo "start $$" >> events; sleep 0.02; echo "end $$" >> events'
    samples: list[tuple[int, int]] = []
    manager_ref: list[TaskManager] = []

    def sample(record: TaskRecord) -> None:
        samples.append((manager_ref[0].running_count, manager_ref[0].queued_count))

    async with running_manager(tmp_path, (sh("short", script, cwd=tmp_path),), on_change=sample) as manager:
        manager_ref.append(manager)
        started = [await manager.start_task("short") for _ in range(100)]
        finished = [await manager.wait(r.id) for r in started]

    assert [r.status for r in finished] == [TaskStatus.SUCCEEDED] * 100
    running = [r for r, _ in samples]
    assert max(running) <= 5
    assert max(running) >= 2  # they did run side by side
    assert max(q for _, q in samples) > 0  # and some had to wait
    overlap = peak = 0
    events = (tmp_path / "events").read_text().split("\n")
    for line in filter(None, events):
        overlap += 1 if line.startswith("start") else -1
        peak = max(peak, overlap)
    assert sum(1 for line in events if line.startswith("end")) == 100
    assert peak <= 5


# --- bounded memory -----------------------------------------------------------------------------


async def test_a_million_lines_stay_on_disk_not_in_memory(tmp_path: Path, record_property) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    template = TaskTemplate(name="flood", argv=("seq", "1", "1000000"), cwd=tmp_path)
    async with running_manager(tmp_path, (template,), tail_lines=50) as manager:
        done = await manager.wait((await manager.start_task("flood")).id)
    growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    record_property("max_rss_growth_kib", growth_kib)
    print(f"\nmax RSS grew by {growth_kib} KiB while a task printed a million lines")

    assert done.status is TaskStatus.SUCCEEDED
    assert done.line_count == 1_000_000
    assert done.tail == tuple(str(n) for n in range(999_951, 1_000_001))
    with open(done.log_path, "rb") as log:
        assert sum(chunk.count(b"\n") for chunk in iter(lambda: log.read(1 << 20), b"")) == 1_000_000


# --- restarts -----------------------------------------------------------------------------------


async def test_a_notice_is_delivered_exactly_once_across_restarts(tmp_path: Path) -> None:
    templates = (sh("backup", "echo copied", spoken="the backup"),)
    async with running_manager(tmp_path, templates) as first:
        await first.wait((await first.start_task("backup")).id)
        offered = first.next_batch()
        assert offered is not None  # fetched, but handoff stops before it is played: no ack

    async with running_manager(tmp_path, templates) as second:
        await asyncio.wait_for(second.wait_pending(), 5)  # pending at once after the restart
        again = second.next_batch()
        assert again == offered
        second.ack(again.ids)
        assert second.next_batch() is None

    async with running_manager(tmp_path, templates) as third:
        assert third.next_batch() is None
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(third.wait_pending(), 0.05)


async def test_tasks_left_running_by_a_crash_are_marked_interrupted_and_announced(tmp_path: Path) -> None:
    templates = (sh("backup", "echo working; sleep 30", spoken="the backup"), sh("tests", "true", spoken="the test run"))
    async with running_manager(tmp_path, templates, max_concurrent=1) as first:
        running = await first.start_task("backup")
        queued = await first.start_task("tests")
        assert (running.status, queued.status) == (TaskStatus.RUNNING, TaskStatus.QUEUED)
        # leaving the block closes the manager without either task finishing

    assert not alive(running.pid)  # closing stopped its processes
    async with running_manager(tmp_path, templates) as second:
        statuses = {r.name: r.status for r in await second.list_tasks()}
        assert statuses == {"backup": TaskStatus.INTERRUPTED, "tests": TaskStatus.INTERRUPTED}
        assert second.next_batch().script == "The backup was interrupted when handoff stopped."
        merged = second.next_batch(now=time.time() + 3600)
        assert merged.script == (
            "While you were away, there was news of two tasks: the backup was interrupted when handoff "
            "stopped; and the test run never started because handoff stopped."
        )


async def test_tasks_stopped_by_a_shutdown_are_recorded_so_and_announced_once(tmp_path: Path) -> None:
    templates = (sh("backup", "echo working; sleep 30", spoken="the backup"), sh("tests", "true", spoken="the test run"))
    async with running_manager(tmp_path, templates, max_concurrent=1, shutdown=True) as first:
        running = await first.start_task("backup")
        queued = await first.start_task("tests")
        assert (running.status, queued.status) == (TaskStatus.RUNNING, TaskStatus.QUEUED)
        # leaving the block is handoff stopping (a signal): close(shutdown=True)

    assert not alive(running.pid)
    async with running_manager(tmp_path, templates) as second:
        records = {r.name: r for r in await second.list_tasks()}
        assert {name: r.status for name, r in records.items()} == {"backup": TaskStatus.STOPPED, "tests": TaskStatus.STOPPED}
        assert records["backup"].stop_reason == "shutdown" and records["backup"].finished_at is not None
        first_notice = second.next_batch()
        assert re.fullmatch(r"The backup was stopped after .+, when handoff was stopped\.", first_notice.script)
        second.ack(first_notice.ids)
        assert second.next_batch().script == "The test run never started: handoff was stopped first."
        second.ack(second.next_batch().ids)
    async with running_manager(tmp_path, templates) as third:
        assert third.next_batch() is None  # said once: not again at the next start


# --- identifiers --------------------------------------------------------------------------------


async def test_names_numbers_and_ambiguity(tmp_path: Path) -> None:
    templates = (sh("backup", "echo done", spoken="the backup"), sh("tests", "sleep 30", spoken="the test run"))
    async with running_manager(tmp_path, templates) as manager:
        one = await manager.wait((await manager.start_task("backup")).id)
        two = await manager.wait((await manager.start_task("backup")).id)
        tests = await manager.start_task("the test run")
        with pytest.raises(AmbiguousTask) as caught:
            await manager.get_result("backup")
        assert caught.value.question.startswith("Which one: ")
        assert " or " in caught.value.question and caught.value.question.endswith("?")
        assert {r.id for r in caught.value.candidates} == {one.id, two.id}
        assert (await manager.get_result(str(two.id))).id == two.id
        assert (await manager.get_result("test")).id == tests.id  # unique partial name
        with pytest.raises(UnknownTask, match="I can't find a task called 'deploy'"):
            await manager.get_result("deploy")
        with pytest.raises(UnknownTemplate, match="There is no task template called 'deploy'"):
            await manager.start_task("deploy")


# --- what may run -------------------------------------------------------------------------------


async def test_parameters_reach_the_program_as_literal_arguments(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("still here")
    echo_argv = "import json, sys; open('argv.json', 'w').write(json.dumps(sys.argv[1:]))"
    template = TaskTemplate(
        name="echo",
        argv=(sys.executable, "-c", echo_argv, "{first}", "--label={second}", "{third}"),
        cwd=tmp_path,
        params=(TaskParam("first"), TaskParam("second"), TaskParam("third")),
    )
    values = {"first": "; rm -rf x", "second": "$(touch y)", "third": "`touch z` && touch w | cat > v"}
    async with running_manager(tmp_path, (template,)) as manager:
        done = await manager.wait((await manager.start_task("echo", values)).id)
        assert done.status is TaskStatus.SUCCEEDED
        with pytest.raises(ParameterError, match="has no parameter 'fourth'"):
            await manager.start_task("echo", {**values, "fourth": "x"})
        with pytest.raises(ParameterError, match="needs a value for third"):
            await manager.start_task("echo", {"first": "a", "second": "b"})

    received = json.loads((tmp_path / "argv.json").read_text())
    assert received == ["; rm -rf x", "--label=$(touch y)", "`touch z` && touch w | cat > v"]
    assert (tmp_path / "x" / "keep.txt").read_text() == "still here"
    assert not any((tmp_path / name).exists() for name in ("y", "z", "w", "v"))


async def test_shell_commands_are_refused_unless_enabled(tmp_path: Path) -> None:
    async with running_manager(tmp_path, ()) as manager:
        with pytest.raises(ShellNotAllowed) as caught:
            await manager.start_shell("touch made-by-shell")
        assert str(caught.value) == (
            f"Running shell commands by voice is turned off. To allow it, set allow_shell = true in {tmp_path / 'tasks.toml'}."
        )
    store = TaskStore(settings_for(tmp_path).db_path)
    assert store.list_tasks() == []  # nothing was recorded
    store.close()

    async with running_manager(tmp_path, (), allow_shell=True, shell_cwd=tmp_path) as manager:
        done = await manager.wait((await manager.start_shell("touch made-by-shell && echo ok")).id)
        assert (done.status, done.name, done.tail) == (TaskStatus.SUCCEEDED, "shell", ("ok",))
    assert (tmp_path / "made-by-shell").exists()
