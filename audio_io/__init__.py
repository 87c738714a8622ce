"""Audio in and out: one small interface, fixed at the Realtime format (pcm16, mono, 24 kHz).

Implementations:
- `PyAudioMicrophone`, `PyAudioSpeaker` (`audio_io.portaudio`): real devices through PortAudio.
- `WavFileMicrophone`, `WavFileSpeaker` (`audio_io.wav`): WAV files instead of devices.
- `PushMicrophone`, `MemorySpeaker`, `CountingSpeaker` (`audio_io.memory`): in memory, for tests, the offline demo and the soak.
- `open_audio(settings.audio)` picks between them; `handoff devices` lists what PortAudio sees.
- `with_volume(speaker, percent)` (`audio_io.volume`): the narrator volume, applied to what is played.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audio_io.format import BYTES_PER_SECOND, CHANNELS, SAMPLE_RATE, SAMPLE_WIDTH, PcmConverter, pcm_duration_s
from audio_io.interface import AudioDeviceError, AudioFileError, MicrophoneSource, NoAudioDeviceError, SpeakerSink
from audio_io.memory import CountingSpeaker, MemorySpeaker, PlaybackTimeline, PushMicrophone
from audio_io.portaudio import PyAudioMicrophone, PyAudioSpeaker
from audio_io.quiet_reads import QuietReads
from audio_io.volume import MAX_VOLUME_PERCENT, VolumeSpeaker, scale_pcm16, with_volume
from audio_io.wav import WavFileMicrophone, WavFileSpeaker, read_wav

if TYPE_CHECKING:
    from config.settings import AudioSettings

__all__ = [
    "BYTES_PER_SECOND", "CHANNELS", "SAMPLE_RATE", "SAMPLE_WIDTH", "PcmConverter", "pcm_duration_s",
    "AudioDeviceError", "AudioFileError", "MicrophoneSource", "NoAudioDeviceError", "SpeakerSink",
    "CountingSpeaker", "MemorySpeaker", "PlaybackTimeline", "PushMicrophone", "PyAudioMicrophone", "PyAudioSpeaker",
    "WavFileMicrophone", "WavFileSpeaker", "WAV_TAIL_SILENCE_S", "open_audio", "MAX_VOLUME_PERCENT",
    "VolumeSpeaker", "scale_pcm16", "with_volume", "read_wav", "QuietReads",
]


WAV_TAIL_SILENCE_S = 2.0


def open_audio(audio: "AudioSettings") -> tuple[MicrophoneSource, SpeakerSink]:
    """The microphone and speaker the settings ask for (not started: call start() on each).

    WAV input is paced like a real microphone when `realtime_wav_input` is set (unpaced
    otherwise); after the file come `WAV_TAIL_SILENCE_S` of silence, so the VAD can end the last
    utterance, and then the input ends: the assistant finishes what it heard and exits. A WAV
    speaker runs in real time unless the input is unpaced, so the microphone stays muted for as
    long as the answer would really take to play.
    """
    if audio.input_wav is not None:
        paced = audio.realtime_wav_input
        mic: MicrophoneSource = WavFileMicrophone(
            audio.input_wav, chunk_ms=audio.chunk_ms, pace=1.0 if paced else 0.0,
            then="silence", silence_s=WAV_TAIL_SILENCE_S, read_ms=audio.read_ms,
        )
        speaker_pace = 1.0 if paced else 0.0
    else:
        mic = PyAudioMicrophone(audio.input_device, chunk_ms=audio.chunk_ms, read_ms=audio.read_ms, quiet=QuietReads.of(audio))
        speaker_pace = 1.0
    speaker: SpeakerSink
    if audio.output_wav is not None:
        speaker = WavFileSpeaker(audio.output_wav, pace=speaker_pace)
    else:
        speaker = PyAudioSpeaker(audio.output_device)
    return mic, speaker
