"""A damaged or locked task database is a sentence, not a traceback, and never stalls the event
loop; a write that finds it locked lands once the lock is gone (issue 10, defects 6 and 7)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import AsyncIterator

import pytest

from commands import cli
from tasks import TaskStatus, TaskStore
from tests.tasks.test_tasks_manager import running_manager, settings_for, sh


def damage(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database, just some text " * 200)


async def test_a_damaged_database_is_set_aside_replaced_and_announced_once(tmp_path: Path) -> None:
    db = settings_for(tmp_path).db_path
    damage(db)
    async with running_manager(tmp_path, (sh("quick", "echo ok"),)) as manager:
        [kept] = list(db.parent.glob("tasks.db.damaged-*"))
        assert kept.read_bytes().startswith(b"this is not a database")
        batch = manager.next_batch()
        assert batch.script == (
            f"My list of background tasks was damaged (file is not a database), so I put it aside as {kept.name} "
            "and started a new one."
        )
        manager.ack(batch.ids)
        assert manager.next_batch() is None  # said once
        done = await manager.wait((await manager.start_task("quick")).id)
        assert done.status is TaskStatus.SUCCEEDED
    async with running_manager(tmp_path, ()) as again:
        assert again.next_batch().script.startswith("The quick task finished")  # the new store works; no second warning


def test_the_tasks_command_says_the_database_is_damaged_in_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = settings_for(tmp_path).db_path
    damage(db)
    assert cli.main(["tasks", "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"handoff tasks: The task database {db} is damaged (file is not a database)")
    assert list(db.parent.glob("tasks.db.damaged-*")) == []  # read-only: left for the assistant


@contextlib.contextmanager
def exclusive_lock(db: Path, readers_too: bool = False):
    """Another program holding the database: no one else can write it (nor, with
    `readers_too`, read it; that needs every other connection closed first)."""
    other = sqlite3.connect(db, timeout=5.0, isolation_level=None)
    if readers_too:
        other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("CREATE TABLE IF NOT EXISTS other_program (x)")
    try:
        yield other
    finally:
        other.execute("COMMIT")
        other.close()


def test_the_tasks_command_says_the_database_is_locked_in_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = settings_for(tmp_path).db_path
    store = TaskStore(db)
    store.list_tasks()
    store.close()
    with exclusive_lock(db, readers_too=True):
        assert cli.main(["tasks", "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "locked by another program" in err and "Traceback" not in err


@contextlib.asynccontextmanager
async def ticker() -> AsyncIterator[list[int]]:
    """Counts event-loop turns: a blocked loop stops the count."""
    ticks = [0]

    async def tick() -> None:
        while True:
            await asyncio.sleep(0.005)
            ticks[0] += 1

    task = asyncio.create_task(tick())
    try:
        yield ticks
    finally:
        task.cancel()


async def test_a_locked_database_does_not_stall_the_loop_and_the_outcome_lands_after(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    script = f"while [ ! -e '{gate}' ]; do sleep 0.01; done; echo finished"
    async with running_manager(tmp_path, (sh("waiter", script),)) as manager, ticker() as ticks:
        record = await manager.start_task("waiter")
        db = settings_for(tmp_path).db_path
        with exclusive_lock(db):
            gate.touch()  # the task ends while the database is locked
            await manager.store_busy.wait_until(lambda: manager.store_busy_retries >= 1, 60)
            during = ticks[0]
            await manager.store_busy.wait_until(lambda: manager.store_busy_retries >= 5, 60)
            assert ticks[0] > during  # the loop kept turning while the write waited
            ended = asyncio.create_task(manager.wait(record.id))
            assert not ended.done() and manager.next_batch() is None  # not lost: still waiting to be written
        done = await asyncio.wait_for(ended, 10)
        assert done.status is TaskStatus.SUCCEEDED
        assert manager.next_batch().script.startswith("The waiter task finished")
    reread = TaskStore(db)
    assert [r.status for r in reread.list_tasks()] == [TaskStatus.SUCCEEDED]
    reread.close()
