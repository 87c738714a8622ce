"""How well the on-device stop phrase ("computer, stop" / "computer, cancel") is heard over the narrator.

Found: the stop phrase said by 5 espeak-ng voices at 3 speeds, with the narration mixed in as the
room echo that remains around the echo gate (-18 dB under the speaker's level, 50 ms late), the
phrase starting a second into the narration. False stops: the narration's own echo alone (at
-18 dB and, as a worst case, at the speaker's level), and ordinary sentences said to the room
(the corpus's near misses and chatter plus sentences built to trip it: "the computer stopped
working", "you can cancel it online"). CPU per second of audio fed (1000 ms/s = one core).

Run: .venv/bin/python -m benchmarks.stop_phrase [--quick]
"""

from __future__ import annotations

import argparse
import time

from benchmarks.corpus import (
    BABBLE_LINES, DEFAULT_CACHE, FRAME_BYTES, NEAR_MISSES, RATE, SPEEDS, VOICES, WIDTH, Corpus, _silence, active_rms,
)
from detectors.stop_phrase import StopPhraseDetector, StopPhraseSettings

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

STOP_TEXTS = ("computer, stop", "computer stop", "computer, cancel", "computer cancel")
NARRATION = (
    "Here is the summary of the file you asked for. The computer reads the first section aloud.",
    "The report says the service stopped twice last week, and the team cancelled the release.",
    "You can stop the timer from the app, or cancel it by voice, whichever you prefer.",
    "Next, the brain suggests three options. The first one is to compute the totals again.",
)
NARRATOR_VOICES = (("en-us+m3", 170), ("en-us+f3", 175))
TRICKY = (
    "the computer stopped working again",
    "you can cancel the order online",
    "stop by the computer store tomorrow",
    "my computer can't stop updating",
    "the commuter stopped at the station",
    "please don't cancel the party",
)


def frames(pcm: bytes):
    for i in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES):
        yield pcm[i : i + FRAME_BYTES]


def with_echo(speech: bytes, narration: bytes, echo_db: float, delay_s: float = 0.05, lead_s: float = 1.0) -> bytes:
    """The user's speech starting `lead_s` into the narration, the narration's echo `echo_db` under
    the speech's level and `delay_s` late."""
    speech = _silence(lead_s) + speech + _silence(0.6)
    level = active_rms(speech)
    echo = _silence(delay_s) + audioop.mul(narration, WIDTH, level / max(1, active_rms(narration)) * 10 ** (echo_db / 20))
    echo = (echo * (len(speech) // max(1, len(echo)) + 1))[: len(speech)]
    return audioop.add(speech, echo, WIDTH)


def count_hits(detector: StopPhraseDetector, pcm: bytes) -> tuple[int, float, float]:
    """(hits, CPU s, audio s) for one stream fed in 20 ms chunks from a reset."""
    detector.reset()
    hits = 0
    started = time.process_time()
    for chunk in frames(pcm):
        hits += detector.feed(chunk) is not None
    return hits, time.process_time() - started, len(pcm) / WIDTH / RATE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--thresholds", default="1e-50:1e-20,1e-70:1e-20,1e-90:1e-20,1e-70:1e-25,1e-50:1e-30,1e-60:1e-30,1e-60:1e-40", help="wake:stop pairs")
    args = parser.parse_args(argv)
    corpus = Corpus(args.cache)
    count = 6 if args.quick else 30
    stops = [(STOP_TEXTS[i % len(STOP_TEXTS)], VOICES[i % len(VOICES)], SPEEDS[(i // len(VOICES)) % len(SPEEDS)])
             for i in range(count)]
    narrations = [corpus.speech(" ".join(NARRATION), v, s) for v, s in NARRATOR_VOICES[: 1 if args.quick else 2]]
    ordinary_texts = list(TRICKY) + ([] if args.quick else list(NEAR_MISSES) + list(BABBLE_LINES))
    ordinary = [corpus.speech(t, VOICES[i % len(VOICES)], SPEEDS[i % len(SPEEDS)]) for i, t in enumerate(ordinary_texts)]
    said = [corpus.speech(*spec) for spec in stops]
    found_sets = {
        "quiet room": [_silence(0.5) + s + _silence(0.6) for s in said],
        "echo -18 dB": [with_echo(s, narrations[i % len(narrations)], -18) for i, s in enumerate(said)],
        "echo -12 dB": [with_echo(s, narrations[i % len(narrations)], -12) for i, s in enumerate(said)],
    }
    level = active_rms(said[0])
    echo_alone = {
        "-18 dB": [audioop.mul(n, WIDTH, level / active_rms(n) * 10 ** (-18 / 20)) for n in narrations],
        "0 dB": [audioop.mul(n, WIDTH, level / active_rms(n)) for n in narrations],
    }
    echo_s = sum(len(n) for n in narrations) / WIDTH / RATE
    print(f"Stop phrase (pocketsphinx 5.1.1 keyphrase, {' / '.join(STOP_TEXTS)}): {count} said "
          f"({len(VOICES)} voices x {len(SPEEDS)} speeds); narration echo alone {echo_s:.0f} s; "
          f"{len(ordinary)} ordinary sentences")
    names = list(found_sets)
    print("| wake / stop threshold | " + " | ".join(f"found, {n}" for n in names)
          + " | false, echo alone -18 dB | false, echo alone 0 dB | false, ordinary sentences | CPU ms/s |")
    print("|---" * (len(names) + 5) + "|")
    for pair in args.thresholds.split(","):
        wake_threshold, stop_threshold = (float(t) for t in pair.split(":"))
        detector = StopPhraseDetector(StopPhraseSettings(wake_threshold=wake_threshold, stop_threshold=stop_threshold))
        cpu = seconds = 0.0
        row = []
        for name in names:
            found = 0
            for pcm in found_sets[name]:
                hits, c, s = count_hits(detector, pcm)
                found += hits > 0
                cpu, seconds = cpu + c, seconds + s
            row.append(f"{found}/{count}")
        for key in ("-18 dB", "0 dB"):
            false = 0
            for pcm in echo_alone[key]:
                hits, c, s = count_hits(detector, pcm)
                false += hits
                cpu, seconds = cpu + c, seconds + s
            row.append(str(false))
        false = 0
        for pcm in ordinary:
            hits, c, s = count_hits(detector, _silence(0.3) + pcm + _silence(0.5))
            false += hits > 0
            cpu, seconds = cpu + c, seconds + s
        row.append(f"{false}/{len(ordinary)}")
        print(f"| {wake_threshold:g} / {stop_threshold:g} | " + " | ".join(row) + f" | {1000 * cpu / seconds:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
