"""What the barge-in hold's stop check should drop, now that a released "stop" is dismissed
(issue 32, session 23).

A barge-in's hit cuts the narration at once; the hold (`detectors.barge_in.CommandHold`) then
decides whether what followed the wake phrase goes up as a command or is dropped as "stop"
(`StopAfterWake`). Since session 23 the router has `dismiss` (decisions.dismissal): a released
"hey jarvis, stop" goes up and ends with nothing run or said, while a command dropped as "stop",
or "hey jarvis" then a pause before the command (the check takes a lenient spot inside "jarvis"
with no speech after it for "stop"), is lost. So the check should drop only what it is sure of.

`benchmarks/barge_in.py`'s rooms and voices (the same scenes for the same seeds), three things
said: "hey jarvis, stop", "hey jarvis, what time is it", and "hey jarvis" then `--pause` seconds
of silence then "what time is it" (a seed of its own). Per hold check (`AfterWakeSettings`):
- stop: the narration cut at most 200 ms after "stop" ends; "on the device" when nothing went up,
  "dismissed" when it went up as a command (the router's `dismiss`);
- command / paused: cut, the wake carried and heard on the upload path, and the upload reached the
  end of the command (for "paused", the words after the pause).
Paths differ only in the hold's check; every other part is the shipped one, so a candidate is run
only where it could decide otherwise (`decided_alike`).

Run: PYTHONPATH=$PWD nice -n 10 .venv/bin/python -m benchmarks.hold_release --offsets 1000 --levels 0,-6,-12 [--trials 30]
"""

from __future__ import annotations

import argparse

from benchmarks.barge_in import Path, run_trial
from benchmarks.barge_in_room import COMMAND_TEXT, RATE, STOP_SETTINGS, STOP_TEXT, build_scenes, narration
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from detectors.barge_in import AfterWakeSettings, PrerollSettings

PAUSED_TEXT = "hey jarvis|what time is it"  # said apart, with a pause between
# The first is run in full, the others only where they could decide otherwise (`decided_alike`).
# "before": the check until session 23 (a lenient spot alone could drop a hold); "s23": only the
# stop phrase's own hit drops one (`stop_needs_phrase`, on since session 23, when this was "phrase");
# "shipped": and a hold with nothing said after its hit waits for a command after a pause
# (`pause_wait_s`, on since session 24).
CHECKS = {
    "shipped": AfterWakeSettings(),
    "before": AfterWakeSettings(stop_needs_phrase=False, pause_wait_s=0.0),
    "s23": AfterWakeSettings(pause_wait_s=0.0),
    "shipped+from-hit": AfterWakeSettings(in_phrase_from_hit=True),
}


def decided_alike(shipped: Path, after: AfterWakeSettings) -> bool:
    """Whether the check `after` would have decided the shipped path's trial alike, so that the
    trial is the same to the byte: no hold decided, or one, which `after`'s rule decides as the
    shipped check did on the same state (`StopAfterWake.says_stop`)."""
    hold, check = shipped.hold, shipped.hold.check
    decided = hold.released + hold.dropped
    if check is None or after == check.settings or decided == 0:
        return check is not None and after == check.settings or decided == 0
    if hold.holding or decided > 1 or after.pause_wait_s != check.settings.pause_wait_s:
        return False  # (a wait decides at another time, on another state: run it)
    return check.says_stop(after) == bool(hold.dropped)


class PausedCorpus:
    """The corpus, with "a|b" read as a, `pause_s` of silence, then b (each trimmed as usual)."""

    def __init__(self, corpus: Corpus, pause_s: float) -> None:
        self.corpus, self.pause = corpus, bytes(2 * round(pause_s * RATE))

    def speech(self, text: str, voice: str, speed: int) -> bytes:
        return self.pause.join(self.corpus.speech(part, voice, speed) for part in text.split("|"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.hold_release")
    parser.add_argument("--levels", default="0,-6,-12")
    parser.add_argument("--offsets", default="1000")
    parser.add_argument("--phrases", default="stop,command,paused")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between 'hey jarvis' and the command")
    parser.add_argument("--checks", default=",".join(CHECKS))
    args = parser.parse_args(argv)
    corpus = PausedCorpus(Corpus(DEFAULT_CACHE), args.pause)
    played = narration(corpus.corpus)
    checks = {name: CHECKS[name] for name in args.checks.split(",")}
    texts = {"stop": (STOP_TEXT, 10), "command": (COMMAND_TEXT, 50), "paused": (PAUSED_TEXT, 90)}
    rows = []
    for offset in (int(x) for x in args.offsets.split(",")):
        for level in (float(x) for x in args.levels.split(",")):
            for kind in args.phrases.split(","):
                text, base = texts[kind]
                scenes = build_scenes(corpus, text, level, args.trials, played, int(base - level) + offset)  # type: ignore[arg-type]
                counts = {name: [0, 0] for name in checks}  # stop: on the device, dismissed; else: routed, -
                for k, scene in enumerate(scenes):
                    line, shipped = [], None
                    for name, after in checks.items():
                        o = shipped if shipped is not None and decided_alike(shipped_path, after) else None
                        if o is None:
                            path = Path(STOP_SETTINGS, True, "zero", None, True, False, True, PrerollSettings(), True, after=after)
                            o = run_trial(scene, path)
                        if shipped is None:
                            shipped, shipped_path = o, path
                        cut = o.cut_at is not None and o.cut_at <= scene.word_end_s + 0.2
                        if kind == "stop":  # a hold let through is "dismissed" by the router
                            released = o.uploaded_s > 0
                            counts[name][0] += cut and not released
                            counts[name][1] += cut and released
                            verdict = "dismissed" if cut and released else "device" if cut else "LOST"
                        else:  # the upload reached the command's end: from 0.5 s before the phrase (the hold's preroll)
                            reached = o.uploaded_s >= scene.word_end_s - (9.0 - 0.5) - 0.3
                            ok = o.cut_at is not None and o.wake_heard and reached
                            counts[name][0] += ok
                            verdict = "ok" if ok else "LOST"
                        line.append(f"{name}: {verdict} released={o.released} dropped={o.dropped} up={o.uploaded_s:.1f}s")
                    print(f"{offset} {level:+.0f}dB {kind} #{k} | " + " | ".join(line), flush=True)
                n = len(scenes)
                for name, (a, b) in counts.items():
                    cell = f"{a}/{n} on the device + {b} dismissed = {a + b}/{n}" if kind == "stop" else f"{a}/{n}"
                    rows.append(f"| {offset} | {level:+.0f} dB | {kind} | {name} | {cell} |")
                    print(rows[-1], flush=True)
    print("\n| offset | echo | said | hold check | found / routed |\n|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
