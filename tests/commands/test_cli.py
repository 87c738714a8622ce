"""The `handoff` command as a user runs it: subprocesses, real settings, real files."""

from __future__ import annotations

import asyncio
import os
import sys
import wave
from pathlib import Path

import pytest

from speech.local_voice import synthesize
from realtime_sim import SimConfig, SimServer
from tests.support.audio_helpers import alsa_file_device, alsa_without_devices, has_sound_card, write_wav

REPO = Path(__file__).resolve().parents[2]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=str(REPO), XDG_RUNTIME_DIR=str(tmp_path), HANDOFF_STATE_DIR=str(tmp_path / "state"), **extra)
    return env


async def run_handoff(tmp_path: Path, *args: str, env: dict[str, str], timeout: float = 90) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "commands.cli", *args, cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    finally:  # a timeout (or the test's own) must not leave a daemon reconnecting for the rest of the suite
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()




async def test_run_from_wav_files_against_the_simulator(tmp_path):
    # Two commands back to back: read as fast as possible, the second must wait while the first
    # is answered (a file is never dropped while the narrator speaks).
    first = await synthesize("computer, what time is it")
    second = await synthesize("computer, echo hello from a file")
    input_wav = write_wav(tmp_path / "in.wav", bytes(9600) + first + bytes(24000) + second + bytes(24000))
    output_wav = tmp_path / "out.wav"
    # Seeded: the realistic model's late transcripts come in one order every run, and with this
    # seed the second command's transcript comes first; the first's is still due when the
    # listener hands over after the answer, and must not be lost (nor its audio replayed).
    async with SimServer(SimConfig(seed=3)) as sim:
        sim.script.push_transcript("Computer, what time is it?")
        sim.script.push_transcript("Computer, echo hello from a file")
        # espeak-ng's "computer": the fallback mode (speech_only, no wake model) is what hears it.
        env = clean_env(tmp_path, OPENAI_API_KEY="sk-cli-test-0123456789", OPENAI_BASE_URL=sim.base_url, WAKE_PHRASE="computer")
        code, out, err = await run_handoff(
            tmp_path, "run", "--input-wav", str(input_wav), "--output-wav", str(output_wav), "--fast", env=env
        )
    assert code == 0, err
    assert "get_time" in err and "echo(" in err and err.count("narrated: answer") == 2  # the log tells the story
    assert "sk-cli-test" not in err + out  # the key never reaches a log
    with wave.open(str(output_wav)) as wav:
        assert wav.getframerate() == 24000 and wav.getnframes() > 24000 // 2  # the answer was spoken


async def test_demo_runs_offline_and_tells_the_whole_story(tmp_path):
    # The demo runs in real time (about a minute); the timeout is only a safety net, generous
    # enough for a loaded machine: each step waits for what the assistant did, not for a time.
    code, out, err = await run_handoff(tmp_path, "demo", env=clean_env(tmp_path), timeout=900)
    assert code == 0, err
    for kind in ("overheard", "wake", "chime", "command", "tool", "narrating", "narrated", "listening"):
        assert f" {kind} " in out, (kind, out)
    # The default: the wake model (flite's voice says "Hey Jarvis") decides; chatter never went up.
    assert "heard       Hey Jarvis, what time is it?" in out and " ignored " not in out
    for tool in ("get_time", "list_files", "read_file_head", "ask_brain", "echo", "start_task", "set_timer"):
        assert f"{tool}(" in out, (tool, out)
    assert "notice" in out and "Your two-second timer is done." in out
    # Issue 28, item 7: the last command shows what was heard and said before the demo ends, and
    # the summary counts the chatter it overheard (three sentences, none uploaded).
    story = out.split("\n\ndone: ")[0]
    last = story[story.rindex("Hey Jarvis, echo the demo is complete."):]
    assert " confirmed " in last and ("said        " in last or "narrating   the demo is complete" in last), last
    assert out.strip().splitlines()[-1] == (
        "done: 8 commands handled, 3 sentences not addressed to it overheard (none of them left this machine); "
        "narration written to handoff-demo.wav")
    with wave.open(str(tmp_path / "handoff-demo.wav")) as wav:
        assert wav.getnframes() > 24000 * 5


async def test_a_demo_step_that_times_out_is_one_line_not_a_traceback(tmp_path):
    # Its steps wait inside a TaskGroup, so a timeout arrives wrapped in an ExceptionGroup.
    code, out, err = await run_handoff(tmp_path, "demo", "--step-timeout", "0.01", env=clean_env(tmp_path), timeout=300)
    assert code == 1, (out, err)
    [line] = err.strip().splitlines()
    assert line.startswith("handoff demo: the assistant did not") and "within 0.01 s" in line, line


async def test_devices_lists_the_alsa_file_device(tmp_path):
    files = alsa_file_device(tmp_path, bytes(4800))
    code, out, err = await run_handoff(tmp_path, "devices", env={**files.env, **clean_env(tmp_path), "ALSA_CONFIG_PATH": files.env["ALSA_CONFIG_PATH"]})
    assert code == 0 and "default" in out and "Input devices" in out, (out, err)
    assert err == ""  # ALSA/JACK start-up noise kept out of the terminal


async def test_devices_without_any_device_says_so(tmp_path):
    if has_sound_card():
        pytest.skip("this machine has a sound card")
    env = {**clean_env(tmp_path), "ALSA_CONFIG_PATH": alsa_without_devices(tmp_path)["ALSA_CONFIG_PATH"]}
    code, out, err = await run_handoff(tmp_path, "devices", env=env)
    assert code == 0 and "no audio devices found" in out, (out, err)


async def test_run_without_a_microphone_is_a_clear_error(tmp_path):
    if has_sound_card():
        pytest.skip("this machine has a sound card")
    env = {**clean_env(tmp_path, OPENAI_API_KEY="sk-cli-test-0123456789", OPENAI_BASE_URL="http://127.0.0.1:9/v1"),
           "ALSA_CONFIG_PATH": alsa_without_devices(tmp_path)["ALSA_CONFIG_PATH"]}
    code, out, err = await run_handoff(tmp_path, "run", env=env)
    assert code == 2 and "no audio input device" in err and "Traceback" not in err, err


async def test_run_without_a_key_names_the_key_and_where_it_goes(tmp_path):
    code, out, err = await run_handoff(tmp_path, "run", env=clean_env(tmp_path))
    assert code == 2 and "OPENAI_API_KEY" in err and ".env" in err and "Traceback" not in err
