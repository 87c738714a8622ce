"""Talking to it like a person (issue 14), through the whole pipeline: a follow-up without the
wake phrase right after an answer, and hearing it work while a slow tool runs."""

from __future__ import annotations

import asyncio

from config.settings import ConversationSettings, FollowUp
from decisions.coordinator import STILL_WORKING_MESSAGE
from speech.local_voice import working_earcon
from tests.support.pipeline_harness import narrated_scripts, running_pipeline



async def test_a_follow_up_without_the_wake_phrase_is_routed_inside_the_window_and_ignored_after(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, conversation=ConversationSettings(follow_up_s=1.5, follow_up=FollowUp.ALWAYS)) as p:
        sim.script.push_tool_call("get_time", {})
        before = await p.ask("Computer, what time is it")
        await p.wait(lambda t: t.count("follow-up") == 1 and t.count("listening") >= 2)
        sim.script.push_tool_call("echo", {"text": "Sunday"})
        p.say("and what day is it")  # no wake phrase, inside the window
        await p.wait(lambda t: t.count("tool") >= 2 and t.count("narrated") >= 2)
        assert [e.text for e in p.timeline.entries if e.kind == "command"][-1] == "and what day is it"
        # The follow-up's answer opened a new window; once it has lapsed (the lapse of time is
        # the behaviour under test, so this waits for the clock), the same words are overheard.
        await p.wait(lambda t: t.count("follow-up") == 2 and t.count("listening") >= 3)
        gate, clock = p.coordinator.core.gate, p.coordinator._clock
        await asyncio.sleep(max(0.0, (gate.window_until or clock()) - clock()) + 0.05)
        assert not gate.window_open_at(clock())
        p.say("and what day is it")
        await p.wait(lambda t: t.count("ignored") >= 1)
        assert p.counts()["command"] == 2


async def test_a_slow_tool_plays_the_working_sound(tmp_path, sim):
    # Compressed: the sound after 0.1 s, the spoken line only after 5 s; the tool takes 0.4 s.
    conversation = ConversationSettings(working_sound_after_s=0.1, still_working_after_s=5.0)
    async with running_pipeline(tmp_path, sim, conversation=conversation) as p:
        sim.script.push_tool_call("ask_brain", {"query": "why is the sky blue"})
        sim.script.push_brain_delay(0.4, "Because of Rayleigh scattering.")
        await p.ask("Computer, ask the brain why the sky is blue")
        assert p.timeline.count("working") == 1
        assert working_earcon() in p.speaker.played  # the sound really reached the speaker
        assert STILL_WORKING_MESSAGE not in narrated_scripts(p)


async def test_a_very_slow_tool_also_says_it_is_still_working_once(tmp_path, sim):
    # The brain answers after 0.2 s: well past the 0.1 s for "still working", well inside the
    # harness's 0.5 s brain timeout (a busy machine must not turn it into a retry).
    conversation = ConversationSettings(working_sound_after_s=0.03, still_working_after_s=0.1)
    async with running_pipeline(tmp_path, sim, conversation=conversation) as p:
        sim.script.push_tool_call("ask_brain", {"query": "why is the sea blue"})
        sim.script.push_brain_delay(0.2, "It reflects the sky, mostly.")
        await p.ask("Computer, ask the brain why the sea is blue")
        assert narrated_scripts(p).count(STILL_WORKING_MESSAGE) == 1
        assert narrated_scripts(p)[-1] == "It reflects the sky, mostly."
