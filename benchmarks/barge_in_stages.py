"""Where barge-in trials are lost, by stage (issue 32, session 12): the canceller's residue, the
gate behind it, the detectors.

For `benchmarks/barge_in.py`'s trials (the same rooms, voices and seeds) at one echo level, with
the narration playing on (nothing is cut here: this measures what the detectors would hear up to
the end of the user's words), per trial:

- residue: the echo left in the canceller's output during the user's words, against the user's
  voice there (dB; the output less the user and the floor: the filters are linear), and the same
  with the echo alone (no user: what a filter undisturbed by the double talk leaves);
- gate: the share of the user's voiced chunks (rms >= 300) the gate behind the canceller drops;
- detectors (the assistant's `BargeInDetector` through a `StopListener`; a hit of either kind
  from the user's onset to 0.2 s after the end of the words), fed
  1. the canceller's output as shipped (the gate behind it),
  2. the canceller's output, ungated,
  3. the user + the residue of the echo-alone run (a filter the double talk does not disturb), ungated,
  4. the user alone with the floor (what the detectors can do at best), ungated.

Run: nice -n 10 .venv/bin/python -m benchmarks.barge_in_stages --level 0 [--trials 30] [--cancel main]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from audio_io.echo_cancel import EchoCanceller
from benchmarks.barge_in_room import (CHUNK, COMMAND_TEXT, LEAD_S, PHRASE, RATE, STOP_SETTINGS, STOP_TEXT, Scene, build_scenes,
                                      narration as room_narration, pcm, samples)
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from config.settings import EchoSettings, UploadMode, UploadSettings
from detectors.barge_in import BargeInDetector
from detectors.pipeline import build_wake_spotter
from detectors.stop_phrase import StopPhraseDetector
from detectors.stop_word import StopListener

FEEDS = ("shipped (gated)", "canceller, ungated", "user + echo-alone residue", "user alone")
DETECT_FROM_S = LEAD_S - 1.5  # the detectors hear from here (fresh), to save CPU


@dataclass
class Stages:
    residue_db: float  # echo left vs the user during the words, with the user talking
    residue_alone_db: float  # the same, echo alone
    gate_dropped: float  # share of the user's voiced chunks the gate behind the canceller dropped
    hits: tuple[bool, ...]  # per feed: a hit while the user spoke


def cancel(scene: Scene, with_user: bool, with_echo: bool = True, settings: EchoSettings = EchoSettings(),
           **kwargs: object) -> tuple[np.ndarray, list[bool]]:
    """The canceller's output for the scene's microphone (without the user, or with nothing played)."""
    canceller = EchoCanceller(settings, **kwargs)  # type: ignore[arg-type]
    played = scene.narration if with_echo else np.zeros(len(scene.narration))
    mic = (scene.user if with_user else 0.0) + (scene.echo(played) if with_echo else 0.0) + scene.noise
    out = bytearray()
    passed = []
    for i in range(len(mic) // CHUNK):
        at = i * CHUNK / RATE
        canceller.played(pcm(played[i * CHUNK:(i + 1) * CHUNK]) if with_echo else bytes(CHUNK * 2), at)
        out += canceller.process(pcm(mic[i * CHUNK:(i + 1) * CHUNK]), at)
        passed.append(canceller.passed)
    return samples(bytes(out)), passed


def heard(detector: BargeInDetector, signal: np.ndarray, passed: list[bool], start_s: float, end_s: float) -> bool:
    detector.reset()
    listener = StopListener(detector)
    first = int(DETECT_FROM_S * RATE) // CHUNK
    for i in range(first, min(len(signal) // CHUNK, int((end_s + 0.2) * RATE) // CHUNK + 1)):
        hit = listener.hear(pcm(signal[i * CHUNK:(i + 1) * CHUNK]), passed[i], True)
        if hit is not None and hit.end_s + DETECT_FROM_S >= start_s - 0.1:
            return True
    return False


def measure(scene: Scene, detector: BargeInDetector, **kwargs: object) -> Stages:
    n = len(scene.user) // CHUNK * CHUNK
    out, passed = cancel(scene, True, **kwargs)
    alone, _ = cancel(scene, False, **kwargs)
    # speexdsp's fixed processing (a DC notch, pre-emphasis) alters the user's voice by itself:
    # the residue is measured against the canceller's output with nothing played
    quiet, _ = cancel(scene, True, with_echo=False, **kwargs)
    quiet_floor, _ = cancel(scene, False, with_echo=False, **kwargs)
    user, noise = scene.user[:n], scene.noise[:n]
    start, end = int(LEAD_S * RATE), int(scene.word_end_s * RATE)
    words = slice(start, end)
    u = (user[words] ** 2).sum()
    residue = out[:n] - quiet[:n]
    residue_alone = alone[:n] - quiet_floor[:n]
    frames = user[: n].reshape(-1, CHUNK)
    voiced = np.sqrt((frames ** 2).mean(axis=1)) >= 300
    dropped = sum(1 for i in np.flatnonzero(voiced) if not passed[i]) / max(1, int(voiced.sum()))
    everything = [True] * len(passed)
    feeds = ((out, passed), (out, everything), (quiet[:n] - quiet_floor[:n] + alone[:n], everything), (user + noise, everything))
    hits = tuple(heard(detector, s, p, LEAD_S, scene.word_end_s) for s, p in feeds)
    return Stages(10 * np.log10((residue[words] ** 2).sum() / u), 10 * np.log10((residue_alone[words] ** 2).sum() / u),
                  dropped, hits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.barge_in_stages")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--level", type=float, default=0.0)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--one-filter", action="store_true", help="the single filter of session 10")
    parser.add_argument("--per-trial", action="store_true")
    args = parser.parse_args(argv)
    corpus = Corpus(args.cache)
    narration = room_narration(corpus)
    stop_settings = STOP_SETTINGS
    upload = UploadSettings(mode=UploadMode.ON_DEVICE_WAKE)
    detector = BargeInDetector(StopPhraseDetector(stop_settings), build_wake_spotter(upload, PHRASE), "hey jarvis")
    kwargs = {"shadow": not args.one_filter}
    level = args.level
    for text, seed in ((STOP_TEXT, int(10 - level)), (COMMAND_TEXT, int(50 - level))):
        results = []
        for k, scene in enumerate(build_scenes(corpus, text, level, args.trials, narration, seed)):
            results.append(r := measure(scene, detector, **kwargs))
            if args.per_trial:
                print(f"{text} #{k}: residue {r.residue_db:+.1f} dB (echo alone {r.residue_alone_db:+.1f}), "
                      f"gate dropped {r.gate_dropped:.0%}, hits {['y' if h else '-' for h in r.hits]}", flush=True)
        res = np.array([r.residue_db for r in results])
        alone = np.array([r.residue_alone_db for r in results])
        drop = np.array([r.gate_dropped for r in results])
        counts = [sum(r.hits[f] for r in results) for f in range(len(FEEDS))]
        print(f"| {level:+.0f} dB | \"{text}\" | {np.median(res):+.1f} ({res.min():+.1f} / {res.max():+.1f}) "
              f"| {np.median(alone):+.1f} ({alone.min():+.1f} / {alone.max():+.1f}) | {np.median(drop):.0%} ({drop.max():.0%}) | "
              + " | ".join(f"{c}/{len(results)}" for c in counts) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
