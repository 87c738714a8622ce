"""Issue 23 through the whole pipeline: `handoff run` as a daemon against the simulator, asked by
voice to read files that hold the key, to echo escape sequences and lone surrogates, to set a
timer with a hostile label and to run a task that digs in the daemon's environment.

Nothing it says (the narrator's scripts), sends (function outputs), keeps (history, status,
the task log) or logs holds the key (defects 1 and 11); nothing printed by `status`, `history`,
`tasks` and `tasks show`, nor the log, holds a raw control character or a forged line (defect
6); a command with a lone surrogate is answered and kept (defect 8).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from realtime_sim import SimServer
from service.status import Status, read_status
from tests.service.test_status import handoff_out
from tests.support.awaiting import file_written
from tests.support.daemon import daemon_env, running_daemon, spoken_wav

# Not shaped like an OpenAI key (no "sk-"), so only the configured value can catch it.
KEY = "handoff-test-key-Q7w9zXv3LmN2pR8t"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\rcaf\ud800\n2026-01-01 00:00:00 INFO    handoff: FORGED LINE"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

TASKS = """
[tasks.envdump]
description = "Print what it can find of the daemon's environment"
spoken = "the dump"
argv = ["sh", "-c", "cat /proc/$PPID/environ | base64 -w0; echo; env | base64 -w0; echo; printf 'done\\\\033]0;title\\\\007\\\\033[2J\\\\n'; echo finished"]
timeout_s = 30
"""


def show_task(tmp_path: Path, task_id: str) -> tuple[int, str]:
    """`handoff tasks --state-dir ... show ID`, as a user types it."""
    result = subprocess.run([sys.executable, "-m", "commands.cli", "tasks", "--state-dir", str(tmp_path / "state"), "show", task_id],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout


def raw_controls(text: str) -> list[str]:
    return CONTROL.findall(text)


@pytest.mark.timeout(300)  # a daemon that answers six times, on a busy machine
async def test_the_key_never_leaves_and_hostile_text_is_printed_harmlessly(tmp_path: Path, sim: SimServer) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "deploy-notes.txt").write_text(f"server: example\napi_token = {KEY}\n")
    (workspace / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (tmp_path / "tasks.toml").write_text(TASKS)
    for transcript, tool, arguments in (
        ("Computer, read the first lines of deploy-notes.txt", "read_file_head", {"path": "deploy-notes.txt"}),
        ("Computer, read the first lines of .env", "read_file_head", {"path": ".env"}),
        (f"Computer, echo {HOSTILE}", "echo", {"text": HOSTILE}),
        ("Computer, set a timer", "set_timer", {"duration": "PT1H", "label": HOSTILE}),
        ("Computer, run the dump", "start_task", {"name": "envdump"}),
    ):
        sim.script.push_transcript(transcript)
        sim.script.push_tool_call(tool, arguments)
    wav = spoken_wav(tmp_path / "mic.wav", utterances=5, seconds_after=120)
    # The key in the daemon's environment (exported, or a unit's Environment=), and a copy of
    # it inside another variable.
    env = {**daemon_env(tmp_path, sim.base_url), "OPENAI_API_KEY": KEY, "WORKSPACE_ROOT": str(workspace),
           "HANDOFF_TASKS_CONFIG": str(tmp_path / "tasks.toml"), "DEPLOY_TOKEN": f"Bearer {KEY}"}
    state = tmp_path / "state"
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(r"narrated: answer", count=5, timeout=200)  # five answers, beside CPU hogs
        await daemon.wait_line(r"narrated: notice", timeout=120)  # the task's outcome
        await file_written(state, lambda: (read_status(state / "status.json") or Status(0, None, 0, 0, 0)).narrations >= 6)
        code, status_out = await asyncio.to_thread(handoff_out, tmp_path, "status")
        assert code == 0, status_out
        code, tasks_out = await asyncio.to_thread(handoff_out, tmp_path, "tasks")
        assert code == 0, tasks_out
        dump_id = next(line.split()[0] for line in tasks_out.splitlines() if "envdump" in line)
        code, shown_out = await asyncio.to_thread(show_task, tmp_path, dump_id)
        assert code == 0, shown_out
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=20) == 0, daemon.log
    code, history_out = await asyncio.to_thread(handoff_out, tmp_path, "history")
    assert code == 0, history_out
    scripts = [line for line in daemon.lines if "narrating: " in line]

    # Defect 1: the key is in no narration, no function output, no history, status or log.
    sent = json.dumps([c.received for c in sim.connections])
    function_outputs = [e for c in sim.connections for e in c.received
                        if e.get("type") == "conversation.item.create" and e["item"].get("type") == "function_call_output"]  # fmt: skip
    assert len(function_outputs) == 5 and "[redacted]" in json.dumps(function_outputs)
    assert "never read out" in json.dumps(function_outputs)  # .env was refused, not read
    everything = [sent, daemon.log, history_out, status_out, tasks_out, shown_out, (state / "status.json").read_text()]
    for path in state.rglob("*"):
        if path.is_file():
            everything.append(path.read_bytes().decode("latin-1"))
    assert all(KEY not in text for text in everything)
    assert any("api token = redacted" in s.lower() or "api_token = redacted" in s.lower() for s in scripts), scripts

    # Defect 11: the task found no key in the daemon's environment nor its own, even base64'd.
    log_path = next(state.rglob("logs/*.log"))
    proc_environ, own_env = (base64.b64decode(line) for line in log_path.read_text().splitlines()[:2])
    assert b"HANDOFF_STATE_DIR" in proc_environ and KEY.encode() not in proc_environ
    assert KEY.encode() not in own_env and b"DEPLOY_TOKEN" not in own_env

    # Defect 6: no raw control character, no forged log line, wherever it is printed.
    for text in (status_out, history_out, tasks_out):
        assert not raw_controls(text), text
    assert not raw_controls(shown_out.replace("\n", "")) and "done\\x1b]0;title\\x07\\x1b[2J" in shown_out
    assert "\\x1b]0;pwned\\x07" in history_out  # the echoed words, escaped
    assert "]0;pwned [2J caf\ufffd 2026-01-01" in tasks_out  # the timer's label, cleaned where it came in
    assert not any(raw_controls(line) for line in daemon.lines)
    assert not any(line.startswith("2026-01-01 00:00:00") for line in daemon.lines)
    assert '\nlast command: "' in status_out

    # Defect 8: the command with a lone surrogate was answered and kept, with U+FFFD.
    assert "caf\ufffd" in history_out and "FORGED LINE" in history_out
