"""The mute's tail (`MutedTail`): what a live microphone's mute dropped is judged, when the mute
lifts, by when it was captured against when the speaker's audio ended."""

from __future__ import annotations

from decisions.mute import MutedTail

CHUNK = 640  # 20 ms at 16 kHz


def chunk(i: int) -> bytes:
    return bytes([i % 256]) * CHUNK


def held(tail: MutedTail, first: int, last: int) -> list[bytes]:
    """Chunks `first`..`last` (20 ms each from room time 0) held; returns those dropped for good."""
    gone: list[bytes] = []
    for i in range(first, last + 1):
        gone += tail.hold((i * 0.02, (i + 1) * 0.02), i * CHUNK, chunk(i))
    return gone


def test_what_was_captured_after_the_audio_ended_goes_up_in_order_and_the_rest_stays_dropped() -> None:
    tail = MutedTail(keep_s=0.5)
    assert held(tail, 0, 19) == []  # 0.4 s: all kept
    dropped, late = tail.release(audio_end=0.31)
    # Chunk 15 (0.30-0.32) holds the first sound after the end; 0-14 were said over the audio.
    assert late == [(i * CHUNK, chunk(i)) for i in range(15, 20)]
    assert dropped == [chunk(i) for i in range(15)]
    assert tail.release(audio_end=0.31) == ([], [])  # released once


def test_only_the_last_keep_s_is_kept_and_what_falls_out_is_dropped_for_good_in_order() -> None:
    tail = MutedTail(keep_s=0.1)
    gone = held(tail, 0, 9)
    assert gone == [chunk(i) for i in range(4)]  # ended more than 0.1 s before the newest chunk did
    dropped, late = tail.release(audio_end=0.15)
    assert dropped == [chunk(i) for i in range(4, 7)] and [o for o, _ in late] == [i * CHUNK for i in range(7, 10)]


def test_a_mute_over_no_sound_lets_nothing_through() -> None:
    # The audio ended before this muted stretch began (nothing was played during it): a mute
    # held for another reason keeps everything out.
    tail = MutedTail()
    held(tail, 10, 14)
    dropped, late = tail.release(audio_end=0.1)
    assert late == [] and len(dropped) == 5


def test_what_is_read_after_the_release_but_was_captured_while_the_audio_played_is_dropped_until_past_the_end() -> None:
    # A reader behind the room: chunks 20-24 (0.40-0.50 s) are read after the mute lifted, but the
    # audio played until 0.45 s; 20-21 end before it, 22 reaches past it (the user's first sound
    # may be in it), and from there on all goes up.
    tail = MutedTail()
    held(tail, 0, 19)
    tail.release(audio_end=0.45)
    assert tail.judging_reads
    assert [tail.played_over((i + 1) * 0.02) for i in range(20, 25)] == [True, True, False, False, False]
    assert not tail.played_over(0.2) and not tail.judging_reads  # ended by the first chunk past the end


def test_after_a_cut_or_a_barge_in_the_ear_lets_through_what_was_said_over_the_audio_goes_up() -> None:
    # A cut: the barge-in that cut the audio was said over it; what the ear held goes up.
    tail = MutedTail()
    held(tail, 0, 19)
    tail.release(audio_end=0.45, cut=True)
    assert not tail.played_over(0.42)
    # A drain, but the ear lets a barge-in through: the user's, and what follows it too.
    held(tail, 30, 49)
    tail.release(audio_end=1.2)
    assert tail.played_over(1.02)
    assert not tail.played_over(1.04, released=True) and not tail.played_over(1.06)


def test_a_mute_over_no_sound_leaves_what_is_read_after_it_to_the_gate() -> None:
    tail = MutedTail()
    held(tail, 10, 14)
    tail.release(audio_end=0.1)
    assert not tail.played_over(0.32)
