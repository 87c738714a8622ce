"""A hostile server's frames (issue 23, defect 3): mistyped and oversized fields go through the
parser and both cores without one exception; what the cores pass on stays within its caps."""

from __future__ import annotations

import base64
import json

import pytest

from decisions import listener_core as lc
from decisions.narration import NarrationCore, Play
from decisions.wake_gate import WakeGate
from realtime_api import wire
from realtime_sim.hostile import hostile_frames

FRAMES = 10_000
SEED = 23


def fresh_listener() -> lc.ListenerCore:
    core = lc.ListenerCore(gate=WakeGate("computer", (), 8.0), session=1)
    core.route("what time is it")  # a route in flight: response.done and errors reach their deep paths
    for event in (wire.SpeechStarted("item_1", 100), wire.SpeechStopped("item_1", 900), wire.AudioCommitted("item_1")):
        core.feed(event)
    return core


def fresh_narration() -> NarrationCore:
    core = NarrationCore("It is noon.", "n1")
    core.feed(wire.ResponseCreated("resp_1", {"narration_id": "n1"}))
    return core


def check_listener_actions(actions: list) -> None:
    for action in actions:
        match action:
            case lc.Heard(transcript=text):
                assert isinstance(text, str) and len(text) <= wire.MAX_TRANSCRIPT_CHARS + len(wire.CUT_MARK)
            case lc.RunTools(calls=calls):
                assert len(calls) <= lc.MAX_CALLS_PER_RESPONSE
                assert all(isinstance(c.call_id, str) and isinstance(c.name, str) for c in calls)


def test_ten_thousand_hostile_frames_raise_nothing_in_the_parser_or_either_core():
    listener, narration = fresh_listener(), fresh_narration()
    kinds: dict[str, int] = {}
    for index, frame in enumerate(hostile_frames(SEED, FRAMES, oversized_share=0.01)):
        if index % 25 == 0:
            listener, narration = fresh_listener(), fresh_narration()
        event = wire.parse_server_frame(frame)
        kinds[type(event).__name__] = kinds.get(type(event).__name__, 0) + 1
        check_listener_actions(listener.feed(event))
        for action in narration.feed(event):
            if isinstance(action, Play):
                assert len(action.pcm) % 2 == 0  # whole 16-bit samples only: the speaker takes nothing else
    assert kinds.get("Malformed", 0) > FRAMES // 4  # the fuzzer does reach the type checks
    assert len(kinds) >= 10  # ... and every kind of event


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "response.done", "response": {"output": [{"type": "function_call", "call_id": ["x"], "name": "n"}]}},
        {"type": "response.done", "response": {"output": [{"type": "function_call", "call_id": "c", "name": 5}]}},
        '{"type": "input_audio_buffer.speech_started", "item_id": "i", "audio_start_ms": 1e999}',
        {"type": "response.created", "response": {"id": "r", "metadata": "n1"}},
        {"type": "error", "error": {"message": ["no"], "code": "x"}},
        {"type": "conversation.item.input_audio_transcription.completed", "item_id": 7, "transcript": "hi"},
        {"type": "conversation.item.input_audio_transcription.completed", "item_id": "i", "transcript": {"a": 1}},
        {"type": "session.updated", "session": {"output_modalities": "text"}},
    ],
)
def test_a_mistyped_field_is_one_malformed_event(frame):
    text = frame if isinstance(frame, str) else json.dumps(frame)
    assert isinstance(wire.parse_server_frame(text), wire.Malformed)


def test_a_one_byte_audio_delta_is_carried_over_to_whole_samples():
    core = fresh_narration()
    played = b""
    for chunk in (b"\x01", b"\x02\x03", b"\x04"):
        frame = json.dumps({"type": "response.output_audio.delta", "response_id": "resp_1", "delta": base64.b64encode(chunk).decode()})
        for action in core.feed(wire.parse_server_frame(frame)):
            assert isinstance(action, Play) and len(action.pcm) % 2 == 0
            played += action.pcm
    assert played == b"\x01\x02\x03\x04"


def test_a_megabyte_transcript_is_cut_at_the_wire():
    frame = json.dumps({"type": "conversation.item.input_audio_transcription.completed", "item_id": "i", "transcript": "a" * 1_000_000})
    event = wire.parse_server_frame(frame)
    assert isinstance(event, wire.TranscriptCompleted)
    assert len(event.transcript) == wire.MAX_TRANSCRIPT_CHARS + len(wire.CUT_MARK)


def test_ten_thousand_calls_in_one_response_are_not_all_read():
    call = {"type": "function_call", "call_id": "c", "name": "set_timer", "arguments": "{}"}
    event = wire.parse_server_frame(json.dumps({"type": "response.done", "response": {"output": [call] * 10_000}}))
    assert len(event.function_calls) == wire.MAX_FUNCTION_CALLS and event.calls_dropped == 10_000 - wire.MAX_FUNCTION_CALLS


def test_a_lone_surrogate_from_the_server_arrives_as_the_replacement_character():
    # JSON may escape a lone surrogate; no log, database or HTTP request could encode it later.
    frame = '{"type": "conversation.item.input_audio_transcription.completed", "item_id": "i1", ' \
            '"content_index": 0, "transcript": "caf\\ud800 computer"}'
    event = wire.parse_server_frame(frame)
    assert event.transcript == "caf\ufffd computer"
    event.transcript.encode("utf-8")
