"""Where the preroll's barge-in trials are lost (issue 32, session 14): per trial of
`benchmarks/barge_in.py` (the same scenes and seeds) at one echo level, the shipped path
(`PrerollStopListener` with the echo gate's margins judging each hit) and the same without the
judging, each with where the narration was cut against the end of the user's words, whether the
hit was a wake (`cmd`), hits the margins vetoed, the feed's openings, and what the hold did
(released / dropped, the wake re-found and the turn ended on the upload path).

A trial lost with no hit in either run is lost at the detectors (they missed the phrase in the
canceller's output); one the unjudged run finds is lost to the check.

Run: PYTHONPATH=$PWD nice -n 10 .venv/bin/python -m benchmarks.barge_in_lost LEVEL stop|cmd TRIALS [ALONE_CUTOFF|model [SEED_OFFSET]]
(ALONE_CUTOFF: the barge-in wake model's, default `StopSettings().barge_in_alone_cutoff`; SEED_OFFSET: fresh rooms)
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.barge_in import (COMMAND_TEXT, NARRATION, NARRATOR, RATE, STOP_TEXT, Path, active_rms,
                                 alone_cutoff_arg, build_scenes, run_trial, samples)
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from detectors.barge_in import PrerollSettings, PrerollStopListener
from detectors.stop_phrase import StopPhraseSettings


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    level_arg, kind, trials = args[:3]
    alone = alone_cutoff_arg(args[3] if len(args) > 3 else "")
    offset = int(args[4]) if len(args) > 4 else 0
    level = float(level_arg)
    corpus = Corpus(DEFAULT_CACHE)
    narration = samples(corpus.speech(NARRATION, NARRATOR, 165))
    narration = np.concatenate([narration, np.zeros(RATE // 2)] * 3)
    narration *= 6000 / active_rms(narration)
    settings = StopPhraseSettings(wake_phrase="hey jarvis", stop_words=("stop", "cancel"))
    text, seed = (STOP_TEXT, int(10 - level) + offset) if kind == "stop" else (COMMAND_TEXT, int(50 - level) + offset)
    for k, scene in enumerate(build_scenes(corpus, text, level, int(trials), narration, seed)):
        row = []
        for judged in (True, False):
            path = Path(settings, True, "zero", None, True, False, True, PrerollSettings(), judged, alone)
            o = run_trial(scene, path)
            listener = path.listener
            assert isinstance(listener, PrerollStopListener)
            cut = "-" if o.cut_at is None else f"{(o.cut_at - scene.word_end_s) * 1000:+.0f}ms"
            row.append(f"{'judged' if judged else 'unjudged'} cut {cut} cmd={int(o.command_hit)} vetoed={listener.vetoed} "
                       f"openings={listener.primings} released={o.released} dropped={o.dropped} "
                       f"wake={int(o.wake_heard)} turn={int(o.turn)} uploaded={o.uploaded_s:.1f}s")
        print(f"#{k} delays {scene.delays[0] * 1000:.0f}->{scene.delays[1] * 1000:.0f} ms | " + " | ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
