"""What the preroll listener finds in `benchmarks/barge_in.py`'s hour of echo alone, and in its
trials, hit by hit (issue 32, session 13).

The canceller's output and the gate's verdicts do not depend on the listener, so they are
computed once per room (the hour's 120 blocks of 30 s, seed 7, exactly as `barge_in.py` builds
them; the trials' rooms with the narration playing on, nothing cut) and kept under `--store`;
then each listener setting runs over them with a fresh detector per room (as the benchmark builds
one), and every hit is written out with what the gate said around it: which chunks it passed,
and by how many dB the echo gate in front found the raw microphone over the echo it expected
(`outer`), so that a rule on a hit can be chosen on part of the rooms and checked on the rest
(`--seed 8`: a fresh hour). Setting "preroll" is `PrerollStopListener` as wired, its hits judged
by the margins and by what was played (session 16) and what was played against the canceller's output
(session 24; "preroll-s23": without that); "margins" by the margins alone (sessions 13-15); "search":
"preroll" with the stop phrase's search waking too (session 23; "search-s23": without session 24's check).

Run: nice -n 10 .venv/bin/python -m benchmarks.barge_in_hour --cache C --store S [--blocks 0:60] [--trials 0]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path as FilePath

import numpy as np

from audio_io.echo import EchoSuppressor
from audio_io.echo_cancel import EchoCanceller
from benchmarks.barge_in import alone_cutoff_arg, suppress_arg
from benchmarks.barge_in_room import (CHUNK, COMMAND_TEXT, FLOOR_RMS, NARRATOR, PHRASE, RATE, STOP_SETTINGS, STOP_TEXT, USER_RMS,
                                      Scene, active_rms, build_scenes, convolve, narration as room_narration, pcm, two_paths)
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from config.settings import EchoSettings, StopSettings, UploadMode, UploadSettings
from detectors.barge_in import BargeInDetector, PrerollSettings, PrerollStopListener
from detectors.pipeline import build_wake_spotter
from detectors.stop_phrase import StopPhraseDetector
from detectors.stop_word import StopListener


def cancelled(scene: Scene, suppress: tuple[int, int, int] | None = None, over_db: float | None = None) -> dict[str, np.ndarray]:
    """The canceller's output for the whole room (nothing cut), the verdicts of the gate behind it,
    and the margins of the echo gate in front (`outer`: the raw microphone against what was played).
    `suppress`: speexdsp's residual echo suppressor after it (`EchoCanceller(suppress=)`); `over_db`:
    only while the gate in front's learnt echo gain is above it (`EchoSettings.cancel_suppress_over_db`)."""
    gate = EchoSuppressor(EchoSettings())
    canceller = EchoCanceller(EchoSettings(cancel_suppress_over_db=over_db), suppress=suppress,
                              echo_gain_db=gate.echo_gain_db)
    mic = scene.user + scene.echo(scene.narration) + scene.noise
    out = bytearray()
    passed = []
    for i in range(len(mic) // CHUNK):
        at = i * CHUNK / RATE
        played, raw = pcm(scene.narration[i * CHUNK:(i + 1) * CHUNK]), pcm(mic[i * CHUNK:(i + 1) * CHUNK])
        canceller.played(played, at)
        out += canceller.process(raw, at)
        gate.played(played, at)
        gate.process(raw, at)
        passed.append(canceller.passed)
    return {"out": np.frombuffer(bytes(out), dtype=np.int16), "passed": np.array(passed), "outer": outer_margins(scene)}


def outer_margins(scene: Scene) -> np.ndarray:
    """Per chunk, the echo gate's `margin_db` on the raw microphone (as `barge_in.Path.gate`)."""
    gate = EchoSuppressor(EchoSettings())
    mic = scene.user + scene.echo(scene.narration) + scene.noise
    margins = []
    for i in range(len(mic) // CHUNK):
        at = i * CHUNK / RATE
        gate.played(pcm(scene.narration[i * CHUNK:(i + 1) * CHUNK]), at)
        gate.process(pcm(mic[i * CHUNK:(i + 1) * CHUNK]), at)
        margins.append(gate.margin_db)
    return np.array(margins)


def hour_scenes(narration: np.ndarray, blocks: int = 120, seed: int = 7) -> list[Scene]:
    """`barge_in.py`'s hour of echo alone at 0 dB, block by block (seed 7; another: a fresh hour)."""
    rng = np.random.default_rng(seed)
    scenes = []
    for _ in range(blocks):
        length = 30 * RATE
        start = int(rng.uniform(0, len(narration) - length))
        narr = narration[start:start + length].copy()
        direct, irs = two_paths(rng)
        gain = USER_RMS / active_rms(convolve(narr, irs[0]))
        scenes.append(Scene(narr, irs, gain, np.zeros(length), 0.0, rng.standard_normal(length) * FLOOR_RMS, direct))
    return scenes


def detector(alone_cutoff: float | None, search_wakes: bool = False) -> BargeInDetector:
    wake = build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), PHRASE, alone_cutoff)
    return BargeInDetector(StopPhraseDetector(STOP_SETTINGS), wake, "hey jarvis", search_wakes)


