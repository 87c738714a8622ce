"""The listener's sync core: what it sends and asks for, fed events by hand."""

import pytest

from realtime_api import wire
from decisions.listener_core import (
    CommandHeard,
    Fatal,
    Heard,
    ListenerCore,
    RoutingFailed,
    RunTools,
    Send,
    SpeakText,
)
from realtime_api.sessions import listener_session
from config.settings import Settings
from decisions.wake_gate import WakeGate, Ignore


def make_core(now=0.0):
    clock = {"t": now}
    return ListenerCore(gate=WakeGate("computer", window_s=8.0), clock=lambda: clock["t"]), clock


def sent(actions):
    return [a.event for a in actions if isinstance(a, Send)]


def test_unaddressed_utterance_is_deleted_and_goes_no_further():
    core, _ = make_core()
    core.feed(wire.AudioCommitted("item_1"))
    assert not core.quiet
    actions = core.feed(wire.TranscriptCompleted("item_1", "nice weather today"))
    assert sent(actions) == [{"type": "conversation.item.delete", "item_id": "item_1"}]
    assert Heard("nice weather today", Ignore()) in actions  # the gate's decision, unchanged
    assert not any(isinstance(a, CommandHeard) for a in actions)
    assert core.quiet


def test_addressed_command_is_deleted_then_routed_as_text():
    core, _ = make_core()
    actions = core.feed(wire.TranscriptCompleted("item_1", "Computer, what time is it?"))
    assert sent(actions) == [{"type": "conversation.item.delete", "item_id": "item_1"}]
    assert CommandHeard("what time is it?") in actions
    tools = [{"type": "function", "name": "get_time", "description": "the time", "parameters": {"type": "object"}}]
    (routed,) = sent(core.route("what time is it?", tools))
    # Out of band, with its own input: the router reads the approved command and nothing else.
    assert routed["response"] == {
        "conversation": "none",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what time is it?"}]}],
        "tools": tools,
        "tool_choice": "required",
        "output_modalities": ["text"],
        "metadata": {"handoff_route": "route-1"},  # its response is known by it (a cancelled one's is ignored)
    }
    with pytest.raises(RuntimeError):
        core.route("another")  # one at a time: the coordinator queues


def test_completed_response_with_a_call_runs_tools_once():
    core, _ = make_core()
    core.route("what time is it")
    call = wire.FunctionCall("call_1", "get_time", "{}", "item_9")
    done = wire.ResponseDone("resp_1", "completed", (call,), "", "", None, None)
    assert core.feed(done) == [RunTools("what time is it", (call,), session=0)]
    # A repeated response.done (not ours any more) asks for nothing.
    assert core.feed(done) == []


def test_text_without_a_call_is_narrated_and_failures_are_reported():
    core, _ = make_core()
    core.route("hello")
    text = wire.ResponseDone("resp_1", "completed", (), "Hello there.", "", None, None)
    assert core.feed(text) == [SpeakText("hello", "Hello there.")]
    core.route("hello")
    failed = wire.ResponseDone("resp_2", "failed", (), "", "", None, "server had an error")
    assert core.feed(failed) == [RoutingFailed("hello", "server had an error")]


def test_session_expiry_is_noted():
    core, _ = make_core()
    expired = wire.ServerError("session_expired", "Your session hit the maximum duration", "invalid_request_error", None)
    assert core.feed(expired) == [] and core.expired


def test_replay_starts_at_the_oldest_utterance_not_yet_transcribed():
    core, _ = make_core()
    assert core.replay_from_ms(include_unfinished=True) is None
    core.feed(wire.SpeechStarted("item_a", 1000))
    core.feed(wire.SpeechStopped("item_a", 2500))
    core.feed(wire.AudioCommitted("item_a"))
    core.feed(wire.SpeechStarted("item_b", 4000))  # still being spoken
    # The server's start includes its prefix padding: that is the replay's pre-roll.
    assert core.replay_from_ms(include_unfinished=True) == 1000
    core.feed(wire.TranscriptCompleted("item_a", "computer, start the backup task"))
    # A's audio was heard: only B's is worth sending again, and only if a drop cut it.
    assert core.replay_from_ms(include_unfinished=True) == 4000
    assert core.replay_from_ms(include_unfinished=False) is None


