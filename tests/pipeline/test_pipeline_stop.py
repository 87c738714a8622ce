""""Computer, stop" while it talks (issue 14), through the whole pipeline: the mic is read while
the narrator speaks (upload muted), the stop detector hears it, the narration is cut at once
(speaker flushed, the narrator's response cancelled), nothing of it is uploaded, and a fresh
listener takes the next command."""

from __future__ import annotations

import base64
from typing import AsyncIterator

import pytest

from audio_io import BYTES_PER_SECOND, MemorySpeaker
from benchmarks.stop_latency import STOP_WORDS, WatchedSpeaker
from concurrency.changes import Changes
from config.settings import ConversationSettings
from reader_agent import NarrationCut, Narrator
from realtime_sim import SimConfig
from speech.local_voice import synthesize
from tests.support.pipeline_harness import MIC_PACE, fast_settings, running_pipeline
from tests.support.sim import running_sim, sdk
from tests.support.room import RoomMicrophone, RoomSpeaker, _bytes_at
from tests.support.stop_detectors import HeardTheUser, LoudStopDetector, spotted

LONG_ANSWER = " ".join(["The quick brown fox jumps over the lazy dog, and then it runs away."] * 12)


def uploaded(p) -> bytes:
    return b"".join(base64.b64decode(e["audio"]) for c in p.listener_connections() for e in c.received
                    if e["type"] == "input_audio_buffer.append")


# The narrator's audio comes ten times faster than real time and plays four times faster: the
# speaker holds seconds of it when the user says stop, and the response is still being generated.
STREAMING = SimConfig(audio_frame_delay_s=0.02, use_espeak=False, seed=1)


def stop_gate(p):
    """The echo gate whose verdict the stop detector hears by: the one behind the canceller."""
    canceller = p.coordinator.canceller
    return canceller.residual if canceller is not None else p.coordinator.echo


async def long_answer_playing(p, sim, speaker: WatchedSpeaker) -> None:
    """A long answer is being read, a second of it has been handed to the speaker (and is
    playing), and the echo gate has heard enough of it to judge the room: until then it takes
    anything as loud as the narration for its echo (the first second of the first narration; on
    a busy machine the microphone's reader can lag the speaker by that much)."""
    sim.script.push_tool_call("echo", {"text": LONG_ANSWER})
    p.say("Computer, read me the long story")
    await p.wait(lambda t: t.count("narrating") == 1)
    gate = stop_gate(p)
    await speaker.changes.wait_until(lambda: speaker.queued >= BYTES_PER_SECOND and gate.has_evidence, timeout=20)


class FlushWatchingSpeaker(WatchedSpeaker):
    """Notes how much microphone audio the stop listener had heard when the speaker was flushed."""

    def __init__(self, pace: float) -> None:
        super().__init__(pace=pace)
        self.mic_clock = lambda: 0.0
        self.flushed_at_mic: list[float] = []

    def flush(self) -> None:
        self.flushed_at_mic.append(self.mic_clock())
        super().flush()


