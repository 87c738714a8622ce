"""Helpers shared by the simulator tests (this module holds no tests).

`running_sim()` starts a simulator and, on the way out, checks every server event it sent
against the openai SDK's `RealtimeServerEvent` — strictly: fields the SDK does not declare are
only allowed where the real service sends them too (see the recordings).
"""

from __future__ import annotations

import base64
import contextlib
import math
from array import array
from typing import Any, AsyncIterator

from openai import AsyncOpenAI
from openai.types.realtime import RealtimeServerEvent
from pydantic import BaseModel, TypeAdapter

from realtime_sim import SimConfig, SimScript, SimServer

SERVER_EVENT = TypeAdapter(RealtimeServerEvent)
# The real service's session frames carry these undeclared fields (every recording has them).
ALLOWED_UNDECLARED = {
    ("session.created", "session.object"),
    ("session.created", "session.id"),
    ("session.created", "session.expires_at"),
    ("session.updated", "session.object"),
    ("session.updated", "session.id"),
    ("session.updated", "session.expires_at"),
}
# Unpaced audio, synthetic voice: fast, and no subprocess per narration.
FAST = SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=1)
PERFECT = SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=1, realistic=False)  # reads verbatim


def undeclared_paths(value: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(value, BaseModel):
        found += [f"{path}.{key}".lstrip(".") for key in (value.__pydantic_extra__ or {})]
        for name in type(value).model_fields:
            found += undeclared_paths(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list):
        for index, element in enumerate(value):
            found += undeclared_paths(element, f"{path}[{index}]")
    return found


def check_server_event(event: dict[str, Any]) -> None:
    """Raise AssertionError unless `event` is a RealtimeServerEvent with no undeclared fields."""
    try:
        model = SERVER_EVENT.validate_python(event)
    except Exception as exc:  # pydantic.ValidationError, reported with the event
        raise AssertionError(f"not a valid RealtimeServerEvent: {event!r}: {exc}") from exc
    extra = [p for p in undeclared_paths(model) if (event["type"], p) not in ALLOWED_UNDECLARED]
    if extra:
        raise AssertionError(f"{event['type']} carries fields the SDK does not declare: {extra}")


@contextlib.asynccontextmanager
async def running_sim(config: SimConfig = FAST, script: SimScript | None = None) -> AsyncIterator[SimServer]:
    sim = SimServer(config, script)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()
    for record in sim.connections:
        for event in record.sent:
            check_server_event(event)


def sdk(sim: SimServer) -> AsyncOpenAI:
    return AsyncOpenAI(api_key="sk-test", base_url=sim.base_url, max_retries=0)


async def recv_until(connection: Any, event_type: str, limit: int = 2000) -> list[Any]:
    """Events from the SDK connection up to and including the first of `event_type`."""
    events = []
    for _ in range(limit):
        event = await connection.recv()
        events.append(event)
        if event.type == event_type:
            return events
    raise AssertionError(f"no {event_type} within {limit} events; got {[e.type for e in events][-10:]}")


def pcm_rms(pcm: bytes) -> float:
    samples = array("h")
    samples.frombytes(pcm[: len(pcm) - len(pcm) % 2])
    return math.sqrt(sum(s * s for s in samples) / len(samples)) if samples else 0.0


def audio_of(events: list[Any]) -> bytes:
    return b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")


def text_session(tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    session: dict[str, Any] = {"type": "realtime", "output_modalities": ["text"], **extra}
    if tools is not None:
        session["tools"] = tools
    return session


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": f"the {name} tool",
        "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}},
    }


def user_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# The order a spoken turn's events arrive in (as recorded against the live API), transcript
# deltas aside: they interleave anywhere after the item is done.
TRANSCRIPT_DELTA = "conversation.item.input_audio_transcription.delta"
SPOKEN_TURN_ORDER = (
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.committed",
    "conversation.item.added",
    "conversation.item.done",
    "conversation.item.input_audio_transcription.completed",
    "response.created",
)


def spoken_turn_head(types: list[str]) -> list[str]:
    """The first event types of a spoken turn, transcript deltas left out, to compare with SPOKEN_TURN_ORDER."""
    return [t for t in types if t != TRANSCRIPT_DELTA][: len(SPOKEN_TURN_ORDER)]
