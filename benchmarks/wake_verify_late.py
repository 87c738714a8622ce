"""The wake verifier on a window ending a little after the wake (issue 34, session 16): does the
name's last sound ("jarvis" against "jarvie", "jarvis, ..." against "jarvis was ...") decide it?

    # the training wakes (session 16: every other clip of the first pass, in three parts, the new
    # sound-alikes, and the synthetic voices in two parts), and a draw's:
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-train .cache/corpus train0.npz --small --shard 0/3
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-extra .cache/corpus extra.npz
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-base .cache/corpus base0.npz --shard 0/2
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-draw .cache/corpus draw1.npz --draw 1
    # session 18: the benchmark's synthetic voices (`wake_choice --base 24`'s clips), judged offline as a draw is
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-bench-base .cache/corpus bench_base.npz
    # session 18: the late weights on everything collected (the candidate `hey_jarvis_late200_s18.npz`)
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-far .cache/corpus far.npz
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late train s18.npz 0.8 -30 0.5 even.npz odd.npz far.npz tv.npz base.npz extra.npz
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late judge s18.npz rdraw5.npz rdraw6.npz bench_base.npz
    # (its "base.npz" is `collect-base`'s training clips: retrained from them, the candidate's weights are byte-equal)
    # session 19: commands in noise and far, everything under the TV, in the training draws (`TRAIN_DRAWS`)
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-noisy .cache/corpus noisy31.npz --draw 31
    # session 20: the closest sound-alikes in every sound variant, in training draws 33/34 (`HARD_DRAWS`); negatives
    # may count more than once in the fit (`--negative-weight`)
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late collect-hard .cache/corpus hard33.npz --draw 33
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late train s20.npz 0.66 -30 0.55 even.npz ... hard34.npz [--negative-weight 2]
    # session 21: session 20's late weights with weights for 100 and 300 ms after the wake, scores averaged
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late blend s21.npz s20.npz 0.68 -30 0.4 even.npz ... hard34.npz
    # and, after a pause (the 300 ms after the wake 20 dB under the name), weights at the wake above 0.6
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late blend s21p.npz s20.npz 0.68 -30 0.4 even.npz ... hard34.npz --at-pause 0.6 20
    # per delay: weights trained (written to /tmp/wake34q/late-<ms>.npz), judged on the draw
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_late sweep draw1.npz detectors/verifiers/hey_jarvis.npz train0.npz ...

`collect-*` runs each clip through the path the benchmark judges (`heard_in` over the shipped
upload filter, `WAKE_VERIFY`'s rule) with a verifier that refuses every wake and keeps, for each
ask, the verifier's windows read from audio ending `DELAYS_S` after the wake (the spotter's own
16 kHz stream, so what a delayed verifier would hear). Refusing every ask leaves the sequence of
asks the shipped path makes up to its first accepted wake, so a clip is woken at a threshold
exactly when one of its asks scores at least that (a clip's asks before the first accepted one
are the same). The training clips are `benchmarks.wake_verifier_train`'s (its cutoffs relaxed).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

# Session 22: and on openWakeWord's 80 ms frame grid (0.12 / 0.2 / 0.28 share one embedding pass; 0.04 and
# 0.36 too), appended so that the older files' delay indexes still hold.
DELAYS_S = (0.0, 0.1, 0.2, 0.3, 0.04, 0.12, 0.28, 0.36)
TAILS_S = (0.28, 0.3)  # the audio after the wake whose peak the pause rule reads (`Weights.early_after_quiet_db`)
PHRASE = "hey jarvis"


class LateRecorder:
    """Stands in for the verifier: each ask's windows at each delay, read later from the stream."""

    def __init__(self, spotter: object) -> None:
        self.spotter = spotter
        self.stream = bytearray()  # every 16 kHz sample the spotter appended (its `_recent_end` indexes it)
        self.positions: list[int] = []
        self.tails: list[list[float]] = []  # per ask, the peak dBFS of each of `TAILS_S` after the wake
        self.last_score = None
        self.weights = None
        self.delay_s = 0.0
        resample = spotter._resample  # type: ignore[attr-defined]

        def tapped(chunk: bytes) -> bytes:
            out: bytes = resample(chunk)
            self.stream.extend(out)
            return out

        tapped.reset = resample.reset  # type: ignore[attr-defined]
        spotter._resample = tapped  # type: ignore[attr-defined]

    def clear(self) -> None:
        self.stream.clear()
        self.positions.clear()
        self.tails.clear()
        self.spotter._recent_end = 0  # type: ignore[attr-defined]

    def accepts(self, pcm16k: bytes) -> bool:
        self.positions.append(self.spotter._recent_end)  # type: ignore[attr-defined]
        return False

    def windows(self, read: object) -> list:
        """Per ask, per delay: the verifier's rows (POSITIONS, features)."""
        import numpy as np

        from detectors.wake_verify import POSITIONS, VERIFY_S, WINDOWS, windows

        from detectors.wake_verify import peak_dbfs

        out, peaks = [], []
        self.tails = [[max(-99.0, peak_dbfs(bytes(self.stream[end * 2 : (end + int(t * 16000)) * 2]))) for t in TAILS_S]
                      for end in self.positions]
        for end in self.positions:
            rows = []
            for delay in DELAYS_S:
                stop = end + int(delay * 16000)
                pcm = bytes(self.stream[max(0, stop - int(VERIFY_S * 16000)) * 2 : stop * 2])
                pcm += b"\0" * max(0, stop * 2 - len(self.stream) * 2) if stop * 2 > len(self.stream) else b""
                peaks.append(max(-99.0, peak_dbfs(pcm)))
                emb = read(pcm)  # type: ignore[operator]
                rows.append(windows(emb) if len(emb) >= WINDOWS + POSITIONS - 1 else np.zeros((POSITIONS, WINDOWS * 96), np.float32))
            out.append(np.stack(rows))
        return out, np.array(peaks).reshape(len(out), len(DELAYS_S))


