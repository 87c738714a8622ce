"""Speech-only upload through the whole pipeline (issue 12): words spoken with espeak-ng reach the
simulator through the on-device VAD and the upload gate; silence never leaves the machine."""

from __future__ import annotations

import base64

import pytest

from config.settings import UploadMode
from speech.local_voice import synthesize
from tests.support.audio_helpers import rms, strip_silence
from tests.support.pipeline_harness import running_pipeline

SILENCE_1S = bytes(2 * 24000)


def appends(p) -> int:
    return sum(1 for c in p.listener_connections() for e in c.received if e["type"] == "input_audio_buffer.append")


def uploaded_ms(p) -> int:
    """Audio the listener sessions were appended (a frame may carry several chunks)."""
    return sum(len(base64.b64decode(e["audio"])) for c in p.listener_connections() for e in c.received
               if e["type"] == "input_audio_buffer.append") * 1000 // 48000


def speech_segments(p) -> list[tuple[int, int]]:
    """(start, end) ms of every utterance the simulator's VAD heard, over all listener sessions."""
    segments = []
    for connection in p.listener_connections():
        starts = [e["audio_start_ms"] for e in connection.sent_of("input_audio_buffer.speech_started")]
        ends = [e["audio_end_ms"] for e in connection.sent_of("input_audio_buffer.speech_stopped")]
        segments += list(zip(starts, ends))
    return segments


@pytest.fixture
async def command_speech():
    return await synthesize("computer, what time is it")


async def test_silence_never_leaves_the_machine_and_a_command_after_it_is_routed(tmp_path, sim, command_speech):
    # Ten minutes of a quiet room, read at 150 times real speed, then a command.
    async with running_pipeline(tmp_path, sim, upload_mode=UploadMode.SPEECH_ONLY, mic_pace=150.0) as p:
        p.microphone.feed(SILENCE_1S * 600)
        await p.microphone.emitted()
        assert appends(p) == 0  # not one append for ten minutes of silence
        assert p.coordinator.parts.mic_filter.chunks_held >= 600 * 50
        sim.script.push_tool_call("get_time", {})
        before = p.counts()
        p.say("Computer, what time is it", command_speech)
        await p.wait(lambda t: t.count("tool") > before["tool"] and t.count("narrated") > before["narrated"])
        sent_ms = uploaded_ms(p)
        assert 0 < sent_ms < 2 * 1000 * len(command_speech) // 48000 + 2500  # the command, its pre-roll and hangover
        # The pre-roll went up first: what was sent starts before the speech does, so the first
        # syllable of "computer" is in it.
        first = next(e["audio"] for c in p.listener_connections() for e in c.received if e["type"] == "input_audio_buffer.append")
        assert rms(base64.b64decode(first)) < 50 < rms(command_speech)


async def test_a_pause_inside_a_command_does_not_split_it(tmp_path, sim, command_speech):
    head, tail = strip_silence(await synthesize("computer, what time")), strip_silence(await synthesize("is it"))
    pause = bytes(2 * 24000 * 350 // 1000)  # shorter than the server's 500 ms of turn-ending silence
    async with running_pipeline(tmp_path, sim, upload_mode=UploadMode.SPEECH_ONLY, vad_silence_ms=500) as p:
        sim.script.push_tool_call("get_time", {})
        p.say("Computer, what time is it", SILENCE_1S + head + pause + tail + SILENCE_1S)
        await p.wait(lambda t: t.count("tool") >= 1)
        assert len(speech_segments(p)) == 1  # one utterance: the gate's hangover bridged the pause
        assert p.counts()["heard"] == 1


async def test_the_daily_budget_stops_uploads_and_is_announced_once(tmp_path, sim):
    from config.settings import CostSettings
    from decisions.coordinator import BUDGET_REACHED_MESSAGE

    async with running_pipeline(tmp_path, sim, cost=CostSettings(daily_budget_usd=0.000001)) as p:
        sim.script.push_tool_call("get_time", {})
        await p.ask("Computer, what time is it")  # its routing response's tokens spend the budget
        await p.wait(lambda t: BUDGET_REACHED_MESSAGE in [e.text for e in t.entries if e.kind == "narrating"])
        await p.wait(lambda t: t.count("narrated") >= 2 and t.count("listening") >= 2)
        assert p.coordinator.core.uploads_paused
        sent_before = appends(p)
        p.say("Computer, what time is it")
        p.say("Computer, what time is it")
        await p.microphone.emitted()
        assert appends(p) == sent_before and p.coordinator.core.uplink.empty  # nothing more leaves the machine
        narrated = [e.text for e in p.timeline.entries if e.kind == "narrating"]
        assert narrated.count(BUDGET_REACHED_MESSAGE) == 1
        assert p.coordinator.core.cost.summary().today.spent_usd > 0


async def test_an_ignored_utterance_is_reported_to_the_upload_filter(tmp_path, sim):
    """The transcript gate's verdict reaches the microphone's filter, which closes a command window
    that a false on-device wake opened (tests/decisions/test_upload_gate.py checks the closing)."""
    async with running_pipeline(tmp_path, sim) as p:
        mic_filter = p.coordinator.parts.mic_filter
        rejected = []
        mic_filter.rejected = lambda: rejected.append(p.timeline.count("ignored"))
        p.say("this is chatter about the weather")
        p.say("and more chatter about the garden")
        await p.wait(lambda t: t.count("ignored") >= 2)
        await p.wait(lambda t: len(rejected) >= 2, 5)
        assert rejected == [1, 2]  # once per ignored utterance, after it was judged
