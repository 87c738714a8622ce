"""Unit tests of the synchronous parts: the session core, VAD, router, script and faults."""

from __future__ import annotations

import base64
import json
import random
import re
from typing import Any

import pytest

from realtime_sim import Fault, SimConfig, SimScript
from realtime_sim.ids import IdFactory
from realtime_sim.router import route
from realtime_sim.outputs import Close, Drop, Send, SendRaw, Stall, Synthesize, Transcribe
from realtime_sim.session_core import HEAR_INLINE_AFTER_S, SessionCore
from speech.synth import silence, synthetic_speech
from realtime_sim.validation import ClientEventValidator
from realtime_sim.vad import EnergyVad, SpeechStarted, SpeechStopped, VadSettings
from tests.support.sim import SPOKEN_TURN_ORDER, check_server_event, spoken_turn_head, tool, user_text

VALIDATOR = ClientEventValidator()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_core(script: SimScript | None = None, clock: FakeClock | None = None, **config: Any) -> SessionCore:
    return SessionCore(
        config=SimConfig(**{"audio_frame_delay_s": 0, "session_length_s": 60.0, "realistic": False, **config}),
        script=script or SimScript(),
        validator=VALIDATOR,
        ids=IdFactory(random.Random(3)),
        clock=clock or FakeClock(),
        wall_clock=lambda: 1_700_000_000.0,
    )


def sent(outputs: list[Any]) -> list[dict[str, Any]]:
    events = [o.event for o in outputs if isinstance(o, Send)]
    for event in events:
        check_server_event(event)
    return events


def types(outputs: list[Any]) -> list[str]:
    return [e["type"] for e in sent(outputs)]


def feed(core: SessionCore, event: dict[str, Any]) -> list[Any]:
    return core.handle_client_text(json.dumps(event))


def append(core: SessionCore, pcm: bytes, chunk_ms: int = 100) -> list[Any]:
    outputs: list[Any] = []
    step = chunk_ms * 48
    for offset in range(0, len(pcm), step):
        chunk = base64.b64encode(pcm[offset : offset + step]).decode()
        outputs += feed(core, {"type": "input_audio_buffer.append", "audio": chunk})
    return outputs


def drive(core: SessionCore, outputs: list[Any]) -> list[Any]:
    """Serve speech requests (synthetic voice) and pump until the core is idle, like the shell."""
    done = list(outputs)
    pending = [o for o in outputs if isinstance(o, Synthesize)]
    while pending or core.has_runnable_work:
        if pending:
            request = pending.pop(0)
            more = core.speech_ready(request.response_id, synthetic_speech(request.text))
        else:
            more = core.pump().outputs
        done += more
        pending += [o for o in more if isinstance(o, Synthesize)]
    return done


# -- session ----------------------------------------------------------------------------------


