"""A verifier's whole rule swept offline on draws judged by `benchmarks.wake_verify_asks` (issue 34, session 24).

    nice -n 10 .venv/bin/python -m benchmarks.wake_verify_asks .cache/corpus all36.json \
        "WAKE_VERIFY=true#W.npz@2" --draw 36          # every ask refused and recorded with what the rule reads
    .venv/bin/python -m benchmarks.wake_verify_sweep W.npz all36.json all37.json ...   # the rules, best slack first
    .venv/bin/python -m benchmarks.wake_verify_sweep W.npz all36.json ... --rule 0.6,-30,0.55,0.6,20   # one rule's losses

A rule whose verifier refuses every ask makes the same asks as any other rule up to the first ask that rule would
accept (the spotter's state after a refusal is the same whatever the threshold), so a clip is woken by a rule when
one of its recorded asks is accepted by it: exact for every rule, not a bound. Each ask is judged as
`WakeVerifier.accepts` does (`benchmarks.wake_verify_grid.accepted`: the blend's mean against the threshold tied to
its window's level, else after a quiet tail the weights at the wake). The rules are ranked by slack: the smaller of
pooled recall above 95 % and pooled near misses under 10 per 100 (in points), the issue's two targets.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from benchmarks.wake_verify_grid import NEAR, RECALL, Rule, figures, met, rule_of

THRESHOLDS = [x / 100 for x in range(40, 92, 2)]
QUIET_THRESHOLDS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)
EARLY_THRESHOLDS = (0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, None)


def draw_of(path: str) -> tuple[list, list]:
    """Per clip (kind, variant, text) and its asks as `wake_verify_grid.accepted` reads them, from the measuring rule
    (the one written with "@") of a `wake_verify_asks` file."""
    with open(path) as f:
        data = json.load(f)
    [rule] = [r for r in data["cpu_ms_per_s"] if "@" in r]
    meta = [(row["kind"], row["variant"], row["text"]) for row in data["rows"]]
    asks = [[(a["s"], a["level"], a.get("early", 0.0), a.get("quiet_db", float("-inf"))) for a in row["asks"][rule]]
            for row in data["rows"]]
    return meta, asks


def pooled(per: list[dict]) -> dict:
    return {k: sum(f[k] for f in per) for k in ("recall", "of", "near", "near_of", "ordinary")}


def slack(f: dict) -> float:
    """Points by which the pooled figures meet the nearer target (negative: missed by); ordinary wakes disqualify."""
    if f["ordinary"]:
        return -100.0
    return min(100 * (f["recall"] / f["of"] - RECALL), 100 * (NEAR - f["near"] / f["near_of"]))


def line(rule: Rule, per: list[dict]) -> str:
    total = pooled(per)
    return (f"{rule.threshold:.2f} quiet<{rule.quiet_peak_dbfs:.0f}:{rule.quiet_threshold:.2f} early {rule.early_threshold}"
            f"/{rule.early_after_quiet_db:.0f}dB | pooled {total['recall']}/{total['of']}"
            f" ({100 * total['recall'] / total['of']:.1f} %) near {total['near']}/{total['near_of']}"
            f" ({100 * total['near'] / total['near_of']:.1f}) ordinary {total['ordinary']} slack {slack(total):+.2f}"
            f" | met {sum(met(f) for f in per)}/{len(per)} | " + " ".join(f"{f['recall']}/{f['near']}" for f in per))


def sweep(draws: list[tuple[list, list]], quiet_peak: float, quiet_db: float, top: int) -> None:
    results = []
    for threshold, quiet, early in itertools.product(THRESHOLDS, QUIET_THRESHOLDS, EARLY_THRESHOLDS):
        rule = Rule(threshold, quiet_peak, quiet, early, quiet_db)
        per = [figures(meta, asks, rule) for meta, asks in draws]
        results.append((slack(pooled(per)), sum(met(f) for f in per), rule, per))
    results.sort(key=lambda r: (r[0], r[1]), reverse=True)
    for _, _, rule, per in results[:top]:
        print(line(rule, per), flush=True)
    print("per threshold, with the quiet threshold and pause rule of most slack:")
    for threshold in THRESHOLDS:
        best = max((r for r in results if r[2].threshold == threshold), key=lambda r: (r[0], r[1]))
        print("  " + line(best[2], best[3]))


def main(argv: list[str]) -> int:
    from detectors.wake_verify import Weights

    weights = Weights.load(Path(argv[0]))
    paths = [a for a in argv[1:] if a.endswith(".json")]
    draws = [draw_of(p) for p in paths]
    given = rule_of(weights)
    if "--rule" in argv:
        t, peak, quiet, early, db = argv[argv.index("--rule") + 1].split(",")
        rule = Rule(float(t), float(peak), float(quiet), None if early == "none" else float(early), float(db))
        per = [figures(meta, asks, rule) for meta, asks in draws]
        print(line(rule, per))
        for path, f in zip(paths, per):
            for what in f["missed"]:
                print(f"  {path} missed {what}")
            for what in f["woken"]:
                print(f"  {path} woken  {what}")
        return 0
    print("the weights' own rule: " + line(given, [figures(meta, asks, given) for meta, asks in draws]))
    sweep(draws, given.quiet_peak_dbfs, given.early_after_quiet_db, int(argv[argv.index("--top") + 1]) if "--top" in argv else 20)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
