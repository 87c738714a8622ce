"""Issue 32: does WebRTC's noise suppression or gain control help the wake word and the VAD?

    nice .venv/bin/python -m benchmarks.webrtc_extras --neural 12 --draw 5

The issue asks for the audio processing module's noise suppressor and automatic gain control only
where a measurement shows the wake model or the VAD does better with them. This runs the shipped
wake path (the upload filter the default settings build: VAD, microWakeWord, the second model and
the gate, judged as `handoff wake-test` judges a recording: `detectors.wake_test.heard_in`) on the
neural-voice corpus (`benchmarks.neural_corpus`: far field, TV, noise, a pause, a lower voice ...)
as it comes and after `pywebrtc_audio.AudioProcessor` with noise suppression, gain control (the
adaptive digital controller), or both, at 24 kHz in 10 ms frames. One processor per condition
runs over all the clips in order, as it would run all day on a microphone (its gain adapts over
time, so a fresh one per clip would judge it unfairly). The VAD is inside the path: quiet far
speech the VAD drops is missed, so what the processing does for the VAD shows in the recall.

Printed: recall per variant, near misses and ordinary sentences woken per 100, and the CPU of the
processing per second of audio against the detector path's own, measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

import numpy as np

from benchmarks.corpus import DEFAULT_CACHE, RATE, Corpus
from benchmarks.wake_choice import POOLED, Tally, judges_for

FRAME = RATE // 100  # the module's 10 ms frame
CONDITIONS = {
    "as heard": None,
    "noise suppression": dict(noise_suppression=True),
    "gain control": dict(auto_gain_control=True),
    "both": dict(noise_suppression=True, auto_gain_control=True),
}


class Processed:
    """One `AudioProcessor` (or none) run over a stream of clips, as a microphone's would."""

    def __init__(self, options: dict | None) -> None:
        from pywebrtc_audio import AudioProcessor  # type: ignore[import-not-found]

        self._processor = None if options is None else AudioProcessor(sample_rate=RATE, **options)
        self._carry = np.zeros(0, dtype=np.int16)  # a clip's last part frame, finished by the next clip
        self.cpu_s = 0.0

    def clip(self, pcm: bytes) -> bytes:
        if self._processor is None:
            return pcm
        start = time.process_time()
        samples = np.concatenate([self._carry, np.frombuffer(pcm, dtype=np.int16)])
        whole = len(samples) // FRAME * FRAME
        out = [np.asarray(self._processor.process(samples[i:i + FRAME]), dtype=np.int16) for i in range(0, whole, FRAME)]
        self._carry = samples[whole:]
        self.cpu_s += time.process_time() - start
        # The clip as long as it came (its last part frame comes out with the next clip's first):
        # the judge sees the same chunks either way.
        done = np.concatenate(out) if out else np.zeros(0, dtype=np.int16)
        return (done.tobytes() + bytes(len(pcm)))[:len(pcm)]


def table(phrase: str, per_variant: int, cache: str, draw: int) -> list[str]:
    from benchmarks.neural_corpus import NeuralCorpus, Variant, neural_near_specs, neural_ordinary_specs, neural_wake_specs
    from detectors.wake_test import heard_in

    corpus = NeuralCorpus(cache, Corpus(cache), draw=draw)
    judges = {name: judges_for(phrase, ["shipped"])["shipped"] for name in CONDITIONS}
    streams = {name: Processed(options) for name, options in CONDITIONS.items()}
    tallies: dict[tuple[str, str, str], Tally] = defaultdict(Tally)
    audio_s, judge_cpu_s = 0.0, 0.0
    for kind, specs in (("addressed", neural_wake_specs(phrase, per_variant)),
                        ("near", neural_near_specs(phrase, per_variant)), ("ordinary", neural_ordinary_specs(per_variant))):
        for spec in specs:
            clip = corpus.clip(spec)
            audio_s += clip.seconds
            for name in CONDITIONS:
                pcm = streams[name].clip(clip.pcm)
                start = time.process_time()
                heard = heard_in(judges[name], pcm)
                if name == "as heard":
                    judge_cpu_s += time.process_time() - start
                tallies[(name, kind, spec.variant.value)].add(heard)
                if kind == "addressed" and spec.variant not in (Variant.PAUSE_AFTER_HEY, Variant.NAME_ALONE):
                    tallies[(name, kind, POOLED)].add(heard)
                tallies[(name, kind, "all")].add(heard)
    names = list(CONDITIONS)
    lines = [f"| variant ({phrase}, piper en_US-joe-medium, draw {draw}) | " + " | ".join(
                f"{name}: recall % / near / ordinary per 100" for name in names) + " |",
             "|---|" + "---|" * len(names)]
    for variant in [v.value for v in Variant] + [POOLED, "all"]:
        lines.append(f"| {variant} | " + " | ".join(
            f"{tallies[(name, 'addressed', variant)].pct()} / {tallies[(name, 'near', variant)].per100()} / "
            f"{tallies[(name, 'ordinary', variant)].per100()}" for name in names) + " |")
    lines.append(f"\nCPU per second of audio ({audio_s:.0f} s): the detector path {1000 * judge_cpu_s / audio_s:.1f} ms; "
                 + ", ".join(f"{name} {1000 * streams[name].cpu_s / audio_s:.1f} ms" for name in names[1:]) + ".")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neural", type=int, default=12, metavar="N", help="clips per variant")
    parser.add_argument("--draw", type=int, default=0, help="which rendering of the neural corpus")
    parser.add_argument("--phrase", default="hey jarvis")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    args = parser.parse_args(argv)
    print("\n".join(table(args.phrase, args.neural, args.cache, args.draw)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
