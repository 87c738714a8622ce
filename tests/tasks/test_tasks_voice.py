"""The task voice tools (through the real ToolRegistry, which also formats their results) and `handoff tasks`."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import AsyncIterator

import pytest

from tools.registry import ToolRegistry
from tools.result import ToolResult
from tasks import TaskConfig, TaskManager, TaskParam, TaskSettings, TaskStore, TaskTemplate, register_task_tools
from tasks import command as tasks_command
from tasks.records import TaskStatus


def assert_speakable(script: str) -> None:
    """Plain sentences: no JSON, markdown, code, underscores or line breaks."""
    assert script and script[-1] in ".?", script
    assert not re.search(r"[{}\[\]\"`*#_<>|\n]", script), script
    assert "http" not in script and "None" not in script and "status" not in script, script
    assert len(script) <= 600


def speak(formatters: ToolRegistry, result: ToolResult) -> str:
    script = formatters.format(result).script
    assert_speakable(script)
    return script


def task(spoken: str, status: str, duration_s: float | None, **extra: object) -> dict:
    data = {"id": 1, "name": "x", "spoken": spoken, "status": status, "duration_s": duration_s, "exit_code": None,
            "timeout_s": 600.0, "error": None, "lines": 0, "tail": [], "log_path": "/logs/1.log"}  # fmt: skip
    data.update(extra)
    return data


@pytest.fixture
def formatters() -> ToolRegistry:
    registry = ToolRegistry()
    register_task_tools(registry, _StubManager())
    return registry


class _StubManager:
    """Enough of a manager to register the tools (formatter tests never call handlers)."""

    config = TaskConfig()


# --- formatters on fixed results ----------------------------------------------------------------


def test_the_task_list_is_one_spoken_sentence(formatters: ToolRegistry) -> None:
    result = ToolResult("list_tasks", "c1", True, {
        "tasks": [task("the backup", "succeeded", 120.0), task("the test run", "running", 40.0)], "more": 0,
    })  # fmt: skip
    assert speak(formatters, result) == "The backup finished in two minutes; the test run is still going, forty seconds so far."
    empty = ToolResult("list_tasks", "c2", True, {"tasks": [], "more": 0})
    assert speak(formatters, empty) == "There are no background tasks."
    many = ToolResult("list_tasks", "c3", True, {"tasks": [task("the backup", "queued", None)], "more": 3})
    assert speak(formatters, many) == "The backup is waiting for a free slot. There are three older ones too."


def test_results_starts_and_cancels_are_spoken(formatters: ToolRegistry) -> None:
    failed = task("the test run", "failed", 40.0, exit_code=1, lines=9, tail=["collected 3 items", "1 failed, 2 passed"])
    assert speak(formatters, ToolResult("get_task_result", "c", True, {"task": failed})) == (
        "The test run failed after forty seconds, with exit code 1. "
        "The last output was: collected 3 items. 1 failed, 2 passed."
    )
    long_run = task("the backup", "succeeded", 3900.0)
    assert speak(formatters, ToolResult("get_task_result", "c", True, {"task": long_run})) == (
        "The backup finished in an hour and five minutes. It has printed nothing."
    )
    queued = ToolResult("start_task", "c", True, {"task": task("the backup", "queued", None), "running": 5, "queued": 1})
    assert speak(formatters, queued) == (
        "The backup is queued: five tasks are already running, so it starts when one finishes."
    )
    cancelled = ToolResult("cancel_task", "c", True, {"task": task("the backup", "cancelled", 40.0), "cancelled": True})
    assert speak(formatters, cancelled) == "I cancelled the backup after forty seconds."
    too_late = ToolResult("cancel_task", "c", True, {"task": task("the backup", "succeeded", 120.0), "cancelled": False})
    assert speak(formatters, too_late) == "There was nothing to cancel: the backup finished in two minutes."


# --- the tools end to end, with real processes ---------------------------------------------------


@pytest.fixture
async def tools(tmp_path: Path):
    echo_argv = "import json, sys; open('agent-argv.json', 'w').write(json.dumps(sys.argv[1:])); print('all done')"
    config = TaskConfig(
        templates=(
            TaskTemplate(name="backup", argv=("sh", "-c", "echo copied 3 files"), spoken="the backup", cwd=tmp_path),
            TaskTemplate(name="tests", argv=("sh", "-c", "echo running; sleep 30"), spoken="the test run", cwd=tmp_path),
            TaskTemplate(
                name="agent", argv=(sys.executable, "-c", echo_argv, "-p", "{prompt}"), agent=True,
                spoken="the coding agent", cwd=tmp_path, params=(TaskParam("prompt", "what to do"),),
            ),
        ),  # fmt: skip
        source=tmp_path / "tasks.toml",
    )
    async with voice_task_tools(config, TaskSettings(state_dir=tmp_path / "state", kill_grace_s=0.3, drain_s=1.0)) as parts:
        yield parts


@contextlib.asynccontextmanager
async def voice_task_tools(
    config: TaskConfig, settings: TaskSettings, registry: ToolRegistry | None = None
) -> AsyncIterator[tuple[ToolRegistry, ToolRegistry, TaskManager]]:
    """A started task manager with the task tools registered on `registry` (default: a fresh one)."""
    store = TaskStore(settings.db_path)
    manager = TaskManager(config, store, settings)
    await manager.start()
    registry = formatters = registry or ToolRegistry()  # the registry formats through each tool's spec
    register_task_tools(registry, manager)
    try:
        yield registry, formatters, manager
    finally:
        await manager.close()
        store.close()


async def call(registry: ToolRegistry, name: str, arguments: dict) -> ToolResult:
    return await registry.run(name, json.dumps(arguments), f"call-{name}")


async def test_the_tools_are_declared_with_the_templates_and_the_agent_rule(tools) -> None:
    registry, _, _ = tools
    declared = {t["name"]: t for t in registry.session_tools()}
    assert set(declared) == {"start_task", "list_tasks", "get_task_result", "cancel_task"}
    start = declared["start_task"]
    assert "'backup'" in start["description"] and "'agent'" in start["description"]
    assert "use 'agent' with prompt set to the request" in start["description"]
    assert set(start["parameters"]["properties"]) == {"name", "command", "prompt"}


async def test_start_list_result_and_cancel_by_voice(tools, tmp_path: Path) -> None:
    registry, formatters, manager = tools
    started = await call(registry, "start_task", {"name": "backup"})
    assert speak(formatters, started) == "I started the backup; I'll tell you when it's done."
    await manager.wait(started.data["task"]["id"])

    result = await call(registry, "get_task_result", {"task": "backup"})
    assert re.fullmatch(r"The backup finished in [a-z -]+\. The last output was: copied 3 files\.", speak(formatters, result))

    await call(registry, "start_task", {"name": "the test run"})
    listing = speak(formatters, await call(registry, "list_tasks", {}))
    assert re.fullmatch(r"The backup finished in [a-z -]+; the test run is still going(, [a-z -]+ so far)?\.", listing)

    cancelled = speak(formatters, await call(registry, "cancel_task", {"task": "tests"}))
    assert re.fullmatch(r"I cancelled the test run after [a-z -]+\.", cancelled)
    again = speak(formatters, await call(registry, "cancel_task", {"task": "tests"}))
    assert again.startswith("There was nothing to cancel: the test run was cancelled after ")


async def test_go_do_this_work_reaches_the_agent_as_one_literal_argument(tools, tmp_path: Path) -> None:
    registry, formatters, manager = tools
    prompt = "fix the login bug; rm -rf ~ $(touch pwned)"
    started = await call(registry, "start_task", {"name": "agent", "prompt": prompt, "command": ""})
    assert started.ok, started.error
    done = await manager.wait(started.data["task"]["id"])
    assert json.loads((tmp_path / "agent-argv.json").read_text()) == ["-p", prompt]
    assert not (tmp_path / "pwned").exists()
    assert done.tail == ("all done",)


async def test_refusals_and_questions_are_spoken_sentences(tools) -> None:
    registry, formatters, manager = tools
    shell = await call(registry, "start_task", {"command": "rm -rf ~"})
    assert not shell.ok
    assert speak(formatters, shell).startswith("Running shell commands by voice is turned off. To allow it, set allow")

    missing = await call(registry, "start_task", {"name": "agent"})
    assert speak(formatters, missing) == "The coding agent needs a value for prompt: what to do."
    wrong = await call(registry, "start_task", {"name": "backup", "prompt": "x"})
    assert speak(formatters, wrong) == "The backup has no parameter 'prompt'. It takes no parameters."
    unknown = await call(registry, "get_task_result", {"task": "deploy"})
    assert speak(formatters, unknown) == "I can't find a task called 'deploy'. There are no tasks yet."

    first = await call(registry, "start_task", {"name": "backup"})
    second = await call(registry, "start_task", {"name": "backup"})
    await manager.wait(first.data["task"]["id"])
    await manager.wait(second.data["task"]["id"])
    ambiguous = await call(registry, "get_task_result", {"task": "backup"})
    assert not ambiguous.ok
    question = speak(formatters, ambiguous)
    at = r"the backup started at \d\d:\d\d"
    # Numbers are added only when both started in the same minute.
    assert re.fullmatch(rf"Which one: (task one, )?{at} or (task two, )?{at}\?", question)
    assert [c["id"] for c in ambiguous.data["candidates"]] == [1, 2]


# --- handoff tasks --------------------------------------------------------------------------------


def cli(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="handoff tasks")
    tasks_command.add_arguments(parser)
    return parser.parse_args(list(argv))


async def test_the_cli_lists_tasks_and_prints_a_log(tools, tmp_path: Path, capsys, monkeypatch) -> None:
    registry, _, manager = tools
    monkeypatch.chdir(tmp_path)  # no stray .env
    done = await manager.wait((await call(registry, "start_task", {"name": "backup"})).data["task"]["id"])
    assert (await call(registry, "start_task", {"name": "tests"})).data["task"]["status"] == "running"
    # Its start is written to the database by the store's worker, which runs calls in order: once a
    # read through it is answered, the start has landed (the command below reads the file itself).
    assert [r.status for r in await manager.list_tasks()] == [TaskStatus.SUCCEEDED, TaskStatus.RUNNING]
    state = str(tmp_path / "state")

    assert tasks_command.run(cli("--state-dir", state)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATUS", "STARTED", "DURATION", "LOG"]
    assert lines[1].split()[:3] == ["1", "backup", "succeeded"] and lines[1].endswith(done.log_path)
    assert lines[2].split()[:3] == ["2", "tests", "running"]

    assert tasks_command.run(cli("--state-dir", state, "show", "1")) == 0
    assert capsys.readouterr().out == "copied 3 files\n"
    assert tasks_command.run(cli("--state-dir", state, "show", "deploy")) == 1
    assert "no task is called 'deploy'; the tasks are: backup, tests." in capsys.readouterr().err


def test_the_cli_without_a_database_says_so(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert tasks_command.run(cli("--state-dir", str(tmp_path / "empty"))) == 0
    assert capsys.readouterr().out.startswith("No tasks yet")
    assert not (tmp_path / "empty").exists()  # reading never creates state