def _judge(relaxed: bool):
    from benchmarks.wake_choice import judges_for
    from benchmarks.wake_verifier_train import RELAXED, RELAXED_MICRO

    judge = judges_for(PHRASE, ["WAKE_VERIFY=true"])["WAKE_VERIFY=true"]
    if relaxed:
        fusion = judge.spotter._fusion
        fusion.alone_cutoff = RELAXED
        fusion.settings = dataclasses.replace(fusion.settings, threshold=RELAXED, micro_cutoff=RELAXED_MICRO, pause_threshold=0.7)
    return judge


def _run(clips: list, relaxed: bool, out: str) -> None:
    import numpy as np

    from detectors.wake_test import heard_in
    from detectors.wake_verify import EmbeddingReader

    judge = _judge(relaxed)
    recorder = LateRecorder(judge.spotter)
    judge.spotter.verifier = recorder
    read = EmbeddingReader()
    rows, clip_of, labels, names, meta, peaks, tails = [], [], [], [], [], [], []
    for index, (name, pcm, addressed, info) in enumerate(clips):
        recorder.clear()
        heard_in(judge, pcm)
        found, levels = recorder.windows(read)
        tails += recorder.tails
        for r, level in zip(found, levels):
            rows.append(r)
            peaks.append(level)
            clip_of.append(index)
        labels.append(addressed)
        names.append(name)
        meta.append(info)
        if index % 50 == 0:
            print(f"{index}/{len(clips)} clips, {len(rows)} asks", flush=True)
    np.savez_compressed(out, rows=np.stack(rows) if rows else np.zeros((0,)), clip=np.array(clip_of), peaks=np.array(peaks), tails=np.array(tails),
                        labels=np.array(labels), names=np.array(names), meta=np.array(meta))


