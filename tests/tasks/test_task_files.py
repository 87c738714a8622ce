"""Task folders and files are the user's alone whatever the umask, and logs stay within a size
cap (issue 10, defect 9)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

import pytest

from tests.tasks.test_tasks_manager import running_manager, sh


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_folders_are_0700_and_files_0600_even_with_umask_0(tmp_path: Path, open_umask: None) -> None:
    state = tmp_path / "state"
    async with running_manager(state, (sh("hello", "echo hello"),)) as manager:
        done = await manager.wait((await manager.start_task("hello")).id)
    for folder in (state, state / "tasks", state / "tasks" / "logs"):
        assert mode(folder) == 0o700, folder
    files = [Path(done.log_path), *(state / "tasks").glob("tasks.db*")]
    assert len(files) >= 2
    for file in files:
        assert mode(file) == 0o600, file


async def test_an_old_world_readable_folder_is_made_private(tmp_path: Path) -> None:
    (tmp_path / "tasks" / "logs").mkdir(parents=True, mode=0o755)
    os.chmod(tmp_path / "tasks", 0o755)
    async with running_manager(tmp_path, ()):
        assert mode(tmp_path / "tasks") == mode(tmp_path / "tasks" / "logs") == 0o700


async def test_a_log_past_its_cap_is_rotated_and_old_logs_are_pruned(tmp_path: Path) -> None:
    loud = sh("loud", "i=0; while [ $i -lt 100 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done")
    async with running_manager(tmp_path, (loud,), log_max_bytes=1000, logs_max_total_bytes=2500) as manager:
        first = await manager.wait((await manager.start_task("loud")).id)
        log, older = Path(first.log_path), Path(first.log_path + ".1")
        assert log.stat().st_size <= 1000 and older.stat().st_size == 1000
        assert log.read_text().endswith("line-99-" + "x" * 36 + "\n")  # the newest output is kept
        second = await manager.wait((await manager.start_task("loud")).id)
        logs = list((tmp_path / "tasks" / "logs").iterdir())
        assert sum(p.stat().st_size for p in logs) <= 2500
        assert Path(second.log_path).exists()
        assert not older.exists()  # the oldest went first
