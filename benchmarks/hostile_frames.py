"""What a hostile server's frames cost the event loop, with the bounds (issue 23, defects 3 and 4).

    .venv/bin/python -m benchmarks.hostile_frames [--quick]

Rows, each timed on this machine and given as a ratio against the baseline measured in the same
run (parsing and feeding one ordinary response.done to the listener core):
- 10,000 seeded mistyped and oversized frames through the parser and both cores (per frame);
- one response.done asking for 10,000 function calls (parsed and fed to the listener core);
- one response.done answering a megabyte of text (parsed, fed, and cut to a script);
- the narrator's similarity check on an 8,000-word read (bounded to 1,000 words a side).
Figures are printed, never asserted (the machine is shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

from decisions import listener_core as lc
from decisions.narration import NarrationCore, similarity
from decisions.wake_gate import WakeGate
from realtime_api import wire
from realtime_sim.hostile import TEMPLATES, hostile_frames, huge_answer, many_calls


def _listener() -> lc.ListenerCore:
    core = lc.ListenerCore(gate=WakeGate("computer", (), 8.0), session=1)
    core.route("what time is it")
    return core


def _timed(work: Callable[[], object], repeat: int) -> float:
    """The best of `repeat` runs, in seconds (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def _feed(frame: str) -> None:
    event = wire.parse_server_frame(frame)
    _listener().feed(event)
    NarrationCore("It is noon.", "n1").feed(event)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer frames and repeats")
    args = parser.parse_args(argv)
    frames = 1_000 if args.quick else 10_000
    repeat = 3 if args.quick else 7

    import json

    ordinary = json.dumps(next(t for t in TEMPLATES if t["type"] == "response.done"))
    baseline = _timed(lambda: _feed(ordinary), repeat * 20)
    fuzz = list(hostile_frames(23, frames, oversized_share=0.01))
    fuzz_s = _timed(lambda: [_feed(f) for f in fuzz], 1)
    calls, answer = many_calls("resp_1"), huge_answer("resp_1")
    read = " ".join(["the quick brown fox jumps over the lazy dog"] * 900)  # ~8,000 words
    rows = [
        ("one ordinary response.done (baseline)", baseline),
        (f"a hostile frame (mean of {frames:,}, 1% oversized)", fuzz_s / frames),
        ("10,000 function calls in one response.done", _timed(lambda: _feed(calls), repeat)),
        ("a 1 MB answer in one response.done", _timed(lambda: _feed(answer), repeat)),
        ("similarity() of an 8,000-word read", _timed(lambda: similarity(read, read.replace("fox", "cat")), repeat)),
    ]
    print("| what | time | ratio to the baseline |")
    print("|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds * 1000:.2f} ms | {seconds / baseline:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