def listen(room: dict[str, np.ndarray], setting: tuple[PrerollSettings, bool] | None, first_s: float = 0.0,
           alone_cutoff: float | None = StopSettings().barge_in_alone_cutoff, scene: Scene | None = None,
           search_wakes: bool = False) -> list[dict]:
    """Every hit a fresh listener finds in the room (nothing is cut), with its span. `setting`:
    the preroll's settings, and whether the gate's margins judge its hits (None: the shipped listener);
    with `scene` (the room's), what was played judges them too (`PrerollSettings.max_explained`);
    `search_wakes`: the stop phrase's search wakes too (`BargeInDetector(search_wakes=)`)."""
    d = detector(alone_cutoff, search_wakes)
    out, passed, margins = room["out"], room["passed"], room["outer"]
    now = [0]
    if setting is None:
        listener: StopListener = StopListener(d)
    else:
        echo = None
        if setting[1] and scene is not None:  # the raw microphone, and what was played (the canceller is told 0 s of delay)
            mic = pcm(scene.user + scene.echo(scene.narration) + scene.noise)
            played = pcm(scene.narration)
            size = CHUNK * 2
            echo = lambda: (mic[now[0] * size:(now[0] + 1) * size], played[now[0] * size:(now[0] + 1) * size])  # noqa: E731
        listener = PrerollStopListener(d, setting[0], (lambda: float(margins[now[0]])) if setting[1] else None, echo)
    hits = []
    first = int(first_s * RATE) // CHUNK
    for i in range(len(passed)):
        now[0] = i
        chunk = out[i * CHUNK:(i + 1) * CHUNK].tobytes()
        if i < first:
            listener.hear(chunk, True, False)  # not narrating yet: only the clock runs
            continue
        hit = listener.hear(chunk, bool(passed[i]), True)
        if hit is not None:
            hits.append({"at": (i + 1) * CHUNK / RATE, "phrase": hit.phrase, "command": hit.command,
                         "start_s": hit.start_s, "end_s": hit.end_s})
    return hits


def stored(store: FilePath, name: str, make, scene: Scene) -> dict[str, np.ndarray]:
    path = store / f"{name}.npz"
    if path.exists():
        with np.load(path) as f:
            room = {k: f[k] for k in f.files}
        if "outer" not in room:  # (kept by an earlier version)
            room["outer"] = outer_margins(scene)
            np.savez(path, **room)
        return room
    room = make()
    np.savez(path, **room)
    return room


SETTINGS = {"shipped": None, "preroll": (PrerollSettings(), True),  # as wired: 2 in 5, 1 s on, the margins and what was played judge hits
            "margins": (PrerollSettings(max_explained=1.0), True),  # session 13-15's: the margins alone judge hits
            "p1-3-0.6": (PrerollSettings(onset=3, hangover_s=0.6), False),  # session 12's default
            "p1-2-1": (PrerollSettings(onset=2, hangover_s=1.0), False), "p1-2-0.6": (PrerollSettings(onset=2, hangover_s=0.6), False),
            "search": (PrerollSettings(), True),  # as wired, and the stop phrase's search wakes too (session 23)
            # as before session 24's check on the canceller's output (`max_residue_explained`): without, with the search
            "preroll-s23": (PrerollSettings(max_residue_explained=1.0), True), "search-s23": (PrerollSettings(max_residue_explained=1.0), True)}
SEARCHING = {"search", "search-s23"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.barge_in_hour")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--store", required=True)
    parser.add_argument("--blocks", default="0:120")
    parser.add_argument("--seed", type=int, default=7, help="the hour's seed (7: the benchmark's hour)")
    parser.add_argument("--narrator", default=NARRATOR, help="the narration's voice (default the benchmark's, espeak-ng en-us+f3)")
    parser.add_argument("--trials", type=int, default=0, help="also the trials' rooms at each level (this many per phrase)")
    parser.add_argument("--levels", default="0,-6,-12")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--out", required=True)
    parser.add_argument("--alone-cutoff", default="", metavar="P|model",
                        help="the barge-in wake model wakes alone above this (default: StopSettings's; model: its own)")
    parser.add_argument("--suppress", default="", metavar="ECHO,ACTIVE,NOISE",
                        help="speexdsp's residual echo suppressor after the canceller (see benchmarks.barge_in)")
    parser.add_argument("--suppress-over", type=float, default=None, metavar="DB",
                        help="the suppressor only while the echo gate's learnt echo gain is above this (see benchmarks.barge_in)")
    args = parser.parse_args(argv)
    alone = alone_cutoff_arg(args.alone_cutoff)
    suppress = suppress_arg(args.suppress)
    store = FilePath(args.store)
    store.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(args.cache)
    narration = room_narration(corpus, args.narrator)
    names = [n for n in args.settings.split(",") if n]
    results = []
    a, b = (int(x) for x in args.blocks.split(":"))
    scenes = hour_scenes(narration, seed=args.seed) if b > a else []
    over = args.suppress_over
    prefix = (("hour" if args.seed == 7 else f"s{args.seed}hour") + ("" if args.narrator == NARRATOR else args.narrator.replace(":", "_")) + ("_res" + args.suppress.replace(",", "_") if suppress else "")
              + ("" if over is None else f"_over{over:g}"))
    spent = {name: 0.0 for name in names}  # CPU of each listener (the canceller's output is shared)
    for k in range(a, b):
        room = stored(store, f"{prefix}{k:03d}", lambda: cancelled(scenes[k], suppress, over), scenes[k])
        for name in names:
            started = time.process_time()
            hits = listen(room, SETTINGS[name], alone_cutoff=alone, scene=scenes[k], search_wakes=name in SEARCHING)
            spent[name] += time.process_time() - started
            for hit in hits:
                results.append({"room": f"{prefix}{k:03d}", "setting": name, **hit})
                print(json.dumps(results[-1]), flush=True)
    if b > a:
        audio_s = 30.0 * (b - a)
        print(f"hits on {audio_s / 60:g} min of echo alone: " + ", ".join(
            f"{name} {sum(r['setting'] == name for r in results)}" for name in names))
        print("CPU of the listener per second of audio (the canceller's output read from the store): " + ", ".join(
            f"{name} {spent[name] / audio_s * 1000:.1f} ms" for name in names), flush=True)
    for level in [float(x) for x in args.levels.split(",") if x] if args.trials else []:
        for text, seed, tag in ((STOP_TEXT, int(10 - level), "stop"), (COMMAND_TEXT, int(50 - level), "command")):
            for k, scene in enumerate(build_scenes(corpus, text, level, args.trials, narration, seed)):
                name = f"{tag}{level:+.0f}_{k:02d}"
                room = stored(store, name, lambda: cancelled(scene, suppress, over), scene)
                for setting in names:
                    hits = listen(room, SETTINGS[setting], alone_cutoff=alone, scene=scene)
                    results.append({"room": name, "setting": setting, "word_end_s": scene.word_end_s, "hits": hits})
                    print(json.dumps(results[-1]), flush=True)
    FilePath(args.out).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