def test_session_created_comes_first_and_expires_when_configured() -> None:
    outputs = make_core().start()
    assert types(outputs) == ["session.created"]
    session = sent(outputs)[0]["session"]
    assert session["expires_at"] == 1_700_000_000 + 60
    assert session["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 200


def test_session_update_reports_the_full_effective_config_with_defaults_filled() -> None:
    core = make_core()
    core.start()
    update = {
        "type": "realtime",
        "output_modalities": ["text"],
        "audio": {"input": {"turn_detection": {"type": "server_vad", "create_response": False}, "transcription": {"model": "whisper-1"}}},
        "tools": [tool("get_time")],
    }
    (event,) = sent(feed(core, {"type": "session.update", "session": update}))
    session = event["session"]
    assert event["type"] == "session.updated"
    assert session["output_modalities"] == ["text"]
    assert session["audio"]["input"]["turn_detection"] == {
        "type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 200,
        "idle_timeout_ms": None, "create_response": False, "interrupt_response": True,
    }  # fmt: skip
    assert session["audio"]["input"]["transcription"] == {"model": "whisper-1", "language": None, "prompt": None}
    assert session["audio"]["output"]["voice"] == "alloy"  # untouched fields keep their value
    assert session["tools"][0]["name"] == "get_time"
    assert core.role == "listener"


def test_role_is_unknown_until_configured_then_follows_output_modalities() -> None:
    core = make_core()
    core.start()
    assert core.role == "unknown"
    feed(core, {"type": "session.update", "session": {"type": "realtime", "instructions": "read aloud"}})
    assert core.role == "narrator"


# -- conversation -----------------------------------------------------------------------------


def test_items_insert_after_previous_item_id_and_unknown_ids_are_errors() -> None:
    core = make_core()
    core.start()
    first = sent(feed(core, {"type": "conversation.item.create", "item": {**user_text("one"), "id": "item_one"}}))
    assert [e["previous_item_id"] for e in first] == [None, None]
    at_root = sent(feed(core, {"type": "conversation.item.create", "previous_item_id": "root", "item": user_text("zero")}))
    assert at_root[0]["previous_item_id"] is None
    after = sent(feed(core, {"type": "conversation.item.create", "previous_item_id": "item_one", "item": user_text("two")}))
    assert after[0]["previous_item_id"] == "item_one"
    (error,) = sent(
        feed(core, {"type": "conversation.item.create", "previous_item_id": "item_nope", "item": user_text("x"), "event_id": "e1"})
    )
    assert error["error"]["code"] == "item_create_invalid_previous_item_id"
    assert error["error"]["event_id"] == "e1"


def test_item_edits_sent_during_a_response_apply_after_it() -> None:
    core = make_core()
    core.start()
    feed(core, {"type": "conversation.item.create", "item": {**user_text("read this"), "id": "item_u"}})
    started = feed(core, {"type": "response.create"})  # audio session: waits for speech
    assert any(isinstance(o, Synthesize) for o in started)
    assert types(feed(core, {"type": "conversation.item.delete", "item_id": "item_u"})) == []
    finished = types(drive(core, started))
    assert finished.index("conversation.item.deleted") > finished.index("response.done")


def test_function_call_sequence_matches_the_recorded_order() -> None:
    script = SimScript()
    core = make_core(script)
    core.start()
    feed(core, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"], "tools": [tool("get_time")]}})
    feed(core, {"type": "conversation.item.create", "item": user_text("computer, what time is it")})
    outputs = feed(core, {"type": "response.create"})
    assert types(outputs) == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "conversation.item.done",
        "response.output_item.done",
        "response.done",
        "rate_limits.updated",
    ]
    done = sent(outputs)[4]
    assert (done["name"], done["arguments"]) == ("get_time", "{}")


def test_a_second_response_while_one_is_active_is_refused_with_the_clients_event_id() -> None:
    core = make_core()
    core.start()
    feed(core, {"type": "conversation.item.create", "item": user_text("a long script to read")})
    first = feed(core, {"type": "response.create"})  # active until its speech is ready
    (error,) = sent(feed(core, {"type": "response.create", "event_id": "evt_second"}))
    assert error["error"]["code"] == "conversation_already_has_active_response"
    assert error["error"]["event_id"] == "evt_second"
    # Out-of-band responses are not serialised with the conversation's.
    out_of_band = feed(core, {"type": "response.create", "response": {"conversation": "none"}})
    assert types(out_of_band)[0] == "response.created"
    finished = sent(drive(core, first + out_of_band))
    assert [e["type"] for e in finished].count("response.done") == 2
    assert "conversation_already_has_active_response" not in json.dumps(finished)


def test_cancel_ends_the_response_with_an_incomplete_item() -> None:
    core = make_core()
    core.start()
    feed(core, {"type": "conversation.item.create", "item": user_text("a fairly long sentence to speak aloud")})
    started = feed(core, {"type": "response.create"})
    request = next(o for o in started if isinstance(o, Synthesize))
    core.speech_ready(request.response_id, synthetic_speech(request.text))  # first audio frame out, then a pause
    events = sent(feed(core, {"type": "response.cancel"}))
    assert [e["type"] for e in events][-4:] == ["conversation.item.done", "response.output_item.done", "response.done", "rate_limits.updated"]
    done = events[-2]["response"]
    assert (done["status"], done["status_details"]["reason"]) == ("cancelled", "client_cancelled")
    assert done["output"][0]["status"] == "incomplete"
    (error,) = sent(feed(core, {"type": "response.cancel", "event_id": "again"}))
    assert error["error"]["code"] == "response_cancel_not_active"


# -- input audio ------------------------------------------------------------------------------


def speech_turn() -> bytes:
    return silence(1000) + synthetic_speech("computer, what time is it") + silence(1000)


def test_vad_events_are_timed_in_audio_and_do_not_depend_on_chunking() -> None:
    pcm = speech_turn()
    results = []
    for chunk_ms in (10, 37, 250, len(pcm) // 48):
        vad = EnergyVad(VadSettings(silence_duration_ms=500))
        step = chunk_ms * 48
        results.append([event for offset in range(0, len(pcm), step) for event in vad.feed(pcm[offset : offset + step])])
    assert all(r == results[0] for r in results)
    started, stopped = results[0]
    assert isinstance(started, SpeechStarted) and isinstance(stopped, SpeechStopped)
    assert started.audio_start_ms == 1000 - 300  # onset minus prefix padding
    assert stopped.audio_end_ms - started.audio_start_ms > 1500


def test_vad_honours_threshold_and_silence_duration() -> None:
    pcm = speech_turn()
    assert EnergyVad(VadSettings(threshold=1.0)).feed(pcm) == []  # nothing reaches 0 dBFS
    short = EnergyVad(VadSettings(silence_duration_ms=100)).feed(pcm)
    long = EnergyVad(VadSettings(silence_duration_ms=900)).feed(pcm)
    assert len(short) > len(long) == 2  # short pauses between words split the utterance


def test_spoken_turn_with_transcription_follows_the_recorded_order() -> None:
    script = SimScript()
    script.push_transcript("computer, what time is it")
    core = make_core(script)
    core.start()
    feed(
        core,
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "output_modalities": ["text"],
                "audio": {"input": {"transcription": {"model": "gpt-4o-mini-transcribe"}, "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}},
            },
        },
    )
    got = types(append(core, speech_turn()))
    assert spoken_turn_head(got) == list(SPOKEN_TURN_ORDER)
    assert got.index("conversation.item.input_audio_transcription.delta") > got.index("conversation.item.done")


@pytest.mark.parametrize("committed_first", [True, False])
def test_audio_sent_inline_is_heard_as_its_own_words_whether_or_not_the_server_committed_it(committed_first: bool) -> None:
    # A client that ends the turn itself routes with the command's audio inline; the server's
    # VAD may have committed that speech already (taking its words), or not yet.
    script = SimScript()
    script.push_transcript("computer, what time is it")
    script.push_transcript("computer, echo the next command")  # not said yet: must not be heard now
    core = make_core(script)
    core.start()
    feed(core, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"], "audio": {
        "input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}})
    command = synthetic_speech("computer, what time is it")
    got = types(append(core, silence(1000) + command + silence(1000 if committed_first else 200)))
    assert ("input_audio_buffer.committed" in got) is committed_first
    route = {"type": "response.create", "response": {
        "conversation": "none", "tool_choice": "required", "output_modalities": ["text"],
        "tools": [tool("get_time"), tool("echo", text="string")],
        "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_audio", "audio": base64.b64encode(silence(300) + command + silence(200)).decode()}]}]}}
    done = [e for e in sent(drive(core, feed(core, route))) if e["type"] == "response.done"]
    assert [item["name"] for item in done[0]["response"]["output"]] == ["get_time"]