def collect_train(cache: str, out: str, small: bool = False, shard: tuple[int, int] = (0, 1), odd: bool = False) -> None:
    """The verifier's training clips (`small`: every other clip of the neural voice's first pass only,
    session 16's time; `odd` with it: the other half (session 17); `shard` (i, n): the i-th of n parts,
    collected in parallel)."""
    from benchmarks.corpus import Corpus, Noise, mix, with_floor
    from benchmarks.wake_verifier_train import TRAIN_EFFECTS_2, TRAIN_VARIANTS_2, TrainCorpus, base_specs, neural_specs, pause_specs

    base = Corpus(cache)
    neural = TrainCorpus(Path(cache), base)
    second = TrainCorpus(Path(cache), base, effects=TRAIN_EFFECTS_2)
    floor = base.noise(Noise.FAN, 10.0, seed=5)
    babble = base.noise(Noise.BABBLE, 10.0, seed=2)
    first = neural_specs()[int(odd) :: 2] if small else neural_specs()
    clips = [(c.name, c.pcm, c.addressed, c.text) for c in neural.clips(first[shard[0] :: shard[1]])]
    if small:
        print(f"{len(clips)} training clips rendered", flush=True)
        return _run(clips, True, out)
    clips += [(c.name + "-2", c.pcm, c.addressed, c.text) for c in second.clips(neural_specs(TRAIN_VARIANTS_2, first_take=1000))]
    clips += [(c.name + "-3", c.pcm, c.addressed, c.text) for c in neural.clips(pause_specs())]
    for index, clip in enumerate(base.clips(base_specs())):
        pcm = with_floor(clip.pcm, floor) if index % 2 else mix(clip.pcm, babble, 20)
        clips.append((clip.name, pcm, clip.addressed, "synthetic: " + clip.text))
    print(f"{len(clips)} training clips rendered", flush=True)
    _run(clips, True, out)


# Session 16: sound-alikes of the two kinds the verifier still accepts (issue 34: "hey jarvie", "jarvis was
# late"), none of the benchmark's lines nor a homophone of one: "hey <jarvi-e>" and the name as a sentence's subject.
EXTRA_TRAIN_NEAR = (
    "hey jervie", "hey marvie", "hey darvie", "hey jarvo", "hey jarbie", "hey jovie", "hey charvie", "hey jarvin",
    "hey jarvia", "hey jorvie", "jarvis said no", "jarvis went home", "jarvis told me", "jarvis is asleep",
    "jarvis was here", "jarvis wants more", "jarvis fixed it", "jarvis can wait",
)


def extra_specs(first_take: int = 5000) -> list:
    from benchmarks.neural_corpus import NeuralSpec
    from benchmarks.wake_verifier_train import TRAIN_COMMANDS, TRAIN_VARIANTS

    return [NeuralSpec((f"{line}, {TRAIN_COMMANDS[(j + k) % len(TRAIN_COMMANDS)]}",), (), variant, False, first_take + j + 40 * k)
            for k, variant in enumerate(TRAIN_VARIANTS) for j, line in enumerate(EXTRA_TRAIN_NEAR)]


def collect_extra(cache: str, out: str) -> None:
    from benchmarks.corpus import Corpus
    from benchmarks.wake_verifier_train import TrainCorpus

    neural = TrainCorpus(Path(cache), Corpus(cache))
    clips = [(c.name + "-x", c.pcm, c.addressed, c.text) for c in neural.clips(extra_specs())]
    print(f"{len(clips)} extra training clips rendered", flush=True)
    _run(clips, True, out)


def collect_tv(cache: str, out: str, passes: int = 2) -> None:
    """Session 17: more of the training's TV variant (new takes: other paces and stretches of the TV's
    talk), the late window's hardest case (the TV's talk after the name)."""
    from benchmarks.corpus import Corpus
    from benchmarks.neural_corpus import Variant
    from benchmarks.wake_verifier_train import TrainCorpus, neural_specs

    neural = TrainCorpus(Path(cache), Corpus(cache))
    specs = [s for k in range(passes) for s in neural_specs((Variant.TV,), first_take=7000 + 200 * k)]
    clips = [(c.name + "-tv", c.pcm, c.addressed, c.text) for c in neural.clips(specs)]
    print(f"{len(clips)} TV training clips rendered", flush=True)
    _run(clips, True, out)


