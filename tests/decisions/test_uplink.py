"""The uplink's frames: chunks back to back in the stream go up together (issue 34), and what is
sent is exactly what leaves the buffer, whatever happens while a frame is on its way."""

from __future__ import annotations

import random

from decisions.uplink import Uplink

CHUNK = 960  # 20 ms at 48,000 bytes per second


def chunk(n: int) -> bytes:
    return bytes([n]) * CHUNK


def drain(uplink: Uplink) -> list[tuple[int | None, bytes]]:
    frames = []
    while (outgoing := uplink.next_chunk()) is not None:
        frames.append((outgoing.at_ms, outgoing.chunk))
        uplink.sent(outgoing.token)
    return frames


def test_chunks_back_to_back_go_up_as_one_frame_up_to_frame_ms():
    uplink = Uplink(100, 48000, frame_ms=100)
    for n in range(7):
        uplink.take(chunk(n), session_ready=True, at_ms=1000 + 20 * n)
    uplink.take(chunk(7), session_ready=True, at_ms=2000)  # a gap in the stream: the gate held what came between
    uplink.take(chunk(8), session_ready=True)  # no place known: alone
    frames = drain(uplink)
    assert [(at, len(pcm) // CHUNK) for at, pcm in frames] == [(1000, 5), (1100, 2), (2000, 1), (None, 1)]
    assert b"".join(pcm for _, pcm in frames) == b"".join(chunk(n) for n in range(9))  # every byte, in order
    assert uplink.stats.chunks_sent == 9 and uplink.empty


def test_a_joined_frame_is_replayed_chunk_by_chunk_with_its_places():
    uplink = Uplink(100, 48000, frame_ms=200)
    uplink.new_session()
    for n in range(6):
        uplink.take(chunk(n), session_ready=True, at_ms=3000 + 20 * n)
    assert len(drain(uplink)) == 1
    assert uplink.session_lost(replay_from_ms=40, chunk_ms=20) == 80  # the session heard the first 40 ms
    assert drain(uplink) == [(3040, b"".join(chunk(n) for n in range(2, 6)))]


def test_without_frame_ms_every_chunk_is_its_own_frame():
    uplink = Uplink(100, 48000)
    for n in range(3):
        uplink.take(chunk(n), session_ready=True, at_ms=20 * n)
    assert [at for at, _ in drain(uplink)] == [0, 20, 40]


def test_a_chunk_evicted_while_its_frame_was_on_its_way_takes_no_unsent_chunk_with_it():
    """The buffer overflowed while the head was being sent (a slow session): the head went by
    eviction, and `sent` must not then remove the next chunk, which never went out."""
    uplink = Uplink(3, 48000)
    for n in range(3):
        uplink.take(chunk(n), session_ready=True, at_ms=20 * n)
    outgoing = uplink.next_chunk()
    assert outgoing.chunk == chunk(0)
    uplink.take(chunk(3), session_ready=True, at_ms=60)  # over capacity: chunk 0 is evicted meanwhile
    uplink.sent(outgoing.token)
    assert [pcm[0] for _, pcm in drain(uplink)] == [1, 2, 3]  # chunk 1 was never sent: it still goes
    assert uplink.stats.chunks_sent == 4


def test_joined_frames_send_the_same_bytes_in_the_same_places_as_a_frame_per_chunk():
    """Random takes (gaps in the stream, chunks with no place, audio while no session is up),
    drains and lost sessions: with and without joining, the same bytes go up in the same order,
    each at the same place, and a replay after a loss replays the same audio."""
    rng = random.Random(34)
    for _ in range(200):
        uplinks = [Uplink(40, 48000), Uplink(40, 48000, frame_ms=200)]
        sent: list[list[tuple[int | None, bytes]]] = [[], []]
        for uplink in uplinks:
            uplink.new_session()
        at_ms, n = 0, 0
        for _ in range(rng.randrange(5, 60)):
            step = rng.random()
            if step < 0.6:
                at_ms += 20 * rng.choice((1, 1, 1, 2, 5))
                place = None if rng.random() < 0.05 else at_ms
                n += 1
                for uplink in uplinks:
                    uplink.take(chunk(n % 256), session_ready=True, at_ms=place)
            elif step < 0.9:
                for uplink, record in zip(uplinks, sent):
                    record += _split(drain(uplink))
            else:
                replay_from = rng.randrange(0, at_ms + 1)
                lost = [uplink.session_lost(replay_from, chunk_ms=20) for uplink in uplinks]
                assert lost[0] == lost[1]
                for uplink in uplinks:
                    uplink.new_session()
        for uplink, record in zip(uplinks, sent):
            record += _split(drain(uplink))
        assert sent[0] == sent[1]
        assert uplinks[0].stats == uplinks[1].stats


def _split(frames: list[tuple[int | None, bytes]]) -> list[tuple[int | None, bytes]]:
    """A frame's chunks, each with its own place."""
    pieces = []
    for at_ms, pcm in frames:
        for i in range(0, len(pcm), CHUNK):
            pieces.append((None if at_ms is None else at_ms + i // CHUNK * 20, pcm[i:i + CHUNK]))
    return pieces
