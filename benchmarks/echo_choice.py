"""Echo suppression candidates in a simulated room: what echo reaches the listener, what speech
starting in the echo's tail is lost, and the CPU each costs.

    .venv/bin/python -m benchmarks.echo_choice [--quick]

The room: the narrator's audio (espeak-ng, or the synthetic voice without it) comes back into
the microphone delayed (20-80 ms) and decayed (-10 to -25 dB), with a weaker reflection 30 ms
later and a faint hiss; a user starts a command 0-100 ms after playback ends (inside the tail).
Candidates: the reference-energy gate (`audio_io.echo.EchoSuppressor`, shipped), and, when
installed, WebRTC's AEC3 (`pywebrtc-audio`) and speexdsp's canceller (`pyaec`). A canceller
passes every chunk cleaned, so for it "echo passed" counts echo-only chunks whose residual is
still above the gate's floor (what a VAD would hear), and "speech lost" counts speech chunks it
attenuated by more than 10 dB.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import time
from array import array
from dataclasses import dataclass
from typing import Protocol

from audio_io.echo import EchoSuppressor
from config.settings import EchoSettings
from audio_io.format import SAMPLE_RATE
from speech.synth import SpeechSynthesizer

CHUNK_MS = 20
CHUNK_SAMPLES = SAMPLE_RATE * CHUNK_MS // 1000
NARRATION = "The backup finished at half past eleven and copied five gigabytes to the external disk."
COMMANDS = ("Computer, what time is it?", "Computer, list the files.", "Computer, ask the brain why the sky is blue.")
AUDIBLE_RMS = 40.0  # echo at or above this (about -58 dBFS) would reach a VAD
SPEECH_RMS = 100.0  # a chunk of the command louder than this counts as speech


def _samples(pcm: bytes) -> array:
    samples = array("h")
    samples.frombytes(pcm[: len(pcm) - len(pcm) % 2])
    return samples


def _rms(samples: array | list[float]) -> float:
    return math.sqrt(sum(s * s for s in samples) / len(samples)) if len(samples) else 0.0


def _active_rms(samples: array) -> float:
    chunks = [samples[i : i + CHUNK_SAMPLES] for i in range(0, len(samples), CHUNK_SAMPLES)]
    loud = [c for c in chunks if _rms(c) > 200]
    return _rms([s for c in loud for s in c]) if loud else 1.0


@dataclass(frozen=True)
class Room:
    """One scene: what was played, what the mic heard, and the truth behind it."""

    played: array  # the narrator's audio, from t = 0
    echo: array  # its echo at the mic (same length as mic)
    speech: array  # the user's command at the mic (same length as mic)
    mic: array  # echo + speech + hiss, clipped to int16
    speech_start: int  # sample where the command begins
    label: str


def make_room(
    played_pcm: bytes, speech_pcm: bytes, delay_ms: float, gain_db: float, offset_ms: float,
    speech_db: float = -6.0, seed: int = 1,
) -> Room:  # fmt: skip
    """The mic of a room where `played_pcm` plays from t = 0 and a command starts `offset_ms`
    after it ends; the command's level is `speech_db` relative to the played audio."""
    played = _samples(played_pcm)
    speech_src = _samples(speech_pcm)
    gain = 10 ** (gain_db / 20)
    delay = int(SAMPLE_RATE * delay_ms / 1000)
    reflection = delay + int(SAMPLE_RATE * 0.03)
    speech_start = len(played) + int(SAMPLE_RATE * offset_ms / 1000)
    total = speech_start + len(speech_src) + SAMPLE_RATE // 2
    echo = [0.0] * total
    for i, s in enumerate(played):
        echo[i + delay] += gain * s
        echo[i + reflection] += 0.4 * gain * s
    level = 10 ** (speech_db / 20) * _active_rms(played) / _active_rms(speech_src)
    speech = [0.0] * total
    for i, s in enumerate(speech_src):
        speech[speech_start + i] = level * s
    rng = random.Random(seed)
    mic = array("h", (max(-32768, min(32767, int(e + v + rng.gauss(0, 10)))) for e, v in zip(echo, speech)))
    return Room(
        played, array("h", (int(e) for e in echo)), array("h", (int(v) for v in speech)), mic, speech_start,
        f"delay {delay_ms:g} ms, echo {gain_db:g} dB, command +{offset_ms:g} ms",
    )


