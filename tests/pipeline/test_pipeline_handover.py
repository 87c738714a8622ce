"""The listener handover after an answer: the microphone goes to the next session at once, an
utterance in progress goes there whole, and the old session stays open until what it heard is
transcribed (a transcript completes after its commit: closing at once would lose it)."""

from __future__ import annotations

import asyncio

import pytest

from audio_io import PushMicrophone
from config.settings import ConversationSettings
from realtime_sim import SimConfig
from speech.local_voice import tone
from tests.support.pipeline_harness import MIC_PACE, UTTERANCE, running_pipeline


def speech_segments(connection) -> list[tuple[int, int]]:
    """(start, end) ms of each utterance the simulator's VAD found in a session."""
    starts = [e["audio_start_ms"] for e in connection.sent_of("input_audio_buffer.speech_started")]
    ends = [e["audio_end_ms"] for e in connection.sent_of("input_audio_buffer.speech_stopped")]
    return list(zip(starts, ends))


# Every transcript completes 2.5 s after its commit, as a slow real transcriber's may.
@pytest.mark.parametrize("sim", [SimConfig(use_espeak=False, seed=2, transcription_delay_ms=(2500, 2500))], indirect=True)
async def test_a_transcript_due_at_the_handover_is_still_heard_and_nothing_is_replayed(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, retire_wait_s=10.0) as p:
        before = p.counts()
        sim.script.push_tool_call("echo", {"text": "Done."})  # a short answer: said before the next transcript comes
        p.say("Computer, echo done")
        await sim.wait_for(lambda s: s.connections[0].sent_of("input_audio_buffer.committed"), 10)
        # Committed half a second later, so its transcript is due after the answer was said and the
        # listener handed over (0.75 s after the command's, every transcript taking 2.5 s).
        p.say("and the grass is green", bytes(2 * 24000 * 2) + UTTERANCE)
        await p.answered(before)
        assert p.timeline.count("ignored") == before["ignored"]  # not yet: still due in the old session
        await p.wait(lambda t: t.count("ignored") > before["ignored"], 8)
        first, second = p.listener_connections()[:2]
        assert len(first.sent_of("conversation.item.input_audio_transcription.completed")) == 2  # both, in the old session
        assert p.timeline.count("replaying") == 0  # nothing sent twice
        assert [e.text for e in p.timeline.entries if e.kind == "heard"] == ["Computer, echo done"]
        assert p.counts()["command"] == before["command"] + 1 and p.counts()["tool"] == before["tool"] + 1
        assert not second.sent_of("input_audio_buffer.committed")  # the new session heard nothing of it
        await sim.wait_for(lambda s: not first.is_open, 5)  # closed once it had transcribed all it heard
        assert p.coordinator.listener.retiring == 0


class FileLikeMicrophone(PushMicrophone):
    """A recording, not a room: the coordinator stops reading it while the narrator speaks, so an
    utterance read halfway then goes on after the answer."""

    live = False


@pytest.mark.parametrize("sim", [SimConfig(use_espeak=False, seed=3, realistic=False)], indirect=True)
async def test_an_utterance_straddling_the_handover_arrives_whole_in_one_session(tmp_path, sim):
    microphone = FileLikeMicrophone(chunk_ms=20, pace=MIC_PACE)
    # No follow-up window: the utterance was begun before the answer; it is no follow-up.
    async with running_pipeline(tmp_path, sim, microphone=microphone, conversation=ConversationSettings(follow_up_s=0)) as p:
        before = p.counts()
        heard_begin = asyncio.Event()  # the answer waits until the first session heard the next utterance begin
        sim.script.push_brain_delay(30.0, "Because of scattering.", until=heard_begin)
        sim.script.push_tool_call("ask_brain", {"query": "why"})
        p.say("Computer, ask the brain why")
        await p.wait(lambda t: t.count("command") > before["command"])
        # 8 s of speech (2 s of loop time): the answer starts while it is being read.
        long = tone([180.0, 220.0, 200.0, 240.0], 2.0) + bytes(2 * 24000 * 500 // 1000)
        sim.script.push_transcript("and the grass is green and the sea is wide")
        p.microphone.feed(long)
        first = p.listener_connections()[0]
        await sim.wait_for(lambda s: len(first.sent_of("input_audio_buffer.speech_started")) == 2, 30)
        heard_begin.set()
        await p.wait(lambda t: t.count("ignored") > before["ignored"])
        first, second = p.listener_connections()[:2]
        assert len(first.sent_of("input_audio_buffer.speech_started")) == 2  # the first session heard it start...
        assert len(first.sent_of("input_audio_buffer.committed")) == 1  # ...but committed only the command
        whole = speech_segments(second)
        assert len(whole) == 1 and whole[0][1] - whole[0][0] >= 7900, whole  # the whole of it, in one session
        assert p.timeline.count("replaying") == 1
        assert p.counts()["command"] == before["command"] + 1