def test_a_replay_skips_a_later_utterance_already_heard():
    core, _ = make_core()
    core.feed(wire.SpeechStarted("item_a", 1000))
    core.feed(wire.SpeechStopped("item_a", 2500))
    core.feed(wire.AudioCommitted("item_a"))
    core.feed(wire.SpeechStarted("item_b", 3000))
    core.feed(wire.SpeechStopped("item_b", 4500))
    core.feed(wire.AudioCommitted("item_b"))
    core.feed(wire.TranscriptCompleted("item_a", "computer, what time is it"))
    core.feed(wire.SpeechStarted("item_c", 5000))
    core.feed(wire.SpeechStopped("item_c", 6500))
    core.feed(wire.AudioCommitted("item_c"))
    core.feed(wire.TranscriptCompleted("item_c", "computer, list the files"))  # C's transcript before B's
    start = core.replay_from_ms(include_unfinished=False)
    # B again, and C too: its transcript waits for B's (judged in the order spoken), so it was
    # never judged here; A, heard before B, is not replayed at all.
    assert start == 3000 and core.heard_after(start) == ()


def test_a_retired_session_hands_the_utterance_in_progress_over_and_waits_for_the_rest():
    core, _ = make_core()
    core.feed(wire.SpeechStarted("item_a", 1000))
    core.feed(wire.SpeechStopped("item_a", 2500))
    core.feed(wire.AudioCommitted("item_a"))
    core.feed(wire.SpeechStarted("item_b", 3000))  # still being spoken at the handover
    replay, command, actions = core.retire(keep_in_progress=True)
    assert replay == 3000 and command is None
    assert actions == [Send({"type": "input_audio_buffer.clear"})]  # B's fragment is never committed here
    assert not core.settled  # A's transcript is still due
    actions = core.feed(wire.TranscriptCompleted("item_a", "and the grass is green"))
    assert [a.transcript for a in actions if isinstance(a, Heard)] == ["and the grass is green"]
    assert core.settled
    # Should B's fragment be transcribed here after all, it is not ours: the next session has it.
    assert not [a for a in core.feed(wire.TranscriptCompleted("item_b", "computer, wh")) if isinstance(a, Heard)]
    # A room's speaker cut off by the mute: the fragment is dropped, not replayed.
    other, _ = make_core()
    other.feed(wire.SpeechStarted("item_c", 500))
    assert other.retire(keep_in_progress=False)[0] is None


def test_an_error_about_our_route_ends_it():
    core, _ = make_core()
    routed = sent(core.route("what time is it"))
    unrelated = wire.ServerError("server_error", "hiccup", "server_error", None)
    assert core.feed(unrelated) == [] and core.in_flight == "what time is it"
    refused = wire.ServerError("invalid_value", "bad", "invalid_request_error", routed[0]["event_id"])
    assert core.feed(refused) == [RoutingFailed("what time is it", "bad")]
    assert core.in_flight is None


def test_fatal_error_stops():
    core, _ = make_core()
    actions = core.feed(wire.ServerError("invalid_api_key", "Incorrect API key", "invalid_request_error", None))
    assert len(actions) == 1 and isinstance(actions[0], Fatal)


def test_transcription_failure_deletes_the_item():
    core, _ = make_core()
    core.feed(wire.AudioCommitted("item_1"))
    assert sent(core.feed(wire.TranscriptFailed("item_1", "nope"))) == [
        {"type": "conversation.item.delete", "item_id": "item_1"}
    ]
    assert core.quiet


def test_listener_session_never_speaks_or_answers_by_itself():
    session = listener_session(Settings(), [{"type": "function", "name": "get_time", "parameters": {}}])
    assert session["output_modalities"] == ["text"]
    vad = session["audio"]["input"]["turn_detection"]
    assert vad["create_response"] is False and vad["interrupt_response"] is False
    assert "idle_timeout_ms" not in vad
    assert session["audio"]["input"]["transcription"]["model"]


def test_an_utterance_is_not_quiet_between_its_end_and_its_commit():
    """The gap between speech_stopped and the commit is no quiet moment (a recycle there
    would cut the utterance off)."""
    core, _ = make_core()
    core.feed(wire.SpeechStarted("item_1", 0))
    core.feed(wire.SpeechStopped("item_1", 900))
    assert not core.quiet
    core.feed(wire.AudioCommitted("item_1"))
    core.feed(wire.TranscriptCompleted("item_1", "nice weather today"))
    assert core.quiet


def test_a_window_is_judged_by_when_the_user_spoke_not_by_a_late_transcript():
    now = [100.0]
    gate = WakeGate("computer", (), window_s=2.0)
    core = ListenerCore(gate=gate, clock=lambda: now[0])
    gate.open_window(101.0)
    core.feed(wire.SpeechStarted("item_1", 0))  # spoken inside the window ...
    core.feed(wire.AudioCommitted("item_1"))
    now[0] = 102.5  # ... transcribed after it lapsed
    actions = core.feed(wire.TranscriptCompleted("item_1", "and what day is it"))
    assert CommandHeard("and what day is it") in actions