class Candidate(Protocol):
    name: str

    def run(self, room: Room) -> list[array | None]:
        """The chunks the listener gets (None = dropped), one per 20 ms mic chunk."""


class GateCandidate:
    def __init__(self, settings: EchoSettings = EchoSettings()) -> None:
        self.name = "reference-energy gate (audio_io.echo)"
        self.settings = settings

    def run(self, room: Room) -> list[array | None]:
        gate = EchoSuppressor(self.settings)
        start = 1000.0  # any monotonic origin
        played = room.played.tobytes()
        step = CHUNK_SAMPLES * 2
        out: list[array | None] = []
        mic = room.mic.tobytes()
        for index in range(0, len(mic) // step):
            if index * step < len(played):  # the speaker is handed audio as it plays
                gate.played(played[index * step : (index + 1) * step], start + index * CHUNK_MS / 1000)
            chunk = mic[index * step : (index + 1) * step]
            passed = gate.process(chunk, start + index * CHUNK_MS / 1000)
            out.append(None if passed is None else _samples(passed))
        return out


class WebRtcCandidate:
    name = "WebRTC AEC3 (pywebrtc-audio 0.2.0, at 16 kHz)"

    def __init__(self) -> None:
        import numpy  # noqa: F401 - only to fail early when missing
        from pywebrtc_audio import EchoCanceller  # type: ignore[import-not-found]

        # AEC3 takes 16/32/48 kHz: the streams are resampled to 16 kHz (cost included).
        self._factory = lambda: EchoCanceller(sample_rate=16000, num_channels=1, stream_delay_ms=0)

    def run(self, room: Room) -> list[array | None]:
        import numpy as np

        from detectors.audio import Resampler

        aec = self._factory()
        far_pcm = room.played.tobytes() + bytes(2 * (len(room.mic) - len(room.played)))
        far_all = np.frombuffer(Resampler(SAMPLE_RATE)(far_pcm), dtype=np.int16)
        near_all = np.frombuffer(Resampler(SAMPLE_RATE)(room.mic.tobytes()), dtype=np.int16)
        out: list[array | None] = []
        for index in range(0, len(room.mic) // CHUNK_SAMPLES):
            pieces = []
            for sub in range(2):  # AEC3 takes 10 ms frames
                begin = index * 320 + sub * 160
                if begin + 160 <= min(len(near_all), len(far_all)):
                    pieces.append(aec.process(near_all[begin : begin + 160], far_all[begin : begin + 160]))
            out.append(array("h", np.concatenate(pieces).tobytes()) if pieces else array("h"))
        return out


class SpeexCandidate:
    name = "speexdsp canceller (pyaec 1.0.1)"

    def __init__(self) -> None:
        from pyaec import Aec  # type: ignore[import-not-found]

        self._factory = lambda: Aec(CHUNK_SAMPLES, SAMPLE_RATE // 5, SAMPLE_RATE, True)  # 200 ms filter

    def run(self, room: Room) -> list[array | None]:
        aec = self._factory()
        far_all = list(room.played) + [0] * (len(room.mic) - len(room.played))
        out: list[array | None] = []
        for index in range(0, len(room.mic) // CHUNK_SAMPLES):
            begin = index * CHUNK_SAMPLES
            cleaned = aec.cancel_echo(list(room.mic[begin : begin + CHUNK_SAMPLES]), far_all[begin : begin + CHUNK_SAMPLES])
            out.append(array("h", cleaned))
        return out


@dataclass
class Score:
    echo_chunks: int = 0  # chunks holding audible echo and no command
    echo_passed: int = 0  # ... of which the listener got audible echo
    speech_chunks: int = 0  # chunks holding the command
    speech_lost: int = 0  # ... dropped (or crushed by a canceller)
    first_lost_ms: list[float] | None = None  # per room: command audio lost before the first chunk passed
    audio_s: float = 0.0
    cpu_s: float = 0.0

    def add(self, room: Room, out: list[array | None], cpu_s: float) -> None:
        self.audio_s += len(room.mic) / SAMPLE_RATE
        self.cpu_s += cpu_s
        first_passed: int | None = None
        onset_chunk = next(  # the command's first audible chunk (espeak-ng leads with silence)
            i for i in range(len(out)) if _rms(room.speech[i * CHUNK_SAMPLES : (i + 1) * CHUNK_SAMPLES]) >= SPEECH_RMS
        )
        for index, got in enumerate(out):
            span = slice(index * CHUNK_SAMPLES, (index + 1) * CHUNK_SAMPLES)
            echo, speech = _rms(room.echo[span]), _rms(room.speech[span])
            if speech >= SPEECH_RMS:
                self.speech_chunks += 1
                lost = got is None or _rms(got) < speech * 10 ** (-10 / 20)
                self.speech_lost += lost
                if not lost and first_passed is None:
                    first_passed = index
            elif echo >= AUDIBLE_RMS and index < onset_chunk:
                self.echo_chunks += 1
                self.echo_passed += got is not None and _rms(got) >= AUDIBLE_RMS
        if self.first_lost_ms is None:
            self.first_lost_ms = []
        self.first_lost_ms.append(float(((first_passed if first_passed is not None else len(out)) - onset_chunk) * CHUNK_MS))


def rooms(narration: bytes, commands: list[bytes], quick: bool) -> list[Room]:
    delays = (20, 80) if quick else (20, 50, 80)
    gains = (-10, -25) if quick else (-10, -18, -25)
    offsets = (0, 50) if quick else (0, 20, 50, 100)
    scenes = []
    for di, delay in enumerate(delays):
        for gi, gain in enumerate(gains):
            for oi, offset in enumerate(offsets):
                command = commands[(di + gi + oi) % len(commands)]
                scenes.append(make_room(narration, command, delay, gain, offset, seed=di * 100 + gi * 10 + oi))
    return scenes


def candidates() -> list[tuple[str, Candidate | None]]:
    found: list[tuple[str, Candidate | None]] = [(GateCandidate().name, GateCandidate())]
    for factory, name in ((WebRtcCandidate, WebRtcCandidate.name), (SpeexCandidate, SpeexCandidate.name)):
        try:
            found.append((name, factory()))
        except ImportError:
            found.append((name, None))
    return found


async def synthesize(quick: bool) -> tuple[bytes, list[bytes]]:
    narrator = SpeechSynthesizer(voice="en-us")
    user = SpeechSynthesizer(voice="en-us+f3", words_per_minute=160)
    try:
        narration = await narrator.synthesize(NARRATION if not quick else "The backup finished at half past eleven.")
        commands = [await user.synthesize(text) for text in COMMANDS]
    finally:
        narrator.close()
        user.close()
    return narration, commands


def measure(quick: bool = False) -> list[tuple[str, Score | None]]:
    narration, commands = asyncio.run(synthesize(quick))
    scenes = rooms(narration, commands, quick)
    results: list[tuple[str, Score | None]] = []
    for name, candidate in candidates():
        if candidate is None:
            results.append((name, None))
            continue
        score = Score()
        for room in scenes:
            started = time.process_time()
            out = candidate.run(room)
            score.add(room, out, time.process_time() - started)
        results.append((name, score))
    return results


def table(results: list[tuple[str, Score | None]]) -> str:
    lines = [
        "| candidate | echo chunks reaching the listener | command chunks lost | command start lost, ms (median / max) | CPU ms per s of audio |",
        "|---|---|---|---|---|",
    ]
    for name, score in results:
        if score is None:
            lines.append(f"| {name} | not installed | | | |")
            continue
        lost = sorted(score.first_lost_ms or [0.0])
        lines.append(
            f"| {name} | {score.echo_passed}/{score.echo_chunks} | {score.speech_lost}/{score.speech_chunks} | "
            f"{lost[len(lost) // 2]:.0f} / {lost[-1]:.0f} | {1000 * score.cpu_s / score.audio_s:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    global CHUNK_MS, CHUNK_SAMPLES, candidates
    parser = argparse.ArgumentParser(prog="python -m benchmarks.echo_choice", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rooms (a test runs this)")
    parser.add_argument("--chunk-ms", type=int, default=CHUNK_MS, help="the microphone's chunk size (default %(default)s; "
                        "other sizes: the gate alone, the cancellers' framing assumes 20 ms)")
    args = parser.parse_args(argv)
    if args.chunk_ms != CHUNK_MS:  # issue 34: the shipped gate at another chunk size (chunk counts are in that size)
        CHUNK_MS, CHUNK_SAMPLES = args.chunk_ms, SAMPLE_RATE * args.chunk_ms // 1000
        candidates = lambda: [(GateCandidate().name, GateCandidate())]  # noqa: E731
    print(table(measure(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
