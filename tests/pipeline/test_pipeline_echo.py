"""The echo gate in the whole pipeline: a simulated room plays the narrator's voice back into the
microphone (delayed 50 ms, -18 dB, and a reflection 30 ms later, 8 dB fainter). The echo never
reaches the listener; a command spoken while the echo's tail is still in the room is routed with
its first word."""

from __future__ import annotations

import base64

import pytest

from audio_io.format import SAMPLE_WIDTH, audioop
from config.settings import ConversationSettings
from realtime_sim import SimConfig
from tests.support.pipeline_harness import MIC_PACE, UTTERANCE, running_pipeline
from tests.support.room import RoomMicrophone, RoomSpeaker

AUDIBLE_RMS = 40.0  # echo this loud (about -58 dBFS) would reach a VAD (as in benchmarks.echo_choice)
# The synthetic voice streams 200 ms per 10 ms, well ahead of the microphone's pace (4x): a late
# loop must not open gaps in the answer (a command placed in one would be muted).
ROOM = SimConfig(use_espeak=False, seed=5, realistic=False, audio_frame_delay_s=0.01)


# No follow-up window (its chime would hold the mute over the tail the command is said into), and
# no working sound (a tick is not the answer whose tail the command is placed in).
QUIET = ConversationSettings(follow_up_s=0, working_sound_after_s=3600, still_working_after_s=3600)


def appended(p) -> list[bytes]:
    """Per listener session, the audio it was sent (a replay into the next session is cut into
    other appends than the microphone's chunks)."""
    return [
        b"".join(base64.b64decode(e["audio"]) for e in c.received if e["type"] == "input_audio_buffer.append")
        for c in p.listener_connections()
    ]


async def command_in_the_answers_tail(p, sim, microphone: RoomMicrophone, speaker: RoomSpeaker) -> float:
    """Asks the time, and says the next command ("list the files") where the answer's audio
    ends, its echo ringing on for 80 ms: placed again each time more of the answer is queued, so
    it lands in the tail however late the loop runs (learning the end only when the narration is
    over could be too late). Returns the room time it starts at."""
    sim.script.push_tool_call("get_time", {})
    sim.script.push_tool_call("list_files", {"path": "."})
    drains = len(speaker.ends)
    starts: list[float] = []
    speaker.after_play = lambda audio_end: starts.append(microphone.place(UTTERANCE, audio_end))
    p.say("Computer, what time is it?")
    sim.script.push_transcript("Computer, list the files")
    await speaker.draining.wait_until(lambda: len(speaker.ends) > drains, 20)
    speaker.after_play = None
    return starts[-1]


@pytest.mark.parametrize("sim", [ROOM], indirect=True)
async def test_the_narrators_echo_never_reaches_the_listener_and_a_command_in_its_tail_keeps_its_first_word(tmp_path, sim):
    microphone = RoomMicrophone(MIC_PACE)
    speaker = RoomSpeaker(microphone, delay_s=0.05, gain_db=-18.0)
    async with running_pipeline(tmp_path, sim, microphone=microphone, speaker=speaker, conversation=QUIET) as p:
        before = p.counts()
        start = await command_in_the_answers_tail(p, sim, microphone, speaker)
        assert start >= speaker.ends[-1] - 0.001  # after the whole answer, not in a gap of it
        await p.wait(lambda t: t.count("tool") >= before["tool"] + 2 and t.count("narrated") >= before["narrated"] + 2
                     and t.count("listening") >= before["listening"] + 2)
        # After the second answer nobody speaks into its tail; then some chatter, so everything
        # before it has surely been sent.
        p.say("and that was the news")
        await p.wait(lambda t: t.count("ignored") >= before["ignored"] + 1)

        sessions = appended(p)
        # The room really echoed, loud enough to be heard, and none of that echo went up.
        echo_only = [h for h in microphone.heard if not any(h.user) and audioop.rms(h.echo, SAMPLE_WIDTH) >= AUDIBLE_RMS]
        assert len(echo_only) > 50  # over a second of it (how much more depends on the hour: the first answer tells the time)
        leaked = [h.at for h in echo_only if any(h.mixed in s for s in sessions)]
        assert not leaked, f"echo reached the listener at room times {leaked}"
        # Nothing was transcribed from it: three utterances, three commits.
        commits = sum(1 for c in p.listener_connections() for e in c.sent if e["type"] == "input_audio_buffer.committed")
        assert commits == 3
        heard = [e.text for e in p.timeline.entries if e.kind == "heard"]
        assert heard[:2] == ["Computer, what time is it?", "Computer, list the files"], heard
        # The command in the tail: every chunk of its voice went to one session, its first one
        # (mixed with the echo) too.
        command = [h for h in microphone.heard if any(h.user) and start - 0.001 < h.at < start + 1.0]
        voiced = [h for h in command if audioop.rms(h.user, SAMPLE_WIDTH) > 0]
        # It did start in the echo's tail: the echo was sounding in the 100 ms before it, and maybe
        # into its first chunk (the answer ends in a pause, so how far depends on where the end fell
        # between two chunks: the voice starts on the next chunk boundary).
        assert any(h.echo != bytes(len(h.echo)) for h in microphone.heard if start - 0.1 < h.at < start + 0.08)
        assert len(voiced) == 30  # 0.6 s
        where = [[i for i, s in enumerate(sessions) if h.mixed in s] for h in voiced]
        assert [s for s in sessions if all(h.mixed in s for h in voiced)], (
            f"the command was split or cut: the sessions each of its chunks went to {where}\n"
            + "\n".join(f"  {e.at:.3f} {e.kind}: {e.text}" for e in list(p.timeline.entries)[-30:]))
        # The gate learnt the room: the echo's delay or its reflection's (the loop's jitter is
        # four times larger in room time: beside two CPU hogs it learnt 0.02 s once, and let no
        # echo through), and about its level.
        path = p.coordinator.echo.path if p.coordinator.echo is not None else None
        assert path is not None and 0.01 <= path.delay_s <= 0.09 and -24 <= path.gain_db <= -14, path


