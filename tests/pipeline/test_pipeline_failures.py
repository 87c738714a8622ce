"""Failures end as the policy in docs/HANDOFF.md says: heard, not crashed, nothing run twice."""

from __future__ import annotations

import asyncio
import base64

import pytest

from audio_io import AudioDeviceError, MemorySpeaker
from decisions.coordinator import CANNOT_CONNECT_MESSAGE, CONNECTION_LOST_MESSAGE, RECONNECTED_MESSAGE
from realtime_api.fatal import SPOKEN, ErrorKind
from realtime_sim import Fault, SimConfig
from speech.local_voice import tone
from tests.support.pipeline_harness import UTTERANCE, narrated_scripts, running_pipeline



def function_outputs(p) -> list[str]:
    return [
        e["item"]["call_id"]
        for c in p.sim.connections
        for e in c.received
        if e["type"] == "conversation.item.create" and e["item"]["type"] == "function_call_output"
    ]


async def test_drop_mid_command_routes_it_again_and_runs_the_tool_once(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_fault(Fault("drop", target="listener", after_sent="response.created"))
        before = await p.ask("Computer, what time is it")  # the fault strikes while it is heard or routed
        assert p.counts()["tool"] == before["tool"] + 1
        assert len(function_outputs(p)) == 1
        assert any("dropped (code 1006)" in e.text for e in p.timeline.entries if e.kind == "error")
        # The answer is what the user hears; no separate "connection lost" message for this one.
        assert narrated_scripts(p)[-1].startswith("It's")
        assert CONNECTION_LOST_MESSAGE not in narrated_scripts(p)


@pytest.mark.parametrize(
    "trigger, attempts, sessions",
    [
        ("response.created", 2, 2),  # before the first audio: nothing was heard, read it on a new session
        ("response.output_audio.delta", 1, 1),  # mid-narration: what was heard is never said again
    ],
)
async def test_a_narrator_drop_is_retried_only_before_the_first_audio(tmp_path, sim, trigger, attempts, sessions):
    async with running_pipeline(tmp_path, sim) as p:
        before = p.counts()
        sim.script.push_tool_call("echo", {"text": "the narration survives a dropped connection"})
        sim.script.push_fault(Fault("drop", target="narrator", after_sent=trigger))
        p.say("Computer, echo the narration survives a dropped connection")
        await p.answered(before)
        narrated = [e.text for e in p.timeline.entries if e.kind == "narrated"]
        assert narrated[-1].endswith(f"attempts {attempts})")
        assert len(p.narrator_connections()) == sessions
        assert [c.close_code for c in p.narrator_connections()][0] == 1006
        assert p.counts()["tool"] == before["tool"] + 1
        assert not [e for e in p.timeline.entries if e.kind == "error" and "local voice" in e.text]


# Transcripts right after the commit, so a command fits in a half-second session.
@pytest.mark.parametrize("sim", [SimConfig(session_length_s=0.5, realistic=False)], indirect=True)
async def test_session_expiry_reconnects_at_once_silently(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        await p.wait(lambda t: any("expired" in e.text for e in t.entries) and t.count("listening") >= 2)
        assert p.listener_connections()[0].close_code == 1001
        assert p.timeline.count("narrated") == 0  # expected, so nothing to say
        # The fresh session works (commands are quick enough to fit a half-second session).
        before = p.counts()
        p.say("Computer, what time is it")
        await p.wait(lambda t: t.count("narrated") > before["narrated"])
        assert p.counts()["tool"] == before["tool"] + 1


async def test_invalid_key_at_handshake_is_fatal_and_said_once(tmp_path, sim):
    sim.script.push_fault(Fault("handshake_401"))
    async with running_pipeline(tmp_path, sim) as p:
        code = await asyncio.wait_for(asyncio.shield(p.task), 20)
        assert code == 3
        message = p.coordinator.fatal_message
        assert message == SPOKEN[ErrorKind.INVALID_KEY] and "OPENAI_API_KEY" in message
        assert p.speaker.played  # said in the local voice: the narrator cannot connect with a bad key either
        assert len(p.listener_connections()) == 0 and len(sim.connections) == 1  # no retry loop


async def test_handshake_errors_back_off_and_are_heard(tmp_path, sim):
    for _ in range(3):
        sim.script.push_fault(Fault("handshake_500"))
    async with running_pipeline(tmp_path, sim) as p:
        await p.wait(lambda t: RECONNECTED_MESSAGE in narrated_scripts(p) and t.count("narrated") >= 2)
        assert CANNOT_CONNECT_MESSAGE in narrated_scripts(p)  # said after the third failure in a row
        assert len(p.listener_connections()) == 1  # status messages do not restart the listener
        attempts = [e.text for e in p.timeline.entries if "connection attempt" in e.text]
        # One retry policy counted the attempts: the backoff grew instead of starting over.
        assert [a.split("attempt ")[1].split(" ")[0] for a in attempts] == ["1", "2", "3"]
        before = await p.ask("Computer, what time is it")


async def test_a_single_failed_handshake_is_not_announced(tmp_path, sim):
    sim.script.push_fault(Fault("handshake_500"))
    async with running_pipeline(tmp_path, sim) as p:
        assert any("connection attempt 1 failed" in e.text for e in p.timeline.entries)
        before = await p.ask("Computer, what time is it")
        assert CANNOT_CONNECT_MESSAGE not in narrated_scripts(p) and RECONNECTED_MESSAGE not in narrated_scripts(p)


async def test_idle_drop_is_heard_and_the_listener_comes_back(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        # A good session (older than healthy_after_s) drops: reconnected at once, and said once.
        sim.script.push_fault(Fault("close_1011", target="listener", after_s=0.8))
        await p.wait(lambda t: CONNECTION_LOST_MESSAGE in narrated_scripts(p) and t.count("narrated") >= 1
                     and p.coordinator.phase.value == "listening")
        before = await p.ask("Computer, what time is it")
        assert p.counts()["tool"] == before["tool"] + 1


async def test_brain_rate_limited_twice_then_answers(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_brain_error(429)
        sim.script.push_brain_error(429)
        sim.script.push_brain_answer("Blue light scatters the most in air.")
        sim.script.push_tool_call("ask_brain", {"query": "why is the sky blue"})
        before = await p.ask("Computer, ask the brain why the sky is blue")
        assert "Blue light scatters the most in air." in narrated_scripts(p)[-1]
        assert len(sim.brain_requests) == 3
        assert p.counts()["tool"] == before["tool"] + 1


async def test_brain_timeout_gives_a_spoken_apology(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        for _ in range(20):
            sim.script.push_brain_delay(5.0)
        sim.script.push_tool_call("ask_brain", {"query": "why is the sky blue"})
        before = await p.ask("Computer, ask the brain why the sky is blue", timeout=30)
        assert "couldn't reach the brain" in narrated_scripts(p)[-1]
        assert p.counts()["tool"] == before["tool"] + 1


async def test_garbage_from_the_server_is_survived(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        for kind in ("malformed_frame", "unknown_event", "server_error"):
            sim.script.push_fault(Fault(kind, target="listener", after_sent="input_audio_buffer.committed"))
        before = await p.ask("Computer, what time is it")
        assert p.counts()["tool"] == before["tool"] + 1


async def test_bad_tool_arguments_are_heard_and_change_nothing(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        listing = sorted(x.name for x in p.settings.workspace_root.iterdir())
        for tool, args in (("read_file_head", '{"path": '), ("read_file_head", {"path": "../../etc/passwd"}),
                           ("no_such_tool", {})):
            sim.script.push_tool_call(tool, args)
            before = await p.ask("Computer, read that file")
            script = narrated_scripts(p)[-1]
            assert script and "{" not in script, script
        assert sorted(x.name for x in p.settings.workspace_root.iterdir()) == listing


async def test_drop_mid_utterance_replays_the_speech_to_the_next_session(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_fault(Fault("drop", target="listener", after_sent="input_audio_buffer.speech_started"))
        before = await p.ask("Computer, what time is it")  # the fault strikes while it is heard or routed
        assert p.timeline.count("replaying") == 1
        first = p.listener_connections()[0]
        assert first.close_code == 1006 and not first.sent_of("input_audio_buffer.committed")
        heard = [e.text for e in p.timeline.entries if e.kind == "heard"]
        assert heard == ["Computer, what time is it"]  # heard once, in the next session
        assert p.counts()["tool"] == before["tool"] + 1


async def test_a_drop_that_took_speech_started_with_it_still_replays_the_speech(tmp_path, sim):
    """A drop loses what was in flight: here the speech_started that would have told the client
    that the user began. The audio sent just before the drop goes to the next session anyway, so
    the command's beginning is not lost, and it is heard and run once."""
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_fault(Fault("drop_in_flight", target="listener", after_sent="input_audio_buffer.speech_started"))
        before = await p.ask("Computer, what time is it")
        first, second = p.listener_connections()[:2]
        assert first.close_code == 1006 and not first.sent_of("input_audio_buffer.speech_started")
        assert p.timeline.count("replaying") == 1
        replayed = b"".join(base64.b64decode(e["audio"]) for e in second.received if e["type"] == "input_audio_buffer.append")
        assert UTTERANCE[:4800] in replayed  # its first 100 ms, which only the dropped session had been sent
        assert [e.text for e in p.timeline.entries if e.kind == "heard"] == ["Computer, what time is it"]
        assert p.counts()["tool"] == before["tool"] + 1


def answers(p) -> int:
    """Narrations that answer a command: the tool's result, the model's text, or an apology."""
    return sum(1 for e in p.timeline.entries if e.kind == "narrated" and e.text.split()[0] in ("answer", "fallback", "error"))


# Every speech segment "says" the command (the fallback transcript): a segment the client never
# heard because of a drop is said again when its audio is replayed, as real speech would be.
SOAK = SimConfig(fault_rate=0.6, seed=20261122, random_fault_delay_s=0.2, fallback_transcript="Computer, what time is it")


@pytest.mark.parametrize("narrator_warm", [False, True], ids=["cold narrator", "warm narrator"])
@pytest.mark.parametrize("sim", [SOAK], indirect=True)
async def test_soak_with_random_faults_every_command_is_answered_once(tmp_path, sim, narrator_warm):
    async with running_pipeline(tmp_path, sim, narrator_warm=narrator_warm) as p:
        for n in range(12):
            before_answers, before_tools = answers(p), p.counts()["tool"]
            p.microphone.feed(UTTERANCE)
            await p.wait(lambda t, k=before_answers: answers(p) > k, timeout=40)
            assert answers(p) == before_answers + 1, f"command {n} was answered {answers(p) - before_answers} times"
            assert p.counts()["tool"] - before_tools <= 1, f"command {n} ran its tool twice"
        assert answers(p) == 12 and p.counts()["tool"] <= 12
        struck = [f.kind for c in sim.connections for f in c.faults]
        assert len(set(struck)) >= 4, struck  # the run really went through a variety of faults
        assert not p.task.done()  # still running
        outputs = function_outputs(p)
        assert len(outputs) == len(set(outputs))  # no call answered twice


async def test_a_server_error_during_setup_is_retried_not_fatal(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        # The next connection (the narrator, for this command) gets an error before it is configured.
        sim.script.push_fault(Fault("server_error", after_sent="session.created"))
        before = await p.ask("Computer, what time is it")
        assert p.coordinator.fatal_message is None and not p.task.done()
        assert narrated_scripts(p)[-1].startswith("It's")


async def test_a_stalled_setup_times_out_and_the_mute_is_not_held_hostage(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, connect_timeout_s=0.5) as p:
        before = p.counts()
        sim.script.push_brain_delay(0.3, "Because of scattering.")
        sim.script.push_tool_call("ask_brain", {"query": "why"})
        p.say("Computer, ask the brain why")
        # The next listener session opens while the tool runs; then the narrator's
        # session.updated is held back far longer than the setup may take.
        await sim.wait_for(lambda s: len([c for c in s.connections if c.role == "listener"]) >= 2, 10)
        sim.script.push_fault(Fault("delay", after_sent="session.created", delay_s=30.0))
        await p.answered(before)
        narrated = [e.text for e in p.timeline.entries if e.kind == "narrated"][-1]
        assert narrated.endswith("attempts 2)")  # the stalled attempt was given up, the retry worked
        narration_mutes = [end - start for holder, start, end in p.coordinator.core.mute.history if holder == "narration"]
        assert narration_mutes and narration_mutes[-1] < 10.0  # not the 30 s stall


class BrokenSpeaker(MemorySpeaker):
    """A speaker that was unplugged: playing works until the first wait for playback."""

    async def drained(self) -> None:
        raise AudioDeviceError("the output device disappeared (unplugged?)")


async def test_a_speaker_that_fails_stops_the_assistant_with_a_clear_message(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, speaker=BrokenSpeaker()) as p:
        p.say("Computer, what time is it")
        assert await asyncio.wait_for(asyncio.shield(p.task), 20) == 3
        assert "speaker stopped working" in p.coordinator.fatal_message
        assert "unplugged" in p.coordinator.fatal_message


async def test_audio_is_buffered_while_the_listener_reconnects(tmp_path, sim):
    # A young session drops (counted, not announced) and its replacement is slow to come up:
    # speech meanwhile waits in the buffer and reaches the new session.
    async with running_pipeline(tmp_path, sim, healthy_after_s=30.0) as p:
        before = p.counts()
        sim.script.push_fault(Fault("delay", target="any", after_sent="session.created", delay_s=0.6))
        sim.script.push_fault(Fault("drop", target="listener", after_s=0.0))
        await p.wait(lambda t: any("dropped" in e.text for e in t.entries))
        buffered_before = p.coordinator.core.uplink.stats.chunks_buffered
        p.say("Computer, what time is it")
        await p.wait(lambda t: t.count("heard") >= before["heard"] + 1)
        assert p.listener_connections()[1].faults  # the delay did hit the new listener
        assert p.coordinator.core.uplink.stats.chunks_buffered - buffered_before > 20  # a good part of the 0.6 s
        assert [e.text for e in p.timeline.entries if e.kind == "heard"][-1] == "Computer, what time is it"


async def test_a_connection_message_never_cuts_off_a_user_mid_sentence(tmp_path, sim):
    """Issue 10, defect 8: "I'm connected again" falls due while the user is speaking a long
    command; it waits for them, so the whole utterance reaches the listener (its mute would have
    dropped the rest) and the message comes after."""
    for _ in range(3):
        sim.script.push_fault(Fault("handshake_500"))
    long_command = tone([190.0, 230.0, 210.0, 200.0], 4.0) + bytes(2 * 24000 * 400 // 1000)  # 16.4 s, 4.1 s at 4x
    # "Connected again" falls due 2.5 s after the session is ready: after the first message is
    # said, and inside the command (which starts right after it and lasts 4 s).
    async with running_pipeline(tmp_path, sim, healthy_after_s=2.5) as p:
        await p.wait(lambda t: CANNOT_CONNECT_MESSAGE in narrated_scripts(p) and t.count("narrated") >= 1)
        sim.script.push_tool_call("get_time", {})
        p.say("Computer, what time is it", long_command)
        await p.wait(lambda t: RECONNECTED_MESSAGE in narrated_scripts(p) and t.count("tool") >= 1)
        kinds = [(e.kind, e.text) for e in p.timeline.entries]
        heard_at = kinds.index(("heard", "Computer, what time is it"))
        assert kinds.index(("narrating", RECONNECTED_MESSAGE)) > heard_at
        started = [e for e in p.listener_connections()[0].sent if e["type"] == "input_audio_buffer.speech_started"]
        stopped = [e for e in p.listener_connections()[0].sent if e["type"] == "input_audio_buffer.speech_stopped"]
        assert len(started) == len(stopped) == 1  # one utterance, not cut in two by a mute
        assert stopped[0]["audio_end_ms"] - started[0]["audio_start_ms"] >= 15000  # heard whole
