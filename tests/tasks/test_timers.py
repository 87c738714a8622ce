"""Timers and reminders: lengths and clock times parsed in code, the tools and their spoken
answers, firing exactly once through the notice queue, cancelling, and surviving a restart."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest

from realtime_sim.router import route
from tasks import TaskConfig, TaskKind, TaskManager, TaskSettings, TaskStatus, TaskStore, register_timer_tools
from tasks.when import (
    WhenError, clock_words, next_clock_time, parse_due, parse_length, remaining_words, when_words,
)
from tools.registry import ToolRegistry
from tools.result import ToolResult
from tasks import command as tasks_command
from tests.tasks.test_tasks_voice import assert_speakable, cli

SUNDAY_4PM = datetime(2026, 11, 22, 16, 0)


# --- lengths ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds", "words", "adjective"),
    [
        ("PT10M", 600, "ten minutes", "ten-minute"),
        ("PT2S", 2, "two seconds", "two-second"),
        ("pt45s", 45, "forty-five seconds", "forty-five-second"),
        ("PT1H30M", 5400, "an hour and thirty minutes", None),
        ("PT1.5H", 5400, "an hour and thirty minutes", None),
        ("PT0,5M", 30, "thirty seconds", "thirty-second"),
        ("PT90M", 5400, "ninety minutes", "ninety-minute"),  # kept in the units it was said in
        ("P1DT2H", 93600, "a day and two hours", None),
        ("P1W", 604800, "seven days", "seven-day"),
        ("10 minutes", 600, "ten minutes", "ten-minute"),
        ("1h 30m", 5400, "an hour and thirty minutes", None),
        ("2 hours and 5 minutes", 7500, "two hours and five minutes", None),
    ],
)
def test_lengths_are_parsed_from_iso_durations_and_plain_words(text, seconds, words, adjective) -> None:
    length = parse_length(text)
    assert (length.total_s, length.words(), length.adjective()) == (seconds, words, adjective)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("banana", "I didn't understand how long the timer should be ('banana'); say it like ten minutes or an hour and a half."),
        ("PT", "I didn't understand how long the timer should be ('PT'); say it like ten minutes or an hour and a half."),
        ("600", "I didn't understand how long the timer should be ('600'); say it like ten minutes or an hour and a half."),
        ("P1M", "Months and years have no fixed length; say how long the timer should be in days, hours or minutes."),
        ("P1Y", "Months and years have no fixed length; say how long the timer should be in days, hours or minutes."),
        ("PT0S", "The timer needs a length of at least a second."),
        ("PT0.2S", "The timer needs a length of at least a second."),
    ],
)
def test_an_unusable_length_is_one_spoken_sentence(text, message) -> None:
    with pytest.raises(WhenError) as caught:
        parse_length(text)
    assert str(caught.value) == message


# --- clock times -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "due"),
    [
        ("17:00", datetime(2026, 11, 22, 17, 0)),
        ("5 pm", datetime(2026, 11, 22, 17, 0)),
        ("5PM", datetime(2026, 11, 22, 17, 0)),
        ("5:30 p.m.", datetime(2026, 11, 22, 17, 30)),
        ("at 5 o'clock pm", datetime(2026, 11, 22, 17, 0)),
        ("16:00", datetime(2026, 11, 23, 16, 0)),  # now exactly: the next one is tomorrow
        ("15:59", datetime(2026, 11, 23, 15, 59)),  # past today -> tomorrow
        ("3 pm", datetime(2026, 11, 23, 15, 0)),
        ("09:30", datetime(2026, 11, 23, 9, 30)),  # 24-hour HH:MM, as the tool asks
        ("10:30", datetime(2026, 11, 23, 10, 30)),
        ("9:30", datetime(2026, 11, 22, 21, 30)),  # no am/pm, not HH:MM: whichever comes first
        ("5", datetime(2026, 11, 22, 17, 0)),
        ("12 am", datetime(2026, 11, 23, 0, 0)),
        ("12:30 am", datetime(2026, 11, 23, 0, 30)),
        ("12 pm", datetime(2026, 11, 23, 12, 0)),
        ("12:15 pm", datetime(2026, 11, 23, 12, 15)),
        ("noon", datetime(2026, 11, 23, 12, 0)),
        ("midnight", datetime(2026, 11, 23, 0, 0)),
        ("00:00", datetime(2026, 11, 23, 0, 0)),
        ("23:59:30", datetime(2026, 11, 22, 23, 59, 30)),
        ("tomorrow 09:00", datetime(2026, 11, 23, 9, 0)),
        ("tomorrow at 9", datetime(2026, 11, 23, 9, 0)),
        ("tonight at 9", datetime(2026, 11, 22, 21, 0)),
        ("friday 5 pm", datetime(2026, 11, 27, 17, 0)),
        ("sunday 17:00", datetime(2026, 11, 22, 17, 0)),  # today, still to come
        ("sunday 15:00", datetime(2026, 11, 29, 15, 0)),  # today's has passed: next week's
    ],
)
def test_clock_times_are_the_next_time_the_clock_shows_them(text, due) -> None:
    assert next_clock_time(text, SUNDAY_4PM) == due


@pytest.mark.parametrize("text", ["25:00", "13 pm", "0 am", "5:61", "17:00:75", "banana", "", "half past five"])
def test_an_unusable_clock_time_is_one_spoken_sentence(text) -> None:
    with pytest.raises(WhenError) as caught:
        next_clock_time(text, SUNDAY_4PM)
    assert str(caught.value) == f"I didn't understand the time '{text}'; say it like 5 PM or 17:30."


def test_a_reminder_is_due_at_a_clock_time_a_date_or_after_a_length() -> None:
    assert parse_due("PT20M", SUNDAY_4PM) == datetime(2026, 11, 22, 16, 20)
    assert parse_due("20 minutes", SUNDAY_4PM) == datetime(2026, 11, 22, 16, 20)
    assert parse_due("5 pm", SUNDAY_4PM) == datetime(2026, 11, 22, 17, 0)
    assert parse_due("2026-11-24T09:00", SUNDAY_4PM) == datetime(2026, 11, 24, 9, 0)
    with pytest.raises(WhenError, match=r"^3 PM today has already passed; say a time still to come\.$"):
        parse_due("today 3 pm", SUNDAY_4PM)
    with pytest.raises(WhenError, match=r"^10 AM on Friday, November 20 has already passed"):
        parse_due("2026-11-20T10:00", SUNDAY_4PM)
    with pytest.raises(WhenError, match="coming year"):
        parse_due("2028-01-01T10:00", SUNDAY_4PM)
    with pytest.raises(WhenError, match="^Say when to remind you"):
        parse_due(" ", SUNDAY_4PM)


def test_times_are_spoken_as_people_say_them() -> None:
    assert [clock_words(datetime(2026, 1, 1, h, m)) for h, m in ((17, 0), (17, 5), (0, 0), (12, 0), (0, 30), (9, 15))] == [
        "5 PM", "5:05 PM", "midnight", "noon", "12:30 AM", "9:15 AM",
    ]  # fmt: skip
    assert when_words(datetime(2026, 11, 22, 17, 0), SUNDAY_4PM) == "at 5 PM"
    assert when_words(datetime(2026, 11, 23, 9, 0), SUNDAY_4PM) == "tomorrow at 9 AM"
    assert when_words(datetime(2026, 11, 27, 12, 0), SUNDAY_4PM) == "on Friday at noon"
    assert when_words(datetime(2026, 12, 7, 17, 0), SUNDAY_4PM) == "on Monday, December 7 at 5 PM"
    assert when_words(datetime(2026, 11, 22, 9, 0), SUNDAY_4PM) == "at 9 AM"  # earlier today
    assert when_words(datetime(2026, 11, 21, 17, 0), SUNDAY_4PM) == "yesterday at 5 PM"
    assert when_words(datetime(2026, 11, 19, 17, 0), SUNDAY_4PM) == "on Thursday, November 19 at 5 PM"
    assert [remaining_words(s) for s in (0, 0.4, 1, 40, 61, 252, 600, 1234, 3660, 183600)] == [
        "less than a second", "a second", "a second", "forty seconds", "a minute and a second",
        "four minutes and twelve seconds", "ten minutes", "twenty-one minutes", "an hour and a minute",
        "two days and three hours",
    ]  # fmt: skip


# --- the simulator's router fills the arguments as a model would ----------------------------------

TIMER_TOOLS = [{"type": "function", "name": n} for n in
               ("get_time", "ask_brain", "cancel_task", "set_timer", "set_reminder", "time_left", "cancel_timer")]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ("computer, set a timer for ten minutes", "set_timer", {"duration": "PT10M"}),
        ("computer, set a timer for 2 seconds", "set_timer", {"duration": "PT2S"}),
        ("computer, set a timer for an hour and a half for the pasta", "set_timer", {"duration": "PT1H30M", "label": "pasta"}),
        ("computer, set a timer for half an hour", "set_timer", {"duration": "PT30M"}),
        ("computer, remind me at 5 pm to call the plumber", "set_reminder", {"at": "17:00", "text": "call the plumber"}),
        ("computer, remind me to call the plumber at 5:30 p.m.", "set_reminder", {"at": "17:30", "text": "call the plumber"}),
        ("computer, remind me in twenty minutes to check the oven", "set_reminder", {"at": "PT20M", "text": "check the oven"}),
        ("computer, remind me tomorrow at 9 am to water the plants", "set_reminder", {"at": "tomorrow 09:00", "text": "water the plants"}),
        ("computer, how long is left on my timer", "time_left", {"name": "timer"}),
        ("computer, how much time is left on the pasta timer", "time_left", {"name": "pasta"}),
        ("computer, cancel the timer", "cancel_timer", {"name": "timer"}),
        ("computer, cancel the reminder", "cancel_timer", {"name": "reminder"}),
        ("computer, cancel the backup task", "cancel_task", {"task": "backup"}),
        ("computer, what time is it", "get_time", {}),
    ],
)
def test_the_simulated_router_copies_lengths_and_times_into_standard_form(text, name, arguments) -> None:
    routed = route(text, TIMER_TOOLS, "required")
    assert routed is not None and (routed.name, routed.arguments) == (name, arguments)


# --- the tools, the manager and the notice queue --------------------------------------------------


class Clock:
    """Wall-clock seconds the test moves by hand (the manager's `clock`)."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def timer_tools(
    state_dir: Path, clock: Callable[[], float] = time.time
) -> AsyncIterator[tuple[ToolRegistry, TaskManager]]:
    settings = TaskSettings(state_dir=state_dir)
    store = TaskStore(settings.db_path)
    manager = TaskManager(TaskConfig(), store, settings, clock=clock)
    await manager.start()
    registry = ToolRegistry()
    register_timer_tools(registry, manager)
    try:
        yield registry, manager
    finally:
        await manager.close()
        store.close()


