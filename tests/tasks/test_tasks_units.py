"""The task package's pure parts: state machine, output tail, templates, identifiers, speech,
notice merging (store only, no processes)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from tasks.config import TaskConfig, TaskParam, TaskSettings, TaskTemplate, load_task_config, parse_task_config
from tasks.errors import AmbiguousTask, ParameterError, TaskConfigError, UnknownTask, UnknownTemplate
from tasks.identify import resolve_task
from tasks.notices import NoticeQueue, notice_for
from tasks.output import OutputTail
from tasks.records import Notice, TaskRecord, TaskStatus
from tasks.speech import duration_words, output_summary, speakable_line
from tasks.store import StoreWorker, TaskStore
from tasks.state import Exited, IllegalTransition, Interrupted, LaunchFailed, Started, StopRequested, transition

EXAMPLE = Path(__file__).resolve().parents[2] / "tasks" / "example_tasks.toml"


def record(task_id: int = 1, name: str = "backup", **changes: object) -> TaskRecord:
    base = TaskRecord(
        id=task_id, name=name, spoken=f"the {name}", argv=("true",), cwd="/", timeout_s=60.0,
        log_path=f"/logs/{task_id}.log", created_at=1000.0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


# --- state machine ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stop_reason, exit_code, expected",
    [
        (None, 0, TaskStatus.SUCCEEDED),
        (None, 3, TaskStatus.FAILED),
        (None, -9, TaskStatus.FAILED),  # killed by someone else
        ("cancel", 0, TaskStatus.CANCELLED),  # exited cleanly on SIGTERM: still the user's cancel
        ("cancel", -9, TaskStatus.CANCELLED),
        ("timeout", -15, TaskStatus.TIMED_OUT),
    ],
)
def test_the_exit_becomes_the_outcome_the_stop_reason_calls_for(stop_reason, exit_code, expected) -> None:
    running = transition(record(), Started(pid=42, at=1001.0))
    if stop_reason:
        running = transition(running, StopRequested(stop_reason, at=1002.0))
        assert running.status is TaskStatus.RUNNING
    done = transition(running, Exited(exit_code, at=1003.0, tail=("last",), line_count=7))
    assert done.status is expected
    assert (done.exit_code, done.tail, done.line_count, done.duration_s(9999.0)) == (exit_code, ("last",), 7, 2.0)


def test_the_first_stop_reason_wins() -> None:
    running = transition(record(), Started(pid=42, at=1001.0))
    stopping = transition(transition(running, StopRequested("cancel", 1002.0)), StopRequested("timeout", 1003.0))
    assert transition(stopping, Exited(-15, 1004.0)).status is TaskStatus.CANCELLED


def test_queued_tasks_can_be_cancelled_interrupted_or_fail_to_launch() -> None:
    queued = record()
    assert transition(queued, StopRequested("cancel", 1.0)).status is TaskStatus.CANCELLED
    assert transition(queued, Interrupted(1.0)).status is TaskStatus.INTERRUPTED
    failed = transition(queued, LaunchFailed("the program x was not found", 1.0))
    assert (failed.status, failed.error) == (TaskStatus.FAILED, "the program x was not found")


@pytest.mark.parametrize(
    "status, event",
    [
        (TaskStatus.QUEUED, Exited(0, 1.0)),
        (TaskStatus.QUEUED, StopRequested("timeout", 1.0)),
        (TaskStatus.RUNNING, Started(1, 1.0)),
        (TaskStatus.RUNNING, LaunchFailed("x", 1.0)),
        (TaskStatus.SUCCEEDED, Interrupted(1.0)),
        (TaskStatus.CANCELLED, Exited(0, 1.0)),
        (TaskStatus.INTERRUPTED, Started(1, 1.0)),
    ],
)
def test_illegal_transitions_raise(status, event) -> None:
    with pytest.raises(IllegalTransition):
        transition(record(status=status), event)


# --- output tail --------------------------------------------------------------------------------


def test_the_tail_keeps_the_last_lines_across_odd_chunk_boundaries() -> None:
    data = b"".join(b"line %d\n" % i for i in range(1, 1001)) + b"no newline yet"
    tail = OutputTail(max_lines=5, max_line_chars=100)
    for start in range(0, len(data), 7):  # chunks that split lines anywhere
        tail.feed(data[start : start + 7])
    assert tail.lines() == ("line 997", "line 998", "line 999", "line 1000", "no newline yet")
    assert tail.line_count == 1001


def test_one_big_chunk_and_long_lines_stay_bounded() -> None:
    tail = OutputTail(max_lines=3, max_line_chars=10)
    tail.feed(b"partial-")
    tail.feed(b"".join(b"%d\n" % i for i in range(100_000)))
    tail.feed(b"x" * 50_000 + b"\n")
    assert tail.lines() == ("99998", "99999", "x" * 10)
    assert tail.line_count == 100_001


def test_a_partial_line_followed_by_few_lines_is_joined() -> None:
    tail = OutputTail(max_lines=10, max_line_chars=100)
    tail.feed(b"hel")
    tail.feed(b"lo\r\nwor")
    tail.feed(b"ld\n")
    assert tail.lines() == ("hello", "world")


# --- templates ----------------------------------------------------------------------------------


def test_the_example_config_loads_with_an_agent_and_no_shell() -> None:
    config = load_task_config(EXAMPLE)
    names = [t.name for t in config.templates]
    assert {"backup", "tests", "agent"} <= set(names)
    assert config.agent_template is not None and config.agent_template.name == "agent"
    assert config.allow_shell is False
    backup = config.template("backup")
    assert backup.argv[0] in ("rsync", "tar")
    assert backup.argv[3].endswith("/Documents/")  # "~" expanded, rsync's trailing slash kept


def test_a_missing_config_file_means_no_templates(tmp_path: Path) -> None:
    config = load_task_config(tmp_path / "absent.toml")
    assert config.templates == () and not config.allow_shell
    with pytest.raises(UnknownTemplate, match="No task templates are set up. Add templates to"):
        config.template("backup")


def test_parameters_fill_argv_elements_verbatim() -> None:
    template = TaskTemplate(
        name="agent",
        argv=("claude", "-p", "{prompt}", "--tag={tag}", "{{literal}}"),
        params=(TaskParam("prompt", "what to do"), TaskParam("tag", default="voice")),
    )
    argv, used = template.fill({"prompt": "fix it; rm -rf ~ $(touch y) `id`"})
    assert argv == ("claude", "-p", "fix it; rm -rf ~ $(touch y) `id`", "--tag=voice", "{literal}")
    assert dict(used) == {"prompt": "fix it; rm -rf ~ $(touch y) `id`", "tag": "voice"}
    assert template.fill({"prompt": "{tag}"})[0][2] == "{tag}"  # values are never substituted again


@pytest.mark.parametrize(
    "values, message",
    [
        ({}, "The agent task needs a value for prompt: what to do."),
        ({"prompt": "  "}, "needs a value for prompt"),
        ({"prompt": "x", "path": "/etc"}, "The agent task has no parameter 'path'. It takes: prompt."),
        ({"prompt": "--dangerous-option"}, "cannot start with a dash"),
        ({"prompt": "a\x00b"}, "null character"),
        ({"prompt": ["a"]}, "must be text"),
    ],
)
def test_bad_parameters_are_clear_errors(values, message) -> None:
    template = TaskTemplate(name="agent", argv=("claude", "-p", "{prompt}"), params=(TaskParam("prompt", "what to do"),))
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(".", r"\.")):
        template.fill(values)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"tasks": {"x": {"argv": ["echo", "{who}"]}}}, "uses {who} in argv but declares no parameter 'who'"),
        ({"tasks": {"x": {"argv": ["echo"], "params": {"who": "w"}}}}, "declares parameter 'who' but argv never uses"),
        ({"tasks": {"x": {"argv": []}}}, "needs argv"),
        ({"tasks": {"x": {"argv": ["{p}"], "params": {"p": "program"}}}}, "cannot take its program name"),
        ({"tasks": {"x": {"argv": ["a"], "timeout_s": 0}}}, "above zero"),
        ({"tasks": {"x": {"argv": ["a"], "shell": True}}}, "unknown key 'shell'"),
        ({"tasks": {"x": {"argv": ["a", "{name}"], "params": {"name": "n"}}}}, "cannot have a parameter called 'name'"),
        ({"allow_shell": "yes"}, "allow_shell in /cfg/tasks.toml must be true or false"),
        (
            {"tasks": {"a": {"argv": ["a"], "agent": True}, "b": {"argv": ["b"], "agent": True}}},
            "Only one task template can be the agent",
        ),
    ],
)
def test_config_mistakes_name_the_file_and_the_entry(data, message) -> None:
    with pytest.raises(TaskConfigError) as caught:
        parse_task_config(data, base_dir=Path("/cfg"), source=Path("/cfg/tasks.toml"))
    assert message in str(caught.value)
    assert "/cfg/tasks.toml" in str(caught.value)


def test_invalid_toml_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text("[tasks.backup\nargv = 3\n")
    with pytest.raises(TaskConfigError, match="is not valid TOML"):
        load_task_config(path)


def test_templates_are_found_by_spoken_or_partial_name() -> None:
    config = TaskConfig(
        templates=(
            TaskTemplate(name="backup", argv=("true",), spoken="the backup"),
            TaskTemplate(name="unit-tests", argv=("true",), spoken="the test run"),
            TaskTemplate(name="lint", argv=("true",)),
        )
    )
    assert config.template("The Backup").name == "backup"
    assert config.template("test run").name == "unit-tests"
    assert config.template("unit tests task").name == "unit-tests"
    assert config.template("lin").name == "lint"
    with pytest.raises(UnknownTemplate) as caught:
        config.template("deploy")
    assert str(caught.value) == "There is no task template called 'deploy'. The templates are: backup, unit-tests and lint."


# --- identifiers --------------------------------------------------------------------------------


def test_tasks_are_found_by_number_name_or_part_of_it() -> None:
    records = [record(1, "backup"), record(2, "tests"), record(3, "agent", label="fix the login bug")]
    assert resolve_task("2", records).id == 2
    assert resolve_task(3, records).id == 3
    assert resolve_task("task 1", records).id == 1
    assert resolve_task("two", records).id == 2
    assert resolve_task("the backup", records).id == 1
    assert resolve_task("test", records).id == 2
    assert resolve_task("login bug", records).id == 3


def test_an_ambiguous_name_asks_which_one_by_start_time() -> None:
    at_1002 = time.mktime((2026, 1, 5, 10, 2, 0, 0, 0, -1))
    at_1015 = time.mktime((2026, 1, 5, 10, 15, 0, 0, 0, -1))
    records = [
        record(1, "backup", status=TaskStatus.SUCCEEDED, started_at=at_1002, finished_at=at_1002 + 60),
        record(2, "backup", status=TaskStatus.RUNNING, started_at=at_1015),
    ]
    with pytest.raises(AmbiguousTask) as caught:
        resolve_task("backup", records)
    assert caught.value.question == "Which one: the backup started at 10:02 or the backup started at 10:15?"
    assert [r.id for r in caught.value.candidates] == [1, 2]
    # Cancel prefers the one still running.
    assert resolve_task("backup", records, prefer=lambda r: r.is_active).id == 2


def test_runs_that_sound_the_same_are_told_apart_by_number() -> None:
    same_minute = time.mktime((2026, 1, 5, 9, 30, 0, 0, 0, -1))
    records = [record(4, "tests", started_at=same_minute), record(5, "tests", started_at=same_minute + 5)]
    with pytest.raises(AmbiguousTask) as caught:
        resolve_task("tests", records)
    assert caught.value.question == (
        "Which one: task four, the tests started at 09:30 or task five, the tests started at 09:30?"
    )


def test_unknown_identifiers_say_what_exists() -> None:
    records = [record(1, "backup"), record(2, "tests")]
    with pytest.raises(UnknownTask, match="There is no task number 9."):
        resolve_task("9", records)
    with pytest.raises(UnknownTask, match="I can't find a task called 'deploy'. The tasks I know of are: backup and tests."):
        resolve_task("deploy", records)
    with pytest.raises(UnknownTask, match="There are no tasks yet."):
        resolve_task("deploy", [])


# --- speech -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seconds, words",
    [
        (0.2, "less than a second"),
        (1, "one second"),
        (40, "forty seconds"),
        (60, "a minute"),
        (95, "a minute and thirty-five seconds"),
        (120, "two minutes"),
        (125, "two minutes"),
        (3600, "an hour"),
        (3900, "an hour and five minutes"),
        (7260, "two hours and a minute"),
        (86400 + 3600, "a day and an hour"),
    ],
)
def test_durations_in_words(seconds, words) -> None:
    assert duration_words(seconds) == words


def test_output_lines_are_cleaned_for_speech() -> None:
    assert speakable_line("\x1b[32mPASSED\x1b[0m tests/test_x.py::test_y") == "PASSED tests/test x.py::test y"
    assert speakable_line("downloading 10%\rdownloading 100%") == "downloading 100%"
    assert speakable_line("see https://example.com/x for {details}") == "see a link for details"
    assert output_summary(["a", "", "3 passed in 0.1s", "   "], lines=2) == "a. 3 passed in 0.1s"


# --- notices ------------------------------------------------------------------------------------


def finished(task_id: int, name: str, status: TaskStatus, took: float, **changes: object) -> TaskRecord:
    return record(task_id, name, status=status, started_at=1000.0, finished_at=1000.0 + took, **changes)


async def test_a_fresh_notice_is_narrated_alone_with_its_output(tmp_path: Path) -> None:
    settings = TaskSettings(state_dir=tmp_path, merge_older_than_s=60)
    store = TaskStore(settings.db_path)
    queue = NoticeQueue(StoreWorker(store), settings)
    failed = finished(1, "tests", TaskStatus.FAILED, 40, exit_code=1, tail=("collected 3 items", "== 1 failed, 2 passed =="))
    store.create_task(failed, settings.log_path)
    store.save_task(failed, notice_for(failed, now=2000.0, summary_lines=2))
    await queue.load()
    batch = queue.next_batch(now=2001.0)
    assert batch is not None
    assert batch.script == (
        "The tests failed after forty seconds, with exit code 1. The last output was: collected 3 items. 1 failed, 2 passed."
    )
    store.close()


async def test_old_notices_are_merged_and_ack_makes_them_final(tmp_path: Path) -> None:
    settings = TaskSettings(state_dir=tmp_path, merge_older_than_s=60)
    store = TaskStore(settings.db_path)
    worker = StoreWorker(store)
    queue = NoticeQueue(worker, settings)
    outcomes = [
        finished(1, "backup", TaskStatus.SUCCEEDED, 120),
        finished(2, "tests", TaskStatus.FAILED, 40, exit_code=2),
        finished(3, "agent", TaskStatus.TIMED_OUT, 600),
    ]
    for done in outcomes:
        store.create_task(done, settings.log_path)
        store.save_task(done, notice_for(done, now=1000.0, summary_lines=2))
    await queue.load()
    assert queue.next_batch(now=1010.0).script.startswith("The backup finished")  # fresh: one at a time
    batch = queue.next_batch(now=5000.0)
    assert batch.script == (
        "While you were away, three tasks finished: the backup finished in two minutes; "
        "the tests failed after forty seconds; and the agent was stopped when it ran past its time limit of a minute."
    )
    assert len(batch.ids) == 3
    queue.ack(batch.ids)
    assert queue.next_batch(now=5000.0) is None
    await worker.close()  # the ack's write lands
    assert store.pending_notices() == []
    store.close()


async def test_a_long_backlog_names_a_few_and_counts_the_rest(tmp_path: Path) -> None:
    settings = TaskSettings(state_dir=tmp_path, merge_older_than_s=60, max_merged_notices=2)
    store = TaskStore(settings.db_path)
    for i in range(1, 6):
        done = finished(i, f"job{i}", TaskStatus.INTERRUPTED, 5)
        store.create_task(done, settings.log_path)
        store.save_task(done, notice_for(done, now=1000.0, summary_lines=2))
    queue = NoticeQueue(StoreWorker(store), settings)
    await queue.load()
    batch = queue.next_batch(now=9000.0)
    assert batch.script == (
        "While you were away, there was news of five tasks: the job1 was interrupted when handoff stopped; "
        "the job2 was interrupted when handoff stopped; and three more, which you can hear with the task list."
    )
    assert len(batch.ids) == 5
    store.close()


def test_cancelled_tasks_are_not_announced() -> None:
    assert notice_for(finished(1, "backup", TaskStatus.CANCELLED, 3), now=1.0, summary_lines=2) is None
    notice = notice_for(finished(1, "backup", TaskStatus.SUCCEEDED, 3), now=1.0, summary_lines=2)
    assert isinstance(notice, Notice) and notice.duration_s == 3