@pytest.mark.parametrize("sim", [STREAMING], indirect=True)
async def test_computer_stop_cuts_a_long_narration_at_once_and_the_next_command_is_routed(tmp_path, sim):
    detector = LoudStopDetector()
    speaker = FlushWatchingSpeaker(pace=MIC_PACE)  # plays in the microphone's time
    async with running_pipeline(tmp_path, sim, speaker=speaker, stop_detector=detector,
                                conversation=ConversationSettings(follow_up_s=3.0)) as p:
        speaker.mic_clock = lambda: p.coordinator._ear.listener.clock
        await long_answer_playing(p, sim, speaker)  # "computer, stop" now
        listening = p.timeline.count("listening")
        p.microphone.feed(STOP_WORDS)
        await p.wait(lambda t: t.count("stopped") == 1 and t.count("listening") > listening)

        timing = p.coordinator.stop_timings[-1]
        # The cut came in the step that heard the hit, before the next microphone chunk was read
        # (how many ms that is, is `benchmarks/stop_latency.py`'s: a wall-clock budget here would
        # fail whenever a busy machine stalls the process); the speaker went quiet at the flush,
        # and no PCM of the narration was written after it.
        assert timing.flushed_at is not None and timing.hit.detected_s in speaker.flushed_at_mic
        end_of_playback = speaker.clock_at(speaker.intervals[-1][1])
        assert end_of_playback <= timing.flushed_at + 1e-3
        assert timing.last_write_at is not None and timing.last_write_at <= timing.flushed_at
        played_s = len(speaker.played) / BYTES_PER_SECOND
        assert 0.2 <= played_s < 10.0  # of about 40 s: the rest of the script was dropped
        narrated = [e.text for e in p.timeline.entries if e.kind == "narrated"]
        assert narrated[-1].startswith("answer (stopped after")
        # The narrator's response was still being generated: it was cancelled, and its session closed.
        (narrator,) = p.narrator_connections()
        assert any(e["type"] == "response.cancel" for e in narrator.received)
        # Nothing of the stop words was uploaded, and no follow-up window opened after a stop.
        assert STOP_WORDS[4800:9600] not in uploaded(p)
        assert p.counts()["ignored"] == 0 and p.timeline.count("follow-up") == 0
        assert len(detector.hits) == 1

        # Listening again: the next command is routed and answered in full.
        sim.script.push_tool_call("get_time", {})
        await p.ask("Computer, what time is it")
        assert [e.text for e in p.timeline.entries if e.kind == "command"] == ["read me the long story", "what time is it"]
        assert p.timeline.count("stopped") == 1
        assert detector.resets >= 1  # after the cut narration: the next one starts afresh


@pytest.mark.parametrize("sim", [STREAMING], indirect=True)
async def test_a_command_said_over_a_narration_cuts_it_and_is_routed_and_answered(tmp_path, sim):
    """Barge-in: "computer, what time is it" over a long answer. The detector hears the wake
    phrase alone (a `command` hit): the narration is cut at once, as for "stop"; what the mic
    heard from just before the phrase is held until it is clearly no "stop", then goes up as any
    command does, and is routed and answered; the cut answer is recorded as stopped."""
    detector = LoudStopDetector(phrase="computer", command=True)
    speaker = WatchedSpeaker(pace=MIC_PACE)
    async with running_pipeline(tmp_path, sim, speaker=speaker, stop_detector=detector,
                                conversation=ConversationSettings(follow_up_s=0)) as p:
        await long_answer_playing(p, sim, speaker)
        sim.script.push_tool_call("get_time", {})
        p.say("Computer, what time is it")  # over the narration
        await p.wait(lambda t: t.count("narrated") == 2)
        assert p.timeline.count("stopped") == 1 and len(detector.hits) == 1
        assert [e.text for e in p.timeline.entries if e.kind == "command"] == ["read me the long story", "what time is it"]
        narrated = [e.text for e in p.timeline.entries if e.kind == "narrated"]
        assert narrated[0].startswith("answer (stopped after") and narrated[1].startswith("answer (similarity")
        # It went up from the hold (echo-cancelled: not byte for byte), once.
        assert p.coordinator._ear.hold.released == 1 and p.coordinator._ear.hold.dropped == 0


class CuttingSpeaker(MemorySpeaker):
    """Cuts the narration as its first audio arrives, as "computer, stop" would."""

    def __init__(self, cut: NarrationCut) -> None:
        super().__init__()
        self.cut = cut
        self.plays = 0

    def play(self, pcm: bytes) -> None:
        self.plays += 1
        super().play(pcm)
        self.cut.cut()


async def test_the_narrator_stops_a_cut_read_at_once_cancels_it_and_never_retries(tmp_path):
    async with running_sim(STREAMING) as sim:
        narrator = Narrator(fast_settings(sim.base_url, tmp_path, tmp_path / "state"), sdk(sim))
        cut = NarrationCut()
        speaker = CuttingSpeaker(cut)
        await speaker.start()
        result = await narrator.narrate(LONG_ANSWER, speaker, cut)
        assert result.stopped and not result.ok and result.attempts == 1
        assert speaker.plays == 1 and result.audio_bytes == len(speaker.played) > 0  # nothing after the cut
        (connection,) = sim.connections
        received = [e["type"] for e in connection.received]
        assert received[-1] == "response.cancel"
        # Cut before it began (said while the narrator was still connecting): no session at all.
        early = NarrationCut()
        early.cut()
        result = await narrator.narrate(LONG_ANSWER, speaker, early)
        assert result.stopped and result.audio_bytes == 0 and len(sim.connections) == 1