async def call(registry: ToolRegistry, name: str, arguments: dict) -> tuple[ToolResult, str]:
    result = await registry.run(name, json.dumps(arguments), f"call-{name}")
    script = registry.format(result).script
    assert_speakable(script)
    return result, script


def local(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp)


async def test_a_timer_fires_once_and_its_notice_says_it_is_done(tmp_path: Path) -> None:
    async with timer_tools(tmp_path) as (registry, manager):
        result, script = await call(registry, "set_timer", {"duration": "PT1S"})
        assert script == f"Timer set for a second; it ends {result.data['timer']['due_words']}."
        assert re.fullmatch(r"(tomorrow )?at (\d\d?(:\d\d)? [AP]M|noon|midnight)", result.data["timer"]["due_words"])
        await manager.notices.wait_pending()
        batch = manager.notices.next_batch()
        assert batch is not None and batch.script == "Your one-second timer is done."
        manager.notices.ack(batch.ids)
        assert manager.notices.next_batch() is None
        [record] = await manager.list_tasks()
        assert (record.kind, record.status, record.name) == (TaskKind.TIMER, TaskStatus.SUCCEEDED, "timer")
        assert manager.pending_timers() == []


async def test_a_cancelled_timer_is_never_announced(tmp_path: Path) -> None:
    async with timer_tools(tmp_path) as (registry, manager):
        await call(registry, "set_timer", {"duration": "PT1S", "label": "the tea"})
        _, cancelled = await call(registry, "cancel_timer", {"name": "tea"})
        assert re.fullmatch(r"I cancelled your tea timer; it had (a second|less than a second) left\.", cancelled)
        # A later timer fires: had the cancelled one (due earlier) fired, its notice would come first.
        await call(registry, "set_timer", {"duration": "PT2S", "label": "eggs"})
        await manager.notices.wait_pending()
        batch = manager.notices.next_batch()
        assert batch is not None and batch.script == "Your eggs timer is done."
        manager.notices.ack(batch.ids)
        assert manager.notices.next_batch() is None
        statuses = {r.label: r.status for r in await manager.list_tasks()}
        assert statuses == {"the tea": TaskStatus.CANCELLED, "eggs": TaskStatus.SUCCEEDED}
        _, again = await call(registry, "cancel_timer", {})
        assert again == "You have no timers or reminders set."


