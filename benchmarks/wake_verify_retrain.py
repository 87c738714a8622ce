"""The blended wake verifier retrained on openWakeWord's 80 ms frame grid (issue 34, session 23).

Session 22's candidate (`detectors/verifiers/candidates/hey_jarvis_blend_s22_grid.npz`) reads its windows 120, 200 and
280 ms after the wake (one embedding pass), with weights trained at 100 / 200 / 300 ms, and lets through "hey jarvie",
"jarvis was late", "hey chavez" and "hey harvest" on some fresh draws. Session 21's collections are gone, so the
training clips are collected again here, read exactly as the grid blend reads them (`GRID_S`: the window ending at the
wake, which the pause rule asks, then the blend's three from one pass over the audio up to 280 ms after it), with hard
negatives of the kinds that get through (`GRID_NEAR`: none of the benchmark's lines), in every sound variant and after
a pause, under training draw numbers no benchmark figure uses (`GRID_DRAWS`).

    # the collections (each a file; `wake_verify_late`'s sets by name, read on the grid)
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_retrain collect .cache/corpus g60.npz grid --draw 60
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_retrain collect .cache/corpus even.npz first --half 0
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_retrain collect .cache/corpus h33.npz hard --draw 33
    # the four windows' weights, the rule's thresholds by clip-grouped cross-validation, written as a weights file
    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_retrain train OUT.npz g60.npz g61.npz even.npz ...

`collect` runs each clip through the path the benchmark judges with `wake_verify_late`'s recorder (a verifier refusing
every ask, at the training's relaxed cutoffs, which the weights carry), so each clip's asks are those the spotter makes
up to its first accepted wake.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from benchmarks.wake_verify_late import PHRASE, LateRecorder

GRID_S = (0.0, 0.12, 0.2, 0.28)  # the window ending at the wake (the pause rule's), then the blend's three on the grid
TAIL_S = 0.28  # the audio after the wake whose peak the pause rule reads (the blend's last window's end)
QUIET_PEAK_DBFS = -30.0  # the level tie (session 17 on): audio peaking under it is judged against the quiet threshold
GRID_DRAWS = (60, 61, 62, 63)  # session 23's training draws (the benchmark's draws are under 60)
# The kinds that got through session 22's candidate ("hey jarvie", "jarvis was late", "hey chavez", "hey harvest"), none
# of the benchmark's lines (`NEAR_MISS_LINES`, `EXTRA_NEAR_MISSES`) nor a homophone of one, nor the earlier training's.
GRID_NEAR = (
    "hey jarva", "hey barvie", "hey jarfie", "hey sarvie", "hey larvie", "hey jarvit", "hey charvo", "hey jarbo",
    "hey chavan", "hey chavet", "hey havas", "hey shavers",
    "hey harvard", "hey carvest", "hey harpist", "hey marvest",
    "jarvis was tired", "jarvis was right", "jarvis was gone", "jarvis is late", "jarvis was early", "jarvis sat down",
)


def pcm_between(stream: bytes | bytearray, start: int, stop: int) -> bytes:
    """16 kHz samples `start`..`stop` of `stream` (none before its start; silence after its end, as a stream that stops)."""
    pcm = bytes(stream[max(0, start) * 2 : max(0, stop) * 2])
    return pcm + b"\0" * ((stop - max(0, start)) * 2 - len(pcm))


class GridRecorder(LateRecorder):
    """Per ask: the window at the wake and the grid blend's three, read as `WakeVerifier` reads them."""

    def windows(self, read: Any) -> tuple[list, Any]:
        import numpy as np

        from detectors.wake_verify import FRAME_SAMPLES, POSITIONS, VERIFY_S, WINDOWS, peak_dbfs, windows

        span = int(VERIFY_S * 16000)
        last = int(GRID_S[-1] * 16000)
        extra = (last - int(GRID_S[1] * 16000)) // FRAME_SAMPLES

        def rows(emb: Any) -> Any:
            return windows(emb) if len(emb) >= WINDOWS + POSITIONS - 1 else np.zeros((POSITIONS, WINDOWS * 96), np.float32)

        out, peaks = [], []
        self.tails = [[max(-99.0, peak_dbfs(pcm_between(self.stream, end, end + int(TAIL_S * 16000))))] for end in self.positions]
        for end in self.positions:
            at_wake = pcm_between(self.stream, end - span, end)
            grid = read(pcm_between(self.stream, end + last - span - extra * FRAME_SAMPLES, end + last), extra)
            found = [rows(read(at_wake))]
            for delay in GRID_S[1:]:
                back = (last - int(delay * 16000)) // FRAME_SAMPLES
                found.append(rows(grid[: len(grid) - back]))
            out.append(np.stack(found))
            peaks.append([max(-99.0, peak_dbfs(pcm_between(self.stream, end + int(d * 16000) - span, end + int(d * 16000)))) for d in GRID_S])
        return out, np.array(peaks).reshape(len(out), len(GRID_S))