def test_audio_sent_inline_after_new_speech_began_is_still_heard_as_the_committed_words() -> None:
    # Issue 28, item 1: the server committed the command, then new speech began (a cough, the
    # next words) before the route with the command's audio inline arrived. The route is that
    # command, as its transcript says, not the new segment's (nor "mm-hm").
    script = SimScript()
    script.push_transcript("computer, what time is it")
    script.push_transcript("computer, echo the next command")
    core = make_core(script)
    core.start()
    feed(core, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"], "audio": {
        "input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}})
    command = synthetic_speech("computer, what time is it")
    got = types(append(core, silence(1000) + command + silence(700) + synthetic_speech("cough")[:9600]))
    assert "input_audio_buffer.committed" in got and got.count("input_audio_buffer.speech_started") == 2
    route = {"type": "response.create", "response": {
        "conversation": "none", "tool_choice": "required", "output_modalities": ["text"],
        "tools": [tool("get_time"), tool("echo", text="string")],
        "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_audio", "audio": base64.b64encode(silence(300) + command + silence(200)).decode()}]}]}}
    done = [e for e in sent(drive(core, feed(core, route))) if e["type"] == "response.done"]
    assert [item["name"] for item in done[0]["response"]["output"]] == ["get_time"]


class LateTranscriber:
    """A transcriber whose words come back only when the test hands them over (as a real one,
    or pocketsphinx on a busy machine, finishes after other events)."""

    needs_audio = False

    def transcribe(self, segment: Any) -> str:
        raise AssertionError("the test hands the words over itself")

    def close(self) -> None:
        pass


