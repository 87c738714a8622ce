"""No process of a task outlives it: not one that left its process group with setsid, and not
the task itself when the daemon is killed with SIGKILL (issue 10, defect 5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tasks import TaskStatus
from tests.support.awaiting import file_written, process_ended
from tests.tasks.test_tasks_manager import alive, running_manager, sh

ROOT = Path(__file__).resolve().parents[2]
# Writes its own pid, then the pid of a child that escaped the group with setsid.
ESCAPE = 'echo $$ > leader; setsid sh -c "echo \\$\\$ > escaped; exec sleep 300" & while [ ! -s escaped ]; do sleep 0.01; done'


def pid_in(path: Path) -> int:
    return int(path.read_text())


async def test_a_child_that_calls_setsid_is_stopped_when_the_task_ends(tmp_path: Path) -> None:
    async with running_manager(tmp_path, (sh("escape", ESCAPE + "; echo started", cwd=tmp_path),)) as manager:
        done = await manager.wait((await manager.start_task("escape")).id)
        assert done.status is TaskStatus.SUCCEEDED
        assert not alive(pid_in(tmp_path / "escaped"))


async def test_a_cancelled_task_takes_its_escaped_child_with_it(tmp_path: Path) -> None:
    async with running_manager(tmp_path, (sh("escape", ESCAPE + "; sleep 300", cwd=tmp_path),)) as manager:
        record = await manager.start_task("escape")
        await file_written(tmp_path, lambda: (tmp_path / "escaped").exists() and (tmp_path / "escaped").read_text().strip())
        cancelled = await manager.cancel(record.id)
        assert cancelled.record.status is TaskStatus.CANCELLED
        assert not alive(pid_in(tmp_path / "escaped"))


DAEMON = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from tasks import TaskConfig, TaskManager, TaskSettings, TaskStore, TaskTemplate

    async def main(state, work):
        settings = TaskSettings(state_dir=Path(state), kill_grace_s=0.3)
        template = TaskTemplate(name="escape", argv=("sh", "-c", sys.argv[3] + "; sleep 300"), cwd=Path(work))
        manager = TaskManager(TaskConfig(templates=(template,)), TaskStore(settings.db_path), settings)
        await manager.start()
        await manager.start_task("escape")
        print("running", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_after_the_daemon_is_killed_its_task_dies_and_what_it_left_is_stopped_at_the_next_start(tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    daemon = subprocess.Popen(
        [sys.executable, "-c", DAEMON, str(state), str(work), ESCAPE], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert daemon.stdout.readline().strip() == "running"
        await file_written(work, lambda: (work / "escaped").exists() and (work / "escaped").read_text().strip())
        leader, escaped = pid_in(work / "leader"), pid_in(work / "escaped")
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait()
        await process_ended(leader)  # PR_SET_PDEATHSIG: the task dies with the daemon
        assert alive(escaped)  # it left the group; only the next start can find it
        async with running_manager(state, (sh("escape", "true"),)) as manager:
            assert not alive(escaped)
            [record] = await manager.list_tasks()
            assert record.status is TaskStatus.INTERRUPTED
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