# Session 18: other rooms for speech across the room (the late window's far scores moved 0.2-0.98 between
# draws, session 17): none of them the benchmark's (`neural_corpus.SOX_EFFECTS`) nor the training's.
FAR_ROOMS = (("reverb", "55", "70", "85"), ("reverb", "80", "60", "70"))


def collect_far(cache: str, out: str) -> None:
    """Session 18: the training's far variant again in `FAR_ROOMS` (new takes)."""
    from benchmarks.corpus import Corpus
    from benchmarks.neural_corpus import Variant
    from benchmarks.wake_verifier_train import TrainCorpus, neural_specs

    clips = []
    for k, room in enumerate(FAR_ROOMS):
        neural = TrainCorpus(Path(cache), Corpus(cache), effects={Variant.FAR: room})
        specs = neural_specs((Variant.FAR,), first_take=8000 + 300 * k)
        clips += [(c.name + f"-far{k}", c.pcm, c.addressed, c.text) for c in neural.clips(specs)]
    print(f"{len(clips)} far training clips rendered", flush=True)
    _run(clips, True, out)


# Session 19: the late verifier's weak spots on the draws (noise 8/12 on draw 9; the TV's talk after a
# sound-alike; far commands just under the quiet threshold 0.5), from the training's lines (none of the
# benchmark's) with each take's noise seed and TV offset drawn as a benchmark draw's, under draw numbers no
# benchmark figure uses (`TRAIN_DRAWS`), and far speech in a third room (none of the benchmark's or `FAR_ROOMS`).
TRAIN_DRAWS = (31, 32)
FAR_ROOM_3 = ("reverb", "65", "45", "75")


def noisy_specs(first_take: int) -> list:
    """Commands in noise (two passes) and across the room, and everything under the TV (commands, the training's
    sound-alikes and session 16's `EXTRA_TRAIN_NEAR`), takes from `first_take` on."""
    from benchmarks.neural_corpus import NeuralSpec, Variant
    from benchmarks.wake_verifier_train import TRAIN_COMMANDS, neural_specs

    specs = [s for s in neural_specs((Variant.NOISE, Variant.FAR), first_take) + neural_specs((Variant.NOISE,), first_take + 500)
             if s.addressed]
    specs += neural_specs((Variant.TV,), first_take + 1000)
    specs += [NeuralSpec((f"{line}, {TRAIN_COMMANDS[j % len(TRAIN_COMMANDS)]}",), (), Variant.TV, False, first_take + 2000 + j)
              for j, line in enumerate(EXTRA_TRAIN_NEAR)]
    return specs


def collect_noisy(cache: str, out: str, draw: int) -> None:
    """Session 19: `noisy_specs` in training draw `draw` (one of `TRAIN_DRAWS`)."""
    from benchmarks.corpus import Corpus
    from benchmarks.neural_corpus import Variant
    from benchmarks.wake_verifier_train import TRAIN_EFFECTS, TrainCorpus

    assert draw in TRAIN_DRAWS, "a benchmark draw is judged on, never trained on"
    neural = TrainCorpus(Path(cache), Corpus(cache), effects={**TRAIN_EFFECTS, Variant.FAR: FAR_ROOM_3}, draw=draw)
    specs = noisy_specs(10000 + 3000 * TRAIN_DRAWS.index(draw))
    clips = [(c.name + f"-n{draw}", c.pcm, c.addressed, c.text) for c in neural.clips(specs)]
    print(f"{len(clips)} noisy training clips of training draw {draw} rendered", flush=True)
    _run(clips, True, out)


# Session 20: the sound-alikes the late verifier still takes ("hey jarvie", "a jar of peas", "hey chavez" at
# 0.75-0.99) were in its training only plain-ish (`EXTRA_TRAIN_NEAR` in `TRAIN_VARIANTS`' first pass) or under the
# TV, while session 19 added commands in noise and far with no sound-alike beside them. Here the closest training
# sound-alikes (none of the benchmark's lines nor a homophone of one) in every sound variant but the TV (session 19
# has it), each take's noise drawn under training draw numbers (`HARD_DRAWS`), with a few commands in the same
# variants so the noise itself says nothing.
HARD_DRAWS = (33, 34)
HARD_NEAR = EXTRA_TRAIN_NEAR + (
    "hey javier", "hey chaz", "hey travers", "hey chavs", "hey darvish", "hey carver", "hey jarley", "hey charvey",
    "hey chavis", "hey harvey", "hey gervais", "hey mavis", "hey davis", "hey jars",
    "hey jarvik", "hey tarvie", "hey carvie", "hey marvis", "a jar of beans", "a jar of jam", "hey chavo", "jarvis left early",
)