def listening_core() -> SessionCore:
    """A text-only session with server VAD whose transcriber names words when the test says."""
    core = SessionCore(config=SimConfig(audio_frame_delay_s=0, session_length_s=60.0, realistic=False), script=SimScript(),
                       validator=VALIDATOR, ids=IdFactory(random.Random(3)), clock=FakeClock(),
                       wall_clock=lambda: 1_700_000_000.0, transcriber=LateTranscriber())  # fmt: skip
    core.start()
    feed(core, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"], "audio": {
        "input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}})
    return core


def test_a_route_by_reference_to_a_segment_not_yet_transcribed_is_answered_by_its_words() -> None:
    # A route by audio at the commit names the committed segment; a model hears that audio at
    # once. This one must wait for the transcriber's words: answered with the fallback words
    # ("mm-hm") it ran a tool nobody asked for, while the transcript then confirmed the command.
    core = listening_core()
    outputs = append(core, silence(1000) + synthetic_speech("computer, what time is it") + silence(1000))
    (item,) = [o.item_id for o in outputs if isinstance(o, Transcribe)]
    route = {"type": "response.create", "response": {
        "conversation": "none", "tool_choice": "required", "output_modalities": ["text"],
        "tools": [tool("get_time"), tool("echo", text="string")], "input": [{"type": "item_reference", "id": item}]}}
    assert "response.done" not in types(drive(core, feed(core, route)))  # its words are not known yet
    done = [e for e in sent(drive(core, core.transcript_ready(item, "computer, what time is it"))) if e["type"] == "response.done"]
    assert [entry["name"] for entry in done[0]["response"]["output"]] == ["get_time"]


def test_a_route_with_audio_inline_whose_speech_is_never_committed_is_heard_by_its_audio() -> None:
    # A provisional route sends the speech so far inline while it is still in the server's buffer;
    # then the client sends nothing (muted for the working sound), so no commit names its words.
    # A model hears inline audio at once; this one waits `HEAR_INLINE_AFTER_S` for the commit,
    # then asks its transcriber for the speech so far (it used to wait until the route timed out).
    core = listening_core()
    clock = core._clock
    assert isinstance(clock, FakeClock)
    command = synthetic_speech("computer, what time is it")
    got = append(core, silence(1000) + command)
    assert "input_audio_buffer.committed" not in types(got) and not any(isinstance(o, Transcribe) for o in got)
    route = {"type": "response.create", "response": {
        "conversation": "none", "tool_choice": "required", "output_modalities": ["text"],
        "tools": [tool("get_time"), tool("echo", text="string")],
        "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_audio", "audio": base64.b64encode(silence(300) + command).decode()}]}]}}
    assert "response.done" not in types(drive(core, feed(core, route)))  # for now it waits for the commit
    deadline = core.next_deadline()
    assert deadline is not None and deadline <= clock.now + HEAR_INLINE_AFTER_S
    clock.now = deadline
    (hearing,) = [o for o in core.tick() if isinstance(o, Transcribe)]
    assert hearing.segment.peek and hearing.segment.end_ms - hearing.segment.start_ms >= 1000  # the speech so far
    outputs = drive(core, core.transcript_ready(hearing.item_id, "computer, what time is it"))
    done = [e for e in sent(outputs) if e["type"] == "response.done"]
    assert [entry["name"] for entry in done[0]["response"]["output"]] == ["get_time"]
    assert "conversation.item.input_audio_transcription.completed" not in types(outputs)  # its commit sends that
    assert not any(isinstance(o, Transcribe) for o in core.tick())  # heard once