async def test_time_left_speaks_the_remaining_time(tmp_path: Path) -> None:
    clock = Clock(time.time())
    async with timer_tools(tmp_path, clock) as (registry, manager):
        _, none = await call(registry, "time_left", {})
        assert none == "You have no timers or reminders set."
        await call(registry, "set_timer", {"duration": "PT10M"})
        clock.now += 5 * 60 + 48
        _, left = await call(registry, "time_left", {"name": "timer"})
        assert left == "Your ten-minute timer has four minutes and twelve seconds left."

        reminder, said = await call(registry, "set_reminder", {"at": "PT2H", "text": "to call the plumber."})
        due = local(manager.pending_timers()[-1].due_at)
        assert said == f"I'll remind you {when_words(due, local(clock.now))}: call the plumber."
        _, both = await call(registry, "time_left", {})
        assert both == (
            "Your ten-minute timer has four minutes and twelve seconds left; "
            f"your reminder to call the plumber is due {when_words(due, local(clock.now))}, in two hours."
        )
        _, one = await call(registry, "time_left", {"name": "plumber"})
        assert one.startswith("Your reminder to call the plumber is due")


async def test_which_timer_is_asked_when_it_is_not_clear(tmp_path: Path) -> None:
    async with timer_tools(tmp_path) as (registry, manager):
        await call(registry, "set_timer", {"duration": "PT10M"})
        await call(registry, "set_timer", {"duration": "PT20M", "label": "pasta"})
        await call(registry, "set_reminder", {"at": "PT1H", "text": "call the plumber"})
        result, question = await call(registry, "cancel_timer", {"name": "timer"})
        assert not result.ok
        assert re.fullmatch(r"Which one: your ten-minute timer due at \d\d:\d\d or your pasta timer due at \d\d:\d\d\?", question)
        _, unknown = await call(registry, "cancel_timer", {"name": "laundry"})
        assert unknown == (
            "I can't find a timer or reminder called 'laundry'; you have your ten-minute timer, "
            "your pasta timer and your reminder to call the plumber."
        )
        _, cancelled = await call(registry, "cancel_timer", {"name": "reminder"})
        assert cancelled == "I cancelled your reminder to call the plumber."
        _, pasta = await call(registry, "cancel_timer", {"name": "the pasta timer"})
        assert pasta.startswith("I cancelled your pasta timer; it had ")
        _, last = await call(registry, "cancel_timer", {})
        assert last.startswith("I cancelled your ten-minute timer; it had ")
        assert manager.notices.next_batch() is None