def grid_specs(draw: int) -> list:
    """Training draw `draw`'s clips: every hard sound-alike (`HARD_NEAR` and `GRID_NEAR`) in two sound variants (the TV
    too), the "hey ..." ones also after a pause, and commands in every variant and form the benchmark has (run on,
    "hey jarvis ... <command>", "hey ... jarvis", "jarvis, ..."), so no variant itself says "the phrase"."""
    from benchmarks.neural_corpus import NeuralSpec, Variant
    from benchmarks.wake_verifier_train import TRAIN_COMMANDS, TRAIN_ORDINARY
    from benchmarks.wake_verify_late import HARD_NEAR

    variants = (Variant.PLAIN, Variant.TEMPO, Variant.PITCH, Variant.REVERB, Variant.NOISE, Variant.FAR, Variant.TV)
    k0, take = GRID_DRAWS.index(draw), 30000 + 4000 * GRID_DRAWS.index(draw)
    lines = tuple(dict.fromkeys(GRID_NEAR + HARD_NEAR))
    specs = []
    for j, line in enumerate(lines):
        for n in range(2):
            variant, command = variants[(3 * j + 2 * n + k0) % len(variants)], TRAIN_COMMANDS[(j + n + k0) % len(TRAIN_COMMANDS)]
            if line.startswith("hey ") and n == 1 and (j + k0) % 2 == 0:
                specs.append(NeuralSpec(("hey", f"{line[4:]}, {command}"), ((0.4, 0.5, 0.6)[j % 3],), variant, False, take + 2 * j + n))
            else:
                specs.append(NeuralSpec((f"{line}, {command}",), (), variant, False, take + 2 * j + n))
    name = PHRASE.split(" ", 1)[1]
    for k, variant in enumerate(variants):
        for i in range(6):
            command, t = TRAIN_COMMANDS[(i + 2 * k + k0) % len(TRAIN_COMMANDS)], take + 1000 + 8 * k + i
            parts, pauses = (((f"{PHRASE}, {command}",), ()), ((PHRASE, command), (0.8,)), (("hey", f"{name}, {command}"), (0.5,)),
                             ((f"{name}, {command}",), ()), ((f"{PHRASE}, {command}",), ()), ((PHRASE, command), (0.9,)))[i]
            specs.append(NeuralSpec(parts, pauses, variant, True, t))
        specs.append(NeuralSpec((TRAIN_ORDINARY[(k + 3 * k0) % len(TRAIN_ORDINARY)],), (), variant, False, take + 1500 + k))
    return specs


