"""Answer at the turn's end (issue 33), through `handoff run` against the simulator: a command
with a pause inside it, heard by the on-device wake model and VAD, is routed provisionally at the
pause; the user goes on, so that route is withdrawn (the tool it asked for, which sets a timer,
never runs on it) and the whole command is routed at its end and answered once."""

from __future__ import annotations

import re
from array import array
from pathlib import Path

import pytest

from realtime_sim import SimConfig, SimServer
from service.history import HISTORY_FILE, HistoryKind, Outcome, read_history
from speech.local_voice import flite_speech
from tests.support.audio_helpers import write_wav
from tests.support.daemon import SILENCE_1S, daemon_env, running_daemon

PAUSE_MS = 300  # inside the command: over PROVISIONAL_MS (160), under TURN_END_MS (460)


def trimmed(pcm: bytes, floor: int = 300) -> bytes:
    """Without the voice's quiet lead-in and tail: the pause is what the test adds."""
    samples = array("h")
    samples.frombytes(pcm)
    loud = [i for i, v in enumerate(samples) if abs(v) >= floor]
    return samples[loud[0]:loud[-1] + 1].tobytes()


@pytest.mark.timeout(120)
async def test_a_command_with_a_pause_inside_is_answered_once_whole_and_its_provisional_route_acts_on_nothing(
        tmp_path: Path) -> None:
    head, tail = trimmed(await flite_speech("hey jarvis, set a timer")), trimmed(await flite_speech("for ten minutes"))
    wav = write_wav(tmp_path / "mine.wav", SILENCE_1S + head + bytes(48 * PAUSE_MS) + tail + SILENCE_1S * 4)
    async with SimServer(SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=1)) as sim:
        # The provisional route (the first response) asks to set a timer: it must be held, then dropped.
        sim.script.push_tool_call("set_timer", {"duration": "PT20M"})  # (the whole command: PT10M)
        sim.script.push_transcript("Hey Jarvis, set a timer for ten minutes.")
        env = daemon_env(tmp_path, sim.base_url, HANDOFF_UPLOAD_MODE="wake_word", WAKE_PHRASE="hey jarvis",
                         PROVISIONAL_MS="160", TURN_END_MS="460",
                         PROVISIONAL_TOKEN_BUDGET="1000")  # (else the first withdrawal holds the next pause back)
        async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as handoff:
            assert await handoff.exited(timeout=100) == 0, handoff.log
        routes = [e["response"] for c in sim.connections if c.role == "listener" for e in c.received
                  if e["type"] == "response.create"]
    log = handoff.log
    # Routed twice, each time at a pause with the audio so far: inside the command (withdrawn: the
    # user went on), and after its end (confirmed by the turn end: the whole command).
    assert len(routes) == 2, log
    audio = [len(r["input"][0]["content"][0]["audio"]) for r in routes]
    assert audio[0] < audio[1], audio
    assert log.count("withdrawn: the user went on after a pause") == 1, log
    assert "the turn ended at the pause: its provisional route stands" in log, log
    # The timer the provisional route asked for never ran: one set_timer, the whole command's, after its words.
    assert len(re.findall(r"\btool: set_timer\(", log)) == 1 and "PT20M" not in log, log
    assert log.index("withdrawn: the user went on after a pause") < log.index("tool: set_timer(")
    assert log.count("narrated: answer") == 1, log
    history = read_history(tmp_path / "state" / HISTORY_FILE)
    assert [(e.kind, e.heard, e.outcome) for e in history] == [
        (HistoryKind.COMMAND, "set a timer for ten minutes.", Outcome.ANSWERED)], log