@pytest.mark.parametrize("write_s", [0.0, 0.025], ids=["quick-writes", "slow-writes"])
@pytest.mark.parametrize("sim", [ROOM], indirect=True)
async def test_a_command_said_as_the_answer_ends_keeps_its_first_word_when_the_end_is_seen_late(tmp_path, sim, write_s):
    # The coordinator learns that the answer's audio ended 250 ms (12 chunks) after it did, as a
    # busy or slow machine does: what the microphone captured after the end is the user's, not the
    # narrator's, and goes up with the rest of the command, to one session. With slow writes each
    # returns 100 ms of room time after its audio started (a loaded machine): the answer's end is
    # still where the speaker's timeline put it, not 100 ms later (the command's first five chunks).
    microphone = RoomMicrophone(MIC_PACE)
    speaker = RoomSpeaker(microphone, late_s=0.25, write_s=write_s)
    async with running_pipeline(tmp_path, sim, microphone=microphone, speaker=speaker, conversation=QUIET) as p:
        before = p.counts()
        start = await command_in_the_answers_tail(p, sim, microphone, speaker)
        await p.wait(lambda t: t.count("tool") >= before["tool"] + 2)
        heard = [e.text for e in p.timeline.entries if e.kind == "heard"]
        assert heard[:2] == ["Computer, what time is it?", "Computer, list the files"], heard
        sessions = appended(p)
        voiced = [h for h in microphone.heard if audioop.rms(h.user, SAMPLE_WIDTH) > 0 and start - 0.001 < h.at < start + 1.0]
        assert len(voiced) == 30  # 0.6 s
        where = [[i for i, s in enumerate(sessions) if h.mixed in s] for h in voiced]
        assert [s for s in sessions if all(h.mixed in s for h in voiced)], f"the command was split or cut: {where}"


@pytest.mark.parametrize("sim", [ROOM], indirect=True)
async def test_what_was_captured_while_the_answer_played_stays_out_when_the_microphone_is_read_late(tmp_path, sim):
    # The microphone is read a second behind the room (a busy machine), so the last of the answer's
    # echo is read after the mute lifted; and the echo comes back later than the gate looks (300
    # ms: the gate cannot tell it from a voice). Captured while the answer played, it is the
    # narrator's and stays out, as the mute would have kept it. (The echo after the audio's end is
    # the gate's, within its delays: this one rings on past them, so the check stops at the end.)
    microphone = RoomMicrophone(MIC_PACE, lag_s=1.0)
    speaker = RoomSpeaker(microphone, delay_s=0.3)
    async with running_pipeline(tmp_path, sim, microphone=microphone, speaker=speaker, conversation=QUIET) as p:
        before = p.counts()
        sim.script.push_tool_call("get_time", {})
        p.say("Computer, what time is it?")
        await p.wait(lambda t: t.count("narrated") >= before["narrated"] + 1 and t.count("listening") >= before["listening"] + 1)
        end, heard = speaker.ends[-1], microphone.heard
        # Everything captured up to half a second past the end was read; an utterance after it
        # is answered only once all of that went up.
        await microphone.handed_out.wait_until(lambda: heard[-1].at > end + 0.5, 20)
        ignored = p.timeline.count("ignored")
        p.say("and that was the news")
        await p.wait(lambda t: t.count("ignored") > ignored)
        sessions = appended(p)
        played_over = [h for h in heard if h.at + 0.02 <= end and audioop.rms(h.echo, SAMPLE_WIDTH) >= AUDIBLE_RMS]
        assert len(played_over) > 20  # the room really echoed while it played
        # (The synthetic voice repeats itself: a chunk the same as one heard after the end, which
        # goes up, cannot be told apart from it.)
        after = {h.mixed for h in heard if h.at + 0.02 > end}
        leaked = [round(h.at, 2) for h in played_over if h.mixed not in after and any(h.mixed in s for s in sessions)]
        assert not leaked, f"the answer's echo went up at room times {leaked} (its audio ended at {end:.2f})"
