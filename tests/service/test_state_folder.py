"""The daemon's state folder and records under attack (issue 23: 2, 7, 9, 10, 12, 13): a second
daemon, a full disk, a closed terminal, a tampered status file, an odd folder name. Each through
the real entry point: `handoff` as a process, or its main() with captured output."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import AsyncIterator

import pytest

from commands import cli
from realtime_sim import SimServer
from service.history import HistoryEntry, HistoryKind, HistoryStore, Outcome, read_history
from service.status import process_start, write_status
from tests.service.test_status import status_tracker
from tests.support.audio_helpers import write_wav
from tests.support.daemon import Daemon, daemon_env, handoff_command, running_daemon, spoken_wav
from tests.support.pipeline_harness import UTTERANCE

WAIT_TASK = '[tasks.wait]\ndescription = "wait a long time"\nargv = ["sleep", "300"]\n'


def handoff(env: dict[str, str], cwd: Path, *args: str, **run: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*handoff_command(), *args], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=120, **run)  # type: ignore[call-overload]  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result


# -- 2: a second daemon on the same state folder ----------------------------------------------------


@contextlib.asynccontextmanager
async def daemon_running_a_task(tmp_path: Path, sim: SimServer) -> AsyncIterator[tuple[Daemon, dict[str, str], Path]]:
    """`handoff run` listening, with one background task (sleep 300) running: the daemon, its
    environment and its microphone WAV."""
    (tmp_path / "tasks.toml").write_text(WAIT_TASK)
    env = daemon_env(tmp_path, sim.base_url, HANDOFF_TASKS_CONFIG=str(tmp_path / "tasks.toml"))
    wav = spoken_wav(tmp_path / "mic.wav", utterances=0, seconds_after=300)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "a.wav")) as daemon:
        await daemon.wait_line(r"handoff is listening")
        started = await asyncio.to_thread(handoff, env, tmp_path, "tasks", "start", "wait")
        assert started.returncode == 0, started.stdout + started.stderr
        yield daemon, env, wav


async def test_a_second_daemon_on_the_same_folder_refuses_before_touching_anything(tmp_path: Path, sim: SimServer) -> None:
    async with daemon_running_a_task(tmp_path, sim) as (first, env, wav):
        async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "b.wav")) as second:
            assert await second.exited(timeout=60) == 2
        assert second.lines == [
            f"handoff: another handoff (pid {first.process.pid}) is already running on the state folder "
            f"{tmp_path / 'state'}; stop it first (`handoff status` shows it), or give this one a folder of its own "
            "with --state-dir."
        ]
        listing = await asyncio.to_thread(handoff, env, tmp_path, "tasks")
        assert "running" in listing.stdout and "interrupted" not in listing.stdout, listing.stdout
        status = json.loads((tmp_path / "state" / "status.json").read_text())
        assert status["pid"] == first.process.pid  # the second one wrote no status either
        first.signal(signal.SIGTERM)
        assert await first.exited(timeout=30) == 0, first.log
    listing = await asyncio.to_thread(handoff, env, tmp_path, "tasks")
    assert "stopped" in listing.stdout, listing.stdout  # by the first daemon's own shutdown


# -- 10: SIGHUP ---------------------------------------------------------------------------------------


async def test_sighup_stops_the_daemon_cleanly_like_sigterm(tmp_path: Path, sim: SimServer) -> None:
    async with daemon_running_a_task(tmp_path, sim) as (daemon, env, _):
        daemon.signal(signal.SIGHUP)
        assert await daemon.exited(timeout=30) == 0, daemon.log
    assert "handoff stopped (SIGHUP)" in daemon.log
    listing = await asyncio.to_thread(handoff, env, tmp_path, "tasks")
    assert "stopped" in listing.stdout and "running" not in listing.stdout, listing.stdout
    status = await asyncio.to_thread(handoff, env, tmp_path, "status")
    assert status.returncode == 3 and status.stdout.startswith("handoff is stopped, since "), status.stdout


# -- 9: a full disk at start --------------------------------------------------------------------------


def _no_room_to_write() -> None:
    """In the child: every file write fails with EFBIG, as on a full disk (SIGXFSZ ignored, so
    the write fails instead of killing the process; the setting survives exec)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


