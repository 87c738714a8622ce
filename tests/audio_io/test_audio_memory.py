"""In-memory audio for pipeline tests: PushMicrophone, MemorySpeaker and the playback model."""

from __future__ import annotations

import asyncio
import time

import pytest

from audio_io import (
    CountingSpeaker,
    MemorySpeaker,
    MicrophoneSource,
    PlaybackTimeline,
    PushMicrophone,
    PyAudioMicrophone,
    PyAudioSpeaker,
    SpeakerSink,
    WavFileMicrophone,
    WavFileSpeaker,
)
from audio_io.echo_reference import MicStamps
from tests.support.audio_helpers import noise

CHUNK_BYTES = 960


def test_every_implementation_fits_the_shared_interface() -> None:
    for mic in (PushMicrophone(), WavFileMicrophone("x.wav"), PyAudioMicrophone(None)):
        assert isinstance(mic, MicrophoneSource)
    for speaker in (MemorySpeaker(), CountingSpeaker(), WavFileSpeaker("x.wav"), PyAudioSpeaker(None)):
        assert isinstance(speaker, SpeakerSink)


# --------------------------------------------------------------------------- PushMicrophone


async def test_push_microphone_emits_silence_when_idle_and_fed_audio_exactly() -> None:
    mic = PushMicrophone(pace=0)
    await mic.start()
    chunks = mic.chunks()
    assert [await anext(chunks) for _ in range(3)] == [bytes(CHUNK_BYTES)] * 3
    utterance = noise(0.05, seed=1)  # 2.5 chunks: the last is padded with silence
    mic.feed(utterance)
    assert mic.pending_bytes == len(utterance)
    emitted = [await anext(chunks) for _ in range(4)]
    assert b"".join(emitted) == utterance + bytes(4 * CHUNK_BYTES - len(utterance))
    assert mic.pending_bytes == 0
    await asyncio.wait_for(mic.emitted(), 5)
    await mic.close()
    with pytest.raises(StopAsyncIteration):
        await anext(chunks)


async def test_push_microphone_emitted_waits_for_the_fed_audio() -> None:
    mic = PushMicrophone(pace=0)
    await mic.start()
    mic.feed(noise(0.1, seed=2))
    waiter = asyncio.create_task(mic.emitted())
    chunks = mic.chunks()
    for _ in range(4):
        await anext(chunks)
        await asyncio.sleep(0)
        assert not waiter.done()
    await anext(chunks)
    await asyncio.wait_for(waiter, 5)
    await mic.close()


async def test_push_microphone_is_paced() -> None:
    pace = 10.0
    mic = PushMicrophone(pace=pace)
    loop = asyncio.get_running_loop()
    await mic.start()
    started = loop.time()
    chunks = mic.chunks()
    for index in range(8):
        await anext(chunks)
        assert loop.time() - started >= index * 0.02 / pace - 1e-3
    await mic.close()


async def test_a_microphone_read_40_ms_at_a_time_hands_on_the_same_20_ms_chunks_two_per_turn_of_the_loop() -> None:
    """Issue 34: the silent room's cost is per wake-up, so the room is read 40 ms at a time; the
    detectors, the echo gate and the end of turn still judge 20 ms chunks, stamped as before."""
    pace, chunk_s = 10.0, 0.02
    audio = noise(0.2, seed=4)
    loop = asyncio.get_running_loop()
    seen: dict[int | None, list[tuple[int, float, bytes]]] = {}
    for read_ms in (None, 40):
        turns = [0]

        def turn() -> None:
            turns[0] += 1
            handle[0] = loop.call_soon(turn)

        handle = [loop.call_soon(turn)]
        mic = PushMicrophone(pace=pace, read_ms=read_ms)
        # Fed before it starts, so the audio is the stream's first chunk in both runs: fed after, a
        # process descheduled for 2 ms between the two (a chunk at this pace) queued the room's
        # silence first, one chunk more in one run than the other (seen once beside a loaded suite).
        mic.feed(audio)
        await mic.start()
        chunks = mic.chunks()
        seen[read_ms] = []
        for _ in range(11):
            chunk = await anext(chunks)
            assert mic.captured_at is not None
            seen[read_ms].append((turns[0], mic.captured_at - mic._pacer.started_at, chunk))
        handle[0].cancel()
        await mic.close()
    assert [c for _, _, c in seen[40]] == [c for _, _, c in seen[None]]  # the same chunks ...
    assert [round(t, 9) for _, t, _ in seen[40]] == [round(t, 9) for _, t, _ in seen[None]]  # ... captured when they were
    assert all(abs(b[1] - a[1] - chunk_s / pace) < 1e-9 for a, b in zip(seen[40], seen[40][1:]))
    turn_of = [t for t, _, _ in seen[40]]
    assert all(turn_of[i] == turn_of[i + 1] for i in range(1, 10, 2))  # a read's two chunks: one turn
    assert all(turn_of[i] < turn_of[i + 1] for i in range(0, 10, 2))  # the next read: a later one
    one_at_a_time = [t for t, _, _ in seen[None]]
    assert all(a < b for a, b in zip(one_at_a_time, one_at_a_time[1:]))  # read 20 ms at a time: a turn each


