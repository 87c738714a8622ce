"""Train the wake verifier (`detectors.wake_verify`): a logistic regression on openWakeWord's
embeddings where the shipped two-model wake fires, phrase against sound-alikes.

    nice -n 10 .venv/bin/python -m benchmarks.wake_verifier_train            # writes detectors/verifiers/hey_jarvis.npz

The training set is disjoint from the benchmark's (`benchmarks.wake_choice --neural`, `--base`):
- other sentences: commands (`TRAIN_COMMANDS`), sound-alikes (`TRAIN_NEAR`: none of
  `NEAR_MISS_LINES` or `EXTRA_NEAR_MISSES`) and ordinary sentences (`TRAIN_ORDINARY`) the
  benchmark never says;
- piper's en_US-joe-medium with other paces and deliveries (`TrainCorpus.scales`) and other sox
  effects (`TRAIN_EFFECTS`, `TRAIN_EFFECTS_2`); espeak-ng, flite and festival voices with the same new sentences.
Each clip goes through the very path the benchmark judges (`detectors.wake_test.heard_in` over
the shipped upload filter); wherever the spotter is about to accept a wake, the verifier's input
(the last `VERIFY_S` of audio) is read into openWakeWord's embeddings and kept, labelled by the
clip. So the classifier learns exactly the wakes it will be asked about. numpy only: standardised
features, L2-regularised logistic regression by Newton's method (through the Woodbury identity
when there are more features than samples), threshold chosen by clip-grouped cross-validation to
keep `--recall` of the training phrase's wakes, the regularisation the one of `--l2` that refuses
most other wakes there. piper is not seeded: with a fresh cache the same command makes other
renderings and slightly other weights (the shipped file, session 14: 357 wakes on the phrase and
the name alone, 213 on the rest; l2 30, threshold 0.521; piper 1.8.0 rendered the same clips twice here,
byte for byte: it may be deterministic now).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.corpus import (
    DEFAULT_CACHE, FAMILY_VOICES, WAKE_SPEEDS, Corpus, Effect, Noise, UtteranceSpec, mix, with_floor,
)
from benchmarks.neural_corpus import NeuralCorpus, NeuralSpec, Variant

PHRASE = "hey jarvis"
RELAXED = 0.5  # the cutoffs the wakes are collected at (`collect`)
# microWakeWord's best in a window, for a wake to be collected: its candidate cutoff (session 12), so
# that "jarvis, ..." alone (microWakeWord under 0.3, openWakeWord often above 0.8) is asked about too.
RELAXED_MICRO = 0.1
TRAIN_COMMANDS = (
    "turn on the kitchen lights", "play some quiet music", "how long until sunset", "remind me to call mum tonight",
    "what is on my calendar", "open my notes", "add eggs to the shopping list", "how far away is the moon",
)
# Sound-alikes of "hey jarvis" the benchmark never says (its lists: benchmarks.corpus.NEAR_MISS_LINES,
# benchmarks.neural_corpus.EXTRA_NEAR_MISSES).
TRAIN_NEAR = (
    "hey carlos", "hey charlie", "hey marcus", "hey davis", "hey harvey", "hey java", "hey nervous", "hey mavis",
    "hey jars", "hey curtis", "hey jarrod", "hey gervais", "hey artist", "hey carpets", "jarring this", "a jar is",
    "hey purpose", "they starve us", "hey jackass", "hey charges", "hard of hearing", "hey garlic", "hey jersey",
    "hey parsley",
    # Session 12: more of the kinds the benchmark's closest near misses are ("hey chavez", "hey jarvie",
    # "hey travis", "hey jealous": none of them, nor a homophone of one).
    "hey javier", "hey chaz", "hey travers", "hey jelly", "hey chavs", "hey marvel", "hey gravy", "hey jovial",
    "hey darvish", "hey carver", "hey calvin", "hey jarhead", "hey jadis", "hey jobless", "hey harbour", "hey starbucks",
    # Session 14: close to the pause rule's near misses ("hey, <pause> jarvie / chavez / harvest / travis /
    # jealous / service"), none of them nor a homophone of one; said after a pause too (`pause_specs`).
    "hey jarley", "hey charvey", "hey chavis", "hey hardest", "hey harness", "hey trellis", "hey zealous",
    "hey surface", "hey larvae", "hey ravish",
)
TRAIN_ORDINARY = (
    "the bus was twenty minutes late this morning", "could you pass the salt please", "I left my umbrella at work",
    "we watched a documentary about whales", "the printer is out of paper again", "dinner will be ready at eight",
    "he finally fixed the leaking tap", "it might snow later this week", "she plays the violin every evening",
    "let's go for a walk after lunch", "the neighbours are having a party", "my phone battery is nearly flat",
)
# Other paces, deliveries and rooms than the benchmark's (`neural_corpus.SOX_EFFECTS`, takes 0-11).
TRAIN_EFFECTS: dict[Variant, tuple[str, ...]] = {
    Variant.TEMPO: ("tempo", "-s", "1.07"),
    Variant.PITCH: ("pitch", "-120"),
    Variant.REVERB: ("reverb", "35", "40", "60"),
    Variant.FAR: ("reverb", "45", "60", "90"),  # session 14: speech across the room, peaks at -42 dBFS as the benchmark's
}
# A second pass through other settings of the same effects (session 12: more rooms and voices for both
# the phrase and the sound-alikes; the first model lost reverberant and noisy commands at 0.58-0.62).
TRAIN_EFFECTS_2: dict[Variant, tuple[str, ...]] = {
    Variant.PITCH: ("pitch", "-260"),
    Variant.REVERB: ("reverb", "70", "30", "90"),
    Variant.FAR: ("reverb", "75", "40", "95"),
}
TRAIN_VARIANTS = (Variant.PLAIN, Variant.TEMPO, Variant.PITCH, Variant.REVERB, Variant.NOISE, Variant.TV, Variant.FAR)
TRAIN_VARIANTS_2 = (Variant.PITCH, Variant.REVERB, Variant.NOISE, Variant.FAR)
# Session 14: the pause rule's wakes ("hey, <pause> ..."), in a plain and a reverberant room.
PAUSE_VARIANTS = (Variant.PLAIN, Variant.REVERB)
# The level lift each wake is also collected at (`--lift`, `detectors.wake_verify.Weights.lift_peak_dbfs`): about
# the peak of speech near the microphone. Session 14: it refused fewer other wakes in cross-validation than the
# audio as heard (125 against 136 of 213) and lost a far command more on draw 7; not shipped.
LIFT_PEAK_DBFS = -12.0
TRAIN_BASE_EFFECTS = (Effect.NONE, Effect.TEMPO, Effect.REVERB, Effect.PHONE)
WEIGHTS = Path(__file__).resolve().parent.parent / "detectors" / "verifiers" / "hey_jarvis.npz"


class TrainCorpus(NeuralCorpus):
    effects = TRAIN_EFFECTS

    def __init__(self, cache_dir: Path, base: Corpus, folder: str = "verifier-train",
                 effects: dict[Variant, tuple[str, ...]] = TRAIN_EFFECTS, draw: int = 0) -> None:
        super().__init__(cache_dir, base, folder, draw)
        self.effects = effects

    def scales(self, take: int) -> dict[str, float]:
        return {"length_scale": (0.95, 1.05, 1.15)[take % 3], "noise_scale": (0.6, 0.72)[take % 2],
                "noise_w_scale": (0.7, 0.9)[take % 2]}


def neural_specs(variants: tuple[Variant, ...] = TRAIN_VARIANTS, first_take: int = 100) -> list[NeuralSpec]:
    """Phrase + command (run on, after a pause, "hey ... jarvis"), the name alone ("jarvis, ...", also
    before a pause), sound-alikes (also "hey ... carlos"), ordinary; takes from `first_take` on."""
    specs = []
    for k, variant in enumerate(variants):
        for i in range(2 * len(TRAIN_COMMANDS)):
            command, take = TRAIN_COMMANDS[i % len(TRAIN_COMMANDS)], first_take + i + 16 * k
            form = (i + k) % 4
            if form == 3:
                specs.append(NeuralSpec(("hey", f"jarvis, {command}"), (0.45,), variant, True, take))
            elif form == 2:
                specs.append(NeuralSpec((PHRASE, command), (0.8,), variant, True, take))
            else:
                specs.append(NeuralSpec((f"{PHRASE}, {command}",), (), variant, True, take))
        name = PHRASE.split(" ", 1)[1]
        for i in range(len(TRAIN_COMMANDS)):  # the name alone, a third of them before a pause
            command, take = TRAIN_COMMANDS[(i + k) % len(TRAIN_COMMANDS)], first_take + 500 + i + 8 * k
            parts, pauses = ((name, command), (0.8,)) if i % 3 == 2 else ((f"{name}, {command}",), ())
            specs.append(NeuralSpec(parts, pauses, variant, True, take))
        for j in range(len(TRAIN_NEAR)):  # each line once per variant, the lines in turn from the variant's place
            i = j + 7 * k
            line, take, command = TRAIN_NEAR[i % len(TRAIN_NEAR)], first_take + i + 40 * k, TRAIN_COMMANDS[(i + k) % len(TRAIN_COMMANDS)]
            if line.startswith("hey ") and (i + k) % 5 == 0:
                specs.append(NeuralSpec(("hey", f"{line[4:]}, {command}"), (0.45,), variant, False, take))
            else:
                specs.append(NeuralSpec((f"{line}, {command}",), (), variant, False, take))
        for i in range(4):
            line = TRAIN_ORDINARY[(i + 4 * k) % len(TRAIN_ORDINARY)]
            specs.append(NeuralSpec((line,), (), variant, False, first_take + i + 4 * k))
    return specs


def pause_specs(first_take: int = 3000) -> list[NeuralSpec]:
    """The pause rule's shape: "hey, <pause> <sound-alike>, <command>" for every "hey ..." line, and as
    many "hey, <pause> jarvis, <command>" (pauses 0.35-0.65 s), through `PAUSE_VARIANTS`."""
    lines = [line[4:] for line in TRAIN_NEAR if line.startswith("hey ")]
    name = PHRASE.split(" ", 1)[1]
    specs = []
    for k, variant in enumerate(PAUSE_VARIANTS):
        for i, rest in enumerate(lines):
            take, command = first_take + i + 100 * k, TRAIN_COMMANDS[(i + k) % len(TRAIN_COMMANDS)]
            pause = (0.35, 0.45, 0.55, 0.65)[(i + k) % 4]
            specs.append(NeuralSpec(("hey", f"{rest}, {command}"), (pause,), variant, False, take))
            if i % 2 == 0:
                specs.append(NeuralSpec(("hey", f"{name}, {command}"), (pause,), variant, True, take + 50))
    return specs


def base_specs() -> list[UtteranceSpec]:
    """Every espeak-ng, flite and festival voice, at every pace, through the base corpus's effects."""
    voices = [v for family in FAMILY_VOICES.values() for v in family]
    specs = []
    for i in range(12 * len(voices)):
        voice, speed = voices[i % len(voices)], WAKE_SPEEDS[(i // len(voices)) % len(WAKE_SPEEDS)]
        effect = TRAIN_BASE_EFFECTS[(i // 7) % len(TRAIN_BASE_EFFECTS)]
        specs.append(UtteranceSpec((f"{PHRASE}, {TRAIN_COMMANDS[i % len(TRAIN_COMMANDS)]}",), voice, speed, True, effect=effect))
    for i in range(18 * len(voices)):
        voice, speed = voices[i % len(voices)], WAKE_SPEEDS[(i // len(voices)) % len(WAKE_SPEEDS)]
        effect = TRAIN_BASE_EFFECTS[(i // 7) % len(TRAIN_BASE_EFFECTS)]
        line = TRAIN_NEAR[i % len(TRAIN_NEAR)]
        specs.append(UtteranceSpec((f"{line}, {TRAIN_COMMANDS[i % len(TRAIN_COMMANDS)]}",), voice, speed, False, effect=effect))
    return specs


@dataclass
class Sample:
    rows: object  # (POSITIONS, features): the verifier's windows at one wake
    label: bool
    clip: str
    lifted: object = None  # the same windows read from the audio lifted to `LIFT_PEAK_DBFS`


class Recorder:
    """Stands in for the verifier: keeps what it would have been asked, accepts every wake."""

    def __init__(self) -> None:
        from detectors.wake_verify import EmbeddingReader

        self.read = EmbeddingReader()
        self.asked: list[tuple[object, object]] = []  # (as heard, lifted)
        self.last_score = None
        self.delay_s = 0.0

    def accepts(self, pcm16k: bytes) -> bool:
        from detectors.wake_verify import POSITIONS, WINDOWS, lifted, windows

        embeddings = self.read(pcm16k)
        if len(embeddings) >= WINDOWS + POSITIONS - 1:
            self.asked.append((windows(embeddings), windows(self.read(lifted(pcm16k, LIFT_PEAK_DBFS)))))
        return True


def collect(cache: str) -> list[Sample]:
    from config.settings import UploadMode, UploadSettings
    from detectors.pipeline import build_upload_filter
    from detectors.wake_test import TryJudge, heard_in

    base = Corpus(cache)
    neural = TrainCorpus(cache, base)
    second = TrainCorpus(cache, base, effects=TRAIN_EFFECTS_2)
    judge = TryJudge(build_upload_filter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), PHRASE, 8.0, 48000))
    recorder = Recorder()
    judge.spotter.verifier = recorder
    # Asked at more moments than the shipped cutoffs wake (microWakeWord alone above 0.5, openWakeWord
    # above 0.5 in a window microWakeWord opened, the pause rule above 0.7): a few more of the phrase,
    # "jarvis" alone, many more sound-alikes the models were nearly sure of.
    fusion = judge.spotter._fusion
    fusion.alone_cutoff = RELAXED
    fusion.settings = dataclasses.replace(fusion.settings, threshold=RELAXED, micro_cutoff=RELAXED_MICRO, pause_threshold=0.7)
    floor = base.noise(Noise.FAN, 10.0, seed=5)
    babble = base.noise(Noise.BABBLE, 10.0, seed=2)
    clips = [(c.name, c.pcm, c.addressed) for c in neural.clips(neural_specs())]
    clips += [(c.name + "-2", c.pcm, c.addressed) for c in second.clips(neural_specs(TRAIN_VARIANTS_2, first_take=1000))]
    clips += [(c.name + "-3", c.pcm, c.addressed) for c in neural.clips(pause_specs())]
    for index, clip in enumerate(base.clips(base_specs())):
        pcm = with_floor(clip.pcm, floor) if index % 2 else mix(clip.pcm, babble, 20)
        clips.append((clip.name, pcm, clip.addressed))
    samples = []
    for name, pcm, addressed in clips:
        recorder.asked.clear()
        heard_in(judge, pcm)
        samples += [Sample(rows, addressed, name, lift) for rows, lift in recorder.asked]
    return samples


def fit(x: object, y: object, l2: float, iterations: int = 30, negative_weight: float = 1.0) -> tuple[object, float]:
    """L2-regularised logistic regression (Newton's method on the standardised features); each negative row
    counts `negative_weight` times (session 20: the class weighting tried against the sound-alikes)."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    counts = np.where(y > 0.5, 1.0, negative_weight)
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(a @ w)))
        grad = a.T @ (counts * (p - y)) + reg * w
        if d + 1 <= n:
            hess = (a * (counts * p * (1 - p))[:, None]).T @ a + np.diag(reg + 1e-9)
            step = np.linalg.solve(hess, grad)
        else:  # more features than samples: the Woodbury form, (A'SA + R)^-1 g with R diagonal
            s = counts * p * (1 - p) + 1e-9
            r_inv = 1.0 / (reg + 1e-6)
            inner = np.diag(1.0 / s) + (a * r_inv) @ a.T
            step = r_inv * grad - r_inv * (a.T @ np.linalg.solve(inner, a @ (r_inv * grad)))
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return w[:-1], float(w[-1])


def weights_for(chosen: list[Sample], l2: float, threshold: float = 0.5, lift: float | None = None, negative_weight: float = 1.0):
    """A model fitted on every window of `chosen`, each labelled as its clip (a negative's rows counted
    `negative_weight` times)."""
    import numpy as np

    from detectors.wake_verify import Weights

    x = np.concatenate([s.rows for s in chosen])
    y = np.concatenate([[s.label] * len(s.rows) for s in chosen])
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-3
    coef, intercept = fit((x - mean) / scale, y, l2, negative_weight=negative_weight)
    return Weights(mean, scale, coef, intercept, threshold, lift)


def held_out(samples: list[Sample], l2: float, folds: int = 5, negative_weight: float = 1.0) -> list[tuple[float, Sample]]:
    """Each wake's score (its best window) by a model that never saw its clip (clip-grouped folds)."""
    clips = sorted({s.clip for s in samples})
    held: list[tuple[float, Sample]] = []
    for fold in range(folds):
        out = {c for i, c in enumerate(clips) if i % folds == fold}
        model = weights_for([s for s in samples if s.clip not in out], l2, negative_weight=negative_weight)
        held += [(float(model.scores(s.rows).max()), s) for s in samples if s.clip in out]
    return held


def threshold_for(held: list[tuple[float, Sample]], recall: float) -> float:
    positives = sorted(score for score, s in held if s.label)
    return positives[int((1 - recall) * len(positives))] if positives else 0.5


def train(samples: list[Sample], l2: float, recall: float, folds: int = 5):
    """Weights and a threshold: windows of a wake are each labelled as the clip; a wake's score is
    its best window. The threshold keeps `recall` of the phrase's wakes in clip-grouped
    cross-validation (each fold's clips unseen by its model)."""
    held = held_out(samples, l2, folds)
    threshold = threshold_for(held, recall)
    final = weights_for(samples, l2, threshold)
    kept = sum(score >= threshold for score, s in held if s.label)
    refused = sum(score < threshold for score, s in held if not s.label)
    return final, (kept, sum(s.label for _, s in held), refused, sum(not s.label for _, s in held))


def clip_kinds() -> dict[str, str]:
    """What each training clip of the neural voice says (by the name `NeuralCorpus.clip` gives it)."""
    import hashlib

    kinds = {}
    name = PHRASE.split(" ", 1)[1]
    for specs, suffix in ((neural_specs(), ""), (neural_specs(TRAIN_VARIANTS_2, first_take=1000), "-2"), (pause_specs(), "-3")):
        for spec in specs:
            key = "neural-" + hashlib.sha1(repr((spec.text, spec.variant.value, spec.take)).encode()).hexdigest()[:12] + suffix
            kind = (("name alone" if spec.text.startswith(name) else "phrase") if spec.addressed
                    else "ordinary" if spec.parts[0] in TRAIN_ORDINARY else "sound-alike")
            kinds[key] = ("far " if spec.variant is Variant.FAR else "pause " if suffix == "-3" else "") + kind
    return kinds


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--out", default=str(WEIGHTS))
    parser.add_argument("--l2", default="3,10,30",
                        help="the regularisation (larger: a smoother model); several: the one that refuses most "
                             "other wakes at --recall in cross-validation")
    parser.add_argument("--recall", type=float, default=0.98, help="of the phrase's wakes, kept in cross-validation")
    parser.add_argument("--samples", default="", help="a .npz to save (or, if it exists, load) the collected wakes")
    parser.add_argument("--lift", type=float, default=float("nan"), metavar="DBFS",
                        help=f"read quiet wakes lifted to this peak, {LIFT_PEAK_DBFS:g} (the weights keep it); nan (default, the shipped weights): as heard")
    args = parser.parse_args(argv)
    if args.samples and Path(args.samples).exists():
        with np.load(args.samples) as data:
            samples = [Sample(r, bool(l), str(c), f) for r, l, c, f in zip(data["rows"], data["labels"], data["clips"], data["lifted"])]
    else:
        samples = collect(args.cache)
        if args.samples:
            np.savez_compressed(args.samples, rows=np.stack([s.rows for s in samples]), lifted=np.stack([s.lifted for s in samples]),
                                labels=np.array([s.label for s in samples]), clips=np.array([s.clip for s in samples]))
    print(f"wakes collected: {sum(s.label for s in samples)} on the phrase, {sum(not s.label for s in samples)} on others")
    lift = None if args.lift != args.lift else args.lift  # nan: as heard (the weights before session 14)
    if lift is not None:
        assert lift == LIFT_PEAK_DBFS, "the wakes were collected lifted to LIFT_PEAK_DBFS"
        samples = [Sample(s.lifted, s.label, s.clip) for s in samples]
    best = None
    for l2 in [float(v) for v in args.l2.split(",") if v]:
        held = held_out(samples, l2)
        threshold = threshold_for(held, args.recall)
        refused = sum(score < threshold for score, s in held if not s.label)
        print(f"l2 {l2:g}: cross-validated threshold {threshold:.3f}, other wakes refused {refused}/"
              f"{sum(not s.label for _, s in held)}", flush=True)
        if best is None or refused >= best[0]:
            best = (refused, l2, held, threshold)
    assert best is not None
    _, l2, held, threshold = best
    kinds = clip_kinds()
    print(f"chosen l2 {l2:g}, threshold {threshold:.3f}; held-out wakes per kind (kept / asked):")
    for kind in ("phrase", "name alone", "sound-alike", "ordinary", "far phrase", "far name alone", "far sound-alike",
                 "pause phrase", "pause sound-alike", "synthetic voices"):
        chosen = [score for score, s in held if kinds.get(s.clip, "synthetic voices") == kind]
        print(f"  {kind}: {sum(score >= threshold for score in chosen)} / {len(chosen)}")
    for kind, label in (("synthetic voices", True), ("synthetic voices", False)):
        chosen = [score for score, s in held if kinds.get(s.clip, kind) == kind and s.label == label]
        print(f"  {kind}, {'phrase' if label else 'others'}: {sum(score >= threshold for score in chosen)} / {len(chosen)}")
    weights = weights_for(samples, l2, threshold, lift)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    weights.save(Path(args.out))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