async def test_bad_lengths_and_times_are_spoken_not_stored(tmp_path: Path) -> None:
    async with timer_tools(tmp_path) as (registry, manager):
        result, spoken = await call(registry, "set_timer", {"duration": "a while"})
        assert not result.ok and spoken.startswith("I didn't understand how long the timer should be")
        _, spoken = await call(registry, "set_timer", {"duration": "P8D"})
        assert spoken == "A timer can run for at most a week; for later than that, ask me for a reminder."
        _, spoken = await call(registry, "set_reminder", {"at": "25:00", "text": "call"})
        assert spoken == "I didn't understand the time '25:00'; say it like 5 PM or 17:30."
        _, spoken = await call(registry, "set_reminder", {"at": "17:00", "text": " . "})
        assert spoken == "Say what to remind you of."
        # Issue 27: these overflowed a date ("The set reminder tool failed: OverflowError").
        for at in ("P99999999999D", "PT99999999999M", "99999999999 minutes"):
            _, spoken = await call(registry, "set_reminder", {"at": at, "text": "call"})
            assert spoken == "I can only keep reminders for the coming year.", (at, spoken)
        _, spoken = await call(registry, "set_reminder", {"at": "0001-01-01T00:00:00+14:00", "text": "call"})
        assert spoken.startswith("The date '0001-01-01T00:00:00+14:00' is not one I can keep"), spoken
        assert await manager.list_tasks() == []


