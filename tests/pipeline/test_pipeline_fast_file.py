"""A WAV file read as fast as it can be (`handoff run --input-wav F --fast`) while the other end
runs late: on a starved machine the simulator (or a real server) hears the audio seconds after
the client sent it. A busy CPU may cost time, never commands: every command in the file is
committed whole and routed before the run ends."""

from __future__ import annotations

import dataclasses
import wave
from pathlib import Path

import pytest

from audio_io import open_audio
from benchmarks.voice_loop import committed_segments, routed_commands
from assembly.build import assistant
from realtime_sim import SimConfig
from speech.local_voice import tone
from speech.synth import silence
from tests.support.pipeline_harness import fast_settings

COMMANDS = 2
SPOKEN = tone([190.0, 230.0, 210.0], 0.3)  # 0.9 s the simulator's VAD hears as speech
# Every frame reaches the other end 1 s late (both ways): the server is that far behind the
# client, longer than the quiet (VAD silence + 1 s) after which a finished file used to count as
# done. Deterministic: no load needed.
LATE = SimConfig(use_espeak=False, realistic=False, seed=11, network_delay_s=1.0,
                 fallback_transcript="Computer, what time is it")


def write_commands(path: Path) -> None:
    with wave.open(str(path), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(24000)
        writer.writeframes(b"".join(SPOKEN + silence(800) for _ in range(COMMANDS)))


@pytest.mark.parametrize("sim", [LATE], indirect=True)
async def test_a_file_read_fast_against_a_late_server_loses_no_command(tmp_path, sim):
    wav = tmp_path / "commands.wav"
    write_commands(wav)
    (tmp_path / "workspace").mkdir()
    settings = fast_settings(sim.base_url, (tmp_path / "workspace").resolve(), tmp_path / "state", connect_timeout_s=30.0)
    settings = dataclasses.replace(settings, audio=dataclasses.replace(
        settings.audio, input_wav=wav, output_wav=tmp_path / "out.wav", realtime_wav_input=False))
    microphone, speaker = open_audio(settings.audio)  # as `handoff run --fast` does
    async with assistant(settings, microphone, speaker) as coordinator:
        assert await coordinator.run() == 0
    segments = committed_segments(sim)
    assert routed_commands(sim) == COMMANDS, segments
    assert len(segments) == COMMANDS and all(length >= 0.85 * 900 for length in segments), segments
