"""The pause inside a woken turn (issue 33): the upload filter reports a pause that may be the
turn's end with the audio so far, and speech coming back after it; never after the wake phrase
alone, and not at all when built without a pause (`set_pause` does not turn it on)."""

from __future__ import annotations

from audio_io import BYTES_PER_SECOND
from detectors.pipeline import UploadFilter
from speech.local_voice import tone
from tests.support.scripted_wake import ScriptedWake, scripted_wake_filter

CHUNK = 960  # 20 ms
MS = 48


def run(pcm: bytes, pause_s: float | None) -> tuple[list[tuple[str, float, int]], UploadFilter]:
    wake = ScriptedWake()
    wake.wake_next()
    upload = scripted_wake_filter(wake, turn_end_s=0.46)
    if pause_s is not None:
        upload = UploadFilter(upload.gate, wake, BYTES_PER_SECOND, 0.46, pause_s=pause_s)  # type: ignore[arg-type]
    said = []
    for index in range(0, len(pcm), CHUNK):
        upload.feed(pcm[index:index + CHUNK])
        at = (index + CHUNK) / MS
        if upload.take_resumed():
            said.append(("resumed", at, 0))
        if (paused := upload.take_pause()) is not None:
            said.append(("paused", at, len(paused)))
        if (turn := upload.take_turn()) is not None:
            said.append(("ended", at, len(turn)))
    return said, upload


PART = tone([190.0, 230.0], 0.3)  # 0.6 s


def test_a_pause_inside_the_command_is_reported_with_the_audio_so_far_and_speech_after_it_resumes():
    pcm = bytes(500 * MS) + PART + bytes(300 * MS) + PART + bytes(1000 * MS)
    said, _ = run(pcm, 0.14)
    assert [kind for kind, _, _ in said] == ["paused", "resumed", "paused", "ended"]
    (_, paused_at, paused_bytes), (_, resumed_at, _), (_, second_at, second_bytes), (_, ended_at, ended_bytes) = said
    assert 1100 + 140 <= paused_at <= 1100 + 140 + 40 and paused_bytes < ended_bytes
    assert 1400 <= resumed_at <= 1400 + 40
    assert ended_at - second_at == 460 - 140 and second_bytes <= ended_bytes  # the last pause, confirmed by the end


def test_no_pause_is_reported_after_the_wake_phrase_alone_or_by_a_filter_built_without_one():
    phrase = tone([190.0, 230.0], 0.12)  # the hit at 0.2 s: no command's worth of speech after it
    said, _ = run(bytes(500 * MS) + phrase + bytes(300 * MS) + PART + bytes(1000 * MS), 0.14)
    assert [kind for kind, _, _ in said] == ["paused", "ended"]  # only after the command
    without, upload = run(bytes(500 * MS) + PART + bytes(300 * MS) + PART + bytes(1000 * MS), None)
    upload.set_pause(0.14)
    assert [kind for kind, _, _ in without] == ["ended"]


def test_set_pause_moves_the_point_from_the_next_turn_on():
    pcm = bytes(500 * MS) + PART + bytes(300 * MS) + PART + bytes(1000 * MS)
    said, upload = run(pcm, 0.14)
    upload.set_pause(0.34)  # past the 300 ms pause: that one is no longer reported
    upload.gate.reset()
    wake = upload.detectors
    wake.wake_next()  # type: ignore[union-attr]
    again = []
    for index in range(0, len(pcm), CHUNK):
        upload.feed(pcm[index:index + CHUNK])
        if upload.take_resumed():
            again.append("resumed")
        if upload.take_pause() is not None:
            again.append("paused")
        if upload.take_turn() is not None:
            again.append("ended")
    assert again == ["paused", "ended"]