def clips_of(cache: str, which: str, draw: int, half: int) -> list:
    """(name, pcm, addressed, "kind|variant|text") of a training set: `grid` (`grid_specs` in `draw`), `first` (half of
    the first pass), `second` (the second pass and the pause pass), `hard` / `noisy` (sessions 19-20's, in their
    training draws), `extra`, `tv`, `far`, `base` (`wake_verify_late`'s)."""
    from benchmarks.corpus import Corpus, Noise, mix, with_floor
    from benchmarks.neural_corpus import Variant
    from benchmarks.wake_verifier_train import (
        TRAIN_EFFECTS, TRAIN_EFFECTS_2, TRAIN_ORDINARY, TRAIN_VARIANTS_2, TrainCorpus, base_specs, neural_specs, pause_specs,
    )
    from benchmarks import wake_verify_late as late

    base = Corpus(cache)
    far3 = {**TRAIN_EFFECTS, Variant.FAR: late.FAR_ROOM_3}
    groups: list[tuple[Any, list]] = []
    if which == "grid":
        assert draw in GRID_DRAWS, "a benchmark draw is judged on, never trained on"
        groups.append((TrainCorpus(Path(cache), base, effects=far3, draw=draw), grid_specs(draw)))
    elif which == "first":
        groups.append((TrainCorpus(Path(cache), base), neural_specs()[half::2]))
    elif which == "second":
        groups.append((TrainCorpus(Path(cache), base, effects=TRAIN_EFFECTS_2), neural_specs(TRAIN_VARIANTS_2, first_take=1000)))
        groups.append((TrainCorpus(Path(cache), base), pause_specs()))
    elif which == "hard":
        assert draw in late.HARD_DRAWS
        k = late.HARD_DRAWS.index(draw)
        groups.append((TrainCorpus(Path(cache), base, effects=far3, draw=draw), late.hard_specs(20000 + 3000 * k, k)))
    elif which == "noisy":
        assert draw in late.TRAIN_DRAWS
        groups.append((TrainCorpus(Path(cache), base, effects=far3, draw=draw), late.noisy_specs(10000 + 3000 * late.TRAIN_DRAWS.index(draw))))
    elif which == "extra":
        groups.append((TrainCorpus(Path(cache), base), late.extra_specs()))
    elif which == "tv":
        groups.append((TrainCorpus(Path(cache), base), [s for k in range(2) for s in neural_specs((Variant.TV,), first_take=7000 + 200 * k)]))
    elif which == "far":
        groups += [(TrainCorpus(Path(cache), base, effects={Variant.FAR: room}), neural_specs((Variant.FAR,), first_take=8000 + 300 * k))
                   for k, room in enumerate(late.FAR_ROOMS)]
    clips = []
    for corpus, specs in groups:
        for spec in specs:
            clip = corpus.clip(spec)
            kind = "addressed" if spec.addressed else "ordinary" if spec.parts[0] in TRAIN_ORDINARY else "near"
            clips.append((f"{clip.name}-{which}{draw}", clip.pcm, spec.addressed, f"{kind}|{spec.variant.value}|{spec.text}"))
    if which == "base":
        floor, babble = base.noise(Noise.FAN, 10.0, seed=5), base.noise(Noise.BABBLE, 10.0, seed=2)
        for index, clip in enumerate(base.clips(base_specs())):
            if index % 2 == half:
                pcm = with_floor(clip.pcm, floor) if index % 2 else mix(clip.pcm, babble, 20)
                kind = "addressed" if clip.addressed else "near"
                clips.append((clip.name, pcm, clip.addressed, f"{kind}|synthetic|{clip.text}"))
    return clips