def test_commit_needs_100ms_and_clear_empties_the_buffer() -> None:
    core = make_core()
    core.start()
    feed(core, {"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}}})
    append(core, silence(50))
    (error,) = sent(feed(core, {"type": "input_audio_buffer.commit"}))
    assert error["error"]["code"] == "input_audio_buffer_commit_empty"
    append(core, silence(100))
    assert types(feed(core, {"type": "input_audio_buffer.commit"}))[:1] == ["input_audio_buffer.committed"]
    append(core, silence(200))
    assert types(feed(core, {"type": "input_audio_buffer.clear"})) == ["input_audio_buffer.cleared"]
    assert sent(feed(core, {"type": "input_audio_buffer.commit"}))[0]["error"]["code"] == "input_audio_buffer_commit_empty"


# -- faults -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("drop", Drop()), ("close_1011", Close(1011, "simulated server fault")), ("delay", Stall(1.0))],
)
def test_fault_strikes_right_after_the_nth_matching_event(kind: str, expected: Any) -> None:
    script = SimScript()
    core = make_core(script)
    core.start()
    script.push_fault(Fault(kind, after_sent="session.updated", nth=2))
    first = feed(core, {"type": "session.update", "session": {"type": "realtime"}})
    assert expected not in first  # counted from the push: this is the first
    second = feed(core, {"type": "session.update", "session": {"type": "realtime"}})
    assert types(second) == ["session.updated"]
    assert second[-1] == expected
    assert script.pending_faults == ()


def test_fault_waits_for_a_connection_with_the_targeted_role() -> None:
    script = SimScript()
    script.push_fault(Fault("server_error", target="narrator", after_sent="session.updated"))
    listener, narrator = make_core(script), make_core(script)
    listener.start()
    narrator.start()
    listener_out = feed(listener, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}})
    assert types(listener_out) == ["session.updated"]
    narrator_out = feed(narrator, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["audio"]}})
    assert types(narrator_out) == ["session.updated", "error"]
    assert sent(narrator_out)[1]["error"]["type"] == "server_error"


def test_session_expires_at_its_length_and_timed_faults_fire_on_the_clock() -> None:
    clock = FakeClock()
    script = SimScript()
    core = make_core(script, clock, session_length_s=5.0)
    core.start()
    script.push_fault(Fault("unknown_event", after_s=2.0))
    assert core.next_deadline() == clock.now + 2.0
    clock.now += 2.0
    assert [type(o) for o in core.tick()] == [SendRaw]
    assert core.next_deadline() == clock.now + 3.0
    clock.now += 3.0
    outputs = core.tick()
    assert sent(outputs)[0]["error"]["code"] == "session_expired"
    assert outputs[-1] == Close(1001, "session expired")
    assert core.closed and core.handle_client_text('{"type": "input_audio_buffer.clear"}') == []


def test_response_failed_fault_ends_the_active_response_as_failed() -> None:
    script = SimScript()
    core = make_core(script)
    core.start()
    feed(core, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}})
    script.push_fault(Fault("response_failed", target="listener", after_sent="response.created"))
    feed(core, {"type": "conversation.item.create", "item": user_text("hello")})
    events = sent(feed(core, {"type": "response.create"}))
    assert [e["type"] for e in events] == ["response.created", "response.done", "rate_limits.updated"]
    assert events[1]["response"]["status"] == "failed"
    assert events[1]["response"]["status_details"]["error"]["type"] == "server_error"


def test_fault_definitions_reject_impossible_combinations() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault("explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role is only known after"):
        Fault("handshake_401", target="listener")
    with pytest.raises(ValueError, match="not both"):
        Fault("drop", after_sent="response.done", after_s=1.0)
    assert Fault("drop").trigger_event == "session.created"


# -- router -----------------------------------------------------------------------------------

ALL_TOOLS = [tool(n) for n in ("get_time", "ask_brain", "list_files", "read_file_head", "echo", "start_task", "list_tasks", "cancel_task", "get_task_result")]


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ("computer, what time is it?", "get_time", {}),
        ("computer ask the brain why the sky is blue", "ask_brain", {"query": "why the sky is blue"}),
        ("computer, list the files", "list_files", {"path": "."}),
        ("computer, read notes.txt", "read_file_head", {"path": "notes.txt", "lines": 10}),
        ("computer read the first 5 lines of README.md", "read_file_head", {"path": "README.md", "lines": 5}),
        ("computer, repeat after me: hello", "echo", {"text": "after me: hello"}),
        ("computer, start the backup task", "start_task", {"name": "backup"}),
        ("computer, list my tasks", "list_tasks", {}),
        ("computer, cancel the backup task", "cancel_task", {"task": "backup"}),
        ("computer, what is the result of backup", "get_task_result", {"task": "backup"}),
    ],
)
def test_router_picks_the_tool_from_keywords(text: str, name: str, arguments: dict[str, Any]) -> None:
    routed = route(text, ALL_TOOLS, "auto")
    assert routed is not None and (routed.name, routed.arguments) == (name, arguments)


