"""`handoff wake-test`: how well the wake model hears *your* voice through *your* microphone.

Live, it asks you to say the wake phrase a few times and then a few sentences that are not it,
and scores each take; with `--input-wav` it scores every utterance of a recording (split by the
on-device VAD). It prints how many it heard, each score, and the WAKE_CUTOFF that would have
caught every phrase with no false wake. Nothing is uploaded: no key, no network.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from config.read_only import readable_settings
from config.settings import SettingsError, UploadMode
from config.wake_phrases import model_for, model_phrases

if TYPE_CHECKING:
    from detectors.wake_test import Take

OTHER_SENTENCES = (
    "I think the train leaves at half past seven",
    "have you fed the cat yet",
    "we are out of milk again",
)
TAKE_S = 3.0  # seconds recorded for each take when live


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-wav", type=Path, help="score every utterance of this recording instead of the microphone")
    parser.add_argument("--not-phrase", action="store_true",
                        help="the recording holds sentences that are NOT the wake phrase: count false wakes")
    parser.add_argument("--times", type=int, default=5, help="live: how many times to say the phrase (default 5)")
    parser.add_argument("--others", type=int, default=len(OTHER_SENTENCES),
                        help=f"live: sentences that are not it (default {len(OTHER_SENTENCES)})")
    parser.add_argument("--wake-phrase", help="the phrase to test (WAKE_PHRASE)")
    parser.add_argument("--cutoff", type=float, help="score against this cutoff instead of WAKE_CUTOFF / the model's own")
    parser.add_argument("--input-device", help="microphone by index or name part (see `handoff devices`)")


def run(args: argparse.Namespace) -> int:
    settings = readable_settings({"WAKE_PHRASE": args.wake_phrase, "AUDIO_INPUT_DEVICE": args.input_device}, "wake-test")
    phrase = settings.listener.wake_phrase
    model = model_for(phrase)
    if model is None:
        raise SettingsError(f"WAKE_PHRASE={phrase} has no on-device model, so there is nothing to test on this machine "
                            f"(it runs in speech_only mode); the phrases with a model are {model_phrases()}.")
    if args.cutoff is not None and not 0 < args.cutoff < 1:
        raise SettingsError(f"--cutoff {args.cutoff:g} is not between 0 and 1.")
    if args.times < 1 or args.others < 0:
        raise SettingsError("--times must be 1 or more and --others 0 or more.")
    from audio_io import AudioDeviceError, AudioFileError, read_wav  # heavy parts load only for a test run
    from detectors.wake_model import ModelSpotter, ModelSpotterSettings
    from detectors.wake_test import Scorer, Take, WakeReport, split_utterances

    cutoff = args.cutoff if args.cutoff is not None else settings.upload.wake_cutoff
    spotter = ModelSpotter(ModelSpotterSettings(model, cutoff=cutoff))
    score = Scorer(spotter)
    if args.input_wav is not None:
        try:
            pcm = read_wav(args.input_wav)
        except AudioFileError as exc:
            raise SettingsError(str(exc)) from None
        utterances = split_utterances(pcm)
        if not utterances:
            print(f"no speech found in {args.input_wav}: is it the right file, and loud enough?")
            return 1
        takes = [Take(u.start_s, score(u.pcm), is_phrase=not args.not_phrase) for u in utterances]
        print(f"{len(utterances)} utterance(s) in {args.input_wav}, each scored by the \"{model.phrase}\" model:")
    else:
        try:
            takes = asyncio.run(_record_takes(settings.audio.input_device, model.phrase, args.times, args.others, score))
        except AudioDeviceError as exc:
            print(f"handoff: {exc}", file=sys.stderr)
            return 1
    report = WakeReport(tuple(takes), cutoff=spotter.cutoff, model_cutoff=spotter.model_cutoff)
    print("\n".join(report.lines(model.phrase)))
    if settings.upload.mode is not UploadMode.ON_DEVICE_WAKE:
        print(f"note: HANDOFF_UPLOAD_MODE={settings.upload.mode.value} is set, so the model does not decide what is uploaded.")
    return 0


async def _record_takes(device: str | None, phrase: str, times: int, others: int,
                        score: Callable[[bytes], float]) -> list[Take]:
    """Prompt, record TAKE_S seconds, score; the phrase `times` times, then `others` sentences."""
    from audio_io import PyAudioMicrophone
    from detectors.wake_test import Take

    prompts = [(f'"{phrase}"', True)] * times + [(f'"{OTHER_SENTENCES[i % len(OTHER_SENTENCES)]}"', False)
                                                 for i in range(others)]
    microphone = PyAudioMicrophone(device)
    await microphone.start()
    takes = []
    try:
        chunks = microphone.chunks()
        for number, (text, is_phrase) in enumerate(prompts, 1):
            print(f"{number}/{len(prompts)}: say {text} now", flush=True)
            pcm = bytearray()
            async for chunk in chunks:
                pcm += chunk
                if len(pcm) >= TAKE_S * 48000:
                    break
            takes.append(Take(number * TAKE_S, score(bytes(pcm)), is_phrase))
    finally:
        await microphone.close()
    return takes
