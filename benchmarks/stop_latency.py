"""How fast "computer, stop" silences a narration, through the whole pipeline in real time.

    .venv/bin/python -m benchmarks.stop_latency [--quick] [--trials N] [--chunk-ms MS]

The assistant runs against the simulator (its narrator streams audio ten times faster than real
time, as the real service does, so the speaker holds seconds of it when the user speaks), with a
real-time in-memory microphone and speaker (the modelled speaker plays as a device would; a
PortAudio device adds its output buffer, 20 ms by default). The user says "computer, stop" after
0.5 to 3 s of a long answer. The stop detector is a scripted stand-in that reports the phrase one
chunk (20 ms, or `--chunk-ms`: the microphone's chunk size) after it ends, as a keyword spotter reports a word once it has ended; the acoustic
detector's own delay is measured in its own benchmark.

Printed per trial, from the detector's hit: the speaker flushed; the last PCM of the narration
written (never after the flush); the speaker silent; the narrator's response cancelled and its
session closed; the listener ready again. Against the 200 ms budget (issue 14), as a ratio; and,
as the baseline measured in the same run, how much of the answer would still have played.
Figures are printed, never asserted (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from audio_io import BYTES_PER_SECOND, MemorySpeaker, PushMicrophone
from assembly.build import assistant
from concurrency.changes import Changes, wait_for
from config.settings import AudioSettings, ConversationSettings
from decisions.timeline import Timeline
from realtime_sim import SimConfig, SimServer
from speech.local_voice import tone
from speech.synth import synthetic_speech
from tests.support.pipeline_harness import UTTERANCE, fast_settings
from tests.support.stop_detectors import LoudStopDetector

BUDGET_MS = 200.0
OFFSETS_S = (0.5, 1.0, 2.0, 3.0)
ANSWER = " ".join(["The quick brown fox jumps over the lazy dog, and then it runs away."] * 6)
STOP_WORDS = tone([523.0, 659.0], 0.25, volume=0.5)  # what the scripted detector hears as "computer, stop"


class WatchedSpeaker(MemorySpeaker):
    """A paced memory speaker that says when audio was queued (the stop tests use it too)."""

    def __init__(self, pace: float = 1.0) -> None:
        super().__init__(pace=pace)
        self.changes = Changes()
        self.queued = 0

    def play(self, pcm: bytes) -> None:
        super().play(pcm)
        self.queued += len(pcm)
        self.changes.notify()


@dataclass(frozen=True)
class Trial:
    offset_s: float
    word_to_hit_ms: float
    flushed_ms: float
    last_write_ms: float  # negative: the last PCM was written before the hit
    silent_ms: float
    closed_ms: float
    listening_ms: float
    dropped_s: float  # the answer that would still have played (the baseline)


async def one_trial(offset_s: float, folder: Path, chunk_ms: int = AudioSettings().chunk_ms) -> Trial:
    root = Path(tempfile.mkdtemp(dir=folder))
    sim = SimServer(SimConfig(audio_frame_delay_s=0.02, use_espeak=False, seed=1))
    await sim.start()
    try:
        workspace = root / f"w{offset_s}"
        workspace.mkdir()
        settings = fast_settings(sim.base_url, workspace, root / f"s{offset_s}",
                                 conversation=ConversationSettings(follow_up_s=0), stop_while_talking=True)
        settings = dataclasses.replace(settings, audio=dataclasses.replace(settings.audio, chunk_ms=chunk_ms))
        timeline, microphone, speaker = Timeline(), PushMicrophone(chunk_ms=chunk_ms, pace=1.0), WatchedSpeaker()
        detector = LoudStopDetector()
        async with assistant(settings, microphone, speaker, timeline, stop_detector=detector) as coordinator:
            task = asyncio.create_task(coordinator.run())
            try:
                await wait_for(timeline, lambda t: t.count("listening") >= 1, 20)
                sim.script.push_tool_call("echo", {"text": ANSWER})
                sim.script.push_transcript("Computer, read me the story")
                microphone.feed(UTTERANCE)
                await speaker.changes.wait_until(lambda: speaker.queued > 0, 30)
                await asyncio.sleep(offset_s)  # the user listens for a while (the lapse of time is the point)
                listening = timeline.count("listening")
                microphone.feed(STOP_WORDS)
                await wait_for(timeline, lambda t: t.count("stopped") == 1, 10)
                await wait_for(timeline, lambda t: t.count("listening") > listening, 10)
                ready_at = time.monotonic()
                timing = coordinator.stop_timings[-1]
                await wait_for(timeline, lambda t: t.count("narrated") >= 1, 10)
                assert timing.flushed_at is not None and timing.done_at is not None and timing.last_write_at is not None, timing
                end = speaker.clock_at(speaker.intervals[-1][1])
                heard = timing.heard_at
                return Trial(
                    offset_s,
                    word_to_hit_ms=timing.detector_ms or 0.0,
                    flushed_ms=(timing.flushed_at - heard) * 1000,
                    last_write_ms=(timing.last_write_at - heard) * 1000,
                    silent_ms=max(0.0, end - heard) * 1000,
                    closed_ms=(timing.done_at - heard) * 1000,
                    listening_ms=(ready_at - heard) * 1000,
                    dropped_s=len(synthetic_speech(ANSWER)) / BYTES_PER_SECOND - len(speaker.played) / BYTES_PER_SECOND,
                )
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        await sim.stop()


def table(trials: list[Trial]) -> str:
    lines = [
        "| stop after | word end -> hit | hit -> flush | hit -> last PCM written | hit -> silent | word end -> silent "
        "(/ 200 ms budget) | hit -> session closed | hit -> listening | answer dropped (baseline) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in trials:
        total = t.word_to_hit_ms + t.silent_ms
        lines.append(
            f"| {t.offset_s:.1f} s | {t.word_to_hit_ms:.0f} ms | {t.flushed_ms:.2f} ms | {t.last_write_ms:.0f} ms | "
            f"{t.silent_ms:.1f} ms | {total:.0f} ms ({total / BUDGET_MS:.2f}) | {_closed(t.closed_ms)} | "
            f"{t.listening_ms:.0f} ms | {t.dropped_s:.1f} s |"
        )
    totals = [t.word_to_hit_ms + t.silent_ms for t in trials]
    lines.append(f"\nword end -> silent: median {statistics.median(totals):.0f} ms, max {max(totals):.0f} ms "
                 f"(budget {BUDGET_MS:.0f} ms)")
    return "\n".join(lines)


def _closed(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 0 else "before (all sent)"


async def measure(offsets: tuple[float, ...], chunk_ms: int = AudioSettings().chunk_ms) -> str:
    with tempfile.TemporaryDirectory() as folder:
        trials = [await one_trial(offset, Path(folder), chunk_ms) for offset in offsets]
    return table(trials)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stop_latency", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one trial")
    parser.add_argument("--trials", type=int, default=1, help="runs of each stop offset")
    parser.add_argument("--chunk-ms", type=int, default=AudioSettings().chunk_ms,
                        help="the microphone's chunk size (default: the settings' %(default)s ms)")
    args = parser.parse_args(argv)
    offsets = OFFSETS_S[:1] if args.quick else OFFSETS_S * args.trials
    print(f"microphone chunks of {args.chunk_ms} ms")
    print(asyncio.run(measure(offsets, args.chunk_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
