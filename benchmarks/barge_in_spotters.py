"""What each spotter makes of a barge-in trial's phrase (issue 32, session 23): on the user's voice
alone (the -60 dBFS floor, no echo, no room) and on the canceller's output over the whole room
(the shipped canceller: the main and shadow filters, the suppressor by level; nothing cut), from
1.5 s before the phrase to 0.2 s after it:

- mww: microWakeWord's best probability (the barge-in wake model's first model; it wakes alone
  above `StopSettings.barge_in_alone_cutoff`, 0.9, or with openWakeWord's agreement);
- oww: openWakeWord's best probability on the same audio (heard from its start, padded);
- ps wake: the strictest of `THRESHOLDS` at which pocketsphinx's keyphrase search for the wake
  phrase (the stop phrase detector's own search, `detectors.stop_phrase._Spotter`, shipped at
  1e-70) spots it ending inside the phrase ("-" none);
- ps stop: the same for the trial's stop word (shipped at 1e-20), for "hey jarvis, stop".

Trials by cell: `--cells OFFSET:LEVEL:PHRASE:K,K,...;...` (`benchmarks/barge_in.py`'s scenes and seeds).

Run: PYTHONPATH=$PWD .venv/bin/python -m benchmarks.barge_in_spotters --cells "1000:0:stop:12,27"
"""

from __future__ import annotations

import argparse

import numpy as np

from audio_io.echo import EchoSuppressor
from audio_io.echo_cancel import EchoCanceller
from benchmarks.barge_in_room import (CHUNK, COMMAND_TEXT, LEAD_S, PHRASE, RATE, STOP_TEXT, Scene, build_scenes, narration,
                                      pcm, samples)
from benchmarks.barge_in_lost import voice_of
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from config.settings import EchoSettings, StopSettings, UploadMode, UploadSettings
from config.wake_phrases import model_for
from detectors.audio import Resampler
from detectors.pipeline import build_wake_spotter
from detectors.stop_phrase import _Spotter
from detectors.wake_confirm import OpenStream

THRESHOLDS = (1e-10, 1e-20, 1e-30, 1e-40, 1e-50, 1e-60, 1e-70, 1e-80, 1e-90, 1e-100)
FROM_S, AFTER_S = 1.5, 0.2


def residue(scene: Scene) -> np.ndarray:
    """The shipped canceller's output for the whole room (the narration playing on)."""
    gate = EchoSuppressor(EchoSettings())
    canceller = EchoCanceller(EchoSettings(), echo_gain_db=gate.echo_gain_db)
    mic = scene.user + scene.echo(scene.narration) + scene.noise
    out = bytearray()
    for i in range(len(mic) // CHUNK):
        at = i * CHUNK / RATE
        played, raw = pcm(scene.narration[i * CHUNK:(i + 1) * CHUNK]), pcm(mic[i * CHUNK:(i + 1) * CHUNK])
        gate.played(played, at)
        gate.process(raw, at)
        canceller.played(played, at)
        out += canceller.process(raw, at)
    return samples(bytes(out))


def scores(audio: np.ndarray, scene: Scene, stop_word: str | None) -> dict[str, str]:
    """The spotters' best on `audio` from `FROM_S` before the phrase to `AFTER_S` after it."""
    first = int((LEAD_S - FROM_S) * RATE) // CHUNK
    last = min(len(audio) // CHUNK, int((scene.word_end_s + AFTER_S) * RATE) // CHUNK + 1)
    chunks = [pcm(audio[i * CHUNK:(i + 1) * CHUNK]) for i in range(first, last)]
    wake = build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), PHRASE, StopSettings().barge_in_alone_cutoff)
    woke = False
    for i, chunk in zip(range(first, last), chunks):
        woke |= wake.feed(chunk, (i + 1) * CHUNK / RATE) is not None
    best = wake.take_best()  # type: ignore[attr-defined]
    pcm16k = Resampler(RATE)(b"".join(chunks))
    model = model_for(PHRASE)
    assert model is not None
    oww = max((p for _, p in OpenStream(model.model).start(pcm16k)), default=0.0)
    onset, end = FROM_S, scene.word_end_s - (LEAD_S - FROM_S)  # the phrase, in the window's time

    def strictest(word: str) -> str:
        for threshold in THRESHOLDS:
            spotter = _Spotter(word, threshold, 2)
            step = 320 * 2  # 20 ms at 16 kHz
            for at in range(0, len(pcm16k), step):
                heard = spotter.feed(pcm16k[at:at + step])
                if heard is not None and onset - 0.1 <= heard[1] <= end + 0.3:
                    return f"{threshold:.0e}"
        return "-"

    out = {"woke": "yes" if woke else "no", "mww": f"{best.probability:.3f}" if best else "-", "oww": f"{oww:.3f}",
           "ps wake": strictest(PHRASE)}
    if stop_word:
        out["ps stop"] = strictest(stop_word)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.barge_in_spotters")
    parser.add_argument("--cells", required=True, help="OFFSET:LEVEL:stop|command:K,K;...")
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args(argv)
    corpus = Corpus(DEFAULT_CACHE)
    speech = narration(corpus)
    print("| offset | echo | phrase | trial | voice | alone: model woke / mww / oww / ps wake / ps stop "
          "| residue: model woke / mww / oww / ps wake / ps stop |")
    print("|---|---|---|---|---|---|---|")
    for cell in (c for c in args.cells.split(";") if c):
        offset, level_text, kind, ks = cell.split(":")
        level = float(level_text)
        text, seed = (STOP_TEXT, int(10 - level) + int(offset)) if kind == "stop" else (COMMAND_TEXT, int(50 - level) + int(offset))
        scenes = build_scenes(corpus, text, level, args.trials, speech, seed)
        for k in (int(x) for x in ks.split(",")):
            scene = scenes[k]
            stop_word = "stop" if kind == "stop" else None
            alone = scores(scene.user + scene.noise, scene, stop_word)
            heard = scores(residue(scene), scene, stop_word)
            print(f"| {offset} | {level:+.0f} dB | {kind} | #{k} | {voice_of(k)} | " + " / ".join(alone.values())
                  + " | " + " / ".join(heard.values()) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
