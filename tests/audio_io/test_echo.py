"""The echo gate in a simulated room: the narrator's echo (delayed, decayed, with a reflection)
never passes; a command starting in the echo's tail passes from its first word."""

from __future__ import annotations

import pytest

from audio_io.echo import EchoSuppressor
from config.settings import EchoSettings
from benchmarks.echo_choice import CHUNK_MS, AUDIBLE_RMS, GateCandidate, Score, _rms, make_room, synthesize
from speech.synth import silence


@pytest.fixture(scope="module")
def voices() -> tuple[bytes, list[bytes]]:
    import asyncio

    return asyncio.run(synthesize(quick=True))


@pytest.mark.parametrize("delay_ms, gain_db", [(20, -10), (50, -18), (80, -10), (80, -25)])
@pytest.mark.parametrize("offset_ms", [0, 40])
def test_echo_never_passes_and_a_command_in_its_tail_keeps_its_first_word(voices, delay_ms, gain_db, offset_ms):
    narration, commands = voices
    room = make_room(narration, commands[0], delay_ms, gain_db, offset_ms)
    score = Score()
    score.add(room, GateCandidate().run(room), 0.0)
    assert score.echo_chunks > 50 and score.echo_passed == 0
    assert score.first_lost_ms == [0.0] and score.speech_lost == 0


def test_an_echo_alone_is_dropped_whole_and_the_path_is_learnt(voices):
    narration, _ = voices
    room = make_room(narration, silence(200), 80, -10, 0)
    gate = EchoSuppressor()
    step = CHUNK_MS * 24 * 2
    played, mic = room.played.tobytes(), room.mic.tobytes()
    passed_echo = []
    for index in range(len(mic) // step):
        at = 50.0 + index * CHUNK_MS / 1000
        if index * step < len(played):
            gate.played(played[index * step : (index + 1) * step], at)
        if gate.process(mic[index * step : (index + 1) * step], at) is not None:
            passed_echo.append(_rms(room.echo[index * step // 2 : (index + 1) * step // 2]))
    assert not [rms for rms in passed_echo if rms >= AUDIBLE_RMS]
    assert gate.path is not None
    assert gate.path.delay_s == pytest.approx(0.08, abs=0.011)
    assert gate.path.gain_db == pytest.approx(-10, abs=3)  # the reflection adds a little


def test_nothing_played_nothing_suppressed():
    gate = EchoSuppressor()
    quiet = bytes(960)
    assert all(gate.process(quiet, 10.0 + i * 0.02) == quiet for i in range(50))
    assert gate.quiet_after_s(11.0) == 0.0


def test_quiet_after_tells_when_the_echo_is_surely_over(voices):
    narration, _ = voices
    gate = EchoSuppressor(EchoSettings(max_delay_ms=100, decay_db_per_s=300))
    gate.played(narration, at=20.0)
    end = 20.0 + len(narration) / 48000
    assert gate.quiet_after_s(20.0) > end - 20.0
    quiet_at = 20.0 + gate.quiet_after_s(20.0)
    assert gate.quiet_after_s(quiet_at + 0.001) == 0.0
    # From then on a faint sound passes: no echo is expected any more.
    faint = (b"\x10\x00\xf0\xff" * 240)
    assert gate.process(faint, quiet_at + 0.02) == faint


def test_a_silent_mic_while_the_narrator_plays_teaches_that_there_is_no_echo(voices):
    narration, commands = voices
    step = CHUNK_MS * 24 * 2
    # Cut off at its loudest chunk past the first second: the worst case would expect an echo as
    # loud as that for the next 150 ms.
    loudest = max(range(48000 // step, len(narration) // step), key=lambda i: _rms(array_of(narration[i * step : (i + 1) * step])))
    narration = narration[: (loudest + 1) * step]
    gate = EchoSuppressor()
    gate.played(narration, at=5.0)
    end = 5.0 + len(narration) / 48000
    at = 5.0
    while at < end:  # the mic hears nothing at all while the narration plays (no echo path)
        gate.process(bytes(step), at)
        at += CHUNK_MS / 1000
    # A command at once after: nothing of it is taken for echo (the worst case would drop it).
    command = commands[0][: 10 * step]
    kept = [gate.process(command[i : i + step], at + i / 48000) is not None for i in range(0, len(command), step)]
    loud = [_rms(array_of(command[i : i + step])) >= AUDIBLE_RMS for i in range(0, len(command), step)]
    assert all(k for k, audible in zip(kept, loud) if audible)


def test_what_never_played_is_no_reference(voices):
    narration, _ = voices
    gate = EchoSuppressor()
    gate.played(narration, at=5.0)
    gate.stopped(5.1)  # flushed (or a speaker done sooner than stamped): only 0.1 s played
    assert gate.quiet_after_s(5.1) < EchoSuppressor().settings.max_delay_ms / 1000 + 0.5
    faint = b"\x10\x00\xf0\xff" * 240
    assert gate.process(faint, 5.1 + gate.quiet_after_s(5.1) + 0.02) == faint


def array_of(pcm: bytes):
    from array import array

    samples = array("h")
    samples.frombytes(pcm)
    return samples


def test_the_margin_says_by_how_much_the_microphone_beat_the_echo_it_expected():
    # What the preroll listener judges a barge-in's hit by (detectors.barge_in.PrerollStopListener):
    # the echo alone sits about at the echo expected, a voice over it well above.
    import numpy as np

    rng = np.random.default_rng(3)
    chunk = 480  # 20 ms at 24 kHz
    played = (rng.standard_normal(chunk * 300) * 3000).astype(np.int16)
    echo = np.concatenate([np.zeros(chunk * 2), played[: -chunk * 2] * 0.3])  # 40 ms late, -10 dB
    voice = rng.standard_normal(len(echo)) * 3000  # 10 dB over the echo, once the path is learnt
    voice[: chunk * 250] = 0
    margins: dict[str, list[float]] = {"echo": [], "voice": []}
    for name, mic in (("echo", echo), ("voice", echo + voice)):
        gate = EchoSuppressor()
        for i in range(300):
            at = 10.0 + i * 0.02
            gate.played(played[i * chunk:(i + 1) * chunk].tobytes(), at)
            gate.process(np.clip(mic[i * chunk:(i + 1) * chunk], -32768, 32767).astype(np.int16).tobytes(), at)
            if i >= 250:  # the path learnt on the echo alone
                margins[name].append(gate.margin_db)
    assert all(-3 < m < 6 for m in margins["echo"])
    assert sorted(margins["voice"])[len(margins["voice"]) // 2] > 8