# The room: the narrator's voice (espeak-ng) comes back into the microphone 50 ms later at -24 dB,
# with a reflection; the user's "computer, stop" is another espeak-ng utterance, at full level.
# In real time: the echo gate lines the echo up with what was played by the clock, and four times
# the loop's jitter (a busy machine) is more than its slots can absorb. The answer streams four
# times faster than it plays (as the service's does): the speaker holds seconds of it, so a late
# loop opens no gaps in its echo (streamed in real time, every late delta was a gap).
ROOM = SimConfig(use_espeak=True, seed=5, realistic=False, audio_frame_delay_s=0.05)
ROOM_PACE = 1.0
ECHO_DB = -24.0
SAYS_COMPUTER = "To make me quiet, say computer, stop. Your computer is fine."


class HeardRoomMicrophone(RoomMicrophone):
    """Tells `emitting` as it emits each chunk: a test awaits the room being heard up to a time
    (the reader lags the room by seconds on a busy machine)."""

    def __init__(self, pace: float) -> None:
        super().__init__(pace)
        self.emitting = Changes()

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in super().chunks():
            self.emitting.notify()
            yield chunk


class CutRoomSpeaker(RoomSpeaker):
    """A RoomSpeaker that goes quiet when flushed: `RoomSpeaker` writes each play's echo into the
    room when it is handed the audio, so the echo of audio queued but never played would ring on
    (seconds of it, when the answer streams ahead), and the next play would start after it.
    (A stand-in for that change in tests/support/room.py.) `cut_at`: the room times it was flushed."""

    def __init__(self, microphone: RoomMicrophone, delay_s: float, gain_db: float) -> None:
        super().__init__(microphone, delay_s=delay_s, gain_db=gain_db)
        self.cut_at: list[float] = []

    def flush(self) -> None:
        super().flush()
        now = self._microphone.room_time()
        self.cut_at.append(now)
        first_echo = _bytes_at(now + min(delay for delay, _ in self._paths))
        room = self._microphone._room
        room[first_echo:] = bytes(max(0, len(room) - first_echo))
        self._end = min(self._end, now)


class StopOverTheEcho:
    """Says `words` over the narration's echo however late the loop runs. What the speaker has
    queued is in the room already (`RoomSpeaker` writes its echo as it is handed the audio), so
    words placed inside it are said over its echo: `say(lead_s)` places them `lead_s` from now at
    the first moment (now, or at a later play) the queued audio covers them, and `saying` tells.
    (Placed by the clock 1.5 s after "narrating", they came before the first audio whenever a busy
    machine held it back, or in a gap of a stream that came late.)"""

    MARGIN_S = 0.2

    def __init__(self, microphone: RoomMicrophone, speaker: RoomSpeaker, words: bytes) -> None:
        self.microphone = microphone
        self.words = words
        self.said_at: list[float] = []  # the room times it was said at
        self.saying = Changes()
        self._lead_s: float | None = None  # armed: say it this far from now
        self._audio_end = 0.0  # room time the speaker's queued audio ends
        speaker.after_play = self._played

    def say(self, lead_s: float) -> None:
        self._lead_s = lead_s
        self._say_if_covered()

    def _played(self, audio_end: float) -> None:
        self._audio_end = audio_end
        self._say_if_covered()

    def say_now(self) -> None:
        """Say it as armed without waiting for queued audio to cover it (a machine too busy to
        stream ahead of the speaker: then over what plays, as a person would)."""
        self._say_if_covered(anyway=True)

    def _say_if_covered(self, anyway: bool = False) -> None:
        if self._lead_s is None:
            return
        at = self.microphone.room_time() + self._lead_s
        # (queued audio that ends after now plays without a gap from now to its end)
        if anyway or self._audio_end >= at + len(self.words) / BYTES_PER_SECOND + self.MARGIN_S:
            self.microphone.say_at(self.words, at)
            self.said_at.append(at)
            self._lead_s = None
            self.saying.notify()


