"""The sounds handoff plays besides speech, ready for the coordinator: the wake chime, the
working sound and the done earcon, each the built-in tone or a WAV file from the settings
(WAKE_SOUND_WAV, WORKING_SOUND_WAV, DONE_SOUND_WAV), loaded once at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from audio_io.format import pcm_duration_s
from audio_io.interface import AudioFileError
from audio_io.wav import read_wav
from speech.local_voice import chime, done_earcon, working_earcon

if TYPE_CHECKING:
    from config.settings import AudioSettings

MAX_SOUND_S = 5.0  # a sound holds the microphone's mute while it plays: keep it short


@dataclass(frozen=True)
class Sounds:
    """pcm16 mono 24 kHz audio for each cue (repr shows lengths, not bytes)."""

    wake: bytes
    working: bytes
    done: bytes

    def __repr__(self) -> str:
        lengths = ", ".join(f"{name}={pcm_duration_s(getattr(self, name)):.2f}s" for name in ("wake", "working", "done"))
        return f"Sounds({lengths})"


def load_sounds(audio: "AudioSettings") -> Sounds:
    """The configured WAV files, converted, or the built-in tones; AudioFileError (one line naming
    the setting) for a file that cannot be used."""
    return Sounds(
        wake=_sound("WAKE_SOUND_WAV", audio.wake_sound_wav, chime),
        working=_sound("WORKING_SOUND_WAV", audio.working_sound_wav, working_earcon),
        done=_sound("DONE_SOUND_WAV", audio.done_sound_wav, done_earcon),
    )


def sound_problems(audio: "AudioSettings") -> list[str]:
    """One sentence for each configured sound `load_sounds` would refuse (`handoff check` and
    `run` say them all before starting)."""
    problems = []
    for setting, path in (("WAKE_SOUND_WAV", audio.wake_sound_wav), ("WORKING_SOUND_WAV", audio.working_sound_wav),
                          ("DONE_SOUND_WAV", audio.done_sound_wav)):  # fmt: skip
        try:
            _sound(setting, path, bytes)
        except AudioFileError as exc:
            problems.append(str(exc))
    return problems


def _sound(setting: str, path: Path | None, built_in: Callable[[], bytes]) -> bytes:
    if path is None:
        return built_in()
    try:
        pcm = read_wav(path)
    except AudioFileError as exc:
        raise AudioFileError(f"{setting}: {exc}") from None
    if pcm_duration_s(pcm) > MAX_SOUND_S:
        raise AudioFileError(
            f"{setting}: {path} plays for {pcm_duration_s(pcm):.1f} seconds; a sound may last at most {MAX_SOUND_S:.0f}."
        )
    return pcm
