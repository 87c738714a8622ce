"""The assistant end to end: the official SDK client, the simulator, in-memory audio."""

from __future__ import annotations

import asyncio

import pytest

from config.settings import ConversationSettings


from realtime_sim import SimConfig
from speech.local_voice import tone
from tests.support.pipeline_harness import narrated_similarity, running_pipeline


def listener_sent_types(pipeline) -> list[str]:
    return [e["type"] for c in pipeline.listener_connections() for e in c.received]


TOOL_COMMANDS = [
    ("what time is it", "get_time", {}),
    ("list the files", "list_files", {"path": "."}),
    ("read the first two lines of notes.txt", "read_file_head", {"path": "notes.txt", "lines": 2}),
    ("echo hello world", "echo", {"text": "hello world"}),
    ("ask the brain why the sky is blue", "ask_brain", {"query": "why is the sky blue"}),
]


async def test_twenty_command_cycles_each_run_once_narrated_once_then_fresh_listener(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        for cycle in range(20):
            text, tool, args = TOOL_COMMANDS[cycle % len(TOOL_COMMANDS)]
            if tool == "ask_brain":
                sim.script.push_brain_answer("Sunlight scatters off air, and blue scatters most.")
            sim.script.push_tool_call(tool, args)
            before = p.counts()
            sessions_before = len(p.listener_connections())
            p.say(f"Computer, {text}")
            await p.answered(before)
            after = p.counts()
            assert after["tool"] == before["tool"] + 1, f"cycle {cycle}: {tool} ran {after['tool'] - before['tool']} times"
            assert after["narrated"] == before["narrated"] + 1
            assert len(p.listener_connections()) == sessions_before + 1  # a fresh listener session
        narrations = [e.text for e in p.timeline.entries if e.kind == "narrated"]
        # Read once each (the realistic model performs numbers and dates, and paraphrases a little).
        assert all(n.endswith("attempts 1)") and narrated_similarity(n) >= 0.8 for n in narrations), narrations
        assert p.coordinator.parts.narrator.weak_matches == 0
        # Every listener session was configured before audio flowed, and each call ran once.
        calls = [e for c in p.listener_connections() for e in c.received if e["type"] == "conversation.item.create"
                 and e["item"]["type"] == "function_call_output"]
        assert len(calls) == 20 and len({c["item"]["call_id"] for c in calls}) == 20
        assert p.speaker.played  # the narrator's audio reached the speaker


async def test_unaddressed_utterances_cost_nothing(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        for i in range(10):
            p.say(f"this is chatter number {i} about the weather")
        await p.wait(lambda t: t.count("ignored") >= 10)
        sent = listener_sent_types(p)
        assert "response.create" not in sent
        assert p.timeline.count("narrated") == 0 and not p.narrator_connections()

        def items(direction: str, event_type: str) -> set[str]:
            return {e["item_id"] for c in p.listener_connections() for e in getattr(c, direction) if e["type"] == event_type}

        committed = items("sent", "input_audio_buffer.committed")
        assert len(committed) == 10
        # Each was deleted; the server confirms (the last delete may still be on the wire).
        await sim.wait_for(lambda s: items("sent", "conversation.item.deleted") == committed, timeout=5)
        assert items("received", "conversation.item.delete") == committed


async def test_wake_only_then_command_inside_the_window(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, wake_window_s=30.0) as p:
        before = p.counts()
        p.say("Computer.")
        await p.wait(lambda t: t.count("chime") == 1)
        assert p.speaker.played == p.coordinator.parts.chime
        sim.script.push_tool_call("get_time", {})
        p.say("what time is it")
        await p.answered(before)
        assert p.timeline.count("tool") == before["tool"] + 1


async def test_command_after_the_window_is_ignored(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, wake_window_s=0.05) as p:
        p.say("Computer.")
        await p.wait(lambda t: t.count("wake") == 1)
        p.say("what time is it")
        await p.wait(lambda t: t.count("ignored") == 1)
        assert "response.create" not in listener_sent_types(p)


async def test_listener_never_requests_audio(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        before = await p.ask("Computer, what time is it")
        for connection in p.listener_connections():
            for event in connection.received:
                if event["type"] == "session.update":
                    assert event["session"]["output_modalities"] == ["text"]
                if event["type"] == "response.create":
                    assert event["response"].get("output_modalities", ["text"]) == ["text"]
            assert not any(e["type"].startswith("response.output_audio") for e in connection.sent)


async def test_no_upload_while_narrating_and_speech_right_after_is_heard(tmp_path, sim):
    # A paced speaker: the narration takes real time to play, as on a real machine.
    async with running_pipeline(tmp_path, sim, speaker_pace=8.0) as p:
        before = p.counts()
        sim.script.push_tool_call("echo", {"text": "a sentence long enough to take a moment to read aloud"})
        p.say("Computer, echo a sentence long enough to take a moment to read aloud")
        # 100 ms after the narration ends, the user starts speaking again.
        await p.wait(lambda t: t.count("narrated") > before["narrated"])
        await asyncio.sleep(0.1)
        p.say("Computer, what time is it")
        await p.wait(lambda t: t.count("heard") >= before["heard"] + 2)
        heard = [e.text for e in p.timeline.entries if e.kind == "heard"]
        assert heard[-1] == "Computer, what time is it"
        # It reached the fresh session, not the one closed after the narration.
        last_listener = p.listener_connections()[-1]
        assert any(e["type"] == "conversation.item.input_audio_transcription.completed" for e in last_listener.sent)
        # While the narrator spoke (its first audio frame until the mute was released, after the
        # paced speaker really played everything), nothing reached any listener session.
        narration = p.narrator_connections()[0]
        start = next(t for t, e in zip(narration.sent_at, narration.sent) if e["type"] == "response.output_audio.delta")
        end = next(stop for holder, _, stop in p.coordinator.core.mute.history if holder == "narration")
        assert end - start > 0.1  # the paced speaker took real time to play it
        uploads = [t for c in p.listener_connections() for t, e in zip(c.received_at, c.received)
                   if e["type"] == "input_audio_buffer.append"]
        assert uploads and not [t for t in uploads if start <= t <= end]
        assert p.coordinator.core.uplink.stats.chunks_muted > 0


async def test_a_deviating_read_is_counted_not_read_again(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_tool_call("echo", {"text": "the quick brown fox jumps over the lazy dog"})
        sim.script.push_reading("Sure, I can help you with foxes and dogs today.")
        await p.ask("Computer, echo the quick brown fox jumps over the lazy dog")
        narrated = [e.text for e in p.timeline.entries if e.kind == "narrated"][-1]
        assert narrated.endswith("attempts 1)") and narrated_similarity(narrated) < 0.8
        assert len(p.narrator_connections()) == 1  # the user heard it: never read again from the top
        assert p.coordinator.parts.narrator.weak_matches == 1


async def test_the_listener_is_recycled_at_a_quiet_moment(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, recycle_after_s=0.3) as p:
        await p.wait(lambda t: any("recycling" in e.text for e in t.entries) and t.count("listening") >= 2)
        assert p.listener_connections()[0].close_code == 1000  # closed by us, not expired
        assert p.timeline.count("narrated") == 0


async def test_recycling_waits_for_the_speaker_to_finish(tmp_path, sim):
    long_speech = tone([190.0, 230.0], 4.0) + bytes(2 * 24000 * 400 // 1000)  # 8 s of audio, 2 s at 4x
    async with running_pipeline(tmp_path, sim, recycle_after_s=0.5) as p:
        p.say("a long story about the garden, not addressed to anyone", long_speech)
        await p.wait(lambda t: any("recycling" in e.text for e in t.entries))
        kinds = [e.kind if e.kind != "restarting" else e.text for e in p.timeline.entries]
        recycled_at = next(i for i, k in enumerate(kinds) if "recycling" in k)
        assert "ignored" in kinds[:recycled_at]  # the utterance was heard out first
        assert p.timeline.count("replaying") == 0


@pytest.mark.parametrize("sim", [SimConfig(seed=4, transcription_delay_ms=(1500, 1500))], indirect=True)
async def test_overheard_speech_not_yet_transcribed_never_reaches_the_router(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        before = p.counts()
        p.say("Computer, what time is it")
        p.say("my password is hunter two")  # overheard right after: committed, transcribed later
        await p.answered(before)
        await p.wait(lambda t: t.count("ignored") > before["ignored"])
        listener = next(c for c in p.listener_connections() if any(e["type"] == "response.create" for e in c.received))
        (route_at, route), = [(t, e) for t, e in zip(listener.received_at, listener.received) if e["type"] == "response.create"]
        committed = [(t, e["item_id"]) for t, e in zip(listener.sent_at, listener.sent) if e["type"] == "input_audio_buffer.committed"]
        transcribed = {e["item_id"]: (t, e["transcript"]) for t, e in zip(listener.sent_at, listener.sent)
                       if e["type"] == "conversation.item.input_audio_transcription.completed"}
        overheard = next(item for _, item in committed if transcribed[item][1].startswith("my password"))
        # The overheard utterance was committed before the route went out and transcribed after it...
        assert dict((item, t) for t, item in committed)[overheard] < route_at < transcribed[overheard][0]
        # ...and the routing response read only the approved command, out of band.
        assert route["response"]["conversation"] == "none"
        texts = [part["text"] for item in route["response"]["input"] for part in item["content"]]
        assert texts == ["what time is it"]
        assert p.counts()["tool"] == before["tool"] + 1


async def test_the_next_listener_session_is_ready_before_the_narration_ends(tmp_path, sim):
    """Issue 15: the restart after an answer opens no connection and sends no session.update
    after the narration; the next session was configured while the narrator spoke."""
    async with running_pipeline(tmp_path, sim, speaker_pace=8.0) as p:
        sim.script.push_tool_call("echo", {"text": "a sentence long enough to take a moment to read aloud"})
        await p.ask("Computer, echo a sentence long enough to take a moment to read aloud")
        first, second = p.listener_connections()[:2]
        configured_at = next(t for t, e in zip(second.received_at, second.received) if e["type"] == "session.update")
        narration_end = next(end for holder, _, end in p.coordinator.core.mute.history if holder == "narration")
        assert configured_at < narration_end
        assert len(p.listener_connections()) == 2  # no connection opened beyond the one warmed up


async def test_a_wake_phrase_in_cyrillic_works_end_to_end(tmp_path, sim):
    # It used to stop the assistant at start ("the wake phrase has no words").
    # No follow-up window: the overheard sentence below must be judged by the wake phrase alone.
    async with running_pipeline(tmp_path, sim, wake_phrase="компьютер", conversation=ConversationSettings(follow_up_s=0)) as p:
        sim.script.push_tool_call("echo", {"text": "привет"})
        before = await p.ask("Компьютер, скажи привет")
        assert [e.text for e in p.timeline.entries if e.kind == "command"] == ["скажи привет"]
        assert p.timeline.count("tool") == before["tool"] + 1
        p.say("Я купил новый компьютер")  # the phrase, but not at the start: not addressed
        await p.wait(lambda t: t.count("ignored") == before["ignored"] + 1)