async def test_a_reminder_due_while_handoff_was_down_is_announced_once_after_the_restart_marked_late(
    tmp_path: Path,
) -> None:
    before = Clock(time.time() - 3 * 3600)  # the first run was three hours ago
    async with timer_tools(tmp_path, before) as (registry, _):
        await call(registry, "set_reminder", {"at": "PT1H", "text": "call the plumber"})
        await call(registry, "set_timer", {"duration": "PT5H"})  # still to come after the restart
    due = local(before.now + 3600)

    async with timer_tools(tmp_path) as (registry, manager):
        await manager.notices.wait_pending()
        batch = manager.notices.next_batch()
        assert batch is not None
        assert batch.script == f"Reminder: call the plumber. This was due {when_words(due, local(time.time()))}, while I was not running."
        manager.notices.ack(batch.ids)
        _, left = await call(registry, "time_left", {})
        assert re.fullmatch(r"Your five-hour timer has (an hour and fifty-nine minutes|two hours) left\.", left)

    async with timer_tools(tmp_path) as (registry, manager):
        assert manager.notices.next_batch() is None  # heard once: never again
        records = {r.kind: r for r in await manager.list_tasks()}
        assert records[TaskKind.REMINDER].status is TaskStatus.SUCCEEDED
        assert records[TaskKind.TIMER].status is TaskStatus.RUNNING


async def test_due_while_handoff_was_down_is_late_however_short_the_gap(tmp_path: Path) -> None:
    before = Clock(time.time() - 5)
    async with timer_tools(tmp_path, before) as (registry, _):
        await call(registry, "set_timer", {"duration": "PT2S", "label": "tea"})  # due three seconds ago
    async with timer_tools(tmp_path) as (_, manager):
        await manager.notices.wait_pending()
        batch = manager.notices.next_batch()
        assert batch is not None and batch.script.startswith("Your tea timer is done. This was due at ")
        assert batch.script.endswith(", while I was not running.")


def test_a_database_from_before_timers_gets_the_new_columns(tmp_path: Path) -> None:
    db_path = tmp_path / "tasks.db"
    old = sqlite3.connect(db_path)
    old.executescript(OLD_SCHEMA)
    old.execute(
        "INSERT INTO tasks (name, spoken, argv, cwd, timeout_s, log_path, created_at, params, label, agent, status,"
        " tail, line_count) VALUES ('backup', 'the backup', '[\"true\"]', '/', 60, '/l/1.log', 1.0, '[]', '', 0,"
        " 'succeeded', '[]', 0)"
    )
    old.execute("INSERT INTO notices (task_id, created_at, outcome, spoken, summary) VALUES (1, 2.0, 'succeeded', 'the backup', '')")
    old.commit()
    old.close()
    store = TaskStore(db_path)
    try:
        [record] = store.list_tasks()
        assert (record.name, record.kind, record.due_at) == ("backup", TaskKind.PROCESS, None)
        [notice] = store.pending_notices()
        assert (notice.kind, notice.label, notice.late) == (TaskKind.PROCESS, "", False)
    finally:
        store.close()
    again = TaskStore(db_path)  # a second open finds nothing to add
    try:
        assert len(again.list_tasks()) == 1
    finally:
        again.close()