def test_a_retired_file_session_hands_over_what_came_after_its_last_utterance():
    core, _ = make_core()
    core.feed(wire.SpeechStarted("item_a", 1000))
    core.feed(wire.SpeechStopped("item_a", 2500))
    core.feed(wire.AudioCommitted("item_a"))
    # A file paused just as the next utterance began: the VAD has not said so yet.
    replay, _, actions = core.retire(keep_in_progress=True)
    assert replay == 2500 and actions == [Send({"type": "input_audio_buffer.clear"})]


# --- routing at the commit (issue 20) -------------------------------------------------------------


def woken_commit(core, item="item_1", speech_ms=1000):
    core.local_wake(0.4)  # the device heard the wake phrase (0.4 s long)
    core.feed(wire.SpeechStarted(item, 1000))
    core.feed(wire.SpeechStopped(item, 1000 + 300 + speech_ms + 500))
    return core.feed(wire.AudioCommitted(item))


def test_an_utterance_woken_on_the_device_is_offered_at_its_commit_and_routed_by_its_audio():
    from decisions.listener_core import CommandCommitted
    core, _ = make_core()
    assert woken_commit(core) == [CommandCommitted("item_1")]
    (route,) = sent(core.route_audio("item_1", []))
    assert route["response"]["input"] == [{"type": "item_reference", "id": "item_1"}]
    assert route["response"]["conversation"] == "none"


def test_the_wake_phrase_alone_is_not_routed_at_its_commit():
    core, _ = make_core()
    assert woken_commit(core, speech_ms=500) == []  # 0.4 s phrase + 0.1 s: no command in it
    core2, _ = make_core()
    assert core2.feed(wire.SpeechStarted("item_1", 1000)) == [] and core2.feed(wire.AudioCommitted("item_1")) == []


def test_a_transcript_not_addressed_cancels_the_route_and_its_response_is_ignored():
    from decisions.listener_core import CommandRejected
    core, _ = make_core()
    woken_commit(core)
    core.route_audio("item_1", [])
    actions = core.feed(wire.TranscriptCompleted("item_1", "commuter traffic was awful"))
    assert CommandRejected("item_1", "commuter traffic was awful") in actions
    assert sent(actions) == []  # the item is still read by the response: deleted once it is done
    cancel = core.feed(wire.ResponseCreated("resp_1", {"handoff_route": "route-1"}))
    assert sent(cancel) == [{"type": "response.cancel", "response_id": "resp_1"}]
    call = wire.FunctionCall("call_1", "set_timer", "{}", "fc_1")
    done = core.feed(wire.ResponseDone("resp_1", "cancelled", (call,), "", "", {"handoff_route": "route-1"}, None))
    assert sent(done) == [{"type": "conversation.item.delete", "item_id": "item_1"}]
    assert not [a for a in done if not isinstance(a, Send)]  # nothing runs
    assert core.in_flight is None


def test_a_confirmed_route_runs_its_calls_once_with_the_words():
    from decisions.listener_core import CommandConfirmed, RunTools
    core, _ = make_core()
    woken_commit(core)
    core.route_audio("item_1", [])
    actions = core.feed(wire.TranscriptCompleted("item_1", "Computer, set a timer"))
    assert CommandConfirmed("item_1", "set a timer") in actions
    assert not [a for a in actions if type(a).__name__ == "CommandHeard"]  # not routed again by its words
    call = wire.FunctionCall("call_1", "set_timer", "{}", "fc_1")
    done = core.feed(wire.ResponseDone("resp_1", "completed", (call,), "", "", {"handoff_route": "route-1"}, None))
    assert RunTools("set a timer", (call,), 0) in done


def test_a_transcript_before_the_route_by_audio_withdraws_it():
    core, _ = make_core()
    woken_commit(core)
    core.feed(wire.TranscriptCompleted("item_1", "Computer, what time is it"))
    assert core.route_audio("item_1", []) is None and core.in_flight is None


def test_transcripts_are_judged_in_the_order_the_utterances_were_spoken():
    """"Computer ... ask the brain why the sky is blue" as two utterances whose transcripts
    complete in the other order: the command is still judged after its wake phrase."""
    core, _ = make_core()
    for item, start in (("item_1", 1000), ("item_2", 3000)):
        core.feed(wire.SpeechStarted(item, start))
        core.feed(wire.SpeechStopped(item, start + 1500))
        core.feed(wire.AudioCommitted(item))
    assert [a for a in core.feed(wire.TranscriptCompleted("item_2", "ask the brain why the sky is blue"))
            if not isinstance(a, Send)] == []  # waits for the utterance said before it
    actions = core.feed(wire.TranscriptCompleted("item_1", "Computer"))
    assert [type(a).__name__ for a in actions if not isinstance(a, Send)] == ["Heard", "Heard", "CommandHeard"]
    assert CommandHeard("ask the brain why the sky is blue") in actions
