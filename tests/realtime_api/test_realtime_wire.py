"""The wire parser against frames recorded from the live API, plus what it must survive."""

import base64

import pytest

from realtime_api import wire
from tests.support.recordings import received_events, recording_paths


@pytest.mark.parametrize("path", recording_paths(), ids=lambda p: p.stem)
def test_every_recorded_frame_parses(path):
    import yaml

    frames = [i["data"] for i in yaml.safe_load(path.read_text())["interactions"] if i.get("direction") == "received"]
    assert frames
    for frame in frames:
        event = wire.parse_server_event(frame)
        assert not isinstance(event, wire.Malformed), (frame["type"], event)


def test_recorded_tool_call_round_yields_the_function_call():
    events = [wire.parse_server_event(f) for f in received_events("test_openai_ws_test_tool_call_round.yaml")]
    dones = [e for e in events if isinstance(e, wire.ResponseDone)]
    assert len(dones) == 2
    first, second = dones
    assert first.status == "completed"
    assert [c.name for c in first.function_calls] == ["get_weather"]
    call = first.function_calls[0]
    assert call.call_id.startswith("call_") and '"city"' in call.arguments and call.item_id.startswith("item_")
    assert second.function_calls == () and second.text.strip()


def test_recorded_preamble_and_call_in_one_response():
    name = "test_parity_ws_test_text_tool_round_parityopenai-current.yaml"
    events = [wire.parse_server_event(f) for f in received_events(name)]
    first = next(e for e in events if isinstance(e, wire.ResponseDone))
    assert len(first.function_calls) == 1 and first.text.strip()


def test_recorded_spoken_turn_gives_transcript_and_audio():
    name = "test_azure_ws_test_spoken_turn_transcribed_drives_a_tool_and_answers_in_audio.yaml"
    events = [wire.parse_server_event(f) for f in received_events(name)]
    transcripts = [e for e in events if isinstance(e, wire.TranscriptCompleted)]
    assert len(transcripts) == 1 and transcripts[0].transcript.strip()
    committed = next(e for e in events if isinstance(e, wire.AudioCommitted))
    assert committed.item_id == transcripts[0].item_id
    audio = [e for e in events if isinstance(e, wire.AudioDelta)]
    assert audio and all(isinstance(a.pcm, bytes) and a.pcm for a in audio)
    spoken = [e for e in events if isinstance(e, wire.AudioTranscriptDone)]
    assert spoken and spoken[-1].transcript


def test_recorded_transcription_failure():
    name = "test_azure_ws_test_audio_in_server_vad_transcription_requires_deployment.yaml"
    events = [wire.parse_server_event(f) for f in received_events(name)]
    failed = [e for e in events if isinstance(e, wire.TranscriptFailed)]
    assert len(failed) == 1 and failed[0].message


def test_malformed_and_unknown_frames_do_not_raise():
    assert isinstance(wire.parse_server_frame(b"{not json"), wire.Malformed)
    assert isinstance(wire.parse_server_frame(b"[1, 2]"), wire.Malformed)
    assert isinstance(wire.parse_server_frame('{"type": "response.done"}'), wire.ResponseDone)
    assert wire.parse_server_frame('{"type": "brand.new.event", "x": 1}') == wire.Unhandled("brand.new.event")
    broken = wire.parse_server_frame('{"type": "response.output_audio.delta", "delta": 5}')
    assert isinstance(broken, wire.Malformed)


def test_errors_are_classified():
    expired = wire.parse_server_event(
        {"type": "error", "error": {"type": "invalid_request_error", "code": "session_expired", "message": "m"}}
    )
    assert expired.session_expired and not expired.fatal
    bad_key = wire.parse_server_event({"type": "error", "error": {"code": "invalid_api_key", "message": "no"}})
    assert bad_key.fatal


def test_client_event_builders():
    pcm = b"\x01\x02" * 10
    assert base64.b64decode(wire.ClientEvents.append_audio(pcm)["audio"]) == pcm
    assert "event_id" not in wire.ClientEvents.append_audio(pcm)
    assert wire.ClientEvents.append_audio(pcm, 61_020)["event_id"] == "mic_61020"  # where it lies in the mic stream
    out = wire.ClientEvents.function_output("call_1", "{}", "item_9")
    assert out["previous_item_id"] == "item_9" and out["item"]["type"] == "function_call_output"
    read = wire.ClientEvents.read_script("Read this: <script>Hello.</script>", "Read it now.", {"narration_id": "n1"})
    assert read["response"]["conversation"] == "none" and read["response"]["metadata"] == {"narration_id": "n1"}
    routed = wire.ClientEvents.route_command("what time is it", [])["response"]
    assert routed["tool_choice"] == "required" and routed["conversation"] == "none"


def test_recorded_usage_is_read_from_response_done_and_transcription():
    name = "test_azure_ws_test_spoken_turn_transcribed_drives_a_tool_and_answers_in_audio.yaml"
    events = [wire.parse_server_event(f) for f in received_events(name)]
    spoken = [e for e in events if isinstance(e, wire.ResponseDone)][-1]
    assert spoken.usage == wire.Usage(
        input_text_tokens=96, input_audio_tokens=26, cached_text_tokens=64, cached_audio_tokens=0,
        output_text_tokens=28, output_audio_tokens=69,
    )
    assert spoken.usage.cached_tokens == 64
    transcribed = next(e for e in events if isinstance(e, wire.TranscriptCompleted))
    assert transcribed.usage == wire.TranscriptionUsage(input_audio_tokens=26, input_text_tokens=0, output_tokens=9)
    assert transcribed.usage.audio_seconds == 2.6  # 1 audio token per 100 ms
    whisper = [wire.parse_server_event(f) for f in received_events("test_openai_ws_test_audio_in_server_vad_turn.yaml")]
    assert next(e for e in whisper if isinstance(e, wire.TranscriptCompleted)).usage == wire.TranscriptionUsage(seconds=3.0)


def test_an_odd_usage_block_counts_as_zero_and_keeps_the_response():
    call = {"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{}", "id": "item_1"}
    for usage in (None, "lots", {"input_tokens": "12", "input_token_details": [], "output_tokens": -3}):
        done = wire.parse_server_event({"type": "response.done", "response": {"status": "completed", "output": [call], "usage": usage}})
        assert done.usage == wire.Usage() and [c.name for c in done.function_calls] == ["get_time"]
    # Totals without details: what is not audio is text; cached without details is text.
    done = wire.parse_server_event({"type": "response.done", "response": {"usage": {
        "input_tokens": 50, "output_tokens": 7, "input_token_details": {"audio_tokens": 20, "cached_tokens": 30}}}})
    assert done.usage == wire.Usage(input_text_tokens=30, input_audio_tokens=20, cached_text_tokens=30, output_text_tokens=7)
    for usage in (None, {"type": "duration", "seconds": "3"}, {"type": "duration", "seconds": float("nan")}):
        heard = wire.parse_server_event(
            {"type": "conversation.item.input_audio_transcription.completed", "item_id": "i", "transcript": "hi", "usage": usage}
        )
        assert heard == wire.TranscriptCompleted("i", "hi") and heard.usage.audio_seconds == 0
