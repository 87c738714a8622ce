"""Every question the wake verifier is asked, per clip of the neural corpus (issue 34, session 13).

    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_asks .cache/corpus asks.json \
        "shipped;WAKE_STRICT=true;WAKE_VERIFY=true;WAKE_STRICT=true WAKE_VERIFY=true;WAKE_VERIFY=true@0.7" [--draw N]

Judges each clip as `benchmarks.wake_choice --neural 12` does (`heard_in` through the default
upload filter, one `TryJudge` per rule) and writes, per clip and rule, whether it was heard and each
score the verifier gave, with the kind of wake it was asked about ("alone": microWakeWord above its
own cutoff; "pair": both models, microWakeWord above 0.7; "name": both, microWakeWord under 0.7, the
name-alone rule; "pause": the pause rule), so its thresholds can be swept offline (a clip is heard
at threshold t when one of its asks scored t or more: exact below the shipped threshold, a lower
bound above it). "RULE@T": that rule with the verifier's threshold T, its asks recorded with what the whole rule
reads (`rule_inputs`; T above 1 refuses every ask, so `benchmarks.wake_verify_sweep` judges any rule exactly); "RULE#FILE": with the weights in FILE
(session 14: "WAKE_VERIFY=true#new.npz"). Reads private parts of the
spotter (`_wake`, `_fusion`): a measuring tool, not a path the assistant runs.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict

from benchmarks.corpus import Corpus
from benchmarks.neural_corpus import NeuralCorpus, Variant, neural_near_specs, neural_ordinary_specs, neural_wake_specs
from benchmarks.wake_choice import judges_for
from detectors.wake_confirm import Fusion
from detectors.wake_test import TryJudge, heard_in
from detectors.wake_verify import WakeVerifier, peak_dbfs

PHRASE = "hey jarvis"


def record_asks(judge: TryJudge, asks: list, threshold: float | None) -> None:
    """Wrap the judge's verifier so each ask lands in `asks` (cleared by the caller per clip)."""
    spotter = judge.spotter
    inner = spotter.verifier
    if inner is None:
        return
    fusion, seen = spotter._fusion, {}
    micro, wake = fusion.micro, spotter._wake

    def on_micro(p: float, t: float) -> Fusion:
        action = micro(p, t)
        seen["alone"] = action is Fusion.WAKE and p > fusion.alone_cutoff and fusion.settings.micro_alone
        return action

    def on_wake(end_time: float):
        seen.update(paused=fusion.paused_from is not None, peak=fusion._peak, frames=min(fusion._open_frames))
        try:
            return wake(end_time)
        finally:
            seen["alone"] = False

    class Recorder:
        weights = inner.weights
        delay_s = inner.delay_s
        last_score: float | None = None

        def accepts(self, pcm16k: bytes) -> bool:
            verdict = inner.accepts(pcm16k)  # (a delayed verifier is handed more than it scores: its own slicing)
            score = self.last_score = inner.last_score
            kind = ("pause" if seen.get("paused") else "alone" if seen.get("alone")
                    else "pair" if seen.get("peak", 0.0) > 0.7 else "name")
            ask = {"s": round(score, 4), "kind": kind, "frames": seen.get("frames"),
                   "peak_dbfs": round(max(-99.0, peak_dbfs(pcm16k)), 1)}  # (the level the verifier heard)
            if threshold is not None:  # a measuring rule: what the whole rule reads, for `wake_verify_sweep`
                ask.update(rule_inputs(inner, pcm16k), micro=round(seen.get("peak", 0.0), 4))
            asks.append(ask)
            return verdict if threshold is None else score >= threshold

    fusion.micro, spotter._wake, spotter.verifier = on_micro, on_wake, Recorder()