def test_a_full_disk_at_start_is_one_sentence_and_check_says_so(tmp_path: Path) -> None:
    env = daemon_env(tmp_path, "http://127.0.0.1:9/v1", PYTHONDONTWRITEBYTECODE="1")
    wav = spoken_wav(tmp_path / "mic.wav", utterances=0, seconds_after=1)
    state = tmp_path / "state"
    for command in (["check"], ["run", "--input-wav", str(wav), "--output-wav", "/dev/null"]):
        result = handoff(env, tmp_path, *command, preexec_fn=_no_room_to_write)
        assert result.returncode == 2, result.stdout + result.stderr
        said = [line for line in (result.stdout + result.stderr).strip().splitlines()
                if not line.startswith("Settings read from: ")]  # check says first where it read them
        assert f"HANDOFF_STATE_DIR={state} has no room to write (File too large); free some disk space there" in said[0], said


def test_a_full_disk_while_opening_the_task_list_is_one_sentence(tmp_path: Path) -> None:
    """Past the start-up check (the disk fills a moment later): the task database cannot be
    created. One sentence, exit 2, no traceback."""
    env = daemon_env(tmp_path, "http://127.0.0.1:9/v1", PYTHONDONTWRITEBYTECODE="1")
    wav = spoken_wav(tmp_path / "mic.wav", utterances=0, seconds_after=1)
    code = (
        "import resource, signal, sys\n"
        "import commands.checks as checks\n"
        "checks.state_dir_problem = lambda path: None\n"  # the check passed; then the disk filled
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))\n"
        "from commands.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code, "run", "--input-wav", str(wav), "--output-wav", "/dev/null"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("handoff: handoff could not write its list of background tasks (") and last.endswith(
        "if the disk is full, free some space."
    ), result.stderr


