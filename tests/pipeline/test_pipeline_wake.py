"""On-device wake from the shipped model through the whole pipeline (issue 19): the narrator saying
the wake phrase does not wake the listener, a command after ten minutes of silence goes up whole,
and a phrase with no model still works in the speech-only fallback."""

from __future__ import annotations

import base64

import pytest

from benchmarks.corpus import Corpus, Noise, _silence, with_floor
from config.settings import ConversationSettings, UploadMode, default_upload_mode
from detectors.wake_model import ModelSpotter
from realtime_sim import SimConfig
from speech.local_voice import synthesize
from tests.support.audio_helpers import rms
from tests.support.pipeline_harness import MIC_PACE, running_pipeline
from tests.support.room import RoomMicrophone, RoomSpeaker

SILENCE_1S = bytes(2 * 24000)
ROOM = SimConfig(use_espeak=False, seed=5, realistic=False, audio_frame_delay_s=0.05)


@pytest.fixture(scope="module")
def flite(tmp_path_factory):
    """flite's slt voice: one the "hey jarvis" model hears (espeak-ng's it mostly does not)."""
    corpus = Corpus(tmp_path_factory.mktemp("wake-corpus"))
    floor = corpus.noise(Noise.FAN, 5.0, seed=5)

    def say(text: str) -> bytes:
        return with_floor(_silence(0.5) + corpus.speech(text, "flite:slt", 165) + _silence(1.0), floor)

    return say


def appends(p) -> list[bytes]:
    """Every piece of mic audio the listener sessions were sent: appended to the buffer, or inline
    with a route at the device's end of turn (`END_OF_TURN=device`)."""
    sent = []
    for c in p.listener_connections():
        for e in c.received:
            if e["type"] == "input_audio_buffer.append":
                sent.append(base64.b64decode(e["audio"]))
            elif e["type"] == "response.create":
                for item in e.get("response", {}).get("input", []):
                    sent += [base64.b64decode(part["audio"]) for part in item.get("content", [])
                             if part.get("type") == "input_audio"]
    return sent


def spotter_hits(p) -> list:
    """Record every hit the upload filter's wake model reports from now on."""
    spotter = p.coordinator.parts.mic_filter.detectors.spotter
    assert isinstance(spotter, ModelSpotter)
    hits, feed = [], spotter.feed

    def recording(chunk, end_time):
        hit = feed(chunk, end_time)
        if hit is not None:
            hits.append(hit)
        return hit

    spotter.feed = recording
    return hits


class NarratorSaysTheWakePhrase(RoomSpeaker):
    """Whatever handoff plays comes out of the loudspeaker as "hey jarvis, ..." in the voice the
    model hears best, at the user's own level (0 dB), and back into the microphone."""

    def __init__(self, microphone: RoomMicrophone, voice: bytes) -> None:
        super().__init__(microphone, delay_s=0.05, gain_db=0.0)
        self._voice = voice
        self._at = 0

    def play(self, pcm: bytes) -> None:
        loop = self._voice * (len(pcm) // len(self._voice) + 2)
        said = loop[self._at : self._at + len(pcm)]
        self._at = (self._at + len(pcm)) % len(self._voice)
        super().play(said)


@pytest.mark.parametrize("sim", [ROOM], indirect=True)
async def test_the_narrator_saying_the_wake_phrase_does_not_wake_the_listener(tmp_path, sim, flite):
    microphone = RoomMicrophone(MIC_PACE)
    command = flite("hey jarvis, what time is it")
    speaker = NarratorSaysTheWakePhrase(microphone, flite("hey jarvis, set a timer for ten minutes"))
    async with running_pipeline(tmp_path, sim, microphone=microphone, speaker=speaker, wake_phrase="hey jarvis",
                                upload_mode=UploadMode.ON_DEVICE_WAKE, conversation=ConversationSettings(follow_up_s=0)) as p:
        hits = spotter_hits(p)
        sim.script.push_tool_call("get_time", {})
        before = p.counts()
        drains = len(speaker.ends)
        p.say("Hey Jarvis, what time is it?", command)
        await p.wait(lambda t: t.count("tool") > before["tool"] and t.count("narrated") > before["narrated"]
                     and t.count("listening") > before["listening"])
        await speaker.draining.wait_until(lambda: len(speaker.ends) > drains, 20)
        # The room goes on after the answer (its echo's tail and then quiet), so everything the
        # microphone heard of the narration has been through the detectors.
        microphone.feed(SILENCE_1S * 3)
        await microphone.emitted()
        assert len(speaker.played) > 2 * 48000  # seconds of "hey jarvis, ..." came out of the loudspeaker
        assert len(hits) == 1, hits  # the user's "hey jarvis", never the narrator's
        assert p.counts()["heard"] == before["heard"] + 1


async def test_a_command_after_ten_minutes_of_silence_is_routed_whole_with_its_first_word(tmp_path, sim, flite):
    command = flite("hey jarvis, what time is it")
    async with running_pipeline(tmp_path, sim, wake_phrase="hey jarvis", upload_mode=UploadMode.ON_DEVICE_WAKE,
                                mic_pace=150.0) as p:
        hits = spotter_hits(p)
        p.microphone.feed(SILENCE_1S * 600)  # ten minutes of a quiet room, read at 150 times real speed
        await p.microphone.emitted()
        assert appends(p) == []
        sim.script.push_tool_call("get_time", {})
        before = p.counts()
        p.say("Hey Jarvis, what time is it?", command)
        # Routed by its audio, it may be answered before its transcript comes: wait for that too.
        await p.wait(lambda t: t.count("tool") > before["tool"] and t.count("narrated") > before["narrated"]
                     and t.count("heard") > before["heard"])
        assert len(hits) == 1
        sent = appends(p)
        # The pre-roll went up first (quiet: before "hey"), then the phrase and the whole command.
        assert rms(sent[0]) < 50 < rms(command)
        voiced = command[int(0.5 * 48000) : -int(1.0 * 48000)]
        assert sum(len(c) for c in sent) >= len(voiced)
        assert [e.text for e in p.timeline.entries if e.kind == "heard"][-1] == "Hey Jarvis, what time is it?"


async def test_a_phrase_with_no_model_falls_back_to_speech_only_and_still_works(tmp_path, sim):
    mode = default_upload_mode("computer")
    assert mode is UploadMode.SPEECH_ONLY
    async with running_pipeline(tmp_path, sim, wake_phrase="computer", upload_mode=mode) as p:
        assert p.coordinator.parts.mic_filter.detectors.spotter is None  # no spotter: the VAD alone
        sim.script.push_tool_call("get_time", {})
        before = p.counts()
        p.say("Computer, what time is it", await synthesize("computer, what time is it"))
        await p.wait(lambda t: t.count("tool") > before["tool"] and t.count("narrated") > before["narrated"])
