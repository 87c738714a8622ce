"""The assistant is built with the configured volume and sounds, and refuses unusable sound files."""

from __future__ import annotations

import dataclasses

import pytest

from audio_io import AudioFileError, MemorySpeaker, PushMicrophone, VolumeSpeaker, read_wav
from assembly.build import assistant
from config.settings import AudioSettings, RealtimeSettings, Settings
from tests.support.audio_helpers import tone, write_wav


def settings_for(tmp_path, **audio: object) -> Settings:
    return Settings(
        realtime=RealtimeSettings(api_key="sk-test", base_url="http://127.0.0.1:9/v1"),  # nothing is dialled
        audio=dataclasses.replace(AudioSettings(), **audio),
        workspace_root=tmp_path,
        state_dir=tmp_path / "state",
    )


async def test_the_speaker_plays_at_the_volume_and_the_wake_sound_is_the_wav(tmp_path):
    ding = write_wav(tmp_path / "ding.wav", tone(880.0, 0.3))
    speaker = MemorySpeaker()
    settings = settings_for(tmp_path, volume_percent=40, wake_sound_wav=ding)
    async with assistant(settings, PushMicrophone(), speaker) as coordinator:
        assert isinstance(coordinator.parts.speaker, VolumeSpeaker) and coordinator.parts.speaker.inner is speaker
        assert coordinator.parts.speaker.percent == 40
        assert coordinator.parts.chime == read_wav(ding)


async def test_an_unusable_sound_stops_the_start_before_anything_opens(tmp_path):
    with pytest.raises(AudioFileError, match="^DONE_SOUND_WAV: the WAV file .* does not exist$"):
        async with assistant(settings_for(tmp_path, done_sound_wav=tmp_path / "gone.wav"), PushMicrophone(), MemorySpeaker()):
            pass
    assert not (tmp_path / "state").exists()