async def test_a_full_disk_mid_run_makes_start_task_say_a_sentence(tmp_path: Path, sim: SimServer) -> None:
    """The disk fills while the daemon runs (its file size limit lowered from outside, SIGXFSZ
    ignored from its start): asking for a task gets a sentence, not "OperationalError"."""
    (tmp_path / "tasks.toml").write_text(WAIT_TASK)
    env = daemon_env(tmp_path, sim.base_url, HANDOFF_TASKS_CONFIG=str(tmp_path / "tasks.toml"))
    wav = spoken_wav(tmp_path / "mic.wav", utterances=0, seconds_after=300)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited by the daemon through exec
    try:
        daemon_context = running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "a.wav"))
        async with daemon_context as daemon:
            await daemon.wait_line(r"handoff is listening")
            resource.prlimit(daemon.process.pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
            asked = await asyncio.to_thread(handoff, env, tmp_path, "tasks", "start", "wait")
            assert asked.returncode == 1, asked.stdout + asked.stderr
            assert asked.stderr.startswith("handoff tasks: handoff could not write its list of background tasks ("), asked.stderr
            assert asked.stderr.rstrip().endswith("if the disk is full, free some space."), asked.stderr
            resource.prlimit(daemon.process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            again = await asyncio.to_thread(handoff, env, tmp_path, "tasks", "start", "wait")
            assert again.returncode == 0, again.stdout + again.stderr  # room again: it works again
            daemon.signal(signal.SIGTERM)
            assert await daemon.exited(timeout=30) == 0, daemon.log
    finally:
        signal.signal(signal.SIGXFSZ, previous)


# -- 7: a transient full disk and the history ---------------------------------------------------------


async def test_a_daemons_history_recovers_after_a_transient_full_disk(tmp_path: Path, sim: SimServer) -> None:
    """The disk is full while the first command is written to the history, then has room again:
    the second command is kept (the first one's connection, without its table, used to fail
    every later write with "no such table" until a restart)."""
    for words in ("first", "second"):
        sim.script.push_transcript(f"Computer, echo {words}")
        sim.script.push_tool_call("echo", {"text": words})
    # Ten seconds between the two: time to give the disk its room back after the first.
    wav = write_wav(tmp_path / "mic.wav", bytes(24000) + UTTERANCE + bytes(48000 * 10) + UTTERANCE + bytes(48000 * 120))
    env = daemon_env(tmp_path, sim.base_url)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited by the daemon through exec
    try:
        async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", "/dev/null") as daemon:
            await daemon.wait_line(r"handoff is listening")
            resource.prlimit(daemon.process.pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
            await daemon.wait_line(r"could not write to the history")
            resource.prlimit(daemon.process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            await daemon.wait_line(r"narrated: answer", count=2)
            daemon.signal(signal.SIGTERM)
            assert await daemon.exited(timeout=30) == 0, daemon.log
    finally:
        signal.signal(signal.SIGXFSZ, previous)
    history = await asyncio.to_thread(handoff, env, tmp_path, "history")
    assert "asked: echo second" in history.stdout, daemon.log
    assert "could not write to the history" in daemon.log and daemon.log.count("could not write to the history") == 1


def test_history_recovers_after_a_transient_full_disk(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.db", max_rows=100)
    entry = HistoryEntry(time.time(), HistoryKind.COMMAND, "what time is it?", [], "It's noon.", Outcome.ANSWERED)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, limits[1]))
    try:
        store._executor.submit(store._write, entry).exception(timeout=30)  # the disk is full: this one is lost
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous)
    store.add(entry)  # room again: written
    store.close()
    assert [e.heard for e in read_history(tmp_path / "history.db")] == ["what time is it?"]


# -- 13: a state folder named with # or ? -------------------------------------------------------------


@pytest.mark.parametrize("name", ["state#1", "what?mode=rw", "100%"])
def test_history_reads_a_state_folder_whose_name_has_uri_characters(tmp_path: Path, capsys, name: str) -> None:
    state = tmp_path / name
    store = HistoryStore(state / "history.db", max_rows=100)
    store.add(HistoryEntry(time.time(), HistoryKind.COMMAND, "what time is it?", [], "It's noon.", Outcome.ANSWERED))
    store.close()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert cli.main(["history", "--state-dir", str(state)]) == 0
    assert "asked: what time is it?" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing opened or created elsewhere


def test_history_limit_zero_is_refused(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["history", "--state-dir", str(tmp_path), "--limit", "0"])
    assert exited.value.code == 2
    assert "--limit: 0 is not a whole number of at least 1" in capsys.readouterr().err


# -- 12: a tampered status file -----------------------------------------------------------------------


def _good_status() -> dict:
    status = status_tracker(time.time).snapshot(healthy=True)
    status.pid, status.process_start = os.getpid(), process_start(os.getpid())
    status.last_command = {"heard": "what time is it?", "at": time.time(), "tools": ["get_time({})"], "outcome": "answered"}
    return {"version": 1, **status.__dict__}


TAMPERED = {
    "string pid": {"pid": "123"},
    "huge pid": {"pid": 10**30},
    "negative pid": {"pid": -1},
    "zero pid": {"pid": 0},
    "bool pid": {"pid": True},
    "NaN started_at": {"started_at": math.nan},
    "infinite updated_at": {"updated_at": math.inf},
    "string started_at": {"started_at": "yesterday"},
    "huge started_at": {"started_at": 1e300},
    "zero heartbeat": {"heartbeat_s": 0},
    "NaN session start": {"session_started_at": math.nan, "listener_up": True},
    "string healthy": {"healthy": "yes"},
    "list phase": {"phase": ["listening"]},
    "negative session": {"session": -3},
    "float drops": {"drops": 1.5},
    "last_command a string": {"last_command": "what time is it"},
    "last_command at NaN": {"last_command": {"heard": "x", "at": math.nan, "tools": [], "outcome": "answered"}},
    "last_command tools not a list": {"last_command": {"heard": "x", "at": 1.0, "tools": "get_time", "outcome": "answered"}},
    "cost a string": {"cost_today_usd": "$1"},
    "cost parts a list": {"cost_parts_usd": [1, 2]},
    "process_start a string": {"process_start": "42"},
    "no pid": {"pid": None},
}


@pytest.mark.parametrize("change", TAMPERED.values(), ids=TAMPERED.keys())
def test_a_tampered_status_file_is_reported_as_damaged(tmp_path: Path, capsys, change: dict) -> None:
    data = {**_good_status(), **change}
    if change == {"pid": None}:
        del data["pid"]
    (tmp_path / "status.json").write_text(json.dumps(data))
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"handoff status: the status file {tmp_path / 'status.json'} is damaged (")
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b"\xff\xfe", b"[" * 100000, b'{"version": 99}'])
def test_a_status_file_that_is_not_one_is_damaged_not_missing(tmp_path: Path, capsys, content: bytes) -> None:
    (tmp_path / "status.json").write_bytes(content)
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == 4
    assert "is damaged (" in capsys.readouterr().err