@pytest.mark.parametrize("sim", [ROOM], indirect=True)
@pytest.mark.parametrize("acoustic", [False, True], ids=["stand-in", "StopPhraseDetector"])
async def test_the_narrations_own_echo_never_stops_it_and_the_users_stop_over_it_does(tmp_path, sim, acoustic):
    """With the stand-in (the spotter hearing "computer", plus an oracle for the user's words) and
    with the on-device detector the assistant runs (STOP_WHILE_TALKING, built by `assistant`)."""
    microphone = HeardRoomMicrophone(ROOM_PACE)
    speaker = CutRoomSpeaker(microphone, delay_s=0.05, gain_db=ECHO_DB)
    detector = None if acoustic else HeardTheUser(microphone)
    async with running_pipeline(tmp_path, sim, microphone=microphone, speaker=speaker, stop_detector=detector,
                                acoustic_stop=acoustic, conversation=ConversationSettings(follow_up_s=0)) as p:
        # 1. An answer that says "computer, stop" itself, echoed by the room: it plays to the end.
        sim.script.push_tool_call("echo", {"text": SAYS_COMPUTER})
        heard_before = len(microphone.heard)
        await p.ask("Computer, how do I stop you")
        end_of_echo = speaker.ends[-1] + 0.1  # (the reflection's last sample included)
        await microphone.emitting.wait_until(lambda: microphone.position_s >= end_of_echo, 20)
        assert p.timeline.count("stopped") == 0 and not p.coordinator.stop_timings
        narrated = [e.text for e in p.timeline.entries if e.kind == "narrated"]
        assert narrated[-1].startswith("answer (similarity")
        # The test can fail: the room's echo of that answer, heard without the echo gate, has "computer" in it.
        echo = b"".join(h.echo for h in microphone.heard[heard_before:])
        assert spotted(echo) >= 1

        # 2. The user says "computer, stop" over the next long answer: it is cut, nothing uploaded.
        stop = StopOverTheEcho(microphone, speaker, await synthesize("computer, stop", words_per_minute=140))
        sim.script.push_tool_call("echo", {"text": LONG_ANSWER})
        p.say("Computer, read me the long story")
        await p.wait(lambda t: t.count("narrating") == 2)
        listening = p.timeline.count("listening")
        if detector is not None:
            detector.listen_from = microphone.room_time()
        stop.say(lead_s=1.0)  # a second into its 40 s of audio
        try:
            await stop.saying.wait_until(lambda: bool(stop.said_at), 15)
        except TimeoutError:
            stop.say_now()
        for _ in range(5 if acoustic else 0):  # pocketsphinx finds 2 in 3 over an echo: people say it again
            try:
                await p.wait(lambda t: t.count("stopped") == 1, timeout=4.0)
                break
            except TimeoutError:
                stop.say(lead_s=0.3)
        await p.wait(lambda t: t.count("stopped") == 1 and t.count("listening") > listening)
        if detector is not None:
            detector.listen_from = None  # heard (by the spotter, or the oracle): the next narration is not listened to for it
        # What the user said before the cut (after it the room is quiet) was said over the echo.
        said = [h for h in microphone.heard if h.user != bytes(len(h.user)) and h.at + 0.02 <= speaker.cut_at[-1]][-10:]
        assert sum(h.echo != bytes(len(h.echo)) for h in said) >= 5  # said over the narration's echo
        timing = p.coordinator.stop_timings[-1]
        end_of_playback = speaker.clock_at(speaker.intervals[-1][1])
        assert timing.flushed_at is not None and end_of_playback <= timing.flushed_at + 1e-3  # quiet from the cut on
        assert len(p.coordinator.stop_timings) == 1
        voiced = [h.mixed for h in microphone.heard if h.user != bytes(len(h.user))][-20:]
        uploaded_audio = uploaded(p)
        assert not any(chunk in uploaded_audio for chunk in voiced)  # the stop stayed home

        # 3. Listening again: the next command is routed.
        sim.script.push_tool_call("get_time", {})
        await p.ask("Computer, what time is it")
        commands = [e.text for e in p.timeline.entries if e.kind == "command"]
        assert commands == ["how do I stop you", "read me the long story", "what time is it"]
