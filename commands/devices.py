"""`handoff devices`: list the audio input and output devices PortAudio sees."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from audio_io.interface import AudioDeviceError
from audio_io.portaudio import DEVICE_SETTING, AudioDevice, list_devices, open_portaudio

NO_DEVICES_LINE = (
    "no audio devices found (PortAudio sees no input or output device): connect a microphone and "
    "a speaker, or run with --input-wav / --output-wav"
)


def add_devices_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Set AUDIO_INPUT_DEVICE / AUDIO_OUTPUT_DEVICE (in .env or the environment) to an index or part "
        "of a name shown here. Exit status 0 even when no device is found (that is an answer, not a "
        "failure); 1 when PortAudio itself cannot be used."
    )


def format_device_list(devices: Sequence[AudioDevice]) -> str:
    """The `handoff devices` listing."""
    if not any(d.max_input_channels or d.max_output_channels for d in devices):
        return NO_DEVICES_LINE
    lines = []
    for kind in ("input", "output"):
        lines.append(f"{kind.capitalize()} devices (set {DEVICE_SETTING[kind]} to an index or part of a name):")
        of_kind = [d for d in devices if d.channels(kind) > 0]
        if not of_kind:
            lines.append("    none")
        for d in of_kind:
            mark = "*" if d.is_default(kind) else " "
            details = f"{d.channels(kind)} channels, {d.default_rate} Hz"
            lines.append(f"  {mark} {d.index:>3}  {d.name}  ({details})")
    lines.append("  (* = system default)")
    return "\n".join(lines)


def run_devices(args: argparse.Namespace) -> int:
    try:
        pa = open_portaudio()
    except AudioDeviceError as exc:
        print(f"handoff: {exc}", file=sys.stderr)
        return 1
    try:
        devices = list_devices(pa)
    finally:
        pa.terminate()
    print(format_device_list(devices))
    return 0