def collect(cache: str, out: str, which: str, draw: int = 0, half: int = 0) -> None:
    import numpy as np

    from benchmarks.wake_verify_late import _judge
    from detectors.wake_test import heard_in
    from detectors.wake_verify import EmbeddingReader

    clips = clips_of(cache, which, draw, half)
    print(f"{len(clips)} clips of {which} {draw} rendered", flush=True)
    judge = _judge(True)
    recorder = GridRecorder(judge.spotter)
    judge.spotter.verifier = recorder
    read = EmbeddingReader()
    rows, clip_of, peaks, tails = [], [], [], []
    for index, (_, pcm, _, _) in enumerate(clips):
        recorder.clear()
        heard_in(judge, pcm)
        found, levels = recorder.windows(read)
        tails += recorder.tails
        rows += found
        peaks += list(levels)
        clip_of += [index] * len(found)
        if index % 50 == 0:
            print(f"{index}/{len(clips)} clips, {len(rows)} asks", flush=True)
    np.savez_compressed(out, rows=np.stack(rows).astype(np.float32) if rows else np.zeros((0, len(GRID_S), 4, 1536), np.float32),
                        clip=np.array(clip_of, dtype=int), peaks=np.array(peaks).reshape(-1, len(GRID_S)), tails=np.array(tails).reshape(-1, 1),
                        labels=np.array([c[2] for c in clips]), names=np.array([c[0] for c in clips]), meta=np.array([c[3] for c in clips]),
                        delays=np.array(GRID_S))


@dataclasses.dataclass
class Collected:
    """Every ask of the collected files: rows (asks, windows, positions, features), each ask's clip (a global index),
    level per window and peak after the wake, and per clip: label, name, "kind|variant|text"."""

    rows: Any
    clip: Any
    peaks: Any
    tails: Any
    labels: list[bool]
    names: list[str]
    meta: list[str]


def load(paths: list[str]) -> Collected:
    import numpy as np

    parts: dict[str, list] = {k: [] for k in ("rows", "clip", "peaks", "tails")}
    labels: list[bool] = []
    names: list[str] = []
    meta: list[str] = []
    for path in paths:
        with np.load(path) as data:
            assert tuple(data["delays"]) == GRID_S, f"{path}: not read on the grid"
            if len(data["clip"]):
                parts["rows"].append(data["rows"])
                parts["clip"].append(data["clip"] + len(labels))
                parts["peaks"].append(data["peaks"])
                parts["tails"].append(data["tails"][:, 0])
            labels += [bool(x) for x in data["labels"]]
            names += [str(x) for x in data["names"]]
            meta += [str(x) for x in data["meta"]]
    return Collected(*(np.concatenate(parts[k]) for k in ("rows", "clip", "peaks", "tails")), labels, names, meta)


def fitted(data: Collected, asks: Any, l2: float) -> list:
    """One weights per window of `GRID_S`, fitted on `asks` (indexes), each window labelled as its clip."""
    from benchmarks.wake_verifier_train import Sample, weights_for

    return [dataclasses.replace(weights_for([Sample(data.rows[i, w], data.labels[data.clip[i]], data.names[data.clip[i]]) for i in asks], l2),
                                delay_s=GRID_S[w]) for w in range(len(GRID_S))]


def scored(data: Collected, members: list, asks: Any) -> list[tuple[float, float, float, float]]:
    """Per ask: (the blend's mean, the level of the 200 ms window, the score at the wake, dB the audio after the wake is
    under the `VERIFY_S` before it): what `wake_verify_grid.accepted` judges."""
    out = []
    for i in asks:
        blend = [float(members[w].scores(data.rows[i, w]).max()) for w in range(1, len(GRID_S))]
        out.append((sum(blend) / len(blend), float(data.peaks[i, GRID_S.index(0.2)]), float(members[0].scores(data.rows[i, 0]).max()),
                    float(data.peaks[i, 0] - data.tails[i])))
    return out


def held_out(data: Collected, l2: float, folds: int = 5) -> list[tuple[float, float, float, float]]:
    """Each ask scored by weights fitted without its clip (clip-grouped folds, by name)."""
    names = sorted(set(data.names))
    fold_of = {n: i % folds for i, n in enumerate(names)}
    out: list = [None] * len(data.clip)
    for fold in range(folds):
        inside = [i for i in range(len(data.clip)) if fold_of[data.names[data.clip[i]]] != fold]
        outside = [i for i in range(len(data.clip)) if fold_of[data.names[data.clip[i]]] == fold]
        for i, s in zip(outside, scored(data, fitted(data, inside, l2), outside)):
            out[i] = s
    return out


