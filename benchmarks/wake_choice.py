"""Which wake-word engine and phrase: recall, false wakes and CPU for every candidate, per voice family.

    nice .venv/bin/python -m benchmarks.wake_choice            # the full corpus (issue 19)
    nice .venv/bin/python -m benchmarks.wake_choice --quick    # a few clips each, for development
    nice .venv/bin/python -m benchmarks.wake_choice --neural 12 --phrases "hey jarvis"   # the neural voice, the shipped path
    nice .venv/bin/python -m benchmarks.wake_choice --neural 12 --draw 2 --phrases "hey jarvis"   # another rendering of it

Candidates are the engines whose models ship inside their wheel (nothing downloaded):
pymicro-wakeword 2.5.0 (microWakeWord, through handoff's own `detectors.wake_model.ModelSpotter`)
and pyopen-wakeword 1.1.0 (openWakeWord, threshold 0.5), each on the phrases both ship, and
handoff's default for "hey jarvis", the two together ("two-stage": microWakeWord alone at its own
cutoff, or both agreeing at lower cutoffs within a window around microWakeWord's candidate,
`detectors.wake_confirm`, through the same `ModelSpotter`). A second table splits recall by how
the command follows the phrase: run straight on ("hey jarvis, what time is it") or after a pause.

The corpus (benchmarks/corpus.py): per phrase, addressed utterances (the phrase then a command, or
the phrase, a pause, the command) from three voice families (espeak-ng variants, flite voices,
festival's HTS voice), speeds 130-200 wpm, sox effects (tempo, pitch, reverb, a "phone" mic);
"clean" means over a -60 dBFS floor, then fan / hum / babble at 20 and 10 dB SNR. Not addressed:
ordinary sentences and near misses for each phrase (at 20 dB), and a stream of babble and TV-like
talk (an hour in the full run, made as it is read). Each clip is fed whole, 20 ms at a time, the
model reset between clips; a wake is the first probability above the cutoff. On the stream, a
wake is not counted again for 3 s (the refractory period). CPU is process time per second of
audio fed, for one phrase (one model): over the whole corpus (mostly addressed clips, where the
two-model engine runs its second model), and the engine's own on the babble stream alone (what an
overheard room costs).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Protocol

from benchmarks.corpus import (
    DEFAULT_CACHE, FRAME_BYTES, FRAME_S, RATE, WIDTH, Clip, Corpus, Family, Noise, babble_stream, family_of, mix,
    near_miss_specs, ordinary_specs, wake_specs, with_floor,
)
from config.settings import AudioSettings, UploadSettings
from config.wake_phrases import MODEL_PHRASES
from detectors.audio import Resampler
from detectors.wake_confirm import ConfirmSettings

REFRACTORY_S = 3.0
OPEN_THRESHOLD = 0.5  # openWakeWord's documented default


class Engine(Protocol):
    name: str
    phrase: str

    def scores(self, pcm: bytes) -> Iterable[tuple[float, float]]:
        """(time s, probability) over `pcm` (24 kHz), continuing from what was fed before."""
        ...

    def reset(self) -> None: ...

    @property
    def cutoff(self) -> float: ...

    def cutoff_label(self, cutoff: float) -> str: ...


class MicroEngine:
    def __init__(self, phrase: str) -> None:
        from detectors.wake_model import ModelSpotter, ModelSpotterSettings

        self.name, self.phrase = "pymicro-wakeword 2.5.0", phrase
        self.spotter = ModelSpotter(ModelSpotterSettings(MODEL_PHRASES[phrase], refractory_s=0.0))
        self._t = 0.0

    @property
    def cutoff(self) -> float:
        return self.spotter.cutoff

    def scores(self, pcm: bytes) -> Iterable[tuple[float, float]]:
        for i in range(0, len(pcm), FRAME_BYTES):
            self._t += FRAME_S
            self.spotter.feed(pcm[i : i + FRAME_BYTES], self._t)
            best = self.spotter.take_best()
            if best is not None:
                yield best.at_s, best.probability

    def reset(self) -> None:
        self.spotter.reset()
        self.spotter.take_best()

    def cutoff_label(self, cutoff: float) -> str:
        return f"{cutoff:g}{' (shipped)' if cutoff == self.cutoff else ''}"


class TwoStageEngine:
    """microWakeWord's candidates confirmed by openWakeWord over a window (`ConfirmSettings`,
    `detectors.wake_confirm`): handoff's default for the phrases whose `WakeModel.confirmed` is set;
    its "probability" is 1 where the spotter reports a wake, else 0."""

    def __init__(self, phrase: str) -> None:
        from detectors.wake_model import ModelSpotter, ModelSpotterSettings

        default = " (handoff's default)" if MODEL_PHRASES[phrase].confirmed else " (not used for this phrase)"
        self.name, self.phrase = "pymicro + pyopen" + default, phrase
        self.confirm = ConfirmSettings()
        self.spotter = ModelSpotter(ModelSpotterSettings(MODEL_PHRASES[phrase], confirm=self.confirm, refractory_s=0.0))
        self._t = 0.0

    @property
    def cutoff(self) -> float:
        return 0.5

    def cutoff_label(self, cutoff: float) -> str:
        c, alone = self.confirm, self.spotter.model_cutoff
        grids = f" on {c.phases} frame grids" if c.phases > 1 else ""
        return (f"pymicro > {alone:g} alone, or pymicro > {c.micro_cutoff:g} and pyopen > {c.threshold:g}{grids} "
                f"within {c.window_s:g} s of pymicro > {c.candidate_cutoff:g}")

    def scores(self, pcm: bytes) -> Iterable[tuple[float, float]]:
        for i in range(0, len(pcm), FRAME_BYTES):
            self._t += FRAME_S
            hit = self.spotter.feed(pcm[i : i + FRAME_BYTES], self._t)
            yield self._t, 1.0 if hit is not None else 0.0

    def reset(self) -> None:
        self.spotter.reset()


class OpenEngine:
    def __init__(self, phrase: str) -> None:
        from pyopen_wakeword import Model, OpenWakeWord, OpenWakeWordFeatures

        self.name, self.phrase = "pyopen-wakeword 1.1.0", phrase
        self._features = OpenWakeWordFeatures.from_builtin()
        self._model = OpenWakeWord.from_builtin(Model(MODEL_PHRASES[phrase].model))
        self._resample = Resampler(RATE)
        self._t = 0.0

    @property
    def cutoff(self) -> float:
        return OPEN_THRESHOLD

    def scores(self, pcm: bytes) -> Iterable[tuple[float, float]]:
        for i in range(0, len(pcm), FRAME_BYTES):
            self._t += FRAME_S
            for features in self._features.process_streaming(self._resample(pcm[i : i + FRAME_BYTES])):
                for probability in self._model.process_streaming(features):
                    yield self._t, probability

    def reset(self) -> None:
        self._features.reset()
        self._model.reset()
        self._resample.reset()

    def cutoff_label(self, cutoff: float) -> str:
        return f"{cutoff:g} (shipped)"


def peak(engine: Engine, pcm: bytes) -> float:
    """The highest probability the engine gives `pcm`, fed from a reset."""
    engine.reset()
    return max((p for _, p in engine.scores(pcm)), default=0.0)


@dataclass
class Tally:
    hits: int = 0
    total: int = 0

    def add(self, hit: bool) -> None:
        self.hits += hit
        self.total += 1

    def pct(self) -> str:
        return f"{100 * self.hits / self.total:.0f} ({self.hits}/{self.total})" if self.total else "-"

    def per100(self) -> str:
        return f"{100 * self.hits / self.total:.1f} ({self.hits}/{self.total})" if self.total else "-"


@dataclass
class Peaks:
    """Each clip's peak probability, labelled; the babble stream's wakes per cutoff."""

    addressed: list[tuple[str, str, str, float]] = field(default_factory=list)  # (level, family, form, peak)
    ordinary: list[tuple[str, float]] = field(default_factory=list)  # (family, peak)
    near: list[tuple[str, float]] = field(default_factory=list)
    babble_wakes: dict[float, int] = field(default_factory=dict)
    babble_s: float = 0.0
    cpu_s: float = 0.0
    audio_s: float = 0.0
    babble_cpu_s: float = 0.0  # of cpu_s, on the babble stream: what an overheard room costs


@dataclass
class Result:
    recall: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))  # (level, family)
    ordinary: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    near: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    babble_wakes: int = 0


def at_cutoff(peaks: Peaks, cutoff: float) -> Result:
    result = Result(babble_wakes=peaks.babble_wakes[cutoff])
    for level, family, form, p in peaks.addressed:
        for key in ((level, family), (level, POOLED), (level, form)):
            result.recall[key].add(p > cutoff)
    for labelled, tallies in ((peaks.ordinary, result.ordinary), (peaks.near, result.near)):
        for family, p in labelled:
            tallies[family].add(p > cutoff)
            tallies[POOLED].add(p > cutoff)
    return result


POOLED = "pooled"
RUN_ON, PAUSED = "phrase, command (run straight on)", "phrase, pause, command"
PAUSE_MARK = " ... "  # how a clip's text marks the pause between its parts (`UtteranceSpec.text`)
LEVELS = ("clean", "20 dB", "10 dB")


def conditions(corpus: Corpus, clip: Clip, index: int, floor: bytes) -> dict[str, bytes]:
    # Voice families take turns (index % 3): the noise turns on the next index, so each family meets each noise.
    kind = list(Noise)[(index + index // len(Family)) % len(Noise)]
    noise = corpus.noise(kind, 10.0, seed=index % 4)
    return {"clean": with_floor(clip.pcm, floor), "20 dB": mix(clip.pcm, noise, 20), "10 dB": mix(clip.pcm, noise, 10)}


def measure(engine: Engine, corpus: Corpus, addressed: list[Clip], ordinary: list[Clip], near: list[Clip],
            babble_s: float, floor: bytes, cutoffs: list[float]) -> Peaks:
    peaks = Peaks(babble_s=babble_s)
    start = time.process_time()

    def fed(pcm: bytes) -> bytes:
        peaks.audio_s += len(pcm) / WIDTH / RATE
        return pcm

    for index, clip in enumerate(addressed):
        family = family_of(clip.voice).value
        form = PAUSED if PAUSE_MARK in clip.text else RUN_ON
        for level, pcm in conditions(corpus, clip, index, floor).items():
            peaks.addressed.append((level, family, form, peak(engine, fed(pcm))))
    for clips, labelled in ((ordinary, peaks.ordinary), (near, peaks.near)):
        for index, clip in enumerate(clips):
            labelled.append((family_of(clip.voice).value, peak(engine, fed(conditions(corpus, clip, index, floor)["20 dB"]))))
    engine.reset()
    quiet_until = dict.fromkeys(cutoffs, float("-inf"))
    peaks.babble_wakes = dict.fromkeys(cutoffs, 0)
    for piece in babble_stream(corpus, babble_s):
        pcm = fed(with_floor(piece, floor))
        engine_start = time.process_time()
        scores = list(engine.scores(pcm))
        peaks.babble_cpu_s += time.process_time() - engine_start  # the engine's own, not making the babble
        for t, p in scores:
            for cutoff in cutoffs:
                if p > cutoff and t >= quiet_until[cutoff]:
                    peaks.babble_wakes[cutoff] += 1
                    quiet_until[cutoff] = t + REFRACTORY_S
    peaks.cpu_s = time.process_time() - start
    return peaks


def table(rows: list[tuple[Engine, float, Peaks]]) -> list[str]:
    families = [f.value for f in Family] + [POOLED]
    lines = [
        "| engine | phrase | cutoff | voices | recall % clean | recall % 20 dB | recall % 10 dB | false per 100 ordinary | false per 100 near misses | false per hour of babble | CPU ms per s of audio | CPU ms per s of babble |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for engine, cutoff, peaks in rows:
        r = at_cutoff(peaks, cutoff)
        for family in families:
            pooled = family == POOLED
            babble = f"{r.babble_wakes * 3600 / peaks.babble_s:.1f} ({r.babble_wakes} in {peaks.babble_s / 60:.0f} min)" if pooled else ""
            cpu = f"{1000 * peaks.cpu_s / peaks.audio_s:.1f} | {1000 * peaks.babble_cpu_s / peaks.babble_s:.1f}" if pooled else " | "
            lines.append(
                f"| {engine.name} | {engine.phrase} | {engine.cutoff_label(cutoff)} | {family} | "
                + " | ".join(r.recall[(level, family)].pct() for level in LEVELS)
                + f" | {r.ordinary[family].per100()} | {r.near[family].per100()} | {babble} | {cpu} |"
            )
    return lines


def form_table(rows: list[tuple[Engine, float, Peaks]]) -> list[str]:
    """Recall by how the command follows the phrase, every voice family pooled."""
    lines = ["| engine | phrase | cutoff | said as | recall % clean | recall % 20 dB | recall % 10 dB |", "|---|---|---|---|---|---|---|"]
    for engine, cutoff, peaks in rows:
        r = at_cutoff(peaks, cutoff)
        for form in (RUN_ON, PAUSED):
            lines.append(f"| {engine.name} | {engine.phrase} | {engine.cutoff_label(cutoff)} | {form} | "
                         + " | ".join(r.recall[(level, form)].pct() for level in LEVELS) + " |")
    return lines


STRICT_RULE, VERIFIER_RULE, BOTH_RULE = "WAKE_STRICT=true", "WAKE_VERIFY=true", "WAKE_STRICT=true WAKE_VERIFY=true"
UNVERIFIED_RULE = "WAKE_VERIFY=false"  # the two models alone (the shipped rule until session 24)
QUIET_RULE = "the VAD's quiet path switched"  # on if the shipped VAD has it off, else off (`--quiet-path`)


@dataclass(frozen=True)
class Rule:
    """A wake rule to measure: the default settings with WAKE_STRICT / WAKE_VERIFY, the verifier's
    weights from `weights` (a .npz; "": the shipped ones), and `micro_cutoff` as
    `ConfirmSettings.verified_micro_cutoff` (None: the shipped value)."""

    label: str
    strict: bool = False
    verify: bool = UploadSettings.wake_verify  # as shipped (on since session 24)
    weights: str = ""
    micro_cutoff: float | None = None
    quiet_switched: bool = False  # the VAD's quiet path the other way from the shipped one (`QUIET_RULE`)
    # The first stage changed (issue 34, session 23): `VadSettings` fields ("quiet_threshold", 0.6) and
    # `ConfirmSettings` fields ("candidate_cutoff", 0.05), each over the default the rule would build.
    vad: tuple[tuple[str, float | None], ...] = ()
    confirm: tuple[tuple[str, float | None], ...] = ()


Changes = tuple[tuple[str, float | None], ...]
# `ConfirmSettings` fields only a verifying spotter reads.
VERIFY_ONLY = frozenset({"reask_cutoff", "verified_micro_cutoff", "verified_threshold", "verified_pause_threshold",
                         "verified_alone_cutoff", "verified_alone_hold_s"})


def first_stage_changes(text: str) -> tuple[Changes, Changes]:
    """"vad.quiet_threshold=0.6,confirm.candidate_cutoff=0.05" -> (vad changes, confirm changes)
    (`--first-stage`); an unknown field raises ValueError."""
    from detectors.vad import VadSettings

    known = {"vad": set(VadSettings.__dataclass_fields__), "confirm": set(ConfirmSettings.__dataclass_fields__)}
    changes: dict[str, list[tuple[str, float | None]]] = {"vad": [], "confirm": []}
    for item in [i.strip() for i in text.split(",") if i.strip()]:
        key, _, value = item.partition("=")
        part, _, name = key.partition(".")
        if part not in known or name not in known[part]:
            raise ValueError(f"not a first-stage setting: {key!r} (vad.FIELD or confirm.FIELD)")
        changes[part].append((name, None if value.lower() == "none" else int(value) if value.lstrip("-").isdigit() else float(value)))
    return tuple(changes["vad"]), tuple(changes["confirm"])


RULES = {"shipped": Rule("shipped"), STRICT_RULE: Rule(STRICT_RULE, strict=True),
         VERIFIER_RULE: Rule(VERIFIER_RULE, verify=True), BOTH_RULE: Rule(BOTH_RULE, strict=True, verify=True),
         QUIET_RULE: Rule(QUIET_RULE, quiet_switched=True), UNVERIFIED_RULE: Rule(UNVERIFIED_RULE, verify=False)}


def judges_for(phrase: str, rules: list, chunk_ms: int = 20, verifier: str = "") -> dict:
    """A `TryJudge` per rule (a `Rule`, or the label of one in `RULES`) over the upload filter the
    default settings build, keyed by label; `verifier`: the weights of the labelled rules that verify."""
    from config.settings import UploadMode, UploadSettings
    from detectors.pipeline import build_upload_filter
    from detectors.wake_confirm import FusionCore
    from detectors.wake_model import ModelSpotter
    from detectors.wake_test import TryJudge
    from detectors.wake_verify import Weights, WakeVerifier

    judges = {}
    for given in rules:
        rule = given if isinstance(given, Rule) else replace(RULES[given], weights=verifier)
        upload = UploadSettings(mode=UploadMode.ON_DEVICE_WAKE, wake_strict=rule.strict, wake_verify=rule.verify)
        judge = TryJudge(build_upload_filter(upload, phrase, 8.0, RATE * WIDTH), chunk_ms)
        if rule.quiet_switched:  # (`VadSettings.quiet_margin`: the far field)
            from benchmarks.listener_upload import quiet_path
            from detectors.vad import SileroVad, VadSettings

            judge.upload.detectors.vad = SileroVad(quiet_path(VadSettings().quiet_margin <= 0))
        if rule.vad:  # (`first_stage_changes`)
            from detectors.vad import SileroVad, VadSettings

            judge.upload.detectors.vad = SileroVad(replace(VadSettings(), **dict(rule.vad)))
        if rule.confirm:
            spotter = judge.spotter
            assert isinstance(spotter, ModelSpotter) and spotter.settings.confirm is not None
            changed = replace(spotter.settings.confirm, **dict(rule.confirm))
            spotter.settings = replace(spotter.settings, confirm=changed)
            spotter._confirm, spotter.cutoff = changed, changed.candidate_cutoff
            spotter._fusion = FusionCore(changed, spotter._alone)
        if rule.verify and rule.weights:  # other weights than the shipped ones
            judge.spotter.use_verifier(WakeVerifier(MODEL_PHRASES[phrase].model, Weights.load(Path(rule.weights))))
        if rule.micro_cutoff is not None:
            fusion = judge.spotter._fusion
            fusion.settings = replace(fusion.settings, verified_micro_cutoff=rule.micro_cutoff)
        judges[rule.label] = judge
    return judges


def neural_table(phrase: str, per_variant: int, cache: str, rules: list[str], chunk_ms: int = 20, verifier: str = "",
                 draw: int = 0, variants: tuple[str, ...] = ()) -> list[str]:
    """Recall and false wakes on the neural-voice corpus (`benchmarks.neural_corpus`), each clip
    judged by `detectors.wake_test.TryJudge` through the upload filter the assistant builds from
    the default settings: what `handoff wake-test` reports on the same recording; each of `rules`
    (`judges_for`) on the same clips in the same run. `chunk_ms`: the microphone's chunk size the
    clips are fed in; `draw`: which rendering of the corpus (`NeuralCorpus`); `variants`: only these
    (`Variant` names, lower case; empty: all)."""
    from benchmarks.neural_corpus import (
        NeuralCorpus, Variant, neural_near_specs, neural_ordinary_specs, neural_wake_specs,
    )
    from detectors.wake_test import heard_in

    corpus = NeuralCorpus(cache, Corpus(cache), draw=draw)
    judges = judges_for(phrase, rules, chunk_ms, verifier)
    rules = list(judges)
    tallies: dict[tuple[str, str, str], Tally] = defaultdict(Tally)
    audio_s = 0.0
    cpu_s: dict[str, float] = defaultdict(float)
    for kind, specs in (("addressed", neural_wake_specs(phrase, per_variant)),
                        ("near", neural_near_specs(phrase, per_variant)), ("ordinary", neural_ordinary_specs(per_variant))):
        for spec in specs:
            if variants and spec.variant.name.lower() not in variants:
                continue
            clip = corpus.clip(spec)
            audio_s += clip.seconds
            for rule, judge in judges.items():
                start = time.process_time()
                heard = heard_in(judge, clip.pcm)
                cpu_s[rule] += time.process_time() - start
                tallies[(rule, kind, spec.variant.value)].add(heard)
                if kind == "addressed" and spec.variant not in (Variant.PAUSE_AFTER_HEY, Variant.NAME_ALONE):
                    tallies[(rule, kind, POOLED)].add(heard)
                tallies[(rule, kind, "all")].add(heard)
    lines = [f"| variant ({phrase}, piper en_US-joe-medium, draw {draw}) | " + " | ".join(
                f"{rule}: recall % | near misses woken per 100 | ordinary woken per 100" for rule in rules) + " |",
             "|---|" + "---|---|---|" * len(rules)]
    for variant in [v.value for v in Variant] + [POOLED + " (the phrase said as it is: every variant but the two wordings)", "all"]:
        key = variant.split(" (")[0] if variant.startswith(POOLED) else variant
        lines.append(f"| {variant} | " + " | ".join(
            f"{tallies[(rule, 'addressed', key)].pct()} | {tallies[(rule, 'near', key)].per100()} | "
            f"{tallies[(rule, 'ordinary', key)].per100()}" for rule in rules) + " |")
    lines.append("\nCPU of the whole detector path (VAD, spotter, gate): " + ", ".join(
        f"{rule} {1000 * cpu_s[rule] / audio_s:.1f} ms per s of audio" for rule in rules) + f" ({audio_s:.0f} s of clips).")
    return lines


def base_table(phrase: str, count: int, cache: str, rules: list[str], chunk_ms: int = 20, verifier: str = "") -> list[str]:
    """The shipped path (`heard_in`, as `neural_table`) on the base corpus's voices: `count`
    commands, near misses and ordinary sentences (`wake_specs`, `near_miss_specs`,
    `ordinary_specs`), over the -60 dBFS floor and at 20 dB (fan, hum or babble)."""
    from detectors.wake_test import heard_in

    corpus = Corpus(cache)
    judges = judges_for(phrase, rules, chunk_ms, verifier)
    rules = list(judges)
    floor = corpus.noise(Noise.FAN, 10.0, seed=5)
    tallies: dict[tuple[str, str, str, str], Tally] = defaultdict(Tally)
    sets = (("addressed", wake_specs(phrase, count)), ("near", near_miss_specs(phrase, count)), ("ordinary", ordinary_specs(count)))
    for kind, specs in sets:
        for index, clip in enumerate(corpus.clips(specs)):
            family = family_of(clip.voice).value
            levels = conditions(corpus, clip, index, floor)
            for level in ("clean", "20 dB"):
                for rule, judge in judges.items():
                    heard = heard_in(judge, levels[level])
                    tallies[(rule, kind, level, family)].add(heard)
                    tallies[(rule, kind, level, POOLED)].add(heard)
    lines = [f"| clips ({phrase}, base corpus) | " + " | ".join(rules) + " |", "|---|" + "---|" * len(rules)]
    names = {"addressed": "commands heard", "near": "near misses woken", "ordinary": "ordinary woken"}
    for kind, _ in sets:
        for level in ("clean", "20 dB"):
            lines.append(f"| {names[kind]}, {level} | " + " | ".join(
                tallies[(rule, kind, level, POOLED)].pct() + " (" + " / ".join(
                    str(tallies[(rule, kind, level, f.value)].hits) for f in Family) + ")" for rule in rules) + " |")
    lines.append("\n(per family: " + " / ".join(f.value for f in Family) + ")")
    return lines


ENGINES: dict[str, Callable[[str], Engine]] = {"micro": MicroEngine, "open": OpenEngine, "two-stage": TwoStageEngine}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few clips each and a minute of babble")
    parser.add_argument("--engines", default="two-stage,micro,open", help="comma-separated: two-stage, micro, open")
    parser.add_argument("--phrases", default=",".join(MODEL_PHRASES), help="comma-separated candidate phrases")
    parser.add_argument("--babble-minutes", type=float, default=None, help="default: 60 (quick: 1)")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--cutoffs", type=lambda v: [float(c) for c in v.split(",") if c], default=[0.9, 0.8, 0.7, 0.5],
                        help="microWakeWord cutoffs to tabulate besides each model's own")
    parser.add_argument("--count", type=int, default=0, help="--quick: clips per set (default 12)")
    parser.add_argument("--neural", type=int, default=0, metavar="N",
                        help="only the neural-voice table (piper en_US-joe-medium), N clips per variant (e.g. 12)")
    parser.add_argument("--draw", type=int, default=0, metavar="N",
                        help="--neural: which rendering of the neural corpus (0: the takes as they are; N: each take's "
                             "pace, delivery and noise moved, seeded by N)")
    parser.add_argument("--strict", action="store_true", help="--neural, --base: also with WAKE_STRICT=true, in the same run")
    parser.add_argument("--verifier", nargs="?", const="shipped", default="", metavar="WEIGHTS",
                        help="--neural, --base: also with the wake verifier (its shipped weights, or a .npz; several "
                             "comma-separated), in the same run")
    parser.add_argument("--both", action="store_true", help="--neural, --base: also with WAKE_STRICT and WAKE_VERIFY together "
                                                                "(with --verifier WEIGHTS: those weights)")
    parser.add_argument("--base", type=int, default=0, metavar="N",
                        help="the shipped path on the base corpus (espeak-ng, flite, festival), N clips per set")
    parser.add_argument("--quiet-path", action="store_true", help="--neural, --base: also with the VAD's quiet path switched, in the same run")
    parser.add_argument("--chunk-ms", type=int, default=AudioSettings().chunk_ms,
                        help="--neural: the microphone's chunk size (default: the settings' %(default)s ms)")
    parser.add_argument("--name-alone", type=float, default=None, metavar="CUTOFF",
                        help="--verifier: also each verifier with microWakeWord's best in a window only above CUTOFF "
                             "(`ConfirmSettings.verified_micro_cutoff`), in the same run")
    parser.add_argument("--first-stage", action="append", default=[], metavar="CHANGES",
                        help="--neural, --base: also the shipped rule (and each --verifier's) with these first-stage "
                             "changes, e.g. 'vad.quiet_threshold=0.6,confirm.candidate_cutoff=0.05' (repeatable), in the same run")
    parser.add_argument("--variants", default="", help="--neural: only these variants (comma-separated: far, tv, name_alone, ...)")
    args = parser.parse_args(argv)
    rules: list = ["shipped"] + [STRICT_RULE] * args.strict
    for weights in [w for w in args.verifier.split(",") if w]:  # "shipped", or a .npz
        path = "" if weights == "shipped" else weights
        label = VERIFIER_RULE + ("" if not path else f" ({Path(path).stem})")
        rules.append(Rule(label, verify=True, weights=path))
        if args.name_alone is not None:
            rules.append(Rule(f"{label}, micro > {args.name_alone:g}", verify=True, weights=path, micro_cutoff=args.name_alone))
        if args.both and path:  # the same weights with WAKE_STRICT too
            rules.append(Rule(f"WAKE_STRICT=true {label}" + (f", micro > {args.name_alone:g}" if args.name_alone is not None else ""),
                              strict=True, verify=True, weights=path, micro_cutoff=args.name_alone))
    rules += [BOTH_RULE] * (args.both and not any(isinstance(r, Rule) and r.weights for r in rules))
    rules += [QUIET_RULE] * args.quiet_path
    shipped_changed = set()  # (a verifier's fields change nothing in the shipped rule: measured once)
    for text in args.first_stage:
        vad, confirm = first_stage_changes(text)
        for base in [r for r in rules if r == "shipped" or (isinstance(r, Rule) and r.verify and not r.strict
                                                           and not r.vad and not r.confirm)]:
            base = RULES[base] if isinstance(base, str) else base
            changes = confirm if base.verify else tuple(c for c in confirm if c[0] not in VERIFY_ONLY)
            if not base.verify and ((not vad and not changes) or (vad, changes) in shipped_changed):
                continue
            shipped_changed.add((vad, changes))
            label = text if base.verify else ",".join(f"{p}.{n}={v}" for p, cs in (("vad", vad), ("confirm", changes)) for n, v in cs)
            rules.append(replace(base, label=f"{base.label} + {label}", vad=vad, confirm=changes))
    weights = ""
    if args.neural or args.base:
        for phrase in [p.strip() for p in args.phrases.split(",") if p.strip()]:
            print(f"microphone chunks of {args.chunk_ms} ms")
            if args.neural:
                only = tuple(v.strip().lower() for v in args.variants.split(",") if v.strip())
                print("\n".join(neural_table(phrase, args.neural, args.cache, rules, args.chunk_ms, weights, args.draw, only)))
            if args.base:
                print("\n".join(base_table(phrase, args.base, args.cache, rules, args.chunk_ms, weights)))
        return 0
    corpus = Corpus(args.cache)
    n_addr, n_other = (args.count or 12, args.count or 12) if args.quick else (100, 100)
    babble_s = 60 * (args.babble_minutes if args.babble_minutes is not None else (1 if args.quick else 60))
    floor = corpus.noise(Noise.FAN, 10.0, seed=5)
    ordinary = corpus.clips(ordinary_specs(n_other))
    rows = []
    for phrase in [p.strip() for p in args.phrases.split(",") if p.strip()]:
        addressed = corpus.clips(wake_specs(phrase, n_addr))
        near = corpus.clips(near_miss_specs(phrase, n_other))
        for key in [e.strip() for e in args.engines.split(",") if e.strip()]:
            engine = ENGINES[key](phrase)
            cutoffs = sorted({engine.cutoff, *(c for c in args.cutoffs if key == "micro")}, reverse=True)
            peaks = measure(engine, corpus, addressed, ordinary, near, babble_s, floor, cutoffs)
            rows += [(engine, cutoff, peaks) for cutoff in cutoffs]
            print(f"measured {engine.name} {phrase}", file=sys.stderr, flush=True)
    print("\n".join(table(rows)))
    print()
    print("\n".join(form_table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