def test_router_only_calls_declared_tools_and_honours_tool_choice() -> None:
    assert route("what time is it", [tool("echo")], "auto") is None
    assert route("what time is it", ALL_TOOLS, "none") is None
    assert route("mm-hm", ALL_TOOLS, "auto") is None
    required = route("computer, tell me a joke", ALL_TOOLS, "required")
    assert required is not None and (required.name, required.arguments) == ("ask_brain", {"query": "tell me a joke"})
    assert route("tell me a joke", [tool("echo")], "required") is None
    for said in ("Hey Jarvis, tell me a joke", "jarvis tell me a joke"):  # the shipped wake phrase, read past too
        asked = route(said, ALL_TOOLS, "required")
        assert asked is not None and asked.arguments == {"query": "tell me a joke"}
    forced = route("what time is it", ALL_TOOLS, {"type": "function", "name": "list_tasks"})
    assert forced is not None and forced.name == "list_tasks"


@pytest.mark.parametrize(
    ("text", "name"),
    [("Hey Jarvis, stop.", "dismiss"), ("computer, never mind", "dismiss"), ("Cancel.", "dismiss"),
     ("okay, stop talking please", "dismiss"), ("hey jarvis, stop the backup task", "ask_brain"),
     ("computer, cancel the backup task", "cancel_task"), ("hey jarvis, stop. What time is it?", "get_time")],
)
def test_the_router_dismisses_only_a_command_that_asks_for_nothing(text: str, name: str) -> None:
    routed = route(text, [*ALL_TOOLS, tool("dismiss")], "required")
    assert routed is not None and routed.name == name


@pytest.mark.parametrize("interrupt", [True, False])
def test_speech_during_an_answer_cancels_it_only_with_interrupt_response(interrupt: bool) -> None:
    core = make_core()
    core.start()
    feed(
        core,
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "audio": {"input": {"turn_detection": {"type": "server_vad", "create_response": False, "interrupt_response": interrupt}}},
            },
        },
    )
    feed(core, {"type": "conversation.item.create", "item": user_text("a long answer that is still playing")})
    started = feed(core, {"type": "response.create"})
    request = next(o for o in started if isinstance(o, Synthesize))
    core.speech_ready(request.response_id, synthetic_speech(request.text))
    events = sent(append(core, silence(200) + synthetic_speech("stop")))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "input_audio_buffer.speech_started"
    if interrupt:
        done = next(e for e in events if e["type"] == "response.done")["response"]
        assert (done["status"], done["status_details"]["reason"]) == ("cancelled", "turn_detected")
    else:
        assert "response.done" not in kinds
        assert "response.done" in types(drive(core, []))


def test_ids_are_shaped_like_the_real_services() -> None:
    script = SimScript()
    core = make_core(script)
    outputs = core.start()
    feed(core, {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"], "tools": [tool("get_time")]}})
    feed(core, {"type": "conversation.item.create", "item": user_text("what time is it")})
    events = sent(outputs + feed(core, {"type": "response.create"}))
    assert all(re.fullmatch(r"event_[A-Za-z0-9]{21}", e["event_id"]) for e in events)
    assert re.fullmatch(r"sess_[A-Za-z0-9]{21}", events[0]["session"]["id"])
    created = next(e for e in events if e["type"] == "response.created")["response"]
    assert re.fullmatch(r"resp_[A-Za-z0-9]{21}", created["id"])
    assert re.fullmatch(r"conv_[A-Za-z0-9]{21}", created["conversation_id"])
    call = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert re.fullmatch(r"item_[A-Za-z0-9]{21}", call["item_id"])
    assert re.fullmatch(r"call_[A-Za-z0-9]{16}", call["call_id"])
