"""One verdict per command (issue 28, item 1): a command the device woke for is either answered
as heard or withdrawn before anything is said, never both answered and called overheard, even
when the transcript spells the wake phrase its own way ("Hey Travis", "Hey, head jarvis") or the
simulator recognises the speech itself (pocketsphinx, no cue sheet)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from realtime_sim import SimServer
from realtime_sim.transcriber import CueSheet, Recogniser
from service.history import HISTORY_FILE, HistoryKind, Outcome, read_history
from speech.local_voice import flite_speech, synthesize
from tests.support.audio_helpers import write_wav
from tests.support.daemon import SILENCE_1S, daemon_env, running_daemon

COMMANDS = ("hey jarvis, what time is it", "hey jarvis, list the files")


async def run_recording(tmp_path: Path, speech: list[bytes], transcriber) -> tuple[str, list]:
    wav = write_wav(tmp_path / "mine.wav", SILENCE_1S + b"".join(s + SILENCE_1S * 8 for s in speech) + SILENCE_1S * 2)
    async with SimServer(transcriber=transcriber) as sim:
        env = daemon_env(tmp_path, sim.base_url, HANDOFF_UPLOAD_MODE="wake_word", WAKE_PHRASE="hey jarvis")
        async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as handoff:
            assert await handoff.exited(timeout=280) == 0, handoff.log
    path = tmp_path / "state" / HISTORY_FILE
    return handoff.log, read_history(path) if path.exists() else []  # (nothing woke it: no history yet)


@pytest.mark.timeout(300)
async def test_a_transcript_that_spells_the_phrase_its_own_way_does_not_undo_the_wake(tmp_path: Path) -> None:
    speech = [await flite_speech(text) for text in COMMANDS]
    second_at = 1 + len(speech[0]) / 48000 + 8
    cues = CueSheet.parse(f"1.0\tHey Travis, what time is it?\n{second_at:.2f}\tHey, head jarvis, list the files.\n")
    log, history = await run_recording(tmp_path, speech, cues)
    assert re.findall(r"\btool: (\w+)\(", log) == ["get_time", "list_files"], log
    assert "withdrawn" not in log and "ignored an utterance" not in log, log
    assert [(e.kind, e.heard, e.outcome) for e in history] == [
        (HistoryKind.COMMAND, "what time is it?", Outcome.ANSWERED),
        (HistoryKind.COMMAND, "list the files.", Outcome.ANSWERED),
    ], log


@pytest.mark.timeout(300)  # (pocketsphinx recognises each utterance on the simulator's side: slow on a busy machine)
@pytest.mark.parametrize("voice", ["flite", "espeak-ng"])
async def test_every_command_the_device_woke_for_has_one_verdict_with_the_simulators_own_recogniser(
        tmp_path: Path, voice: str) -> None:
    speech = [await (flite_speech(text) if voice == "flite" else synthesize(text)) for text in COMMANDS]
    recogniser = Recogniser()
    try:
        log, history = await run_recording(tmp_path, speech, recogniser)
    finally:
        recogniser.close()
    answers = log.count("narrated: answer")
    commands = [e for e in history if e.kind is HistoryKind.COMMAND]
    # Every answer said belongs to a command kept with its words; nothing said was then withdrawn.
    assert len(commands) == answers, log
    assert all(e.heard and e.outcome is Outcome.ANSWERED for e in commands), (commands, log)
    for withdrawn in re.finditer(r"withdrawn: (.*)", log):
        assert "answer is not said" in withdrawn.group(1) or "nothing ran" in withdrawn.group(1), log
    assert not [e for e in history if e.kind is HistoryKind.OVERHEARD]
    if voice == "flite":  # a voice the shipped model hears: there is something to judge
        assert answers >= 1, log
