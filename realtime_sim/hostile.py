"""Frames a hostile or broken server sends: real event shapes with one field mistyped or
oversized (a list for an id, `1e999` for a time, an object where text belongs, an odd-length
audio delta, a million-character transcript). The simulator injects them (`mistyped_frame`
faults); the wire's fuzz test feeds thousands of them to the parser and both cores.

Deterministic for a given `random.Random`: a failing frame is reproduced by its seed.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from typing import Any, Iterator

# One frame of every type the client reads, with the ids the cores of a test expect (`item_1`,
# response `resp_1`, narration `n1`), so a mistyped frame reaches deep into the cores.
TEMPLATES: tuple[dict[str, Any], ...] = (
    {"type": "session.created", "session": {"id": "sess_1", "expires_at": 1700000000}},
    {"type": "session.updated", "session": {"output_modalities": ["text"]}},
    {"type": "input_audio_buffer.speech_started", "item_id": "item_1", "audio_start_ms": 100},
    {"type": "input_audio_buffer.speech_stopped", "item_id": "item_1", "audio_end_ms": 900},
    {"type": "input_audio_buffer.committed", "item_id": "item_1"},
    {
        "type": "conversation.item.input_audio_transcription.completed",
        "item_id": "item_1",
        "transcript": "Computer, what time is it",
        "usage": {"type": "duration", "seconds": 1.5},
    },
    {"type": "conversation.item.input_audio_transcription.failed", "item_id": "item_1", "error": {"message": "no"}},
    {"type": "conversation.item.deleted", "item_id": "item_1"},
    {"type": "response.created", "response": {"id": "resp_1", "metadata": {"narration_id": "n1"}}},
    {
        "type": "response.done",
        "response": {
            "id": "resp_1",
            "status": "completed",
            "metadata": {"narration_id": "n1"},
            "output": [
                {"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{}", "id": "item_2"},
                {"type": "message", "content": [{"type": "output_text", "text": "It is noon."}]},
                {"type": "message", "content": [{"type": "output_audio", "transcript": "It is noon."}]},
            ],
            "usage": {"input_tokens": 10, "output_tokens": 5, "input_token_details": {"audio_tokens": 2}},
        },
    },
    {
        "type": "response.done",
        "response": {
            "id": "resp_1",
            "status": "failed",
            "metadata": {"narration_id": "n1"},
            "status_details": {"type": "failed", "error": {"type": "server_error", "code": None, "message": "boom"}},
        },
    },
    {"type": "response.output_audio.delta", "response_id": "resp_1", "delta": base64.b64encode(b"\x01\x02" * 8).decode()},
    {"type": "response.output_audio_transcript.done", "response_id": "resp_1", "transcript": "It is noon."},
    {"type": "error", "error": {"type": "invalid_request_error", "code": "x", "message": "bad", "event_id": "route-1-response"}},
)

# Raw JSON text, so values JSON cannot build from Python (1e999 parses as infinity) go out too.
HOSTILE_VALUES: tuple[str, ...] = (
    "null", "true", "false", "0", "-1", "1.5", "1e999", "-1e999", "1e308", "9" * 400, '""', '"x"',
    "[]", '["call_1"]', "[1, 2]", "{}", '{"a": {"b": []}}', '"\\ud800"', '"\\u0000\\u001b[2J"',
    '"=="', '"A"', '"AAA"', '"!!!!"', "[" * 50 + "]" * 50,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a frame a value can be swapped (not the `type` at the top)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if prefix or key != "type":
                yield (*prefix, key)
                yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield (*prefix, index)
            yield from _paths(inner, (*prefix, index))


_MARK = "\x00HOSTILE\x00"


def _with(frame: dict[str, Any], path: tuple[Any, ...], raw: str) -> str:
    """The frame as JSON text with the value at `path` replaced by the raw JSON `raw`."""
    mutated = copy.deepcopy(frame)
    target = mutated
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = _MARK
    return json.dumps(mutated).replace(json.dumps(_MARK), raw, 1)


def _oversized(rng: random.Random, frame: dict[str, Any]) -> str:
    """A frame with one string, or one list, blown up (a megabyte of text, thousands of calls)."""
    mutated = copy.deepcopy(frame)
    if mutated["type"] == "response.done" and rng.random() < 0.5:
        calls = mutated["response"].get("output") or [{"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"}]
        mutated["response"]["output"] = [calls[0]] * rng.choice((100, 10_000))
        return json.dumps(mutated)
    strings = [p for p in _paths(mutated) if isinstance(_get(mutated, p), str)]
    if not strings:
        return json.dumps(mutated)
    path = rng.choice(strings)
    target = mutated
    for step in path[:-1]:
        target = target[step]
    if path[-1] == "delta":
        target["delta"] = base64.b64encode(bytes(rng.choice((1, 3, 1_000_001)))).decode()
    else:
        target[path[-1]] = "word " * rng.choice((2_000, 200_000))
    return json.dumps(mutated)


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def hostile_frame(rng: random.Random, oversized_share: float = 0.05) -> str:
    """One mistyped (or, now and then, oversized) frame."""
    frame = rng.choice(TEMPLATES)
    if rng.random() < oversized_share:
        return _oversized(rng, frame)
    path = rng.choice(list(_paths(frame)))
    return _with(frame, path, rng.choice(HOSTILE_VALUES))


def hostile_frames(seed: int, count: int, oversized_share: float = 0.05) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield hostile_frame(rng, oversized_share)


def many_calls(response_id: str, count: int = 10_000) -> str:
    """A completed response asking for `count` calls of get_time."""
    call = {"type": "function_call", "status": "completed", "name": "get_time", "arguments": "{}"}
    output = [{**call, "id": f"item_many_{n}", "call_id": f"call_many_{n}"} for n in range(count)]
    return json.dumps({"type": "response.done", "response": {"id": response_id, "status": "completed", "output": output}})


def huge_answer(response_id: str, words: int = 200_000) -> str:
    """A completed response answering a megabyte of text (no tool call)."""
    content = [{"type": "output_text", "text": "All work and no play. " * (words // 5)}]
    output = [{"type": "message", "id": "item_huge", "role": "assistant", "content": content}]
    return json.dumps({"type": "response.done", "response": {"id": response_id, "status": "completed", "output": output}})