def hard_specs(first_take: int, half: int) -> list:
    """`HARD_NEAR` in half of the sound variants each (`half` 0 or 1: the other half), and four commands per variant."""
    from benchmarks.neural_corpus import NeuralSpec, Variant
    from benchmarks.wake_verifier_train import TRAIN_COMMANDS

    variants = (Variant.PLAIN, Variant.TEMPO, Variant.PITCH, Variant.REVERB, Variant.NOISE, Variant.FAR)
    specs = [NeuralSpec((f"{line}, {TRAIN_COMMANDS[(j + k) % len(TRAIN_COMMANDS)]}",), (), variants[(2 * j + k + 3 * half) % 6], False,
                        first_take + 40 * k + j) for j, line in enumerate(HARD_NEAR) for k in range(3)]
    for k, variant in enumerate(variants):
        for i in range(4):
            command, take = TRAIN_COMMANDS[(i + 2 * k + half) % len(TRAIN_COMMANDS)], first_take + 2000 + 8 * k + i
            specs.append(NeuralSpec(("hey", f"jarvis, {command}"), (0.45,), variant, True, take) if i == 3
                         else NeuralSpec((f"{PHRASE}, {command}",), (), variant, True, take))
    return specs


def collect_hard(cache: str, out: str, draw: int) -> None:
    """Session 20: `hard_specs` in training draw `draw` (one of `HARD_DRAWS`)."""
    from benchmarks.corpus import Corpus
    from benchmarks.neural_corpus import Variant
    from benchmarks.wake_verifier_train import TRAIN_EFFECTS, TrainCorpus

    assert draw in HARD_DRAWS, "a benchmark draw is judged on, never trained on"
    half = HARD_DRAWS.index(draw)
    neural = TrainCorpus(Path(cache), Corpus(cache), effects={**TRAIN_EFFECTS, Variant.FAR: FAR_ROOM_3}, draw=draw)
    clips = [(c.name + f"-h{draw}", c.pcm, c.addressed, c.text) for c in neural.clips(hard_specs(20000 + 3000 * half, half))]
    print(f"{len(clips)} hard training clips of training draw {draw} rendered", flush=True)
    _run(clips, True, out)


def collect_base(cache: str, out: str, shard: tuple[int, int] = (0, 1)) -> None:
    """The verifier's training clips in espeak-ng, flite and festival voices (`wake_verifier_train.base_specs`)."""
    from benchmarks.corpus import Corpus, Noise, mix, with_floor
    from benchmarks.wake_verifier_train import base_specs

    base = Corpus(cache)
    floor = base.noise(Noise.FAN, 10.0, seed=5)
    babble = base.noise(Noise.BABBLE, 10.0, seed=2)
    clips = []
    for index, clip in enumerate(base.clips(base_specs())):
        if index % shard[1] == shard[0]:
            pcm = with_floor(clip.pcm, floor) if index % 2 else mix(clip.pcm, babble, 20)
            clips.append((clip.name, pcm, clip.addressed, "synthetic: " + clip.text))
    print(f"{len(clips)} synthetic training clips rendered", flush=True)
    _run(clips, True, out)


def collect_draw(cache: str, out: str, draw: int, relaxed: bool = False) -> None:
    """A draw's clips (`relaxed`: through the training's cutoffs, a spotter that asks more often)."""
    from benchmarks.corpus import Corpus
    from benchmarks.neural_corpus import NeuralCorpus, neural_near_specs, neural_ordinary_specs, neural_wake_specs

    corpus = NeuralCorpus(Path(cache), Corpus(cache), draw=draw)
    clips = []
    for kind, specs in (("addressed", neural_wake_specs(PHRASE, 12)), ("near", neural_near_specs(PHRASE, 12)),
                        ("ordinary", neural_ordinary_specs(12))):
        for spec in specs:
            clip = corpus.clip(spec)
            clips.append((clip.name, clip.pcm, spec.addressed, f"{kind}|{spec.variant.value}|{spec.text}"))
    print(f"{len(clips)} clips of draw {draw} rendered", flush=True)
    _run(clips, relaxed, out)


