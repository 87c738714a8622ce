"""Recovery paths found by review: each test fails if its fix is taken out."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

import main_agent
from realtime_api import wire
from audio_io import MemorySpeaker, WavFileMicrophone
from assembly.build import assistant
from decisions.coordinator import (
    CANNOT_CONNECT_MESSAGE,
    CONNECTION_LOST_MESSAGE,
    RECONNECTED_MESSAGE,
    ROUTING_FAILED_MESSAGE,
)
from speech.local_voice import tone
from decisions.listener_core import SessionEnd, SessionReady
from decisions.timeline import Timeline
from realtime_sim import Fault, SimConfig
from config.settings import ReconnectSettings, Settings
from tests.support.audio_helpers import write_wav
from tests.support.pipeline_harness import UTTERANCE, fast_settings, narrated_scripts, running_pipeline





async def test_a_slow_tool_is_not_mistaken_for_a_lost_response(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, route_timeout_s=1.0) as p:
        for _ in range(20):
            sim.script.push_brain_delay(5.0)
        sim.script.push_tool_call("ask_brain", {"query": "why is the sky blue"})
        p.say("Computer, ask the brain why the sky is blue")
        await p.wait(lambda t: any("couldn't reach the brain" in s for s in narrated_scripts(p)), 30)
        assert ROUTING_FAILED_MESSAGE not in narrated_scripts(p)


async def test_the_watchdog_apology_is_final(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, route_timeout_s=1.0) as p:
        before = p.counts()
        # The model's response to this route is held back far past the route timeout.
        sim.script.push_fault(Fault("delay", target="listener", after_sent="response.created", delay_s=3.0))
        p.say("Computer, what time is it")
        await p.wait(lambda t: ROUTING_FAILED_MESSAGE in narrated_scripts(p) and t.count("listening") > before["listening"], 20)
        # The old session (and its late response) is gone; nothing is routed again or run.
        await sim.wait_for(lambda s: p.listener_connections()[0].close_code is not None, 5)
        assert p.counts()["command"] == before["command"] + 1
        assert p.counts()["tool"] == before["tool"]


async def test_a_drop_while_a_tool_runs_is_answered_once_and_quietly(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        before = p.counts()
        sim.script.push_brain_delay(0.3, "Because of scattering.")
        sim.script.push_tool_call("ask_brain", {"query": "why"})
        sim.script.push_fault(Fault("drop", target="listener", after_sent="response.done"))
        p.say("Computer, ask the brain why")
        await p.answered(before)
        assert CONNECTION_LOST_MESSAGE not in narrated_scripts(p)
        assert "Because of scattering." in narrated_scripts(p)[-1]
        assert p.counts()["tool"] == before["tool"] + 1  # and the harness checks no output went astray


async def test_a_server_error_while_the_listener_is_set_up_is_retried(tmp_path, sim):
    sim.script.push_fault(Fault("server_error", after_sent="session.created"))  # the first connection
    async with running_pipeline(tmp_path, sim) as p:
        assert p.coordinator.fatal_message is None
        failed = [e.text for e in p.timeline.entries if "connection attempt 1 failed" in e.text]
        assert failed and "server" in failed[0].lower()
        before = await p.ask("Computer, what time is it")
        assert not any("local voice" in e.text for e in p.timeline.entries)


# Transcripts right after the commit: the narration must start while the user is still talking.
@pytest.mark.parametrize("sim", [SimConfig(realistic=False)], indirect=True)
async def test_speech_cut_off_by_a_narration_is_not_replayed_after_it(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        before = p.counts()
        # (0.2 s: well under the harness's brain timeout of 0.5 s, which a busy machine hit at 0.4, and
        # the answer started only after the user had stopped)
        sim.script.push_brain_delay(0.2, "The sky is blue.")
        sim.script.push_tool_call("ask_brain", {"query": "why"})
        p.say("Computer, ask the brain why")
        sim.script.push_transcript("Computer, list the")
        p.microphone.feed(tone([200.0, 240.0], 1.5))  # the user keeps talking; the narration mutes them
        await p.answered(before)
        assert p.timeline.count("replaying") == 0
        assert p.counts()["command"] == before["command"] + 1


async def test_a_flapping_connection_is_talked_about_once(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        for _ in range(8):
            sim.script.push_fault(Fault("close_1011", target="listener", after_s=0.2))  # younger than healthy
        await p.wait(lambda t: RECONNECTED_MESSAGE in narrated_scripts(p), 60)
        said = [s for s in narrated_scripts(p) if s in (CONNECTION_LOST_MESSAGE, CANNOT_CONNECT_MESSAGE, RECONNECTED_MESSAGE)]
        assert said == [CANNOT_CONNECT_MESSAGE, RECONNECTED_MESSAGE]
        assert len(p.listener_connections()) >= 9


async def test_file_audio_is_kept_through_a_drop_and_a_slow_reconnect(tmp_path, sim):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = fast_settings(sim.base_url, workspace.resolve(), tmp_path / "state")
    settings = dataclasses.replace(
        settings, reconnect=ReconnectSettings(initial_s=2.0, max_s=5.0, jitter_s=0.01, healthy_after_s=0.5)
    )
    pcm = bytes(24000) + UTTERANCE + bytes(2 * 24000 * 20)
    mic = WavFileMicrophone(write_wav(tmp_path / "in.wav", pcm), chunk_ms=20, pace=8.0)
    timeline = Timeline()
    sim.script.push_transcript("Computer, what time is it")
    sim.script.push_fault(Fault("drop", target="listener", after_sent="input_audio_buffer.speech_started"))
    async with assistant(settings, mic, MemorySpeaker(), timeline) as coordinator:
        code = await asyncio.wait_for(coordinator.run(), 60)
    assert code == 0
    assert timeline.count("tool") == 1


async def test_file_speech_right_after_a_long_narration_is_kept(tmp_path, sim):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = fast_settings(sim.base_url, workspace.resolve(), tmp_path / "state")
    pcm = bytes(24000) + UTTERANCE + bytes(2 * 24000 * 3 // 2) + UTTERANCE + bytes(2 * 24000 * 12)
    mic = WavFileMicrophone(write_wav(tmp_path / "in.wav", pcm), chunk_ms=20, pace=4.0)
    timeline = Timeline()
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
    sim.script.push_transcript("Computer, echo " + text)
    sim.script.push_tool_call("echo", {"text": text})
    sim.script.push_transcript("Computer, what time is it")
    async with assistant(settings, mic, MemorySpeaker(pace=1.0), timeline) as coordinator:
        run = asyncio.create_task(coordinator.run())
        await sim.wait_for(lambda s: any(c.role == "narrator" for c in s.connections), 20)
        # The listener opened after this narration is slow to come up, as a real handshake can be.
        sim.script.push_fault(Fault("delay", target="any", after_sent="session.created", delay_s=0.6))
        code = await asyncio.wait_for(run, 60)
    assert code == 0
    assert timeline.count("heard") == 2


# --- the listener shell alone, with a link that the server closes at once -----------------------


class ClosingLink:
    closed_by_us = False

    def __init__(self, code: int) -> None:
        self.closed = None
        self._code = code

    async def events(self):
        self.closed = wire.Closed(self._code, "going away")
        yield self.closed

    async def send(self, event) -> bool:
        return False

    async def close(self) -> None:
        pass


class CountingObserver:
    """Records the listener's session news; gives up after the fourth session."""

    def __init__(self) -> None:
        self.ready = 0
        self.ends: list[SessionEnd] = []
        self.gave_up = asyncio.Event()

    def __call__(self, event) -> None:
        if isinstance(event, SessionReady):
            self.ready += 1
            if self.ready >= 4:
                self.gave_up.set()
        elif isinstance(event, SessionEnd):
            self.ends.append(event)


@pytest.mark.parametrize("code", [1000, 1001, 1006, 1011])
async def test_sessions_the_server_ends_young_back_off(monkeypatch, code):
    async def open_closing(*args, **kwargs):
        return ClosingLink(code)

    monkeypatch.setattr(main_agent, "open_configured", open_closing)
    settings = Settings(reconnect=ReconnectSettings(initial_s=0.05, max_s=1.0, jitter_s=0.0))
    observer = CountingObserver()
    listener = main_agent.Listener(settings, None, [], observer)
    task = asyncio.create_task(listener.run())
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(observer.gave_up.wait(), 10)
    task.cancel()
    # Three failed sessions in a row waited 0.05 + 0.1 + 0.2 s between them: no spinning.
    assert loop.time() - started >= 0.3
    assert all(end.failure and not end.by_us for end in observer.ends)