async def test_push_microphone_close_ends_a_waiting_reader() -> None:
    mic = PushMicrophone(pace=0.0001)  # 200 s per chunk
    await mic.start()
    chunks = mic.chunks()
    await anext(chunks)
    waiter = asyncio.create_task(anext(chunks))
    await asyncio.sleep(0)
    await mic.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiter, 10)


async def test_push_microphone_needs_start_and_whole_samples() -> None:
    mic = PushMicrophone()
    with pytest.raises(RuntimeError, match="start"):
        await anext(mic.chunks())
    with pytest.raises(ValueError, match="even number of bytes"):
        mic.feed(b"\x01")


# --------------------------------------------------------------------------- MemorySpeaker


async def test_unpaced_memory_speaker_plays_at_once_back_to_back() -> None:
    speaker = MemorySpeaker()
    await speaker.start()
    first, second = noise(0.5, seed=3), noise(0.25, seed=4)
    speaker.play(first)
    speaker.play(second)
    await speaker.drained()
    assert speaker.played == first + second
    assert speaker.intervals == [(0.0, 0.75)]
    speaker.flush()  # everything already played: nothing to drop
    assert speaker.played == first + second and speaker.flush_count == 1
    await speaker.close()


async def test_paced_memory_speaker_flush_drops_queued_audio() -> None:
    now = [100.0]
    speaker = MemorySpeaker(pace=1.0, clock=lambda: now[0])
    await speaker.start()
    audio = noise(1.0, seed=5)
    speaker.play(audio)
    now[0] += 0.5
    assert speaker.played == audio[:24000]
    speaker.flush()
    await asyncio.wait_for(speaker.drained(), 5)
    now[0] += 2.0
    assert speaker.played == audio[:24000]  # the flushed half never plays
    assert speaker.intervals == [(0.0, 0.5)]


async def test_paced_memory_speaker_records_when_audio_played() -> None:
    now = [0.0]
    speaker = MemorySpeaker(pace=1.0, clock=lambda: now[0])
    await speaker.start()
    speaker.play(noise(1.0, seed=6))
    now[0] = 0.5
    speaker.play(noise(0.5, seed=7))  # queued behind the first: plays from 1.0 to 1.5
    now[0] = 3.0
    speaker.play(noise(0.25, seed=8))  # after a gap
    now[0] = 3.1
    assert speaker.intervals == [(0.0, 1.5), (3.0, pytest.approx(3.1))]
    now[0] = 4.0
    assert speaker.intervals == [(0.0, 1.5), (3.0, 3.25)]
    assert speaker.played == noise(1.0, seed=6) + noise(0.5, seed=7) + noise(0.25, seed=8)


async def test_counting_speaker_keeps_time_and_counts_but_keeps_no_audio() -> None:
    now = [0.0]
    speaker = CountingSpeaker(pace=1.0, clock=lambda: now[0])
    await speaker.start()
    speaker.play(noise(1.0, seed=6))
    now[0] = 0.5
    speaker.flush()  # the second half never plays
    await asyncio.wait_for(speaker.drained(), 5)
    for _ in range(1000):  # a long run: nothing piles up per narration
        speaker.play(noise(0.01, seed=7))
        now[0] += 1.0
        speaker.flush()
    assert speaker.bytes_played == 24000 + 1000 * 480 and speaker.flush_count == 1001
    assert speaker._timeline.intervals(now[0]) == []  # no history kept


async def test_paced_memory_speaker_drained_returns_only_after_the_audio_played() -> None:
    now = [0.0]
    speaker = MemorySpeaker(pace=50.0, clock=lambda: now[0])
    await speaker.start()
    speaker.play(noise(1.0, seed=9))
    waiter = asyncio.create_task(speaker.drained())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()
    now[0] = 0.02  # 1 s of audio at pace 50
    await asyncio.wait_for(waiter, 10)
    assert speaker.played == noise(1.0, seed=9)


async def test_flush_releases_a_waiting_drained() -> None:
    speaker = MemorySpeaker(pace=0.001)  # would take 1000 s per second of audio
    await speaker.start()
    speaker.play(noise(1.0, seed=10))
    waiter = asyncio.create_task(speaker.drained())
    await asyncio.sleep(0)
    speaker.flush()
    await asyncio.wait_for(waiter, 10)


async def test_memory_speaker_after_close_drops_audio_and_before_start_refuses() -> None:
    speaker = MemorySpeaker()
    with pytest.raises(RuntimeError, match="start"):
        speaker.play(b"\0\0")
    await speaker.start()
    await speaker.close()
    speaker.play(noise(0.1, seed=11))
    assert speaker.played == b""


# --------------------------------------------------------------------------- the playback model


