"""The echo canceller's CPU against its barge-in quality (issues 34 and 32, session 22).

`audio_io.echo_cancel` as configured (`EchoSettings`: speexdsp's frame, the shadow filter always
or on demand) against the canceller before session 22 (10 ms frames, the shadow on every chunk),
measured in the same run, each variant on the same rooms:

- CPU (the default): ms of CPU per 20 ms chunk the canceller runs on (its gate behind it
  included), the variants interleaved `--repeats` times (the lowest of each is printed, and the
  ratio to the baseline): a room whose echo path changes 6 s in (`benchmarks.barge_in`'s), and a
  room with no echo at all (`benchmarks.listener_upload_pipeline`'s memory speaker);
- `--erle N`: the echo taken off (dB) on N of `benchmarks.barge_in`'s 0 dB rooms, before and
  after the path's change and where the user speaks (docs/PERFORMANCE.md, "Barge-in: following the
  room's change"), and the share of chunks the shadow ran on;
- `--barge-in`: `benchmarks.barge_in`'s trials on the shipped path (the wake model behind the gate,
  the hold's stop check after a cut), "hey jarvis, stop" found (cut <= 200 ms after the word,
  nothing uploaded) and commands cut and routed, per level, for each `--seed-offset`.

Run: nice -n 10 .venv/bin/python -m benchmarks.echo_cancel_cost [--erle 12] [--barge-in --seed-offset 700]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from audio_io.echo_cancel import EchoCanceller
from benchmarks.barge_in import ERLE_WINDOWS, Path, run_trial
from benchmarks.barge_in_room import CHUNK, COMMAND_TEXT, RATE, STOP_SETTINGS, STOP_TEXT, Scene, build_scenes, narration, pcm, samples
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from config.settings import EchoSettings

BEFORE = dataclasses.replace(EchoSettings(), cancel_frame_ms=10, cancel_shadow_always=True)  # before session 22
VARIANTS = {  # (`--variants` names them)
    "before": BEFORE,
    "10ms-on-demand": dataclasses.replace(EchoSettings(), cancel_frame_ms=10, cancel_shadow_always=False),
    "20ms-always": dataclasses.replace(EchoSettings(), cancel_frame_ms=20, cancel_shadow_always=True),
    "20ms-on-demand": dataclasses.replace(EchoSettings(), cancel_frame_ms=20, cancel_shadow_always=False),
    "now": EchoSettings(),  # as shipped
}


def cancelled(settings: EchoSettings, scene: Scene, mic: np.ndarray) -> tuple[bytes, float, float]:
    """The canceller's output for the scene's narration played and `mic` heard, in 20 ms chunks;
    the share of chunks its shadow filter ran on, and the CPU per chunk, ms."""
    canceller = EchoCanceller(settings)
    out = bytearray()
    shadowed = 0
    spent = 0.0
    chunks = len(mic) // CHUNK
    for i in range(chunks):
        far, near = pcm(scene.narration[i * CHUNK:(i + 1) * CHUNK]), pcm(mic[i * CHUNK:(i + 1) * CHUNK])
        t = time.process_time()
        canceller.played(far, i * CHUNK / RATE)
        out += canceller.process(near, i * CHUNK / RATE)
        spent += time.process_time() - t
        shadowed += canceller.shadow_running
    return bytes(out), shadowed / max(chunks, 1), spent / max(chunks, 1) * 1000


def erle(corpus: Corpus, rooms: int, names: list[str]) -> None:
    scenes = build_scenes(corpus, STOP_TEXT, 0.0, rooms, narration(corpus), seed=10)
    windows = ERLE_WINDOWS
    print("| canceller | room | " + " | ".join(f"{a:g}-{b:g} s, median (min)" for a, b in windows) + " | chunks the shadow ran on |")
    print("|---|---|" + "---|" * (len(windows) + 1))
    for name in names:
        for with_user in (False, True):
            rows, shares = [], []
            for scene in scenes:
                echo = scene.echo(scene.narration)
                user = scene.user if with_user else np.zeros(len(echo))
                out, share, _ = cancelled(VARIANTS[name], scene, user + echo + scene.noise)
                left = samples(out) - user[:len(out) // 2] - scene.noise[:len(out) // 2]
                rows.append([10 * np.log10((echo[int(a * RATE):int(b * RATE)] ** 2).sum()
                                           / ((left[int(a * RATE):int(b * RATE)] ** 2).sum() + 1.0)) for a, b in windows])
                shares.append(share)
            r = np.array(rows)
            cells = " | ".join(f"{m:.1f} ({n:.1f})" for m, n in zip(np.median(r, axis=0), r.min(axis=0)))
            print(f"| {name} | {'the user speaks at 9 s' if with_user else 'echo alone'} | {cells} | {np.mean(shares):.0%} |", flush=True)


def cpu(corpus: Corpus, names: list[str], repeats: int) -> None:
    """ms per chunk, the lowest of `repeats` interleaved runs (the machine's load only adds)."""
    scene = build_scenes(corpus, STOP_TEXT, 0.0, 1, narration(corpus), seed=10)[0]
    rooms = {"a room whose path changes (0 dB, the user at 9 s)": scene.user + scene.echo(scene.narration) + scene.noise,
             "no echo (the user at 9 s)": scene.user + scene.noise}
    best: dict[tuple[str, str], float] = {}
    shadow: dict[tuple[str, str], float] = {}
    for _ in range(repeats):
        for room, mic in rooms.items():
            for name in names:
                _, share, ms = cancelled(VARIANTS[name], scene, mic)
                best[(room, name)] = min(best.get((room, name), ms), ms)
                shadow[(room, name)] = share
    print("| room | canceller | ms of CPU per 20 ms chunk (lowest of runs) | ratio to before | chunks the shadow ran on |")
    print("|---|---|---|---|---|")
    for room in rooms:
        base = best[(room, names[0])]
        for name in names:
            print(f"| {room} | {name} | {best[(room, name)]:.3f} | {best[(room, name)] / base:.2f} | {shadow[(room, name)]:.0%} |")


def trials(corpus: Corpus, names: list[str], levels: list[float], count: int, offset: int, phrases: str = "stop,command") -> None:
    """`benchmarks.barge_in`'s shipped-path rows (`--wake-gated`), one per canceller."""
    speech = narration(corpus)
    stop_settings = STOP_SETTINGS
    print("| seed offset | echo vs user | canceller | 'hey jarvis, stop' found | command cut | command cut and routed |")
    print("|---|---|---|---|---|---|")
    for level in levels:
        stops = build_scenes(corpus, STOP_TEXT, level, count, speech, seed=int(10 - level) + offset) if "stop" in phrases else []
        commands = build_scenes(corpus, COMMAND_TEXT, level, count, speech, seed=int(50 - level) + offset) if "command" in phrases else []
        for name in names:
            found = cut = routed = 0
            for scene in stops:
                o = run_trial(scene, Path(stop_settings, True, echo_settings=VARIANTS[name]))
                found += o.cut_at is not None and o.cut_at <= scene.word_end_s + 0.2  # (gone up: dismissed, session 23)
            for scene in commands:
                o = run_trial(scene, Path(stop_settings, True, echo_settings=VARIANTS[name]))
                cut += o.cut_at is not None
                routed += o.cut_at is not None and o.wake_heard and o.turn
            print(f"| {offset} | {level:+.0f} dB | {name} | {found}/{len(stops)} | {cut}/{len(commands)} | {routed}/{len(commands)} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.echo_cancel_cost")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--variants", default="before,now",
                        help="which cancellers, named as in VARIANTS (the first is the baseline)")
    parser.add_argument("--repeats", type=int, default=5, help="CPU: interleaved runs of each")
    parser.add_argument("--erle", type=int, default=0, metavar="ROOMS", help="the echo taken off on this many 0 dB rooms")
    parser.add_argument("--barge-in", action="store_true", help="benchmarks.barge_in's trials on the shipped path")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--levels", default="0,-6,-12")
    parser.add_argument("--phrases", default="stop,command", help="--barge-in: which trials, stop, command or both")
    parser.add_argument("--seed-offset", type=int, default=0, help="added to the trials' seeds, as benchmarks.barge_in's")
    args = parser.parse_args(argv)
    corpus = Corpus(args.cache)
    names = args.variants.split(",")
    if args.erle:
        erle(corpus, args.erle, names)
    elif args.barge_in:
        trials(corpus, names, [float(x) for x in args.levels.split(",") if x], args.trials, args.seed_offset, args.phrases)
    else:
        cpu(corpus, names, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
