"""`handoff satellite`: this machine's microphone and speaker as a satellite for a hub on another
machine (Wyoming, as wyoming-satellite speaks it). The wyoming package loads only when it runs."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from audio_io import (
    AudioDeviceError, AudioFileError, MicrophoneSource, PyAudioMicrophone, PyAudioSpeaker, SpeakerSink, WavFileMicrophone,
    WavFileSpeaker, with_volume,
)
from assembly.detectors import build_stop_detector, upload_filter
from audio_io.echo_reference import RoomEcho
from config.logging_setup import configure_logging
from commands.options import flagged_settings
from config.settings import SettingsError, UploadMode
from service.signals import StopSignals

if TYPE_CHECKING:
    from rooms.satellite import SatelliteServer

log = logging.getLogger("handoff")


def add_satellite_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=["pair"],
                        help="pair: show a code to pair this satellite with a hub (`handoff rooms pair ROOM CODE` there)")
    parser.add_argument("--listen", help="where the hub may connect, tcp://host:port (SATELLITE_LISTEN; default tcp://127.0.0.1:10700)")
    parser.add_argument("--name", help="the room this satellite is in (SATELLITE_NAME)")
    parser.add_argument("--input-device", help="microphone by index or name part (see `handoff devices`)")
    parser.add_argument("--output-device", help="speaker by index or name part")
    parser.add_argument("--input-wav", type=Path, help="read the microphone from this WAV file (in real time, then silence)")
    parser.add_argument("--output-wav", type=Path, help="write what would be played to this WAV file instead")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")


def run_satellite(args: argparse.Namespace) -> int:
    """This machine's microphone and speaker as a satellite: the on-device wake word and VAD
    decide what is a command; only that crosses the network."""
    from rooms.pairing import satellite_keys
    from rooms.satellite import SatelliteServer  # only here: see the module's docstring

    flags = {"SATELLITE_LISTEN": ("--listen", args.listen), "SATELLITE_NAME": ("--name", args.name),
             "AUDIO_INPUT_DEVICE": ("--input-device", args.input_device),
             "AUDIO_OUTPUT_DEVICE": ("--output-device", args.output_device), "LOG_LEVEL": ("--log-level", args.log_level)}  # fmt: skip
    try:
        settings = flagged_settings(flags)
        settings = settings.replace(upload=dataclasses.replace(settings.upload, mode=UploadMode.ON_DEVICE_WAKE))
        mic_filter = upload_filter(settings)
        stop = build_stop_detector(settings) if settings.stop.enabled else None  # "computer, stop" heard here
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"handoff: {problem}", file=sys.stderr)
        return 2
    if args.action == "pair":
        from commands.pairing import pair_satellite

        return pair_satellite(settings)
    configure_logging(settings.log_level)
    rooms = settings.rooms
    keys = satellite_keys(settings)
    if keys.hub_pem() is None:
        log.warning("this satellite is not paired with a hub yet: run `handoff satellite pair` and type its code on the hub")
    microphone: MicrophoneSource = (
        WavFileMicrophone(args.input_wav, chunk_ms=settings.audio.chunk_ms, pace=1.0, then="silence", silence_s=None)
        if args.input_wav else PyAudioMicrophone(settings.audio.input_device, chunk_ms=settings.audio.chunk_ms))
    speaker: SpeakerSink = (WavFileSpeaker(args.output_wav, pace=1.0) if args.output_wav
                            else PyAudioSpeaker(settings.audio.output_device))  # fmt: skip
    # The room's echo gate and canceller: what its own stop detector hears while this room plays the hub's voice.
    echo = RoomEcho(with_volume(speaker, settings.audio.volume_percent), microphone, settings.echo, time.monotonic)
    server = SatelliteServer(rooms.listen, rooms.satellite_name, microphone, echo.speaker, mic_filter, woken=True,
                             stop_detector=stop, keys=keys, echo=echo)  # fmt: skip
    return asyncio.run(_serve_satellite(server))


async def _serve_satellite(server: SatelliteServer) -> int:
    """Until SIGTERM / SIGINT (exit 0); a device or an address that cannot be used is one line (exit 2)."""
    main = asyncio.create_task(_serve(server), name="satellite")
    signals = StopSignals(lambda _sig: main.cancel())
    with signals.installed(asyncio.get_running_loop()):
        try:
            problem = await main
        except asyncio.CancelledError:
            if signals.received is None:
                raise
            log.info("the satellite stopped (%s)", signals.received.name)
            return 0
    print(f"handoff: {problem}", file=sys.stderr)
    return 2


async def _serve(server: SatelliteServer) -> str:
    """Returns only with what stopped it (it runs until cancelled)."""
    problem = ""
    try:
        await server.run()
    except* (AudioDeviceError, AudioFileError) as group:
        problem = str(group.exceptions[0])
    except* OSError as group:  # the address is taken, or not this machine's
        problem = f"cannot listen on {server.listen.uri}: {group.exceptions[0]}; choose another SATELLITE_LISTEN."
    return problem or "the satellite stopped"
