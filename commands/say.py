"""`handoff say TEXT`: read TEXT aloud through the real narrator path (a narrator session, the
configured voice, volume and speaker, or --output-wav), to try a voice, a speaker or a volume."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import logging
import sys
from pathlib import Path

from audio_io import AudioDeviceError, AudioFileError, PyAudioSpeaker, SpeakerSink, WavFileSpeaker, with_volume
from commands.checks import output_file_problem, voice_problem
from config.logging_setup import configure_logging, redact
from commands.options import flagged_settings
from config.settings import Settings, SettingsError
from reader_agent import Narrator
from realtime_api.link import make_client

log = logging.getLogger("handoff.say")

EXIT_FAILED = 1  # the narrator could not read it
EXIT_USAGE = 2  # no key or simulator, no text, a device or file problem
EXIT_FATAL = 3  # the service refused (key, quota, model)

# CLI flag -> settings key (CLI beats environment beats .env beats defaults).
_FLAG_KEYS = {
    "base_url": "OPENAI_BASE_URL",
    "voice": "READER_VOICE",
    "volume": "NARRATOR_VOLUME",
    "output_device": "AUDIO_OUTPUT_DEVICE",
    "log_level": "LOG_LEVEL",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", nargs="+", help="what to say")
    parser.add_argument("--voice", help="the narrator's voice (READER_VOICE), e.g. marin or cedar")
    parser.add_argument("--volume", help="0-150 percent (NARRATOR_VOLUME)")
    parser.add_argument("--output-device", help="speaker by index or name part (AUDIO_OUTPUT_DEVICE)")
    parser.add_argument("--output-wav", type=Path, help="write the speech to this WAV file instead of playing it")
    parser.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. the simulator's http://127.0.0.1:8765/v1")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("--room", help="announce it in this room of the running hub (a name in SATELLITES, or all)")


def _announce(settings: Settings, text: str, room: str) -> int:
    """`--room`: the running hub says it there, as a notice (between answers, never over one)."""
    from tasks.config import TaskSettings
    from tasks.control import NotRunning, ask
    from tasks.errors import TaskError

    try:
        reply = ask(TaskSettings.from_settings(settings).control_path, {"op": "announce", "text": text, "room": room}, 10.0)
    except (NotRunning, TaskError, TimeoutError, OSError, ValueError) as exc:
        print(f"handoff say: {str(exc).replace('nothing was started or cancelled', 'nothing was said')}", file=sys.stderr)
        return EXIT_FAILED
    if not reply.get("ok"):
        print(f"handoff say: {reply.get('error', 'the hub refused it')}", file=sys.stderr)
        return EXIT_USAGE
    print(f"Said in {'every room' if room == 'all' else 'the ' + room} (as soon as nothing else is being said there).")
    return 0


def run(args: argparse.Namespace) -> int:
    settings = flagged_settings({key: (f"--{flag.replace('_', '-')}", getattr(args, flag, None))
                                 for flag, key in _FLAG_KEYS.items()})  # fmt: skip
    text = " ".join(args.text).strip()
    if not text:
        print("handoff say: the text is empty; give the words to say.", file=sys.stderr)
        return EXIT_USAGE
    if args.room:
        return _announce(settings, text, args.room.lower())
    if not settings.realtime.api_key and not settings.realtime.base_url:
        raise SettingsError(
            "`handoff say` needs OPENAI_API_KEY (in .env or the environment), or OPENAI_BASE_URL "
            "pointing at the simulator (`handoff sim`) to try it offline."
        )
    voice = voice_problem(settings.realtime.reader_voice, "--voice" if args.voice else "READER_VOICE")
    output = args.output_wav
    problem = voice or (output_file_problem(output, "--output-wav") if output else None)
    if problem:
        print(f"handoff say: {problem}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(settings.log_level, secrets=[settings.realtime.api_key])
    if output is None:
        return _say_to(settings, text, PyAudioSpeaker(settings.audio.output_device))
    if output.exists() and not output.is_file():  # /dev/null, a pipe: written as it is, never replaced
        return _say_to(settings, text, WavFileSpeaker(output))
    # Into a file beside the output, renamed over it only once the words are in: a failed `say`
    # leaves an existing file as it was.
    partial = output.with_name(f".{output.name}.partial")
    try:
        code = _say_to(settings, text, WavFileSpeaker(partial))
        if code == 0:
            os.replace(partial, output)
        return code
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()


def _say_to(settings: Settings, text: str, speaker: SpeakerSink) -> int:
    try:
        return asyncio.run(say(settings, text, with_volume(speaker, settings.audio.volume_percent)))
    except (AudioDeviceError, AudioFileError) as exc:
        print(f"handoff say: {exc}", file=sys.stderr)
        return EXIT_USAGE


async def say(settings: Settings, text: str, speaker: SpeakerSink) -> int:
    client = make_client(settings.realtime)
    try:
        await speaker.start()
        try:
            result = await Narrator(settings, client).narrate(text, speaker)
            await speaker.drained()
        finally:
            await speaker.close()
    finally:
        await client.close()
    if result.ok:
        print(f"Said it (the transcript matches the text {result.similarity:.2f}).")
        return 0
    print(f"handoff say: {redact(result.error or 'the narrator could not read it', [settings.realtime.api_key])}",
          file=sys.stderr)  # fmt: skip
    return EXIT_FATAL if result.fatal else EXIT_FAILED
