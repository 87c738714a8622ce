"""The effective session configuration: defaults, `session.update` merging, and what follows from it.

Shapes follow the recorded `session.created` / `session.updated` frames, field order included.
"""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any, Literal, Mapping

from audio_io.format import SAMPLE_RATE
from realtime_sim.vad import VadSettings

Role = Literal["listener", "narrator", "unknown"]

_SERVER_VAD_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 200,
    "idle_timeout_ms": None,
    "create_response": True,
    "interrupt_response": True,
})
_SEMANTIC_VAD_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "type": "semantic_vad",
    "eagerness": "auto",
    "create_response": True,
    "interrupt_response": True,
})
# semantic_vad has no silence knob; "auto" eagerness waits about this long (energy VAD stand-in).
_SEMANTIC_SILENCE_MS: Mapping[str, int] = MappingProxyType({"low": 1500, "medium": 800, "high": 300, "auto": 800})
_PCM: Mapping[str, Any] = MappingProxyType({"type": "audio/pcm", "rate": SAMPLE_RATE})
_SESSION_KEY_ORDER = (
    "type", "object", "id", "model", "output_modalities", "instructions", "tools", "tool_choice",
    "max_output_tokens", "tracing", "truncation", "prompt", "expires_at", "audio", "include",
)  # fmt: skip


def default_session(*, session_id: str, model: str, instructions: str, expires_at: int) -> dict[str, Any]:
    """What `session.created` reports before the client changes anything."""
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": instructions,
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": expires_at,
        "audio": {
            "input": {
                "format": dict(_PCM),
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": dict(_SERVER_VAD_DEFAULTS),
            },
            "output": {"format": dict(_PCM), "voice": "alloy", "speed": 1.0},
        },
        "include": None,
    }


def normalize_format(value: dict[str, Any]) -> dict[str, Any]:
    kind = value.get("type", "audio/pcm")
    return dict(_PCM) if kind == "audio/pcm" else {"type": kind}


def normalize_tool(tool: dict[str, Any]) -> dict[str, Any]:
    ordered: dict[str, Any] = {key: tool[key] for key in ("type", "name", "description", "parameters") if key in tool}
    ordered.update({key: value for key, value in tool.items() if key not in ordered})
    return ordered


def normalize_turn_detection(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """The server fills every knob the client left out with its default (no merge with before)."""
    if value is None:
        return None
    defaults = _SEMANTIC_VAD_DEFAULTS if value.get("type") == "semantic_vad" else _SERVER_VAD_DEFAULTS
    return {key: value.get(key, default) for key, default in defaults.items()}


def apply_update(current: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The effective session after a (validated) `session.update`; only present fields change."""
    session = copy.deepcopy(current)
    for key, value in update.items():
        if key == "type":
            continue
        if key == "instructions":
            # The recorded server keeps its instructions when sent an empty string.
            if value:
                session["instructions"] = value
        elif key == "audio":
            _merge_audio(session["audio"], value or {})
        elif key == "tools":
            session["tools"] = [normalize_tool(tool) for tool in value]
        else:
            session[key] = copy.deepcopy(value)
    ordered = {key: session[key] for key in _SESSION_KEY_ORDER if key in session}
    ordered.update({key: value for key, value in session.items() if key not in ordered})
    return ordered


def _merge_audio(audio: dict[str, Any], update: dict[str, Any]) -> None:
    audio_in = audio["input"]
    for key, value in (update.get("input") or {}).items():
        if key == "format":
            audio_in["format"] = normalize_format(value)
        elif key == "transcription":
            audio_in["transcription"] = (
                None if value is None else {"model": None, "language": None, "prompt": None, **value}
            )
        elif key == "turn_detection":
            audio_in["turn_detection"] = normalize_turn_detection(value)
        else:
            audio_in[key] = copy.deepcopy(value)
    audio_out = audio["output"]
    for key, value in (update.get("output") or {}).items():
        audio_out[key] = normalize_format(value) if key == "format" else copy.deepcopy(value)


def role_of(session: dict[str, Any]) -> Role:
    """The role a session plays: "listener" when text-only, "narrator" when it speaks."""
    return "listener" if session.get("output_modalities") == ["text"] else "narrator"


def turn_detection(session: dict[str, Any]) -> dict[str, Any] | None:
    detection: dict[str, Any] | None = session["audio"]["input"]["turn_detection"]
    return detection


def vad_settings(session: dict[str, Any]) -> VadSettings | None:
    detection = turn_detection(session)
    if detection is None:
        return None
    if detection["type"] == "semantic_vad":
        return VadSettings(silence_duration_ms=_SEMANTIC_SILENCE_MS.get(detection.get("eagerness") or "auto", 800))
    return VadSettings(
        threshold=detection["threshold"],
        prefix_padding_ms=detection["prefix_padding_ms"],
        silence_duration_ms=detection["silence_duration_ms"],
    )


def transcription_enabled(session: dict[str, Any]) -> bool:
    return session["audio"]["input"]["transcription"] is not None


def voice(session: dict[str, Any]) -> str:
    name: str = session["audio"]["output"]["voice"]
    return name
