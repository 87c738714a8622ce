"""Which reads of a silent room may wait for the next (issue 34): `audio_io.quiet_reads.QuietReads`."""

from __future__ import annotations

from audio_io.format import audioop
from audio_io.quiet_reads import QuietReads
from config.settings import AudioSettings
from tests.support.audio_helpers import noise


def at_rms(seconds: float, rms: int, seed: int) -> bytes:
    pcm = noise(seconds, seed)
    return audioop.mul(pcm, 2, rms / audioop.rms(pcm, 2))


def test_only_after_the_room_was_silent_a_while_and_never_more_than_the_reads_asked() -> None:
    quiet = QuietReads(rms=20, after_s=0.2, reads=3)
    hiss = at_rms(0.04, 9, seed=1)
    holds = [quiet.hold(hiss, 0.04, 2) for _ in range(14)]
    # 0.2 s (five reads) handed on one by one; then two held, the third handed on with them.
    assert holds == [False] * 5 + [True, True, False] * 3


def test_a_sound_in_any_chunk_goes_at_once_and_only_a_read_over_the_floor_starts_the_quiet_over() -> None:
    quiet = QuietReads(rms=20, after_s=0.08, reads=2)
    hiss = at_rms(0.04, 9, seed=1)
    assert [quiet.hold(hiss, 0.04, 2) for _ in range(3)] == [False, False, True]
    blip = at_rms(0.02, 9, seed=2) + at_rms(0.02, 25, seed=3)
    assert audioop.rms(blip, 2) < 20  # the read as a whole would pass for silence
    assert not quiet.hold(blip, 0.04, 2)  # a chunk over the floor: at once ...
    assert quiet.hold(hiss, 0.04, 2)  # ... but the room is still silent
    sound = at_rms(0.02, 9, seed=4) + at_rms(0.02, 40, seed=5)
    assert audioop.rms(sound, 2) >= 20
    assert [quiet.hold(x, 0.04, 2) for x in (sound, hiss, hiss, hiss)] == [False, False, False, True]  # the quiet starts over


def test_the_settings_ask_for_two_reads_and_reading_as_much_switches_it_off() -> None:
    assert QuietReads.of(AudioSettings()) is not None
    assert QuietReads.of(AudioSettings(quiet_read_ms=40, unhurried_read_ms=40)) is None
    assert QuietReads.of(AudioSettings(read_ms=200)) is None


def test_a_sound_waits_too_while_no_one_is_in_a_hurry_and_goes_at_once_when_someone_is() -> None:
    quiet = QuietReads(rms=20, after_s=1.0, reads=3)
    sound = at_rms(0.04, 40, seed=5)
    hiss = at_rms(0.04, 9, seed=1)
    hurry = [False]
    quiet.unhurried = lambda: not hurry[0]
    # No one in a hurry: any read waits, the third goes with the two before it.
    assert [quiet.hold(x, 0.04, 2) for x in (sound, hiss, sound, sound, sound, sound)] == [True, True, False, True, True, False]
    hurry[0] = True  # (a wake heard: the upload filter is awake)
    assert [quiet.hold(x, 0.04, 2) for x in (sound, hiss, sound)] == [False, False, False]
    quiet.unhurried = None  # (what a microphone nobody told starts with)
    assert not quiet.hold(sound, 0.04, 2)


def test_no_one_in_a_hurry_lets_more_reads_go_together_than_a_silent_room_alone() -> None:
    quiet = QuietReads(rms=20, after_s=0.0, reads=3, unhurried_reads=5)
    hiss = at_rms(0.04, 9, seed=1)
    assert [quiet.hold(hiss, 0.04, 2) for _ in range(6)] == [True, True, False] * 2
    quiet.unhurried = lambda: True
    assert [quiet.hold(hiss, 0.04, 2) for _ in range(10)] == [True] * 4 + [False] + [True] * 4 + [False]
    reads = QuietReads.of(AudioSettings())
    assert reads is not None and (reads._reads, reads._unhurried_reads) == (3, 5)  # 120 and 200 ms of 40 ms reads
