"""Where the wake's first stage loses a command (issue 34, session 23): per command of the neural
corpus that the upload filter never woke on, what each part of the first stage did with it.

    nice .venv/bin/python -m benchmarks.wake_first_stage --draw 28 [--rule shipped] [--all]

Each clip is judged as `benchmarks.wake_choice --neural 12` judges it (`heard_in` through the upload
filter the default settings build) with the parts watched: the VAD (chunks over the energy floor,
webrtcvad's verdict on them, the quiet path open, Silero's best, the chunks called speech), the
spotter (the chunks it was fed, microWakeWord's best and when), the two-model rule
(`FusionCore`'s windows: when one opened, microWakeWord's peak in it, openWakeWord's best in it and
its frames over the threshold, how it ended), the pause rule (each run, pause and whether it fit)
and the hits the gate was handed. Beside that, what the models score on the whole clip with no VAD
in front (microWakeWord fed every chunk; openWakeWord fed every chunk), so a loss is placed: the
VAD never let the models hear it, the models never scored it, or the rule refused what they scored.
Reads the spotter's and the VAD's private parts: a measuring tool, not a path the assistant runs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from benchmarks.corpus import Corpus
from benchmarks.neural_corpus import NeuralCorpus, neural_wake_specs
from benchmarks.wake_choice import judges_for
from detectors.wake_confirm import Fusion
from detectors.wake_test import TryJudge, heard_in

PHRASE = "hey jarvis"
CHUNK_S = 0.02


@dataclass
class Watch:
    """What the first stage did with one clip (times in s of the clip)."""

    loud: int = 0  # chunks at or over the energy floor
    voiced: int = 0  # of those, webrtcvad heard a voice in
    quiet_open: int = 0  # chunks under the floor the quiet path amplified for Silero
    silero_best: float = 0.0
    speech: list[float] = field(default_factory=list)  # the chunks called speech (their end times)
    fed: list[float] = field(default_factory=list)  # the chunks the spotter heard
    micro_best: tuple[float, float] = (0.0, 0.0)  # (probability, at s) as fed
    windows: list[dict] = field(default_factory=list)  # the two-model rule's windows
    pauses: list[str] = field(default_factory=list)  # the pause rule's asks
    asked: list[str] = field(default_factory=list)  # wakes the rule made, before the verifier (when there is one)
    hits: list[float] = field(default_factory=list)  # hits the spotter handed the gate
    accepted: int = 0  # wakes the upload filter took


def watch(judge: TryJudge) -> Watch:
    """Wrap the judge's VAD, spotter and fusion so each clip's story lands in the returned Watch
    (`reset` it per clip with `watch.__init__()`)."""
    seen = Watch()
    upload = judge.upload
    assert upload.detectors is not None
    vad, spotter = upload.detectors.vad, judge.spotter
    vad_feed, spot_feed, take_wake = vad.feed, spotter.feed, upload.take_wake
    fusion = spotter._fusion  # type: ignore[attr-defined]
    f_micro, f_open, f_pause = fusion.micro, fusion.open, fusion.pause
    clock = {"t": 0.0}

    def on_vad(chunk: bytes):
        from audio_io.format import audioop

        clock["t"] += CHUNK_S
        verdict = vad_feed(chunk)
        if audioop.rms(chunk, 2) >= vad.settings.energy_floor_rms:
            seen.loud += 1
            seen.voiced += vad._voiced
        elif vad._open_s > 0 or verdict.probability > 0:
            seen.quiet_open += 1
        seen.silero_best = max(seen.silero_best, verdict.probability)
        if verdict.is_speech:
            seen.speech.append(round(clock["t"], 2))
        return verdict

    def on_spot(chunk: bytes, end_time: float):
        seen.fed.append(end_time)
        hit = spot_feed(chunk, end_time)
        now = spotter._best  # type: ignore[attr-defined]  (`TryJudge` takes it after every chunk)
        if now is not None and now.probability > seen.micro_best[0]:
            seen.micro_best = (now.probability, now.at_s)
        if hit is not None:
            seen.hits.append(round(end_time, 2))
        return hit

    def window(at_s: float, kind: str) -> dict:
        if not seen.windows or seen.windows[-1].get("end") is not None:
            seen.windows.append({"kind": kind, "from": round(at_s, 2), "micro": 0.0, "open": 0.0, "frames": 0})
        return seen.windows[-1]

    def on_micro(p: float, t: float) -> Fusion:
        action = f_micro(p, t)
        if action is not Fusion.NOTHING or fusion.deadline is not None:
            w = window(t, "micro")
            w["micro"] = max(w["micro"], p)
            if action in (Fusion.WAKE, Fusion.STOP):
                w["end"] = f"{action.value} {t:.2f}" + (" (micro alone)" if action is Fusion.WAKE and p > fusion.alone_cutoff else "")
        return action

    def on_open(phase: int, p: float, t: float) -> Fusion:
        action = f_open(phase, p, t)
        if seen.windows and seen.windows[-1].get("end") is None:
            w = seen.windows[-1]
            w["open"] = max(w["open"], p)
            w["frames"] = min(fusion._open_frames)
            if action in (Fusion.WAKE, Fusion.STOP):
                w["end"] = f"{action.value} {t:.2f}"
        return action

    def on_pause(word_start: float, word_end: float, at_s: float) -> Fusion:
        action = f_pause(word_start, word_end, at_s)
        seen.pauses.append(f"run {word_end - word_start:.2f} s, gap {at_s - word_end:.2f} s at {at_s:.2f}: {action.value}")
        if action is Fusion.START:
            window(at_s, "pause")
        return action

    def on_take_wake() -> float | None:  # (`TryJudge` asks after every chunk; the gate is rebuilt at each restart)
        wake = take_wake()
        seen.accepted += wake is not None
        return wake

    def on_tick(original):
        def tick(now: float) -> Fusion:
            action = original(now)
            if action is Fusion.STOP and seen.windows and seen.windows[-1].get("end") is None:
                seen.windows[-1]["end"] = f"stop {now:.2f}"
            return action
        return tick

    wake = spotter._wake  # type: ignore[attr-defined]

    def on_wake(end_time: float):
        kind = "pause" if fusion.paused_from is not None else f"micro {fusion.peak:.2f}"
        seen.asked.append(f"{end_time:.2f} ({kind})")
        return wake(end_time)

    spotter._wake = on_wake  # type: ignore[attr-defined]
    verifier = spotter.verifier  # type: ignore[attr-defined]
    if verifier is not None:
        accepts = verifier.accepts

        def on_ask(pcm16k: bytes) -> bool:
            verdict = accepts(pcm16k)
            seen.asked.append(f"verifier {verifier.last_score:.2f} {'accepts' if verdict else 'refuses'}")
            return verdict

        verifier.accepts = on_ask  # type: ignore[method-assign]
    vad.feed, spotter.feed, upload.take_wake = on_vad, on_spot, on_take_wake  # type: ignore[method-assign]
    fusion.micro, fusion.open, fusion.pause = on_micro, on_open, on_pause  # type: ignore[method-assign]
    fusion.tick = on_tick(fusion.tick)  # type: ignore[method-assign]
    original_restart = upload.restart

    def restart() -> None:
        original_restart()
        clock["t"] = 0.0
        seen.__init__()  # type: ignore[misc]

    upload.restart = restart  # type: ignore[method-assign]
    return seen


def ungated(pcm: bytes) -> tuple[tuple[float, float], tuple[float, float]]:
    """(microWakeWord's best, openWakeWord's best), each (probability, at s), on the whole clip with no VAD."""
    from benchmarks.wake_choice import MicroEngine, OpenEngine

    best = []
    for engine in (_engines.setdefault("micro", MicroEngine(PHRASE)), _engines.setdefault("open", OpenEngine(PHRASE))):
        engine.reset()
        engine._t = 0.0  # type: ignore[attr-defined]
        best.append(max(((p, t) for t, p in engine.scores(pcm)), default=(0.0, 0.0)))
    return best[0], best[1]


_engines: dict = {}


def spans(times: list[float]) -> str:
    """"0.84-1.62, 2.40-3.10": runs of 20 ms chunk end times."""
    runs: list[list[float]] = []
    for t in times:
        if runs and t - runs[-1][1] <= CHUNK_S * 1.5:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return ", ".join(f"{a - CHUNK_S:.2f}-{b:.2f}" for a, b in runs) or "none"


def story(seen: Watch, said: str, raw: tuple[tuple[float, float], tuple[float, float]]) -> list[str]:
    (mp, mt), (op, ot) = raw
    lines = [f"  said {said}; no VAD: micro best {mp:.2f} at {mt:.2f}, open best {op:.2f} at {ot:.2f}",
             f"  VAD: {seen.loud} chunks over the floor ({seen.voiced} voiced by webrtcvad), {seen.quiet_open} on the quiet "
             f"path, Silero best {seen.silero_best:.2f}; speech {spans(seen.speech)}",
             f"  spotter fed {spans(seen.fed)}; micro best as fed {seen.micro_best[0]:.2f} at {seen.micro_best[1]:.2f}"]
    for w in seen.windows:
        lines.append(f"  window ({w['kind']}) from {w['from']:.2f}: micro peak {w['micro']:.2f}, open best {w['open']:.2f} "
                     f"({w['frames']} frames over), {w.get('end', 'open at the end')}")
    lines += [f"  pause rule: {p}" for p in seen.pauses]
    if seen.asked:
        lines.append(f"  wakes made by the rule: {', '.join(seen.asked)}")
    if seen.hits:
        lines.append(f"  hits {seen.hits}, accepted by the gate {seen.accepted}")
    return lines


def vad_differences(draw: int, cache: str, vad_changes: str, verifier: str) -> list[str]:
    """Every clip of a draw (commands, near misses, ordinary sentences) through the default VAD and
    one with `vad_changes` ("quiet_threshold=0.6"): a clip whose chunks get the same verdicts from
    both is judged the same by every rule (the VAD's verdict is all the spotter and the gate see of
    it), so only the clips that differ are judged, each by the shipped rule and the verifier's (if
    given) with and without the change. Returns a line per such clip and the totals' changes."""
    from dataclasses import replace

    from benchmarks.neural_corpus import neural_near_specs, neural_ordinary_specs
    from benchmarks.wake_choice import Rule, first_stage_changes
    from detectors.vad import SileroVad, VadSettings

    vad, _ = first_stage_changes(",".join(f"vad.{c.strip()}" for c in vad_changes.split(",") if c.strip()))
    corpus = NeuralCorpus(cache, Corpus(cache), draw=draw)
    plain, changed = SileroVad(), SileroVad(replace(VadSettings(), **dict(vad)))
    rules = [Rule("shipped"), Rule("shipped+", vad=vad)] + (
        [Rule("verifier", verify=True, weights=verifier), Rule("verifier+", verify=True, weights=verifier, vad=vad)] if verifier else [])
    judges = judges_for(PHRASE, rules)
    step = 960
    lines, clips, delta = [], 0, {"addressed": [0, 0], "near": [0, 0], "ordinary": [0, 0]}
    for kind, specs in (("addressed", neural_wake_specs(PHRASE, 12)), ("near", neural_near_specs(PHRASE, 12)),
                        ("ordinary", neural_ordinary_specs(12))):
        for spec in specs:
            pcm = corpus.clip(spec).pcm
            clips += 1
            plain.restart()
            changed.restart()
            if all(plain.feed(pcm[i : i + step]).is_speech == changed.feed(pcm[i : i + step]).is_speech
                   for i in range(0, len(pcm) - step + 1, step)):
                continue
            heard = {label: heard_in(judge, pcm) for label, judge in judges.items()}
            for index, base in enumerate(("shipped", "verifier")[: len(rules) // 2]):
                delta[kind][index] += heard[base + "+"] - heard[base]
            lines.append(f"draw {draw} {kind} {spec.variant.name} take {spec.take} {spec.text!r}: "
                         + ", ".join(f"{label} {'woke' if h else '-'}" for label, h in heard.items()))
    lines.append(f"draw {draw}: {len(lines)} of {clips} clips heard otherwise by the VAD with {vad_changes}; change in "
                 + "; ".join(f"{kind} woken: shipped {d[0]:+d}" + (f", verifier {d[1]:+d}" if verifier else "") for kind, d in delta.items()))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draw", type=int, action="append", required=True)
    parser.add_argument("--cache", default=".cache/corpus")
    parser.add_argument("--rule", default="shipped", help="a rule `benchmarks.wake_choice.judges_for` knows")
    parser.add_argument("--verifier", default="", help="with --rule 'WAKE_VERIFY=true': these weights (a .npz)")
    parser.add_argument("--all", action="store_true", help="every command's story, not only the ones missed")
    parser.add_argument("--variants", default="", help="comma-separated variant names (Variant's values' first word)")
    parser.add_argument("--vad-diff", default="", metavar="CHANGES",
                        help="instead: the clips the VAD hears otherwise with these VadSettings changes, judged "
                             "with and without them ('quiet_threshold=0.6')")
    args = parser.parse_args(argv)
    if args.vad_diff:
        for draw in args.draw:
            print("\n".join(vad_differences(draw, args.cache, args.vad_diff, args.verifier)), flush=True)
        return 0
    for draw in args.draw:
        corpus = NeuralCorpus(args.cache, Corpus(args.cache), draw=draw)
        judge = judges_for(PHRASE, [args.rule], verifier=args.verifier)[args.rule]
        seen = watch(judge)
        missed = 0
        for spec in neural_wake_specs(PHRASE, 12):
            if args.variants and spec.variant.name.lower() not in args.variants.split(","):
                continue
            clip = corpus.clip(spec)
            heard = heard_in(judge, clip.pcm)
            if heard and not args.all:
                continue
            missed += not heard
            said = ", ".join(f"{a:.2f}-{b:.2f}" for a, b in clip.speech_spans[:1] + clip.speech_spans[-1:])
            print(f"draw {draw} take {spec.take} {spec.variant.name} {'heard' if heard else 'MISSED'}: {spec.text!r}")
            print("\n".join(story(seen, said, ungated(clip.pcm))), flush=True)
        print(f"draw {draw}: {missed} missed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
