"""The session configurations (`session.update` payloads) of the listener and the narrator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from audio_io.format import SAMPLE_RATE
from decisions.narration import READ_VERBATIM

from config.settings import NoiseReduction

if TYPE_CHECKING:
    from config.settings import Settings

LISTENER_INSTRUCTIONS = (
    "You are the router of a voice assistant. Each user message is one spoken command. "
    "Route every command to exactly one tool, choosing the tool that best fits, and fill its "
    "arguments from the command. Questions that need knowledge or thought go to ask_brain with "
    "the question as the query. A command may come as the spoken audio itself: it begins with "
    "the wake word, which is not part of the command. Never answer in text yourself."
)



def transcription(settings: Settings) -> dict[str, Any]:
    """Transcription with the hints the GA session takes: the language, and a prompt that spells
    the wake phrase, so the wake gate sees it written the same way every time."""
    wake = settings.listener.wake_phrase
    config: dict[str, Any] = {
        "model": settings.realtime.transcribe_model,
        "prompt": f"Commands start with the wake word \"{wake}\", as in: {wake.capitalize()}, what time is it?",
    }
    if settings.realtime.transcribe_language:
        config["language"] = settings.realtime.transcribe_language
    return config


def listener_session(settings: Settings, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The listener's session config: text only, VAD that never answers by itself, transcription on."""
    noise = settings.realtime.noise_reduction
    return {
        "output_modalities": ["text"],
        "instructions": LISTENER_INSTRUCTIONS,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": SAMPLE_RATE},
                "transcription": transcription(settings),
                "noise_reduction": None if noise is NoiseReduction.OFF else {"type": noise.value},
                "turn_detection": {
                    "type": "server_vad",
                    "silence_duration_ms": settings.listener.vad_silence_ms,
                    "create_response": False,
                    "interrupt_response": False,
                },
            }
        },
        "tools": tools,
        "tool_choice": "required",
    }


def narrator_session(settings: Settings) -> dict[str, Any]:
    """Audio out in the reader's voice; no tools, no input audio (turn detection off)."""
    return {
        "output_modalities": ["audio"],
        "instructions": READ_VERBATIM,
        "audio": {
            "input": {"turn_detection": None},
            "output": {"format": {"type": "audio/pcm", "rate": SAMPLE_RATE}, "voice": settings.realtime.reader_voice},
        },
        "tools": [],
        "tool_choice": "none",
    }
