"""`handoff wake-test`: how well the wake the assistant runs hears *your* voice through *your* microphone.

Live, it asks you to say the wake phrase a few times and then a few sentences that are not it,
and judges each take; with `--input-wav` it judges every try of a recording (split by the
on-device VAD; "phrase, pause, command" is one try), the recording fed whole, as a live
microphone would feed it. Each is fed through the upload filter the
assistant builds from your settings (the two-model rule for "hey jarvis", or microWakeWord alone
with WAKE_CUTOFF set), so "heard" means the assistant would have woken. It prints how many it
heard, microWakeWord's score on each, and a WAKE_CUTOFF only where a cutoff is the whole rule.
Nothing is uploaded: no key, no network.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from config.read_only import readable_settings
from config.settings import SettingsError, UploadMode
from config.wake_phrases import model_for

if TYPE_CHECKING:
    from detectors.wake_test import Take, TryJudge

OTHER_SENTENCES = (
    "I think the train leaves at half past seven",
    "have you fed the cat yet",
    "we are out of milk again",
)
TAKE_S = 3.0  # seconds recorded for each take when live


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-wav", type=Path, help="judge every try of this recording instead of the microphone (leave 4 s of silence between tries)")
    parser.add_argument("--not-phrase", action="store_true",
                        help="the recording holds sentences that are NOT the wake phrase: count false wakes")
    parser.add_argument("--times", type=int, default=5, help="live: how many times to say the phrase (default 5)")
    parser.add_argument("--others", type=int, default=len(OTHER_SENTENCES),
                        help=f"live: sentences that are not it (default {len(OTHER_SENTENCES)})")
    parser.add_argument("--wake-phrase", help="the phrase to test (WAKE_PHRASE)")
    parser.add_argument("--cutoff", type=float, help="as WAKE_CUTOFF: microWakeWord alone at this cutoff (switches the two-model rule off)")
    parser.add_argument("--input-device", help="microphone by index or name part (see `handoff devices`)")


def run(args: argparse.Namespace) -> int:
    if args.cutoff is not None and not 0 < args.cutoff < 1:
        raise SettingsError(f"--cutoff {args.cutoff:g} is not between 0 and 1.")
    if args.times < 1 or args.others < 0:
        raise SettingsError("--times must be 1 or more and --others 0 or more.")
    overrides = {"WAKE_PHRASE": args.wake_phrase, "AUDIO_INPUT_DEVICE": args.input_device,
                 "WAKE_CUTOFF": None if args.cutoff is None else str(args.cutoff)}
    settings = readable_settings(overrides, "wake-test")  # (a bad setting elsewhere in .env is said, not fatal)
    phrase = settings.listener.wake_phrase
    model = model_for(phrase)
    from audio_io import AudioDeviceError, AudioFileError, read_wav  # heavy parts load only for a test run
    from assembly.detectors import upload_filter
    from detectors.wake_test import TRY_GAP_S, Take, TryJudge, WakeReport

    # The wake the assistant runs with these settings, whatever the upload mode (the mode decides
    # only whether the wake gates the upload: see the note below).
    wake_settings = replace(settings, upload=replace(settings.upload, mode=UploadMode.ON_DEVICE_WAKE))
    judge = TryJudge(upload_filter(wake_settings), settings.audio.chunk_ms)
    name = f'the "{model.phrase}" model' if model is not None else f'pocketsphinx\'s keyphrase search for "{phrase}"'
    if args.input_wav is not None:
        try:
            pcm = read_wav(args.input_wav)
        except AudioFileError as exc:
            raise SettingsError(str(exc)) from None
        tries = judge.tries(pcm)  # the whole recording through the filter, as a live room would be heard
        if not tries:
            print(f"no speech found in {args.input_wav}: is it the right file, and loud enough?")
            return 1
        takes = [Take(t.start_s, t.heard, t.score, is_phrase=not args.not_phrase) for t in tries]
        print(f"{len(tries)} tries in {args.input_wav} (speech with pauses under {TRY_GAP_S:g} s is one try), "
              f"each heard or not by {name} as the assistant runs it:")
    else:
        try:
            takes = asyncio.run(_record_takes(settings.audio.input_device, model.phrase if model else phrase,
                                              args.times, args.others, judge))
        except AudioDeviceError as exc:
            print(f"handoff: {exc}", file=sys.stderr)
            return 1
    report = WakeReport(tuple(takes), rule=judge.rule())
    print("\n".join(report.lines(model.phrase if model else phrase)))
    if model is None:
        print(f"note: \"{phrase}\" has no shipped model: by default it runs in speech_only mode (every sentence is "
              f"uploaded); these are the figures of HANDOFF_UPLOAD_MODE=wake_word, which wakes on sound-alikes too.")
    elif settings.upload.mode is not UploadMode.ON_DEVICE_WAKE:
        print(f"note: HANDOFF_UPLOAD_MODE={settings.upload.mode.value} is set, so the wake does not decide what is uploaded.")
    return 0


def _judged(judge: TryJudge, pcm: bytes) -> tuple[bool, float | None]:
    judged = judge(pcm)
    return judged.heard, judged.score


async def _record_takes(device: str | None, phrase: str, times: int, others: int, judge: TryJudge) -> list[Take]:
    """Prompt, record TAKE_S seconds, judge; the phrase `times` times, then `others` sentences."""
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
            takes.append(Take(number * TAKE_S, *_judged(judge, bytes(pcm)), is_phrase=is_phrase))
    finally:
        await microphone.close()
    return takes