def collect_bench_base(cache: str, out: str, count: int = 24) -> None:
    """Session 18: `wake_choice --base COUNT`'s clips (espeak-ng, flite, festival; clean and at 20 dB), as
    `collect_draw` does a draw's, so a rule is judged offline on the synthetic voices too (meta's variant:
    "<level> <family>")."""
    from benchmarks.corpus import Corpus, Noise, family_of
    from benchmarks.wake_choice import conditions, near_miss_specs, ordinary_specs, wake_specs

    corpus = Corpus(cache)
    floor = corpus.noise(Noise.FAN, 10.0, seed=5)
    clips = []
    for kind, specs in (("addressed", wake_specs(PHRASE, count)), ("near", near_miss_specs(PHRASE, count)),
                        ("ordinary", ordinary_specs(count))):
        for index, clip in enumerate(corpus.clips(specs)):
            levels = conditions(corpus, clip, index, floor)
            for level in ("clean", "20 dB"):
                clips.append((clip.name, levels[level], clip.addressed, f"{kind}|{level} {family_of(clip.voice).value}|{clip.text}"))
    print(f"{len(clips)} clips of the base corpus rendered", flush=True)
    _run(clips, True, out)


def samples_at(paths: list[str], delay: int) -> list:
    """The training wakes of the collected files, read `DELAYS_S[delay]` after each wake."""
    import numpy as np

    from benchmarks.wake_verifier_train import Sample

    samples = []
    for path in paths:
        with np.load(path) as data:
            rows, clip, labels, names = data["rows"], data["clip"], data["labels"], data["names"]
            samples += [Sample(rows[i, delay], bool(labels[clip[i]]), str(names[clip[i]])) for i in range(len(clip))]
    return samples


def draw_scores(path: str, weights: object, delay: int) -> tuple[list, list]:
    """Per clip of a draw: (kind, variant, text), and the (score, peak dBFS) of each of its asks."""
    import numpy as np

    with np.load(path) as data:
        rows, clip, meta, peaks = data["rows"], data["clip"], data["meta"], data["peaks"]
        asks: list = [[] for _ in meta]
        members = [(weights, delay)] + [(w, DELAYS_S.index(w.delay_s)) for w in getattr(weights, "blend", ())]
        for i in range(len(clip)):
            score = sum(float(w.scores(rows[i, d]).max()) for w, d in members) / len(members)  # type: ignore[attr-defined]
            asks[clip[i]].append((score, float(peaks[i, delay])))  # (blended: the mean, at the level of the first's window)
        return [str(m).split("|", 2) for m in meta], asks


def judged(meta: list, asks: list, threshold: float, quiet: tuple[float, float] | None = None) -> dict:
    """Recall per variant (and pooled), near misses, ordinary woken at `threshold` (`quiet`: (peak
    dBFS, threshold) for audio quieter than that peak)."""
    from collections import Counter

    def passes(score: float, peak: float) -> bool:
        return score >= (quiet[1] if quiet is not None and peak < quiet[0] else threshold)

    heard, total = Counter(), Counter()
    for (kind, variant, _), clip_asks in zip(meta, asks):
        woken = any(passes(s, p) for s, p in clip_asks)
        for key in ((kind, "all"), (kind, variant)):
            heard[key] += woken
            total[key] += 1
    return {"recall": heard[("addressed", "all")], "of": total[("addressed", "all")], "near": heard[("near", "all")],
            "ordinary": heard[("ordinary", "all")],
            "variants": {v: heard[("addressed", v)] for k, v in total if k == "addressed" and v != "all"}}


