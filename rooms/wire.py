"""The one place that reads Wyoming events (the `wyoming` package's classes) into tagged events,
for both sides: the hub reading a satellite, and `handoff satellite` reading its hub. A frame
that does not fit becomes `Unusable`, never an exception."""

from __future__ import annotations

from dataclasses import dataclass

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.pipeline import PipelineStage, RunPipeline
from wyoming.satellite import PauseSatellite, RunSatellite
from wyoming.asr import Transcript
from wyoming.error import Error


@dataclass(frozen=True)
class PipelineStarted:
    """`run-pipeline`: a command's audio follows. `woken`: the satellite heard the wake word
    itself (start stage asr), so what follows is the command without it; otherwise (start stage
    wake) the satellite streams everything and the hub's own detection decides."""

    woken: bool


@dataclass(frozen=True)
class Audio:
    pcm: bytes
    rate: int
    width: int
    channels: int


@dataclass(frozen=True)
class AudioBegins:
    rate: int
    width: int
    channels: int


@dataclass(frozen=True)
class AudioEnds:
    """`audio-stop`: the satellite stopped streaming (or a hub ended what it plays)."""


@dataclass(frozen=True)
class Alive:
    """`info`, `pong`: the other side answered a keep-alive. `snd_rate`: the rate its speaker
    takes, when its info says."""

    snd_rate: int | None = None


@dataclass(frozen=True)
class PingAsked:
    text: str | None


@dataclass(frozen=True)
class DescribeAsked:
    pass


@dataclass(frozen=True)
class RunAsked:
    """`run-satellite` (a hub is ready) or `pause-satellite` (`run=False`)."""

    run: bool


@dataclass(frozen=True)
class Heard:
    """`transcript`: the hub understood the command (a wake-word satellite stops streaming)."""

    text: str


@dataclass(frozen=True)
class Failed:
    text: str


@dataclass(frozen=True)
class Unusable:
    """Any other event, or one whose fields do not fit: ignored, counted."""

    type: str
    why: str = ""


SatelliteEvent = (PipelineStarted | Audio | AudioBegins | AudioEnds | Alive | PingAsked | DescribeAsked | RunAsked
                  | Heard | Failed | Unusable)


def parse(event: Event) -> SatelliteEvent:
    kind = event.type
    try:
        if AudioChunk.is_type(kind):
            chunk = AudioChunk.from_event(event)
            if chunk.width != 2 or chunk.channels not in (1, 2) or not 8000 <= chunk.rate <= 48000:
                return Unusable(kind, f"audio as {chunk.rate} Hz, {chunk.width} bytes, {chunk.channels} channels")
            return Audio(chunk.audio, chunk.rate, chunk.width, chunk.channels)
        if RunPipeline.is_type(kind):
            return PipelineStarted(woken=RunPipeline.from_event(event).start_stage is not PipelineStage.WAKE)
        if AudioStart.is_type(kind):
            start = AudioStart.from_event(event)
            return AudioBegins(start.rate, start.width, start.channels)
        if AudioStop.is_type(kind):
            return AudioEnds()
        if Info.is_type(kind):
            return Alive(_snd_rate(Info.from_event(event)))
        if Pong.is_type(kind):
            return Alive()
        if Ping.is_type(kind):
            return PingAsked(Ping.from_event(event).text)
        if Describe.is_type(kind):
            return DescribeAsked()
        if RunSatellite.is_type(kind) or PauseSatellite.is_type(kind):
            return RunAsked(RunSatellite.is_type(kind))
        if Transcript.is_type(kind):
            return Heard(Transcript.from_event(event).text)
        if Error.is_type(kind):
            return Failed(Error.from_event(event).text)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return Unusable(kind, f"{exc.__class__.__name__}: {exc}")
    return Unusable(kind)


def _snd_rate(info: Info) -> int | None:
    for snd in info.snd or ():
        rate = snd.snd_format.rate if snd.snd_format is not None else None
        if rate and 8000 <= rate <= 48000:
            return rate
    return None