def per_clip(data: Collected, asks: list) -> tuple[list, list]:
    """`wake_verify_grid.figures`' inputs: each clip's (kind, variant, text) and its asks."""
    grouped: list[list] = [[] for _ in data.meta]
    for i, a in enumerate(asks):
        grouped[data.clip[i]].append(a)
    return [m.split("|", 2) for m in data.meta], grouped


def choose(meta: list, asks: list, recall: float) -> tuple[Any, dict]:
    """The rule that refuses most sound-alike and ordinary clips while hearing at least `recall` of the addressed clips
    that were asked about, from the held-out scores (ties: more heard)."""
    import itertools

    from benchmarks.wake_verify_grid import Rule, figures

    asked = [(m, a) for m, a in zip(meta, asks) if a]
    meta, asks = [m for m, _ in asked], [a for _, a in asked]
    best: tuple | None = None
    for threshold, quiet, early in itertools.product([x / 100 for x in range(30, 96, 2)], [x / 100 for x in range(20, 90, 5)],
                                                     (0.5, 0.6, 0.7, 0.8, 0.9, None)):
        rule = Rule(threshold, QUIET_PEAK_DBFS, quiet, early, 20.0)
        f = figures(meta, asks, rule)
        if f["recall"] < recall * f["of"]:
            continue
        key = (-(f["near"] + f["ordinary"]), f["recall"])
        if best is None or key > best[0]:
            best = (key, rule, f)
    assert best is not None, "no rule keeps the recall asked for"
    return best[1], best[2]


def train(out: str, paths: list[str], recall: float = 0.98, l2s: tuple[float, ...] = (100.0,)) -> None:
    """The four windows' weights (l2 and the rule chosen by clip-grouped cross-validation) written to `out`."""
    from benchmarks.wake_verifier_train import RELAXED

    data = load(paths)
    print(f"{len(data.clip)} asks of {len(data.labels)} clips ({sum(data.labels)} addressed)", flush=True)
    best: tuple | None = None
    for l2 in l2s:
        rule, f = choose(*per_clip(data, held_out(data, l2)), recall)
        print(f"l2 {l2:g}: {rule}: heard {f['recall']}/{f['of']}, woken {f['near']}/{f['near_of']} sound-alikes, {f['ordinary']} ordinary", flush=True)
        for line in f["woken"]:
            print("   woken ", line)
        key = (-(f["near"] + f["ordinary"]), f["recall"])
        if best is None or key > best[0]:
            best = (key, l2, rule)
    assert best is not None
    _, l2, rule = best
    early, blend0, main, blend1 = fitted(data, range(len(data.clip)), l2)
    early = dataclasses.replace(early, threshold=rule.early_threshold if rule.early_threshold is not None else 1.0)
    weights = dataclasses.replace(main, threshold=rule.threshold, quiet_peak_dbfs=rule.quiet_peak_dbfs, quiet_threshold=rule.quiet_threshold,
                                  blend=(blend0, blend1), early=early if rule.early_threshold is not None else None,
                                  early_after_quiet_db=rule.early_after_quiet_db if rule.early_threshold is not None else None,
                                  ask_threshold=RELAXED, ask_pause_threshold=0.7, ask_alone_cutoff=RELAXED)
    weights.save(Path(out))
    print(f"written {out}: l2 {l2:g}, {rule}", flush=True)


def main(argv: list[str]) -> int:
    if argv[0] == "collect":  # collect CACHE OUT.npz WHICH [--draw N] [--half H]
        draw = int(argv[argv.index("--draw") + 1]) if "--draw" in argv else 0
        half = int(argv[argv.index("--half") + 1]) if "--half" in argv else 0
        collect(argv[1], argv[2], argv[3], draw, half)
    elif argv[0] == "train":  # train OUT.npz COLLECTED.npz... [--recall R]
        files, recall = argv[2:], 0.98
        if "--recall" in files:
            at = files.index("--recall")
            recall = float(files[at + 1])
            del files[at : at + 2]
        train(argv[1], files, recall)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
