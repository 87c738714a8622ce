"""The narrator's sync core and the transcript comparison."""

from realtime_api import wire
from decisions.narration import Finished, Interrupted, NarrationCore, Play, similarity
from realtime_api.sessions import narrator_session
from config.settings import Settings


def test_only_audio_of_our_response_is_played():
    core = NarrationCore("Hello there.", "n1")
    start = core.start()
    assert start["response"]["conversation"] == "none"
    assert start["response"]["input"][0]["content"][0]["text"] == "Hello there."
    assert core.feed(wire.AudioDelta("resp_other", b"\x00\x01")) == []  # before ours was created
    assert core.feed(wire.ResponseCreated("resp_1", {"narration_id": "n1"})) == []
    assert core.feed(wire.AudioDelta("resp_1", b"\x00\x01")) == [Play(b"\x00\x01")]
    assert core.feed(wire.AudioDelta("resp_2", b"\x00\x02")) == []
    core.feed(wire.AudioTranscriptDone("resp_1", "Hello there."))
    done = wire.ResponseDone("resp_1", "completed", (), "", "Hello there.", {"narration_id": "n1"}, None)
    assert core.feed(done) == [Finished("completed", "Hello there.", None)]
    assert core.audio_bytes == 2


def test_drop_and_fatal_errors_interrupt():
    core = NarrationCore("x", "n1")
    assert core.feed(wire.Closed(1006)) == [Interrupted("the narrator connection closed (code 1006)")]
    fatal = core.feed(wire.ServerError("insufficient_quota", "You exceeded your quota", "insufficient_quota", None))
    assert len(fatal) == 1 and fatal[0].fatal
    assert core.feed(wire.ServerError("server_error", "oops", "server_error", None)) == []


def test_similarity_ignores_case_and_punctuation_but_not_words():
    assert similarity("It's 3:05 PM.", "it's 3 05 pm") == 1.0
    assert similarity("The backup finished in two minutes.", "The backup finished in two minutes") == 1.0
    assert similarity("The backup finished in two minutes.", "Sure! I can help with backups.") < 0.5
    assert similarity("", "") == 1.0


def test_narrator_session_has_no_tools_and_no_input():
    session = narrator_session(Settings())
    assert session["output_modalities"] == ["audio"]
    assert session["tools"] == [] and session["audio"]["input"]["turn_detection"] is None
    assert session["audio"]["output"]["voice"] == Settings().realtime.reader_voice