def sweep(train_paths: list[str], draw_path: str, shipped: str) -> None:
    """Per delay: weights trained on the training wakes read that late, judged on the draw at their
    cross-validated threshold and around it; the shipped weights at no delay as the baseline."""
    from benchmarks.wake_verifier_train import held_out, threshold_for, weights_for
    from detectors.wake_verify import Weights

    base = Weights.load(Path(shipped))
    meta, asks = draw_scores(draw_path, base, 0)
    print(f"shipped weights, no delay, threshold {base.threshold:.3f}:", judged(meta, asks, base.threshold), flush=True)
    for delay, seconds in enumerate(DELAYS_S):
        samples = samples_at(train_paths, delay)
        best = None
        for l2 in (10.0, 30.0, 100.0):
            held = held_out(samples, l2)
            threshold = threshold_for(held, 0.98)
            refused = sum(score < threshold for score, s in held if not s.label)
            if best is None or refused >= best[0]:
                best = (refused, l2, threshold, sum(not s.label for _, s in held))
        assert best is not None
        refused, l2, threshold, negatives = best
        weights = dataclasses.replace(weights_for(samples, l2, threshold), delay_s=seconds)
        Path("/tmp/wake34q").mkdir(exist_ok=True)
        weights.save(Path(f"/tmp/wake34q/late-{int(seconds * 1000)}.npz"))
        meta, asks = draw_scores(draw_path, weights, delay)
        print(f"delay {seconds * 1000:.0f} ms: l2 {l2:g}, cross-validated threshold {threshold:.3f} (refused {refused}/{negatives})", flush=True)
        for t in sorted({round(threshold, 3), 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}):
            print(f"  threshold {t:.3f}:", judged(meta, asks, t), flush=True)


def train_late(out: str, paths: list[str], threshold: float, quiet: tuple[float, float], negative_weight: float = 1.0) -> None:
    """Session 18: weights for the window 200 ms after the wake, trained on every collected file given
    (l2 by clip-grouped cross-validation as `sweep`), asked at the training's cutoffs (`RELAXED`), with
    `threshold` and `quiet` ((peak dBFS, threshold) for quieter audio) as chosen on the draws (session 20:
    each negative wake counted `negative_weight` times)."""
    from benchmarks.wake_verifier_train import RELAXED, held_out, threshold_for, weights_for

    samples = samples_at(paths, DELAYS_S.index(0.2))
    print(f"{len(samples)} wakes, {sum(s.label for s in samples)} of the phrase", flush=True)
    best: tuple[int, float] | None = None
    for l2 in (10.0, 30.0, 100.0):
        held = held_out(samples, l2, negative_weight=negative_weight)
        cut = threshold_for(held, 0.98)
        refused = sum(score < cut for score, s in held if not s.label)
        print(f"l2 {l2:g}: cross-validated threshold {cut:.3f}, refused {refused} of {sum(not s.label for _, s in held)}", flush=True)
        if best is None or refused > best[0]:
            best = (refused, l2)
    assert best is not None
    weights = dataclasses.replace(weights_for(samples, best[1], threshold, negative_weight=negative_weight), delay_s=0.2, quiet_peak_dbfs=quiet[0], quiet_threshold=quiet[1],
                                  ask_threshold=RELAXED, ask_pause_threshold=0.7, ask_alone_cutoff=RELAXED)
    weights.save(Path(out))


def train_blend(out: str, late: str, paths: list[str], threshold: float, quiet: tuple[float, float], delays: tuple[float, ...] = (0.1, 0.3),
                at_pause: tuple[float, float] | None = None) -> None:
    """Session 21: `late`'s weights with weights for the windows ending `delays` after the wake, trained on the
    same files as it (its l2), their scores averaged with its own, judged at `threshold` and `quiet`; `at_pause`
    (threshold, dB): weights for the window ending at the wake, asked when the audio after it is that much quieter."""
    from benchmarks.wake_verifier_train import weights_for
    from detectors.wake_verify import Weights

    base = Weights.load(Path(late))
    blend = tuple(dataclasses.replace(weights_for(samples_at(paths, DELAYS_S.index(d)), BLEND_L2), delay_s=d) for d in delays)
    early = None if at_pause is None else weights_for(samples_at(paths, DELAYS_S.index(0.0)), BLEND_L2, at_pause[0])
    dataclasses.replace(base, threshold=threshold, quiet_peak_dbfs=quiet[0], quiet_threshold=quiet[1], blend=blend, early=early,
                        early_after_quiet_db=None if at_pause is None else at_pause[1]).save(Path(out))


