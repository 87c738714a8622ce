"""What a new user met, round three (issue 28): the command line as they run it, each message one
sentence saying what to change, blaming what they typed."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from commands import cli
from tests.commands.test_checks import home  # noqa: F401  (the fixture: a clean environment)
from tests.support.audio_helpers import write_wav


def said(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, captured.out, captured.err


# -- item 5: a bad setting in .env does not blind the read-only commands -------------------------------


@pytest.mark.parametrize("line", ["TURN_END_MS=-5", "WEB_PORT=abc"])
@pytest.mark.parametrize("command", [["status"], ["history"], ["tasks"], ["wake-test", "--input-wav", "missing.wav"]])
def test_a_bad_setting_does_not_block_what_only_reads(home, capsys, line: str, command: list[str]) -> None:
    (home / ".env").write_text(f"{line}\n")
    code, out, err = said(capsys, *command)
    key, value = line.split("=")
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"handoff: {key}={value} is not ") and lines[0].endswith(
        f"(`handoff {command[0]}` reads it as its default meanwhile; `handoff run` refuses it)."), lines
    if command[0] == "wake-test":
        assert lines[1:] and "missing.wav" in lines[1], lines  # it went on to the recording
    else:
        assert code in (0, 3) and out, (code, out, err)  # it answered: not running, no history, no tasks
        assert len(lines) == 1, lines


def test_a_bad_value_typed_as_a_flag_is_still_refused(home, capsys) -> None:
    (home / ".env").write_text("WEB_PORT=abc\n")
    code, _, err = said(capsys, "wake-test", "--wake-phrase", " ", "--input-wav", "x.wav")
    assert code == 2 and "WAKE_PHRASE is empty" in err


# -- item 9: a state folder that is a file -----------------------------------------------------------


@pytest.mark.parametrize("command", ["status", "history"])
def test_a_state_dir_that_is_a_file_is_said_so(home, capsys, command: str) -> None:
    code, out, err = said(capsys, command, "--state-dir", "/etc/passwd")
    assert code == 2 and out == ""
    assert err == (f"handoff {command}: --state-dir /etc/passwd is a file, not a folder; point it at the folder handoff "
                   "keeps its state in (default ~/.local/state/handoff).\n")


# -- item 11: a flag's mistake is the flag's --------------------------------------------------------


def test_a_bad_flag_is_blamed_on_the_flag_as_typed(home, capsys) -> None:
    code, _, err = said(capsys, "say", "hello", "--volume", "500")
    assert code == 2
    assert err == "handoff: --volume 500 is not a whole number from 0 to 150 (percent); change --volume.\n"
    code, _, err = said(capsys, "satellite", "--name", "Bad Name")
    assert code == 2
    assert err == "handoff: --name Bad Name is not a room name (letters, digits, - or _); change --name.\n"
    code, out, _ = said(capsys, "check", "--log-level", "loud")
    assert code == 2 and "error: --log-level loud is not one of DEBUG, INFO, WARNING, ERROR; change --log-level." in out
    (home / ".env").write_text("NARRATOR_VOLUME=500\n")  # the same value from .env is the setting's
    code, _, err = said(capsys, "say", "hello")
    assert err == "handoff: NARRATOR_VOLUME=500 is not a whole number from 0 to 150 (percent); set it in .env or the environment.\n"


# -- item 12: usage said by the command that was run -----------------------------------------------------


def test_an_unknown_flag_gets_the_usage_of_its_command(home, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "--bogus"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith("usage: handoff run ") and err.endswith("handoff run: error: unrecognized arguments: --bogus\n")


def test_tasks_start_needs_only_the_template(home, capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["tasks", "start"])
    assert capsys.readouterr().err.endswith("handoff tasks start: error: the following arguments are required: template\n")


def test_help_texts_end_their_sentences_and_check_offers_what_it_checks(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["wake-test", "--help"])
    description = capsys.readouterr().out.split("\n\n")[1]
    assert " ".join(description.split()).endswith("does the wake the assistant runs hear you")  # the whole sentence
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    help_text = capsys.readouterr().out
    assert "--fast" not in help_text and "check for `run --input-wav`" in " ".join(help_text.split())
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "3 not running, 4 unknown (its status file is damaged)" in readme


# -- item 10: a satellite on port 0 listens where the system says -----------------------------------------


def test_a_satellite_on_port_0_listens_on_a_port_of_its_own(tmp_path: Path) -> None:
    mic = write_wav(tmp_path / "mic.wav", bytes(24000))
    process = subprocess.Popen(
        [sys.executable, "-m", "commands.cli", "satellite", "--listen", "tcp://127.0.0.1:0", "--input-wav", str(mic),
         "--output-wav", str(tmp_path / "out.wav")], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "WAKE_PHRASE": "computer"}, text=True)  # fmt: skip
    try:
        assert process.stderr is not None
        for line in process.stderr:  # until it says where it listens
            found = re.search(r"waiting for its hub on tcp://127\.0\.0\.1:(\d+)", line)
            if found:
                break
        else:
            raise AssertionError("the satellite never said where it listens")
        port = int(found.group(1))
        assert port not in (0, 10700)
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # and it does listen there
    finally:
        process.terminate()
        process.wait(30)


# -- item 15: a run that heard nothing says so ---------------------------------------------------------


async def test_a_run_that_heard_nothing_says_what_to_try(tmp_path: Path) -> None:
    from realtime_sim import SimServer
    from tests.commands.test_cli import clean_env, run_handoff

    wav = write_wav(tmp_path / "quiet.wav", bytes(24000 * 2 * 2))  # two seconds of a quiet room
    async with SimServer() as sim:
        env = clean_env(tmp_path, OPENAI_API_KEY="sk-cli-test-0123456789", OPENAI_BASE_URL=sim.base_url, WEB_PORT="0",
                        WORKSPACE_ROOT=str(tmp_path))
        code, _, err = await run_handoff(tmp_path, "run", "--input-wav", str(wav), "--output-wav", str(tmp_path / "o.wav"),
                                         "--fast", env=env)  # fmt: skip
    assert code == 0, err
    assert err.strip().splitlines()[-1] == (
        f"handoff: no command was heard in {wav}: the wake phrase \"hey jarvis\" was never heard on this machine, so "
        f"nothing was uploaded; `handoff wake-test --input-wav {wav}` shows how well it hears it.")


def test_a_key_of_a_bad_shape_is_still_cut_out_of_history(home, capsys) -> None:
    from service.history import HISTORY_FILE, HistoryEntry, HistoryKind, HistoryStore, Outcome

    key = "sk-bad key-0123456789"
    (home / ".env").write_text(f"OPENAI_API_KEY={key}\n")
    store = HistoryStore(home / "state" / HISTORY_FILE, 10)
    store.add(HistoryEntry(1.0, HistoryKind.COMMAND, heard=f"say {key}", tools=[], said=f"you said {key}",
                           outcome=Outcome.ANSWERED))  # fmt: skip
    store.close()
    code, out, err = said(capsys, "history")
    assert code == 0 and "asked: say" in out and key not in out + err, out + err
