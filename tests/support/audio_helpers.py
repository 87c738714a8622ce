"""Test audio and the ALSA "file plugin" harness for the real pyaudio classes.

ALSA reads its configuration once per process, at first use, so every pyaudio scenario runs in a
fresh subprocess (`python -m tests.support.audio_helpers SCENARIO ...`) whose environment points
ALSA_CONFIG_PATH at an asound.conf in the test's tmp_path. There, ALSA's default device is the
`file` plugin over the `null` device: capture returns `mic.raw` byte for byte (and then again from
its start), playback lands in `spk.raw`. Nothing is paced, so the scenarios run as fast as the CPU allows.
The scenario prints one JSON line on stdout; the test reads it and the files.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import math
import os
import random
import struct
import subprocess
import sys
import wave
from dataclasses import dataclass
from pathlib import Path

from audio_io.format import audioop  # the stdlib module (audioop-lts on 3.13+), imported without its warning

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_ALSA_CONF = "/usr/share/alsa/alsa.conf"
SCENARIO_TIMEOUT_S = 60


# --------------------------------------------------------------------------- test audio


def tone(
    freq_hz: float, seconds: float, rate: int = 24000, amplitude: float = 0.5, channels: int = 1
) -> bytes:
    """A sine tone, pcm16 little-endian, starting at full amplitude (cosine) so its start is visible."""
    frames = int(seconds * rate)
    peak = int(amplitude * 32767)
    samples = (int(peak * math.cos(2 * math.pi * freq_hz * i / rate)) for i in range(frames))
    mono = b"".join(struct.pack("<h", s) for s in samples)
    return audioop.tostereo(mono, 2, 1, 1) if channels == 2 else mono


def noise(seconds: float, seed: int, rate: int = 24000) -> bytes:
    """Deterministic pseudo-random pcm16 mono: any shift or lost chunk changes the bytes."""
    return random.Random(seed).randbytes(int(seconds * rate) * 2)


def write_wav(path: Path, pcm: bytes, rate: int = 24000, channels: int = 1, width: int = 2) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(pcm)
    return path


def read_wav(path: Path) -> tuple[bytes, int, int, int]:
    """(frames, rate, channels, sample width)."""
    with wave.open(str(path), "rb") as r:
        return r.readframes(r.getnframes()), r.getframerate(), r.getnchannels(), r.getsampwidth()


def dominant_frequency(pcm: bytes, rate: int) -> float:
    """Frequency of a pure tone from its zero crossings (good to a few Hz over a second of audio)."""
    samples = struct.unpack(f"<{len(pcm) // 2}h", pcm)
    crossings = sum(1 for a, b in zip(samples, samples[1:]) if (a < 0) != (b < 0))
    return crossings / 2 / (len(samples) / rate)


def rms(pcm: bytes) -> int:
    return audioop.rms(pcm, 2)


def strip_silence(pcm: bytes) -> bytes:
    """pcm without the all-zero samples before and after the sound (what an idle speaker wrote)."""
    head = (len(pcm) - len(pcm.lstrip(b"\0"))) // 2 * 2
    tail = (len(pcm.rstrip(b"\0")) + 1) // 2 * 2
    return pcm[head:tail] if tail > head else b""


# --------------------------------------------------------------------------- ALSA harness


@dataclass(frozen=True)
class AlsaFiles:
    """An ALSA setup whose default device reads `mic` and writes `speaker`."""

    env: dict[str, str]
    mic: Path
    speaker: Path


def alsa_file_device(tmp_path: Path, mic_pcm: bytes) -> AlsaFiles:
    mic, speaker, conf = tmp_path / "mic.raw", tmp_path / "spk.raw", tmp_path / "asound.conf"
    mic.write_bytes(mic_pcm)
    conf.write_text(
        "pcm.!default {\n"
        '  type file\n  slave.pcm "null"\n'
        f'  infile "{mic}"\n  file "{speaker}"\n  format "raw"\n'
        "}\n"
    )
    return AlsaFiles(env=_subprocess_env(tmp_path, f"{SYSTEM_ALSA_CONF}:{conf}"), mic=mic, speaker=speaker)


def alsa_without_devices(tmp_path: Path) -> dict[str, str]:
    """Only the system's base configuration: with no sound card, PortAudio sees no device.
    (An empty ALSA_CONFIG_PATH file is no good: PortAudio 19.6 asserts and aborts on it.)"""
    return _subprocess_env(tmp_path, SYSTEM_ALSA_CONF)


def has_sound_card() -> bool:
    return any(Path("/dev/snd").glob("pcmC*")) if Path("/dev/snd").is_dir() else False


def _subprocess_env(tmp_path: Path, alsa_config_path: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ALSA_CONFIG_PATH=alsa_config_path,
        JACK_NO_START_SERVER="1",  # never spawn jackd while PortAudio probes for JACK
        XDG_RUNTIME_DIR=str(tmp_path),
        PYTHONPATH=str(REPO_ROOT),
        PYTHONWARNINGS="ignore::DeprecationWarning",
    )
    return env


def run_scenario(env: dict[str, str], *args: str) -> dict:
    """Run one scenario in a fresh interpreter; return the JSON it printed last, plus what the
    process wrote to stderr (under "stderr": ALSA/JACK noise would show up there)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.audio_helpers", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"scenario {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


# --------------------------------------------------------------------------- scenarios (subprocess side)


def _refuse_24k() -> None:
    """Make every device answer "no" for 24 kHz, as many USB microphones do. ALSA's file/null
    plugins accept every rate, so this is the only way to reach the resampling path without hardware."""
    import pyaudio

    original = pyaudio.PyAudio.is_format_supported

    def is_format_supported(self, rate, *args, **kwargs):  # type: ignore[no-untyped-def]
        if int(rate) == 24000:
            raise ValueError("Invalid sample rate", pyaudio.paInvalidSampleRate)
        return original(self, rate, *args, **kwargs)

    pyaudio.PyAudio.is_format_supported = is_format_supported


def _describe(endpoint) -> dict:  # type: ignore[no-untyped-def]
    return {
        "device": endpoint.device.name,
        "rate": endpoint.stream_format.rate,
        "channels": endpoint.stream_format.channels,
    }


async def _capture(device: str | None, nbytes: int, out: Path) -> dict:
    from audio_io import PyAudioMicrophone

    # Large queue bound: the unpaced file device produces audio far faster than real time.
    mic = PyAudioMicrophone(device, max_queued_s=600.0)
    await mic.start()
    captured = bytearray()
    try:
        async for chunk in mic.chunks():
            captured += chunk
            if len(captured) >= nbytes:
                break
    finally:
        await mic.close()
    out.write_bytes(bytes(captured))
    return _describe(mic)


async def _play(device: str | None, pcm_file: Path) -> dict:
    from audio_io import PyAudioSpeaker

    speaker = PyAudioSpeaker(device)
    await speaker.start()
    try:
        pcm = pcm_file.read_bytes()
        half = len(pcm) // 2 // 2 * 2
        speaker.play(pcm[:half])  # two plays: the resampler must carry its state across them
        speaker.play(pcm[half:])
        await asyncio.wait_for(speaker.drained(), 30)
    finally:
        await speaker.close()
    return _describe(speaker)


async def _latency(shift_ms: tuple[float, float]) -> dict:
    """A real microphone and speaker, and the echo canceller's stream delay from their latencies,
    as the coordinator builds it. `shift_ms`: move the input callbacks' capture stamps that much
    earlier and the output callbacks' playback stamps that much later (a sound card's latencies)."""
    import numpy  # noqa: F401  (the canceller's)
    from audio_io import PyAudioMicrophone, PyAudioSpeaker
    from audio_io.echo_cancel import EchoCanceller, stream_latency_s
    from audio_io.volume import VolumeSpeaker

    stamps = [0.0, 0.0]

    def shifted(method, key: str, side: int, sign: float):  # type: ignore[no-untyped-def]
        def callback(self, in_data, frame_count, time_info, status):  # type: ignore[no-untyped-def]
            time_info = dict(time_info)
            time_info[key] = time_info["current_time"] + sign * shift_ms[side] / 1000
            stamps[side] = abs(time_info[key] - time_info["current_time"])
            return method(self, in_data, frame_count, time_info, status)
        return callback

    PyAudioMicrophone._on_device_audio = shifted(PyAudioMicrophone._on_device_audio, "input_buffer_adc_time", 0, -1)
    PyAudioSpeaker._on_device_wants_audio = shifted(PyAudioSpeaker._on_device_wants_audio, "output_buffer_dac_time", 1, 1)
    mic, speaker = PyAudioMicrophone(None, max_queued_s=600.0), PyAudioSpeaker(None)
    await mic.start()
    await speaker.start()
    reported = [mic.latency_s, speaker.latency_s]
    wrapped = VolumeSpeaker(speaker, 50)  # as the assistant wraps it
    canceller = EchoCanceller(delay_s=lambda: stream_latency_s(wrapped) + stream_latency_s(mic))
    try:
        speaker.play(bytes(4800))
        read = 0
        async for chunk in mic.chunks():
            canceller.played(chunk, read / 48000)
            canceller.process(chunk, read / 48000)
            read += len(chunk)
            if read >= 48000:
                break
        await asyncio.wait_for(speaker.drained(), 30)
    finally:
        await mic.close()
        await speaker.close()
    return {"reported": reported, "stamps": [round(s, 4) for s in stamps], "delay_ms": canceller.stream_delay_ms}


async def _select(specs: list[str]) -> dict:
    from audio_io import AudioDeviceError, PyAudioMicrophone, PyAudioSpeaker

    results = {}
    for kind, cls in (("input", PyAudioMicrophone), ("output", PyAudioSpeaker)):
        for spec in specs:
            endpoint = cls(None if spec == "-" else spec)
            try:
                await endpoint.start()
                results[f"{kind}:{spec}"] = {"ok": endpoint.device.name, "index": endpoint.device.index}
            except AudioDeviceError as exc:
                results[f"{kind}:{spec}"] = {"error": str(exc), "type": type(exc).__name__}
            finally:
                await endpoint.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="audio_helpers")
    sub = parser.add_subparsers(dest="scenario", required=True)
    capture = sub.add_parser("capture")
    capture.add_argument("--bytes", type=int, required=True)
    capture.add_argument("--out", type=Path, required=True)
    play = sub.add_parser("play")
    play.add_argument("--pcm", type=Path, required=True)
    select = sub.add_parser("select")
    select.add_argument("specs", nargs="+", help='device specs; "-" = the default')
    sub.add_parser("devices")
    latency = sub.add_parser("latency")
    latency.add_argument("--shift-ms", default="0,0")
    for p in (capture, play):
        p.add_argument("--device", default=None)
        p.add_argument("--refuse-24k", action="store_true")
    args = parser.parse_args(argv)

    if getattr(args, "refuse_24k", False):
        _refuse_24k()
    if args.scenario == "capture":
        result = asyncio.run(_capture(args.device, args.bytes, args.out))
    elif args.scenario == "play":
        result = asyncio.run(_play(args.device, args.pcm))
    elif args.scenario == "latency":
        shift = tuple(float(v) for v in args.shift_ms.split(","))
        result = asyncio.run(_latency((shift[0], shift[1])))
    elif args.scenario == "select":
        result = asyncio.run(_select(args.specs))
    else:
        from commands import devices

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = devices.run_devices(argparse.Namespace())
        result = {"exit": code, "stdout": out.getvalue()}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