def test_an_untampered_status_file_still_reads(tmp_path: Path, capsys) -> None:
    (tmp_path / "status.json").write_text(json.dumps(_good_status()))
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("handoff is running (pid ")


# -- status after a stop or a crash -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_status_of_a_stopped_or_dead_daemon_shows_no_live_figures(tmp_path: Path, capsys, how: str) -> None:
    tracker = status_tracker(lambda: time.time() - 600)
    asked_at = time.time() - 620
    tracker.status.last_command = {"heard": "start the backup", "at": asked_at, "tools": [], "outcome": "in progress"}
    status = tracker.snapshot(healthy=True, phase="stopped" if how == "stopped" else None)
    status.listener_up, status.session, status.session_started_at = True, 4, time.time() - 700
    if how == "killed":
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        status.pid, status.process_start = int(gone.stdout), None
    write_status(tmp_path / "status.json", status)
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    first, *rest = out.splitlines()
    assert first.startswith("handoff is stopped, since " if how == "stopped" else "handoff is not running: process ")
    assert ", 10 min ago (it had run " in first
    assert rest == [f'last command: "start the backup" at {_clock(asked_at)}: no tool, not finished']
    assert "listener" not in out and "in progress" not in out


def _clock(at: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


# -- CLI: a closed pipe, Ctrl-C while loading -----------------------------------------------------------


@pytest.mark.parametrize("command", [["status"], ["history"], ["check"], ["--help"]])
def test_a_closed_pipe_is_no_traceback(tmp_path: Path, command: list[str]) -> None:
    state = tmp_path / "state"
    store = HistoryStore(state / "history.db", max_rows=100)
    for n in range(200):
        store.add(HistoryEntry(time.time(), HistoryKind.COMMAND, f"command {n}", [], "done", Outcome.ANSWERED))
    store.close()
    write_status(state / "status.json", status_tracker(time.time).snapshot(healthy=True))
    env = daemon_env(tmp_path, "http://127.0.0.1:9/v1")
    args = command if command == ["--help"] else [*command, "--state-dir", str(state)]
    # `| head -1` once head has gone: the pipe's reading end is closed before anything is written.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([*handoff_command(), *args], cwd=tmp_path, env=env, stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=120)  # fmt: skip
    finally:
        os.close(write_end)
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr


def test_ctrl_c_while_the_command_loads_is_no_traceback(tmp_path: Path) -> None:
    """SIGINT at once, while the modules still load: exit 130, nothing printed."""
    env = daemon_env(tmp_path, "http://127.0.0.1:9/v1")
    # The signal lands during the imports main() does: the same place a Ctrl-C in the first 2 s lands.
    code = (
        "import builtins, os, signal, sys\n"
        # A terminal's Ctrl-C: live even where this test runs as a background job (SIGINT ignored).
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from commands import cli\n"
        "real = builtins.__import__\n"
        "def interrupted(name, *a, **k):\n"
        "    if name == 'config.settings':\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = interrupted\n"
        "sys.exit(cli.main(['status']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 130 and result.stderr == "", result.stderr


# -- history and status load only what they need --------------------------------------------------------

HEAVY = ("openai", "numpy", "pocketsphinx", "aiohttp", "pyaudio", "websockets", "pydantic")


@pytest.mark.parametrize("command", ["status", "history"])
def test_status_and_history_do_not_load_the_assistant(tmp_path: Path, command: str) -> None:
    env = daemon_env(tmp_path, "http://127.0.0.1:9/v1")
    code = (
        "import sys\n"
        "from commands.cli import main\n"
        f"main([{command!r}, '--state-dir', {str(tmp_path)!r}])\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout
