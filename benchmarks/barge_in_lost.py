"""Where barge-in's trials are lost, per trial (issue 32, sessions 14 and 22): `benchmarks/barge_in.py`'s
trials (the same scenes and seeds) through the shipped path (the preroll row: `PrerollStopListener`
with the echo gate's margins and what was played judging each hit, the hold's stop check, the upload
filter carrying the wake; the suppressor by level), each with its voice, where the narration was
cut against the end of the user's words, whether the hit was a wake (`cmd`), hits vetoed, the feed's
openings, what the hold did (released / dropped), the wake and the turn on the upload path, and
whether the barge-in wake model wakes on the voice alone (`benchmarks.barge_in_alone`: no echo). A
line per cell: found / routed, lost, and of the lost how many the wake model misses even alone.

`--unjudged` adds the same without the judging (a trial it finds is lost to the check); `--candidate`
adds session 22's hold check (`CANDIDATE`: a stop word counts as after the wake phrase only at or after
the hit), run only where it could differ: a trial with no hold, or one hold that the candidate would
decide alike (`decides` on the check's state when it decided), is the same to the byte by construction.

Run: PYTHONPATH=$PWD nice -n 10 .venv/bin/python -m benchmarks.barge_in_lost --levels 0 --offsets 100,200 [--phrases stop,command] [--trials 30] [--candidate] [--unjudged]
"""

from __future__ import annotations

import argparse
import dataclasses

from benchmarks.barge_in import Path, alone_cutoff_arg, run_trial
from benchmarks.barge_in_room import (COMMAND_TEXT, SPEEDS, STOP_SETTINGS, STOP_TEXT, USERS, build_scenes,
                                      narration as room_narration)
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from detectors.barge_in import AfterWakeSettings, PrerollSettings, PrerollStopListener, StopAfterWake

CANDIDATE = AfterWakeSettings(in_phrase_from_hit=True)  # session 22's hold check, measured, not switched on
BEFORE = "-s23"  # (`--before`) the path as it was before session 24's residue check


def voice_of(k: int) -> str:
    """Trial #k's user voice and speed (`build_scenes`' order: the same at every offset)."""
    return f"{USERS[k % len(USERS)].split(':')[-1]} {SPEEDS[(k // len(USERS)) % len(SPEEDS)]}"


def decides(check: StopAfterWake | None, from_hit: bool) -> bool:
    """What the check, reading "after the wake phrase" from the hit or from the phrase's start,
    says of the one hold that ran (its state when it decided: nothing is fed to it after)."""
    return check is not None and check.says_stop(dataclasses.replace(check.settings, in_phrase_from_hit=from_hit))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.barge_in_lost")
    parser.add_argument("--levels", default="0")
    parser.add_argument("--offsets", default="0")
    parser.add_argument("--phrases", default="stop,command")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--only", default="", help="trial numbers to run, e.g. 10,25 (default all)")
    parser.add_argument("--alone-cutoff", default="")
    parser.add_argument("--candidate", action="store_true", help="also session 22's hold check, measured (the same run)")
    parser.add_argument("--unjudged", action="store_true", help="also without the margins judging the hits")
    parser.add_argument("--before", action="store_true",
                        help="also each path without session 24's residue check (`max_residue_explained`), "
                             "run only where the check vetoed a hit (else the same to the byte)")
    parser.add_argument("--search", action="store_true",
                        help="also session 23's second wake (the stop phrase's search for the wake phrase: `search_wakes`), "
                             "run first; the shipped path is rerun only where the search woke")
    args = parser.parse_args(argv)
    alone = alone_cutoff_arg(args.alone_cutoff)
    corpus = Corpus(DEFAULT_CACHE)
    narration = room_narration(corpus)
    settings = STOP_SETTINGS
    runs = [("search", True, AfterWakeSettings())] if args.search else []
    runs += [("shipped", True, AfterWakeSettings())]
    runs += [("candidate", True, CANDIDATE)] if args.candidate else []
    runs += [("unjudged", False, AfterWakeSettings())] if args.unjudged else []
    if args.before:  # each path without session 24's check on the canceller's output, after it
        runs = [r for run in runs for r in (run, (run[0] + BEFORE, *run[1:])) if run[0] != "unjudged" or r is run]
    only = {int(x) for x in args.only.split(",") if x}
    for offset in (int(x) for x in args.offsets.split(",")):
        for level in (float(x) for x in args.levels.split(",")):
            for kind in args.phrases.split(","):
                text, seed = (STOP_TEXT, int(10 - level) + offset) if kind == "stop" else (COMMAND_TEXT, int(50 - level) + offset)
                good = {name: 0 for name, _, _ in runs}
                lost_unwoken = {name: 0 for name, _, _ in runs}
                lost_hold = {name: 0 for name, _, _ in runs}  # a hold decided it wrongly (a "stop" released, a command dropped)
                unwoken = 0
                for k, scene in enumerate(build_scenes(corpus, text, level, args.trials, narration, seed)):
                    if only and k not in only:
                        continue
                    alone_ok = scene.woken_alone()
                    unwoken += not alone_ok
                    row = []
                    held = True
                    outcomes: dict[str, tuple[bool, bool]] = {}  # each path's (ok, wrong_hold)
                    residue_vetoed: dict[str, int] = {}  # each path's hits vetoed by session 24's check
                    search_woke: dict[str, int] = {}  # each path's wakes by the search

                    def same_as(name: str) -> tuple[str, str] | None:
                        """The path already run that this one is the same as to the byte, and why."""
                        if name.endswith(BEFORE) and residue_vetoed.get(name[:-len(BEFORE)]) == 0:
                            return name[:-len(BEFORE)], "no residue veto"
                        if name == "candidate" and not held:
                            return "shipped", "decided alike"
                        searched = "search" + name[len("shipped"):]
                        if name.startswith("shipped") and search_woke.get(searched) == 0:
                            return searched, "the search never woke"
                        return None

                    for name, judged, after in runs:
                        alike = same_as(name)
                        if alike is not None:
                            base, why = alike
                            ok, wrong_hold = outcomes[name] = outcomes[base]
                            residue_vetoed[name], search_woke[name] = residue_vetoed[base], search_woke[base]
                            good[name] += ok
                            lost_unwoken[name] += not ok and not alone_ok and not wrong_hold
                            lost_hold[name] += not ok and wrong_hold
                            row.append(f"{name}: the same ({why})")
                            continue
                        preroll = PrerollSettings(max_residue_explained=1.0) if name.endswith(BEFORE) else PrerollSettings()
                        path = Path(settings, True, "zero", None, True, False, True, preroll, judged, alone, after,
                                    search_wakes=name.startswith("search"))
                        o = run_trial(scene, path)
                        search_woke[name] = path.detector.search_woke
                        listener = path.listener
                        assert isinstance(listener, PrerollStopListener)
                        residue_vetoed[name] = listener.residue_vetoed
                        if kind == "stop":
                            ok = o.cut_at is not None and o.cut_at <= scene.word_end_s + 0.2  # (gone up: dismissed)
                        else:
                            ok = o.cut_at is not None and o.wake_heard and o.turn
                        wrong_hold = o.released > 0 if kind == "stop" else o.dropped > 0 and not o.released
                        outcomes[name] = ok, wrong_hold
                        good[name] += ok
                        lost_unwoken[name] += not ok and not alone_ok and not wrong_hold
                        lost_hold[name] += not ok and wrong_hold
                        if name == "shipped":  # the candidate decides alike: the same to the byte
                            assert o.released + o.dropped != 1 or path.hold.holding or decides(path.hold.check, False) == bool(o.dropped)
                            held = o.released + o.dropped > 1 or path.hold.holding or (
                                o.released + o.dropped == 1 and decides(path.hold.check, True) != bool(o.dropped))
                        check = path.hold.check
                        spots = "" if check is None or not (o.released or o.dropped) else (
                            f" hit={check._hit_s:.2f} phrase={check._phrase_start_s:.2f} spots=" + ",".join(f"{t - check._hit_s:+.2f}" for t in check.spots)
                            + f" after_spot={check._voiced_after_s:.2f} after_hit={check._voiced_after_hit_s:.2f}")
                        cut = "-" if o.cut_at is None else f"{(o.cut_at - scene.word_end_s) * 1000:+.0f}ms"
                        row.append(f"{name} {'ok' if ok else 'LOST'} cut {cut} cmd={int(o.command_hit)} sw={path.detector.search_woke} vetoed={listener.vetoed}"
                                   f"+{listener.explained_vetoed}+{listener.residue_vetoed} openings={listener.primings} released={o.released} "
                                   f"dropped={o.dropped} wake={int(o.wake_heard)} turn={int(o.turn)} uploaded={o.uploaded_s:.1f}s{spots}")
                    print(f"{offset} {level:+.0f}dB {kind} #{k} {voice_of(k)} alone={'woken' if alone_ok else 'NOT'} "
                          f"delays {scene.delays[0] * 1000:.0f}->{scene.delays[1] * 1000:.0f} ms | " + " | ".join(row), flush=True)
                n = len(only) if only else args.trials
                print(f"== offset {offset} {level:+.0f} dB {kind}: " + ", ".join(
                    f"{name} {good[name]}/{n}, lost {n - good[name]} (voice not woken even alone: {lost_unwoken[name]}, "
                    f"the hold: {lost_hold[name]}, over the echo: {n - good[name] - lost_unwoken[name] - lost_hold[name]})"
                    for name, _, _ in runs) + f"; trials whose voice is not woken even alone: {unwoken}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
