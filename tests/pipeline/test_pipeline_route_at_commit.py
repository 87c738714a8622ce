"""Answer at the floor (issue 20), through the whole pipeline: an utterance the device heard the
wake phrase in is routed at its commit, by its audio; a read-only tool runs and is narrated
before the (late) transcript; a tool that acts waits for the transcript; a false local wake whose
transcript is not addressed runs nothing; nothing is done twice."""

from __future__ import annotations

import pytest

from decisions.coordinator import ROUTED_BY_AUDIO
from realtime_sim import SimConfig
from service.history import HistoryTracker
from tests.support.pipeline_harness import narrated_scripts, running_pipeline
from tests.support.scripted_wake import ScriptedWake, scripted_wake_filter

LATE = SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=1, transcription_delay_ms=(800, 800))
AT_COMMIT = SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=1, realistic=False)


def kinds(p) -> list[str]:
    return [str(e.kind) for e in p.timeline.entries]


def routes(p) -> list[dict]:
    return [e["response"] for c in p.listener_connections() for e in c.received if e["type"] == "response.create"]


@pytest.mark.parametrize("sim", [LATE], indirect=True)
async def test_a_read_only_command_is_narrated_before_its_late_transcript(tmp_path, sim):
    wake = ScriptedWake()
    async with running_pipeline(tmp_path, sim, mic_filter=scripted_wake_filter(wake)) as p:
        history: list = []
        p.timeline.on_add.append(HistoryTracker(history.append, keep_overheard=False).observe)
        sim.script.push_tool_call("get_time", {})
        wake.wake_next()
        p.say("Computer, what time is it")
        await p.wait(lambda t: t.count("narrated") >= 1 and t.count("confirmed") >= 1 and t.count("said") >= 1)
        # History keeps it whole once its words came: what was asked, and what was said.
        assert [(h.heard, h.said[:5]) for h in history] == [("what time is it", "It's ")]
        order = kinds(p)
        assert order.index("narrating") < order.index("confirmed")  # answered before its words came
        (route,) = routes(p)
        assert route["input"][0]["type"] == "item_reference"  # by its audio, out of band
        assert route["conversation"] == "none"
        commands = [e.text for e in p.timeline.entries if e.kind == "command"]
        assert commands == [ROUTED_BY_AUDIO]  # routed once: its transcript did not route it again
        assert [e.text for e in p.timeline.entries if e.kind == "confirmed"] == ["what time is it"]
        assert p.timeline.count("tool") == 1


@pytest.mark.parametrize("sim", [LATE], indirect=True)
async def test_a_command_that_acts_waits_for_its_transcript(tmp_path, sim):
    wake = ScriptedWake()
    async with running_pipeline(tmp_path, sim, mic_filter=scripted_wake_filter(wake)) as p:
        sim.script.push_tool_call("set_timer", {"duration": "PT10M"})
        wake.wake_next()
        p.say("Computer, set a timer for ten minutes")
        await p.wait(lambda t: t.count("narrated") >= 1)
        order = kinds(p)
        assert order.index("confirmed") < order.index("tool")  # its verdict first, then it acted
        assert p.timeline.count("tool") == 1 and len(routes(p)) == 1
        assert len(p.coordinator.parts.tools.names()) > 0


@pytest.mark.parametrize("sim", [LATE, AT_COMMIT], indirect=True)
async def test_a_false_local_wake_whose_transcript_is_not_addressed_runs_nothing(tmp_path, sim):
    wake = ScriptedWake()
    async with running_pipeline(tmp_path, sim, mic_filter=scripted_wake_filter(wake)) as p:
        # A late transcript cancels the route sent at the commit; one at the commit beats the
        # route (which is then not sent at all).
        late = sim.config.transcription_delay_ms[0] > 0 and sim.config.realistic
        if late:
            sim.script.push_tool_call("set_timer", {"duration": "PT10M"})  # what the model made of "commuter ..."
        wake.wake_next()
        p.say("commuter traffic was awful today")
        await p.wait(lambda t: t.count("ignored") >= 1 and (t.count("withdrawn") >= 1 or not late))
        assert len(routes(p)) == 1 if late else len(routes(p)) <= 1
        sim.script.push_tool_call("get_time", {})
        wake.wake_next()
        p.say("Computer, what time is it")  # the next command is routed and answered as usual
        await p.wait(lambda t: t.count("narrated") >= 1)
        assert p.timeline.count("tool") == 1 and len(routes(p)) <= 2
        assert [e.text.split("(")[0] for e in p.timeline.entries if e.kind == "tool"] == ["get_time"]  # the timer never ran
        assert len(narrated_scripts(p)) == 1


@pytest.mark.parametrize("sim", [AT_COMMIT], indirect=True)
async def test_a_transcript_at_the_commit_still_routes_once(tmp_path, sim):
    """The transcript may beat the route by audio: whichever comes first, one route, one call."""
    wake = ScriptedWake()
    async with running_pipeline(tmp_path, sim, mic_filter=scripted_wake_filter(wake)) as p:
        for n in range(3):
            sim.script.push_tool_call("get_time", {})
            wake.wake_next()
            before = p.counts()
            p.say("Computer, what time is it")
            await p.answered(before)
        assert p.timeline.count("tool") == 3 and len(routes(p)) == 3
        assert p.timeline.count("narrated") == 3


@pytest.mark.parametrize("sim", [LATE], indirect=True)
async def test_with_the_devices_end_of_turn_the_command_goes_inline_before_the_server_ends_the_turn(tmp_path, sim):
    wake = ScriptedWake()
    async with running_pipeline(tmp_path, sim, mic_filter=scripted_wake_filter(wake, turn_end_s=0.1),
                                vad_silence_ms=300) as p:
        sim.script.push_tool_call("get_time", {})
        wake.wake_next()
        p.say("Computer, what time is it")
        await p.wait(lambda t: t.count("narrated") >= 1 and t.count("confirmed") >= 1)
        (route,) = routes(p)
        (part,) = route["input"][0]["content"]
        assert part["type"] == "input_audio" and len(part["audio"]) > 1000  # the command's audio, inline
        order = kinds(p)
        assert order.index("narrating") < order.index("confirmed")
        assert p.timeline.count("tool") == 1 and p.timeline.count("command") == 1  # its commit did not route it again
