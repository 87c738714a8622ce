"""Tasks never see the API key unless a template asks for it by name, and never repeat a
secret into their log, their record or a spoken notice (issue 10, defect 2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from config.settings import load_settings
from tasks import TaskSettings, TaskTemplate, parse_task_config
from tasks.output import Redactor
from tests.tasks.test_tasks_manager import running_manager, sh

SECRET = "sk-proj-abcdefghijklmnop0123456789"


async def test_a_task_gets_no_openai_variables_and_its_output_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("COPY_OF_KEY", SECRET)
    monkeypatch.setenv("HARMLESS", "kept")
    settings = TaskSettings.from_settings(load_settings({"HANDOFF_STATE_DIR": str(tmp_path)}))
    assert settings.secrets == (SECRET,)
    script = f"env | sort; echo 'the key is {SECRET}.'; printf '%s' '{SECRET[:10]}'; printf '%s\\n' '{SECRET[10:]}'"
    async with running_manager(tmp_path, (sh("leaky", script, spoken="the leak"),), secrets=settings.secrets) as manager:
        done = await manager.wait((await manager.start_task("leaky")).id)
        log_text = Path(done.log_path).read_text()
        assert "HARMLESS=kept" in log_text
        assert "OPENAI_" not in log_text and "COPY_OF_KEY" not in log_text
        assert SECRET not in log_text and "the key is [redacted]." in log_text
        assert log_text.rstrip().endswith("[redacted]")  # split across two writes, still found
        assert not any(SECRET in line for line in done.tail)
        assert SECRET not in manager.next_batch().script
    stored = sqlite3.connect(tmp_path / "tasks" / "tasks.db").execute("SELECT tail FROM tasks").fetchone()[0]
    assert SECRET not in stored


async def test_a_template_can_pass_a_named_secret_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    config = parse_task_config(
        {"tasks": {"agent": {"argv": ["sh", "-c", 'test "$OPENAI_API_KEY" && echo "has $OPENAI_API_KEY"'], "env": ["OPENAI_API_KEY"]}}},
        base_dir=tmp_path,
    )
    template: TaskTemplate = config.templates[0]
    assert template.env == ("OPENAI_API_KEY",)
    async with running_manager(tmp_path, (template,), secrets=(SECRET,)) as manager:
        done = await manager.wait((await manager.start_task("agent")).id)
        assert done.tail == ("has [redacted]",)


def test_the_redactor_finds_a_secret_split_across_reads_and_keeps_other_bytes() -> None:
    out: list[bytes] = []
    redactor = Redactor((SECRET,), out.append)
    for piece in (b"caf\xe9 ", SECRET[:5].encode(), SECRET[5:].encode(), b" done\n", b"tail"):
        redactor(piece)
    redactor.flush()
    assert b"".join(out) == b"caf\xe9 [redacted] done\ntail"


def test_a_variable_that_contains_the_key_is_not_passed_on() -> None:
    # Issue 23, defect 11: only a variable *equal* to the key was held back.
    from tasks.runner import task_environment

    env = task_environment({"TOKEN": f"Bearer {SECRET}", "URL": f"https://x/?k={SECRET}", "HOME": "/h"}, "t1", (SECRET,))
    assert env == {"HOME": "/h", "HANDOFF_TASK": "t1"}


def test_once_the_settings_are_read_the_key_is_gone_from_the_process_environment(tmp_path: Path) -> None:
    # Issue 23, defect 11: a task read the key from /proc/$PPID/environ (base64 beat the redaction).
    import os
    import subprocess
    import sys

    program = (
        "import os, subprocess, sys\n"
        "from safety.process import keep_key_private\n"
        "keep_key_private(os.environ['OPENAI_API_KEY'])\n"
        "assert 'OPENAI_API_KEY' not in os.environ and 'COPY' not in os.environ\n"
        "dump = subprocess.run(['cat', f'/proc/{os.getpid()}/environ'], capture_output=True).stdout\n"
        "sys.stdout.write(dump.decode('latin-1'))\n"
    )
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "COPY": f"x{SECRET}x", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout  # as root it can still read the file: the key is not in it
    assert "PYTHONPATH=" in result.stdout  # the rest of the environment is still there