def rule_inputs(verifier: WakeVerifier, pcm16k: bytes) -> dict:
    """Besides the blend's mean, what `WakeVerifier.accepts` judges an ask by (session 24): the level of its own
    window (`threshold_for`'s), and with `early` weights their score at the wake and how far the audio after the
    wake peaks under it (`early_after_quiet_db`'s test), so a rule's thresholds can be swept offline."""
    weights = verifier.weights
    inputs = {"level": round(max(-99.0, peak_dbfs(verifier._ending_at(pcm16k, weights.delay_s))), 2)}
    if weights.early is not None:
        at_wake = verifier._ending_at(pcm16k, 0.0)
        after = verifier._after_wake(pcm16k)
        inputs.update(early=round(verifier.score(at_wake, weights.early), 4),
                      quiet_db=round(max(-99.0, peak_dbfs(at_wake)) - max(-99.0, peak_dbfs(after)), 2))
    return inputs


def table(path: str) -> list[str]:
    """The markdown table of a written file: per variant and rule, recall, near misses, ordinary woken."""
    with open(path) as f:
        data = json.load(f)
    rules = list(data["cpu_ms_per_s"])
    counts: dict = defaultdict(lambda: [0, 0])
    variants = list(dict.fromkeys(row["variant"] for row in data["rows"]))
    for row in data["rows"]:
        for rule in rules:
            for key in ((row["variant"], row["kind"], rule), ("all", row["kind"], rule)) + (
                    ((SOUND, row["kind"], rule),) if row["variant"] not in WORDING_VALUES else ()):
                counts[key][0] += bool(row["heard"][rule])
                counts[key][1] += 1

    def cell(variant: str, kind: str, rule: str) -> str:
        heard, total = counts[(variant, kind, rule)]
        return "-" if not total else f"{100 * heard / total:.0f} ({heard}/{total})" if kind == "addressed" else f"{heard}/{total}"

    lines = ["| variant | " + " | ".join(f"{r}: recall % | near misses | ordinary" for r in rules) + " |",
             "|---" * (1 + 3 * len(rules)) + "|"]
    for variant in variants + [SOUND, "all"]:
        lines.append(f"| {variant} | " + " | ".join(" | ".join(cell(variant, k, r) for k in ("addressed", "near", "ordinary"))
                                                   for r in rules) + " |")
    lines.append("CPU of the detector path, ms per s of audio (" + f"{data['audio_s']:.0f} s): "
                 + ", ".join(f"{r} {v:.1f}" for r, v in data["cpu_ms_per_s"].items()))
    return lines


SOUND = "pooled (the seven sound variants)"
WORDING_VALUES = (Variant.PAUSE_AFTER_HEY.value, Variant.NAME_ALONE.value)


def main(argv: list[str]) -> int:
    if argv[0] == "--table":
        print("\n".join(table(argv[1])))
        return 0
    cache, out, rules = argv[0], argv[1], argv[2].split(";")
    draw = int(argv[argv.index("--draw") + 1]) if "--draw" in argv else 0  # (`NeuralCorpus`'s draw)
    corpus = NeuralCorpus(cache, Corpus(cache), draw=draw)
    judges, asks = {}, {rule: [] for rule in rules}
    for rule in rules:
        name, _, threshold = rule.partition("@")
        name, _, weights = name.partition("#")
        judges[rule] = judges_for(PHRASE, [name], verifier=weights)[name]
        record_asks(judges[rule], asks[rule], float(threshold) if threshold else None)
    rows, cpu, audio = [], defaultdict(float), 0.0
    for kind, specs in (("addressed", neural_wake_specs(PHRASE, 12)), ("near", neural_near_specs(PHRASE, 12)),
                        ("ordinary", neural_ordinary_specs(12))):
        for spec in specs:
            clip = corpus.clip(spec)
            audio += clip.seconds
            row: dict = {"kind": kind, "variant": spec.variant.value, "text": spec.text, "heard": {}, "asks": {}}
            for rule, judge in judges.items():
                asks[rule].clear()
                start = time.process_time()
                row["heard"][rule] = heard_in(judge, clip.pcm)
                cpu[rule] += time.process_time() - start
                row["asks"][rule] = list(asks[rule])
            rows.append(row)
    with open(out, "w") as f:
        json.dump({"rows": rows, "cpu_ms_per_s": {r: 1000 * s / audio for r, s in cpu.items()}, "audio_s": audio}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
