"""WAV-file microphone and speaker, and the open_audio factory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from audio_io import (
    WAV_TAIL_SILENCE_S,
    SAMPLE_RATE,
    AudioFileError,
    PyAudioMicrophone,
    PyAudioSpeaker,
    WavFileMicrophone,
    WavFileSpeaker,
    open_audio,
)
from audio_io.format import audioop
from config.settings import AudioSettings
from tests.support.audio_helpers import dominant_frequency, noise, read_wav, rms, tone, write_wav

CHUNK_BYTES = 960  # 20 ms at 24 kHz mono pcm16


async def _all_chunks(mic) -> list[bytes]:  # type: ignore[no-untyped-def]
    await mic.start()
    try:
        return [chunk async for chunk in mic.chunks()]
    finally:
        await mic.close()


async def test_interface_format_file_is_read_unchanged_in_chunk_sized_pieces(tmp_path: Path) -> None:
    audio = noise(0.51, seed=1)  # 25.5 chunks
    chunks = await _all_chunks(WavFileMicrophone(write_wav(tmp_path / "in.wav", audio), pace=0))
    assert b"".join(chunks) == audio
    assert [len(c) for c in chunks] == [CHUNK_BYTES] * 25 + [CHUNK_BYTES // 2]


async def test_chunk_ms_sets_the_chunk_size(tmp_path: Path) -> None:
    audio = noise(0.2, seed=2)
    chunks = await _all_chunks(WavFileMicrophone(write_wav(tmp_path / "in.wav", audio), chunk_ms=50, pace=0))
    assert [len(c) for c in chunks] == [2400] * 4


async def test_then_silence_continues_for_silence_s(tmp_path: Path) -> None:
    audio = noise(0.1, seed=3)
    mic = WavFileMicrophone(write_wav(tmp_path / "in.wav", audio), pace=0, then="silence", silence_s=0.2)
    chunks = await _all_chunks(mic)
    assert b"".join(chunks[:5]) == audio
    assert chunks[5:] == [bytes(CHUNK_BYTES)] * 10


async def test_endless_silence_ends_on_close(tmp_path: Path) -> None:
    mic = WavFileMicrophone(write_wav(tmp_path / "in.wav", noise(0.02, seed=4)), pace=0, then="silence")
    await mic.start()
    chunks = mic.chunks()
    assert await anext(chunks) == noise(0.02, seed=4)
    for _ in range(100):
        assert await anext(chunks) == bytes(CHUNK_BYTES)
    await mic.close()
    with pytest.raises(StopAsyncIteration):
        await anext(chunks)


async def test_paced_chunks_are_not_released_early(tmp_path: Path) -> None:
    pace = 10.0  # chunk i no earlier than i * 2 ms after start
    mic = WavFileMicrophone(write_wav(tmp_path / "in.wav", noise(0.2, seed=5)), pace=pace)
    loop = asyncio.get_running_loop()
    await mic.start()
    started = loop.time()
    times = [loop.time() - started async for _ in mic.chunks()]
    await mic.close()
    assert len(times) == 10
    for index, elapsed in enumerate(times):
        assert elapsed >= index * 0.02 / pace - 1e-3


async def test_close_interrupts_a_paced_wait(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "in.wav", noise(0.1, seed=6))
    mic = WavFileMicrophone(path, pace=0.0001)  # 200 s per chunk
    await mic.start()
    chunks = mic.chunks()
    await anext(chunks)  # chunk 0 is due at once
    waiter = asyncio.create_task(anext(chunks))
    await asyncio.sleep(0)
    await mic.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiter, 10)


async def test_other_rates_and_stereo_are_converted(tmp_path: Path) -> None:
    seconds = 1.0
    path = write_wav(tmp_path / "in.wav", tone(500, seconds, rate=44100, channels=2), rate=44100, channels=2)
    audio = b"".join(await _all_chunks(WavFileMicrophone(path, pace=0)))
    assert len(audio) / 2 / SAMPLE_RATE == pytest.approx(seconds, abs=0.002)
    assert dominant_frequency(audio, SAMPLE_RATE) == pytest.approx(500, abs=5)
    assert rms(audio) == pytest.approx(rms(tone(500, seconds)), rel=0.02)


async def test_8_bit_unsigned_wav_is_converted(tmp_path: Path) -> None:
    pcm16 = tone(400, 0.5, rate=SAMPLE_RATE)
    unsigned8 = audioop.bias(audioop.lin2lin(pcm16, 2, 1), 1, 128)
    path = write_wav(tmp_path / "in.wav", unsigned8, width=1)
    audio = b"".join(await _all_chunks(WavFileMicrophone(path, pace=0)))
    assert len(audio) == len(pcm16)
    assert max(abs(a - b) for a, b in zip(memoryview(audio).cast("h"), memoryview(pcm16).cast("h"))) < 256


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_text("not audio"), "is not a WAV file"),
        (lambda p: write_wav(p, bytes(600), channels=3), "3 channels"),
        (lambda p: None, "does not exist"),
    ],
)
async def test_unusable_files_give_a_clear_error(tmp_path: Path, make, message) -> None:  # type: ignore
    path = tmp_path / "in.wav"
    make(path)
    with pytest.raises(AudioFileError, match=message) as info:
        await WavFileMicrophone(path).start()
    assert str(path) in str(info.value)


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="then"):
        WavFileMicrophone("x.wav", then="loop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pace"):
        WavFileMicrophone("x.wav", pace=-1)


# --------------------------------------------------------------------------- WAV speaker


async def test_unpaced_wav_speaker_writes_everything_played(tmp_path: Path) -> None:
    path = tmp_path / "out" / "spoken.wav"
    speaker = WavFileSpeaker(path)
    await speaker.start()
    first, second = noise(0.3, seed=7), noise(0.2, seed=8)
    speaker.play(first)
    speaker.play(second)
    await speaker.drained()
    await speaker.close()
    assert read_wav(path) == (first + second, SAMPLE_RATE, 1, 2)


async def test_paced_wav_speaker_flush_keeps_only_what_had_played(tmp_path: Path) -> None:
    now = [10.0]
    speaker = WavFileSpeaker(tmp_path / "out.wav", pace=2.0, clock=lambda: now[0])
    await speaker.start()
    audio = noise(1.0, seed=9)
    speaker.play(audio)
    now[0] += 0.125  # 0.25 s of audio at pace 2
    speaker.flush()
    await speaker.drained()  # nothing queued any more
    await speaker.close()
    frames, *_ = read_wav(tmp_path / "out.wav")
    assert frames == audio[: int(0.25 * SAMPLE_RATE) * 2]


async def test_paced_wav_speaker_drained_waits_until_the_audio_would_have_played(tmp_path: Path) -> None:
    now = [0.0]
    speaker = WavFileSpeaker(tmp_path / "out.wav", pace=100.0, clock=lambda: now[0])
    await speaker.start()
    audio = noise(1.0, seed=10)
    speaker.play(audio)
    waiter = asyncio.create_task(speaker.drained())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()
    now[0] = 0.01  # 1 s of audio at pace 100
    await asyncio.wait_for(waiter, 10)
    await speaker.close()
    assert read_wav(tmp_path / "out.wav")[0] == audio


async def test_wav_speaker_reports_an_unwritable_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(AudioFileError, match="cannot write"):
        await WavFileSpeaker(tmp_path / "file" / "out.wav").start()


# --------------------------------------------------------------------------- factory


async def test_open_audio_with_paced_wav_input_continues_with_silence_in_real_time(tmp_path: Path) -> None:
    audio = noise(0.08, seed=11)
    settings = AudioSettings(
        input_wav=write_wav(tmp_path / "in.wav", audio), output_wav=tmp_path / "out.wav", chunk_ms=40
    )
    mic, speaker = open_audio(settings)
    assert isinstance(mic, WavFileMicrophone) and isinstance(speaker, WavFileSpeaker)
    await mic.start()
    chunks = mic.chunks()
    assert [await anext(chunks) for _ in range(3)] == [audio[:1920], audio[1920:], bytes(1920)]
    await mic.close()
    await speaker.start()
    speaker.play(noise(5.0, seed=12))  # five seconds in real time: far from played when closed
    await speaker.close()
    assert len(read_wav(tmp_path / "out.wav")[0]) < len(noise(5.0, seed=12))


async def test_open_audio_with_unpaced_wav_input_ends_after_a_silence_tail(tmp_path: Path) -> None:
    audio = noise(0.1, seed=13)
    settings = AudioSettings(
        input_wav=write_wav(tmp_path / "in.wav", audio),
        output_wav=tmp_path / "out.wav",
        realtime_wav_input=False,
    )
    mic, speaker = open_audio(settings)
    # The tail lets the VAD end the last utterance; then the input ends.
    assert b"".join(await _all_chunks(mic)) == audio + bytes(int(WAV_TAIL_SILENCE_S * 24000) * 2)
    await speaker.start()
    speaker.play(noise(5.0, seed=14))
    await speaker.close()
    assert read_wav(tmp_path / "out.wav")[0] == noise(5.0, seed=14)  # unpaced: played at once


def test_open_audio_uses_devices_otherwise(tmp_path: Path) -> None:
    mic, speaker = open_audio(AudioSettings(input_device="usb", output_device="3"))
    assert isinstance(mic, PyAudioMicrophone) and isinstance(speaker, PyAudioSpeaker)
    mic, speaker = open_audio(AudioSettings(input_wav=tmp_path / "in.wav"))
    assert isinstance(mic, WavFileMicrophone) and isinstance(speaker, PyAudioSpeaker)