def test_timeline_splits_partly_played_audio_on_whole_samples() -> None:
    timeline = PlaybackTimeline()
    audio = noise(0.1, seed=12)
    timeline.queue(audio, now=0.0)
    first = timeline.advance(0.03333)
    assert first == audio[: 799 * 2]
    rest = timeline.advance(1.0)
    assert first + rest == audio
    assert timeline.intervals(1.0) == [(0.0, 0.1)]


async def test_a_late_reader_keeps_the_rooms_time_each_chunk_stamped_when_it_was_captured() -> None:
    """A busy loop that reads late: the chunks keep their capture times (the echo gate compares
    each with what the speaker played then), and audio said meanwhile is placed when it was said,
    after the room's silence, not right after the last chunk read."""
    pace, chunk_s = 10.0, 0.02
    mic = PushMicrophone(pace=pace)
    loop = asyncio.get_running_loop()
    await mic.start()
    chunks = mic.chunks()
    for _ in range(2):
        await anext(chunks)
    time.sleep(0.05)  # the loop is busy for 25 chunks of room time (a blocking stall, on purpose)
    said_at = loop.time()
    mic.feed(noise(0.06, seed=3))
    stamps: list[float] = []
    while True:
        chunk = await anext(chunks)
        assert mic.captured_at is not None
        stamps.append(mic.captured_at)
        if any(chunk):
            break
    assert len(stamps) >= 20  # the silence the room had while nobody read
    steps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert all(abs(step - chunk_s / pace) < 1e-9 for step in steps)  # one chunk apart: the stream's own clock
    assert said_at - chunk_s / pace <= stamps[-1] <= said_at + chunk_s / pace  # stamped when it was said
    room = MicStamps(lambda: loop.time() * pace, mic, pace)
    assert room.stamp(chunk) == stamps[-1] * pace  # the echo gate takes the device's time, not the late arrival
    await mic.close()


async def test_a_silent_rooms_reads_go_two_at_a_time_and_a_sound_goes_when_it_would_have() -> None:
    """Issue 34: a silent room's CPU is the loop's wake-ups. Once the room has been silent a while,
    a quiet read waits for the next; the chunks, their capture times and, for every read with a
    sound in it, the moment it is handed on stay those of reading 40 ms at a time."""
    from audio_io.format import audioop
    from audio_io.quiet_reads import QuietReads

    hiss = audioop.mul(noise(0.6, seed=5), 2, 0.0005)  # RMS about 9: under 20
    room = hiss + noise(0.1, seed=6) + hiss + noise(0.1, seed=7) + hiss
    chunk_bytes = CHUNK_BYTES
    seen: dict[bool, list[tuple[float, int, bytes]]] = {}
    waits = {False: 0, True: 0}  # the pacer's timers: the loop's wake-ups
    for holding in (False, True):
        mic = PushMicrophone(pace=20.0, read_ms=40, quiet=QuietReads(20, 0.2, 2) if holding else None)
        wait = mic._pacer._wait_until

        async def counted(due: int, wait=wait, holding=holding) -> None:  # type: ignore[no-untyped-def]
            waits[holding] += 1
            await wait(due)

        mic._pacer._wait_until = counted  # type: ignore[method-assign]
        await mic.start()
        mic.feed(room)
        chunks = mic.chunks()
        seen[holding] = []
        for _ in range(len(room) // chunk_bytes):
            chunk = await anext(chunks)
            assert mic.captured_at is not None
            seen[holding].append((round(mic.captured_at - mic._pacer.started_at, 9), mic._pacer._released_through, chunk))
        await mic.close()
    assert [(t, c) for t, _, c in seen[True]] == [(t, c) for t, _, c in seen[False]]  # the same chunks, stamped the same
    loud = [i for i, (_, _, c) in enumerate(seen[False]) if audioop.rms(c, 2) >= 20]
    assert len(loud) == 10 and all(seen[True][i][1] == seen[False][i][1] for i in loud)  # a sound: handed on as before
    assert all(seen[True][i][1] >= seen[False][i][1] for i in range(len(room) // chunk_bytes))
    wakeups = {holding: len({released for _, released, _ in seen[holding]}) for holding in seen}
    assert wakeups[True] < 0.75 * wakeups[False]  # 0.2 s after each sound, one release per two reads ...
    assert waits[True] == wakeups[True] and waits[False] == wakeups[False]  # ... and one wake-up per release
    held_late = [i for i in range(len(seen[True])) if seen[True][i][1] > seen[False][i][1]]
    assert held_late and all(seen[True][i][1] - seen[False][i][1] == 2 for i in held_late)  # one read late at most
    assert all(audioop.rms(seen[True][i][2], 2) < 20 for i in held_late)
    after_sound = [i for i in range(len(seen[True])) if any(0 < i - j <= 10 for j in loud)]
    assert not set(held_late) & set(after_sound) and min(held_late) >= 10  # the room silent 0.2 s (10 chunks) first
