"""Text from the model reaches argv, paths and SQLite only once it is known to be usable, and
a bug while running one task never stops the others (issue 10, defects 1 and 3)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tasks import ParameterError, TaskConfig, TaskParam, TaskSettings, TaskStatus, TaskTemplate
from tasks.runner import ProcessRunner
from tests.tasks.test_tasks_manager import running_manager, sh
from tests.tasks.test_tasks_voice import voice_task_tools

ECHO_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"


def echo(name: str, *argv: str, params: tuple[str, ...]) -> TaskTemplate:
    """A template that prints the argv it was given, as JSON."""
    return TaskTemplate(name=name, argv=(sys.executable, "-c", ECHO_ARGV, *argv), params=tuple(TaskParam(p, p) for p in params))


async def test_a_lone_surrogate_is_refused_aloud_and_the_assistant_keeps_answering(tmp_path: Path) -> None:
    template = echo("agent", "-p", "{prompt}", params=("prompt",))
    config = TaskConfig(templates=(template, sh("quick", "echo ok", cwd=tmp_path)), allow_shell=True, shell_cwd=tmp_path)
    settings = TaskSettings(state_dir=tmp_path / "state", kill_grace_s=0.3)
    async with voice_task_tools(config, settings) as (registry, _, manager):
        async with asyncio.timeout(10):
            for arguments in ({"name": "agent", "prompt": "fix \ud800 it"}, {"command": "echo \udcff"}):
                result = await registry.run("start_task", json.dumps(arguments), "c1")
                assert not result.ok
                assert "broken character" in result.error
            unknown = await registry.run("get_task_result", json.dumps({"task": "x\ud800"}), "c2")
            assert not unknown.ok and "broken character" in unknown.error
            # Every later command is still answered.
            started = await registry.run("start_task", json.dumps({"name": "quick"}), "c3")
            assert started.ok
            done = await manager.wait(started.data["task"]["id"])
            assert done.status is TaskStatus.SUCCEEDED
            cancelled = await registry.run("cancel_task", json.dumps({"task": "quick"}), "c4")
            assert cancelled.ok and cancelled.data["cancelled"] is False


async def test_a_bug_while_running_a_task_fails_that_task_aloud_and_the_next_one_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_run = ProcessRunner.run
    broken = {"armed": True}

    async def run_once_broken(self: ProcessRunner, *args: object, **kwargs: object) -> int:
        if broken.pop("armed", False):
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return await real_run(self, *args, **kwargs)

    monkeypatch.setattr(ProcessRunner, "run", run_once_broken)
    async with running_manager(tmp_path, (sh("first", "echo one"), sh("second", "echo two")), max_concurrent=1) as manager:
        async with asyncio.timeout(10):
            first = await manager.start_task("first")
            assert first.status is TaskStatus.FAILED
            assert "internal error" in first.error
            assert manager.internal_errors == 1
            assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)
            assert manager.next_batch() is None  # the caller heard it could not start: said once
            second = await manager.wait((await manager.start_task("second")).id)
            assert (second.status, second.tail) == (TaskStatus.SUCCEEDED, ("two",))


@pytest.mark.parametrize(
    ("argv", "values"),
    [
        (("log", "{since}..HEAD"), {"since": "--output=pwned"}),  # git would write the file
        (("-cf", "out.tar", "{folder}/"), {"folder": "-C"}),  # tar would read an option
        (("{a}{b}",), {"a": "", "b": "-x"}),
    ],
)
async def test_a_value_that_would_start_an_argument_with_a_dash_is_refused(
    tmp_path: Path, argv: tuple[str, ...], values: dict[str, str]
) -> None:
    params = tuple(TaskParam(name, name, default="" if name == "a" else None) for name in values)
    template = TaskTemplate(name="tool", argv=(sys.executable, "-c", ECHO_ARGV, *argv), params=params, cwd=tmp_path)
    async with running_manager(tmp_path, (template,)) as manager:
        with pytest.raises(ParameterError, match="cannot start with a dash"):
            await manager.start_task("tool", values)
        assert not (tmp_path / "pwned").exists()
        assert await manager.list_tasks() == []


async def test_dashes_inside_a_value_or_after_a_literal_prefix_are_fine(tmp_path: Path) -> None:
    template = echo("tool", "--since={since}", "{since}..HEAD", params=("since",))
    template = TaskTemplate(name="tool", argv=template.argv, params=template.params, cwd=tmp_path)
    async with running_manager(tmp_path, (template,)) as manager:
        done = await manager.wait((await manager.start_task("tool", {"since": "v1-2--3"})).id)
        assert json.loads(done.tail[-1]) == ["--since=v1-2--3", "v1-2--3..HEAD"]
