"""What a new user trying things met (issue 24, item 7): each message is written for its reader, in
the words they typed, through the command line as they run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands import cli
from tests.commands.test_checks import home  # noqa: F401  (the fixture: a clean environment)
from tests.tasks.test_timers import call, timer_tools

KEY = "sk-words-test-0123456789"


def handoff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return code, lines[0]


def run_wav(capsys, home: Path, monkeypatch, name: str) -> tuple[int, str]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    return handoff(capsys, "run", "--input-wav", name, "--output-wav", "out.wav")


def test_an_empty_wav_says_it_is_empty(home, capsys, monkeypatch) -> None:
    (home / "empty.wav").write_bytes(b"")
    code, line = run_wav(capsys, home, monkeypatch, "empty.wav")
    assert code == 2 and line == "handoff: empty.wav is empty: there is no audio in it; give a WAV file that holds the recording"
    assert "()" not in line


def test_an_mp3_gets_a_conversion_that_works_on_an_mp3(home, capsys, monkeypatch) -> None:
    # A bare `sox song.mp3 ...` fails ("no handler for file extension `mp3'") without sox's MP3 support.
    (home / "song.mp3").write_bytes(b"ID3\x03\x00\x00\x00\x00\x00\x00\xff\xfb\x90\x00")
    code, line = run_wav(capsys, home, monkeypatch, "song.mp3")
    assert code == 2 and line.startswith("handoff: song.mp3 is an MP3 file, not a WAV file; ")
    assert "sudo apt-get install libsox-fmt-mp3" in line and "sox song.mp3 -r 24000" in line


def test_a_missing_input_wav_is_missing_not_not_a_file(home, capsys, monkeypatch) -> None:
    code, line = run_wav(capsys, home, monkeypatch, "missing.wav")
    assert code == 2 and line == "handoff: --input-wav missing.wav does not exist; give a WAV file to read."


@pytest.mark.parametrize(("flags", "message"), [
    (("--fault-rate", "2"), "--fault-rate 2 is not a probability; use a number from 0 to 1."),
    (("--delay-ms", "-5"), "--delay-ms -5 is not a delay; use 0 or more milliseconds."),
    (("--upgrade-delay-ms", "-1"), "--upgrade-delay-ms -1 is not a delay; use 0 or more milliseconds."),
    (("--session-length", "0"), "--session-length 0 is not a length; use a positive number of seconds."),
])
def test_sim_errors_name_the_flags_not_the_internals(home, capsys, flags, message) -> None:
    code, line = handoff(capsys, "sim", "--port", "0", *flags)
    assert code == 2 and line == f"handoff sim: {message}"


async def test_tasks_takes_state_dir_after_the_action_and_writes_for_reading(home, capsys) -> None:
    state = home / "elsewhere"
    async with timer_tools(state) as (registry, _):
        await call(registry, "set_timer", {"duration": "PT10M", "label": "pasta"})
        await call(registry, "set_timer", {"duration": "PT20M", "label": "tea"})
    capsys.readouterr()  # what the tools logged (an earlier command's log handler may print there)
    code, line = handoff(capsys, "tasks", "show", "timer", "--state-dir", str(state))
    # Written, not spoken: digits and dates, not "task one, your timer due at ...".
    assert code == 1 and line.startswith("handoff tasks: 'timer' names 2 tasks: 1 (timer, "), line
    assert "; 2 (timer, " in line and line.endswith("; give its number.") and "task one" not in line
    assert " due 20" in line  # a full date and time
    code, line = handoff(capsys, "tasks", "show", "nap", "--state-dir", str(state))
    assert code == 1 and line == "handoff tasks: no task is called 'nap'; the tasks are: timer."


def test_check_says_which_env_file_it_read(home, capsys, monkeypatch) -> None:
    cli.main(["check"])  # no key: an error, and where the settings were looked for
    assert (f"Settings read from: command-line flags and the environment; there is no .env in {home} "
            "(only the current folder's .env is read).") in capsys.readouterr().out.splitlines()
    (home / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    assert cli.main(["check"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("ok: ") and last.endswith(f"Settings read from: command-line flags, the environment, then {home / '.env'}.")


def test_messages_name_the_command_the_readme_gives(home, capsys) -> None:
    code, line = handoff(capsys, "tasks", "cancel", "1")
    assert code == 3 and line.endswith("start it with `./run` (in its folder).") and "handoff run" not in line
    code, line = handoff(capsys, "run")
    assert code == 2 and "run `./run demo` for the offline demo" in line


async def test_tasks_cancel_of_an_ambiguous_name_is_written_for_reading(home, capsys, tmp_path) -> None:
    import asyncio

    from tasks import TaskConfig, TaskManager, TaskSettings, TaskStore, TaskTemplate
    from tasks.control import ControlServer

    settings = TaskSettings(state_dir=tmp_path / "state")
    store = TaskStore(settings.db_path)
    manager = TaskManager(TaskConfig(templates=(TaskTemplate(name="nap", argv=("sleep", "30"), cwd=tmp_path),)), store, settings)
    await manager.start()
    server = ControlServer(manager, settings.control_path)
    await server.start()
    try:
        await manager.start_task("nap")
        await manager.start_task("nap")
        capsys.readouterr()
        code = await asyncio.to_thread(cli.main, ["tasks", "cancel", "nap", "--state-dir", str(tmp_path / "state")])
        [line] = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and line.startswith("handoff tasks: 'nap' names 2 tasks: 1 (nap, running, started 20"), line
        assert "; 2 (nap, running, started " in line and "task one" not in line and "Which one" not in line
    finally:
        await server.close()
        await manager.close()
        store.close()