# The schema as the first release made it (tasks/store.py before timers).
OLD_SCHEMA = """
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, spoken TEXT NOT NULL, argv TEXT NOT NULL,
    cwd TEXT NOT NULL, timeout_s REAL NOT NULL, log_path TEXT NOT NULL, created_at REAL NOT NULL,
    params TEXT NOT NULL, label TEXT NOT NULL, agent INTEGER NOT NULL, status TEXT NOT NULL, started_at REAL,
    finished_at REAL, pid INTEGER, exit_code INTEGER, stop_reason TEXT, error TEXT, tail TEXT NOT NULL,
    line_count INTEGER NOT NULL
);
CREATE TABLE notices (
    id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL REFERENCES tasks(id), created_at REAL NOT NULL,
    outcome TEXT NOT NULL, spoken TEXT NOT NULL, duration_s REAL, exit_code INTEGER, timeout_s REAL, error TEXT,
    summary TEXT NOT NULL, delivered_at REAL
);
"""


async def test_timers_appear_in_handoff_tasks(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    async with timer_tools(tmp_path / "state") as (registry, manager):
        await call(registry, "set_timer", {"duration": "PT10M", "label": "pasta"})
        await call(registry, "set_reminder", {"at": "PT2H", "text": "call the plumber"})
        due = local(manager.pending_timers()[-1].due_at).strftime("%Y-%m-%d %H:%M:%S")
        assert tasks_command.run(cli("--state-dir", str(tmp_path / "state"))) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].split()[:3] == ["1", "timer", "running"] and lines[1].endswith(": pasta")
        assert lines[2].split()[:3] == ["2", "reminder", "running"] and lines[2].endswith(f"due {due}: call the plumber")
        assert tasks_command.run(cli("--state-dir", str(tmp_path / "state"), "show", "plumber")) == 0
        assert capsys.readouterr().out == f"reminder 2 (your reminder to call the plumber), running, due {due}: call the plumber\n"


async def test_a_hostile_label_or_reminder_is_kept_and_said_without_control_characters(tmp_path: Path) -> None:
    # Issue 23, defects 6 and 8: escape sequences, newlines and lone surrogates from the model.
    hostile = "\x1b]0;pwned\x07tea\r\n2026-01-01 FORGED caf\ud800"
    async with timer_tools(tmp_path) as (registry, manager):
        timer, script = await call(registry, "set_timer", {"duration": "PT1H", "label": hostile})
        reminder, _ = await call(registry, "set_reminder", {"at": "23:59", "text": hostile})
        assert timer.ok and reminder.ok, (timer, reminder)
        records = await manager.list_tasks()
        assert [r.label for r in records] == ["]0;pwned tea 2026-01-01 FORGED caf\ufffd"] * 2
        assert "\x1b" not in script and "\x07" not in script


async def test_three_hundred_timers_stop_at_the_limit_with_one_sentence(tmp_path: Path) -> None:
    """Issue 23, defect 4: 300 set_timer calls made 300 timers (and 300 notices)."""
    from tasks.manager import MAX_PENDING_TIMERS

    async with timer_tools(tmp_path) as (registry, manager):
        scripts = [(await call(registry, "set_timer", {"duration": "PT1H"}))[1] for _ in range(MAX_PENDING_TIMERS + 5)]
        assert len(manager.pending_timers()) == MAX_PENDING_TIMERS
        assert scripts[-1] == f"There are already {MAX_PENDING_TIMERS} timers and reminders set; cancel one first."
        assert len(await manager.list_tasks()) == MAX_PENDING_TIMERS
