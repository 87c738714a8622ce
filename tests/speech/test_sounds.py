"""The wake, working and done sounds: built-in earcons, or WAV files from the settings."""

from __future__ import annotations

import pytest

from audio_io import AudioFileError, pcm_duration_s
from config.settings import AudioSettings, SettingsError, load_settings
from speech.local_voice import chime, done_earcon, working_earcon
from speech.sounds import load_sounds
from tests.support.audio_helpers import dominant_frequency, rms, tone, write_wav


def test_the_built_in_earcons_are_short_soft_and_distinct() -> None:
    sounds = load_sounds(AudioSettings())
    assert (sounds.wake, sounds.working, sounds.done) == (chime(), working_earcon(), done_earcon())
    for earcon in (sounds.working, sounds.done):
        assert 0.1 <= pcm_duration_s(earcon) <= 0.3
        assert 0 < rms(earcon) < rms(sounds.wake)  # softer than the wake chime
    assert len({sounds.wake, sounds.working, sounds.done}) == 3
    assert repr(sounds) == "Sounds(wake=0.16s, working=0.22s, done=0.18s)"


def test_wav_files_replace_them_converted_to_24_khz_mono(tmp_path) -> None:
    stereo_44k = write_wav(tmp_path / "ding.wav", tone(660.0, 0.5, rate=44100, channels=2), rate=44100, channels=2)
    sounds = load_sounds(AudioSettings(working_sound_wav=stereo_44k))
    assert sounds.wake == chime() and sounds.done == done_earcon()
    assert abs(pcm_duration_s(sounds.working) - 0.5) < 0.01
    assert abs(dominant_frequency(sounds.working, 24000) - 660.0) < 5


def test_an_unusable_sound_file_is_one_line_naming_the_setting(tmp_path) -> None:
    with pytest.raises(AudioFileError) as missing:
        load_sounds(AudioSettings(wake_sound_wav=tmp_path / "nope.wav"))
    assert str(missing.value) == f"WAKE_SOUND_WAV: the WAV file {tmp_path / 'nope.wav'} does not exist"
    (tmp_path / "song.mp3").write_bytes(b"ID3\x03\x00not a wav")
    with pytest.raises(AudioFileError, match=r"^DONE_SOUND_WAV: .*song\.mp3 is an MP3 file, not a WAV file; install sox.s MP3 support .*libsox-fmt-mp3.* convert it with: sox "):
        load_sounds(AudioSettings(done_sound_wav=tmp_path / "song.mp3"))
    long = write_wav(tmp_path / "long.wav", tone(440.0, 6.0, rate=8000), rate=8000)
    with pytest.raises(AudioFileError, match=r"^WORKING_SOUND_WAV: .*long\.wav plays for 6\.0 seconds; a sound may last at most 5\.$"):
        load_sounds(AudioSettings(working_sound_wav=long))
    for error in (missing.value,):
        assert "\n" not in str(error)


def test_volume_and_sound_settings_are_read_and_checked(tmp_path) -> None:
    settings = load_settings(environ={"NARRATOR_VOLUME": "80", "DONE_SOUND_WAV": "~/ding.wav"}, dotenv_path=None)
    assert settings.audio.volume_percent == 80 and settings.audio.done_sound_wav is not None
    assert settings.audio.done_sound_wav.name == "ding.wav" and "~" not in str(settings.audio.done_sound_wav)
    assert load_settings(environ={}, dotenv_path=None).audio.volume_percent == 100
    assert load_settings(environ={"NARRATOR_VOLUME": "150%"}, dotenv_path=None).audio.volume_percent == 150
    for bad in ("151", "-5", "loud", "50.5"):
        with pytest.raises(SettingsError, match=rf"^NARRATOR_VOLUME={bad} is not a whole number from 0 to 150"):
            load_settings(environ={"NARRATOR_VOLUME": bad}, dotenv_path=None)
