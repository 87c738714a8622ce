"""Timers and reminders by voice, end to end on the simulator: set, announced exactly once,
asked about, cancelled, and a reminder that came due while handoff was stopped."""

from __future__ import annotations

import re
import time
from datetime import datetime

from tasks import TaskConfig, TaskKind, TaskManager, TaskSettings, TaskStatus, TaskStore
from tasks.when import when_words
from tests.support.pipeline_harness import narrated_scripts, running_pipeline



def notices(p) -> list[str]:
    return [e.text for e in p.timeline.entries if e.kind == "notice"]


async def test_a_two_second_timer_is_announced_exactly_once(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        before = await p.ask("Computer, set a timer for two seconds")
        assert narrated_scripts(p)[-1].startswith("Timer set for two seconds; it ends ")
        # It announces itself, then the listener is fresh again.
        await p.wait(lambda t: t.count("notice") == 1 and t.count("narrated") == before["narrated"] + 2
                     and t.count("listening") >= before["listening"] + 2)  # fmt: skip
        assert notices(p) == ["Your two-second timer is done."] and narrated_scripts(p)[-1] == "Your two-second timer is done."
        # Another full command cycle: nothing is announced again.
        await p.ask("Computer, what time is it?")
        assert p.timeline.count("notice") == 1
        manager = p.coordinator.parts.notices
        assert manager.next_batch(time.time()) is None
        [timer] = await manager.list_tasks()
        assert (timer.kind, timer.status) == (TaskKind.TIMER, TaskStatus.SUCCEEDED)


async def test_time_left_and_cancel_by_voice(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        await p.ask("Computer, set a timer for ten minutes")
        assert narrated_scripts(p)[-1].startswith("Timer set for ten minutes; it ends ")
        await p.ask("Computer, how long is left on my timer?")
        assert re.fullmatch(r"Your ten-minute timer has (ten minutes|nine minutes and [a-z -]+ seconds?) left\.", narrated_scripts(p)[-1])
        await p.ask("Computer, cancel the timer")
        assert re.fullmatch(r"I cancelled your ten-minute timer; it had [a-z -]+ left\.", narrated_scripts(p)[-1])
        await p.ask("Computer, how long is left on my timer?")
        assert narrated_scripts(p)[-1] == "You have no timers or reminders set."
        tools = [e.text.split("(")[0] for e in p.timeline.entries if e.kind == "tool"]
        assert tools == ["set_timer", "time_left", "cancel_timer", "time_left"]
        assert p.timeline.count("notice") == 0


async def test_a_reminder_due_while_handoff_was_stopped_is_announced_once_after_the_restart(tmp_path, sim):
    # The last run, three hours ago, set a reminder for an hour later; then handoff stopped.
    settings = TaskSettings(state_dir=tmp_path / "state")
    three_hours_ago = time.time() - 3 * 3600
    store = TaskStore(settings.db_path)
    manager = TaskManager(TaskConfig(), store, settings, clock=lambda: three_hours_ago)
    await manager.start()
    await manager.add_timer(TaskKind.REMINDER, three_hours_ago + 3600, "your reminder to call the plumber", "call the plumber")
    await manager.close()
    store.close()

    async with running_pipeline(tmp_path, sim) as p:
        await p.wait(lambda t: t.count("notice") == 1 and t.count("narrated") == 1 and t.count("listening") >= 2)
        due = datetime.fromtimestamp(three_hours_ago + 3600)
        [said] = notices(p)
        assert said == f"Reminder: call the plumber. This was due {when_words(due, datetime.now())}, while I was not running."

    async with running_pipeline(tmp_path, sim) as p:  # and again: it was heard, so it is not repeated
        await p.ask("Computer, what time is it?")
        assert p.timeline.count("notice") == 0
        assert p.coordinator.parts.notices.next_batch(time.time()) is None