BLEND_L2 = 100.0  # session 20's late weights' (chosen by `train_late`'s cross-validation)


def judge_files(weights_file: str, paths: list[str]) -> None:
    """Session 18: weights at their own delay, threshold and level tie, judged on collected draws (or the
    base corpus's clips, `collect-bench-base`): what the spotter would give, from the asks."""
    from detectors.wake_verify import Weights

    weights = Weights.load(Path(weights_file))
    quiet = None if weights.quiet_peak_dbfs is None or weights.quiet_threshold is None else (weights.quiet_peak_dbfs, weights.quiet_threshold)
    for path in paths:
        meta, asks = draw_scores(path, weights, DELAYS_S.index(weights.delay_s))
        print(path, judged(meta, asks, weights.threshold, quiet), flush=True)


def main(argv: list[str]) -> int:
    if argv[0] == "sweep":  # sweep DRAW.npz SHIPPED.npz TRAIN.npz...
        sweep(argv[3:], argv[1], argv[2])
        return 0
    if argv[0] == "judge":  # judge WEIGHTS.npz COLLECTED.npz...
        judge_files(argv[1], argv[2:])
        return 0
    if argv[0] == "blend":  # blend OUT.npz LATE.npz THRESHOLD QUIET_DBFS QUIET_THRESHOLD FILE... [--at-pause THRESHOLD DB]
        files, at_pause = argv[6:], None
        if "--at-pause" in files:
            at = files.index("--at-pause")
            at_pause = (float(files[at + 1]), float(files[at + 2]))
            del files[at : at + 3]
        train_blend(argv[1], argv[2], files, float(argv[3]), (float(argv[4]), float(argv[5])), at_pause=at_pause)
        return 0
    if argv[0] == "train":  # train OUT.npz THRESHOLD QUIET_DBFS QUIET_THRESHOLD FILE... [--negative-weight W]
        files, weight = argv[5:], 1.0
        if "--negative-weight" in files:
            at = files.index("--negative-weight")
            weight = float(files[at + 1])
            del files[at : at + 2]
        train_late(argv[1], files, float(argv[2]), (float(argv[3]), float(argv[4])), weight)
        return 0
    if argv[0] == "collect-train":
        part = argv[argv.index("--shard") + 1].split("/") if "--shard" in argv else ("0", "1")
        collect_train(argv[1], argv[2], "--small" in argv, (int(part[0]), int(part[1])), "--odd" in argv)
    elif argv[0] == "collect-tv":
        collect_tv(argv[1], argv[2])
    elif argv[0] == "collect-noisy":  # collect-noisy CACHE OUT.npz --draw N (N in TRAIN_DRAWS)
        collect_noisy(argv[1], argv[2], int(argv[argv.index("--draw") + 1]))
    elif argv[0] == "collect-hard":  # collect-hard CACHE OUT.npz --draw N (N in HARD_DRAWS)
        collect_hard(argv[1], argv[2], int(argv[argv.index("--draw") + 1]))
    elif argv[0] == "collect-far":
        collect_far(argv[1], argv[2])
    elif argv[0] == "collect-base":
        part = argv[argv.index("--shard") + 1].split("/") if "--shard" in argv else ("0", "1")
        collect_base(argv[1], argv[2], (int(part[0]), int(part[1])))
    elif argv[0] == "collect-extra":
        collect_extra(argv[1], argv[2])
    elif argv[0] == "collect-bench-base":
        collect_bench_base(argv[1], argv[2])
    elif argv[0] == "collect-draw":
        collect_draw(argv[1], argv[2], int(argv[argv.index("--draw") + 1]), "--relaxed" in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
