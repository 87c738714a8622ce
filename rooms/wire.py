"""The one place that reads Wyoming frames into tagged events, for both sides: the hub reading a
satellite, and `handoff satellite` reading its hub.

`read(reader)` reads one frame off the connection and never raises (but for cancellation): a
frame whose fields do not fit (no `type`, a rate of 16000.5, audio that is not a whole number of
frames, ...) becomes `Unusable` and the connection goes on; a frame whose framing is lost (a
header that is not a JSON object, a length that is not a small whole number, a frame cut short,
a header line over `MAX_HEADER_BYTES`) becomes `Closed`: the caller drops the connection. Every
frame is bounded before it is read (`MAX_DATA_BYTES`, `MAX_PAYLOAD_BYTES`), so no peer can make
either side hold more than one small frame. The events we send are built with the `wyoming`
package's classes; its reader is not used (it raises on frames it was not written for).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Callable

from wyoming.event import Event

MAX_HEADER_BYTES = 64 * 1024  # the header line (asyncio's default StreamReader limit)
MAX_DATA_BYTES = 64 * 1024  # the JSON data after the header
MAX_PAYLOAD_BYTES = 1024 * 1024  # an audio chunk: over 5 s of 48 kHz stereo (satellites send ~0.1 s)
RATES = (8000, 48000)  # the audio rates either side accepts (inclusive)
_STAGES_WOKEN = ("asr", "intent", "handle", "tts")  # run-pipeline start stages after the wake word


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
class StopAsked:
    """`handoff-stop`: `handoff satellite`'s own detector heard "computer, stop" while the hub's
    voice played there (its microphone does not cross the network then)."""

    phrase: str


STOP_TYPE = "handoff-stop"  # ours: a Wyoming peer that does not know it ignores it


def stop_event(phrase: str) -> Event:
    return Event(STOP_TYPE, {"phrase": phrase})


@dataclass(frozen=True)
class Unusable:
    """Any other event, or one whose fields do not fit: ignored, counted."""

    type: str
    why: str = ""


@dataclass(frozen=True)
class Closed:
    """The connection ended, or what came is not Wyoming framing (its next frame cannot be
    found): the connection is over."""

    why: str


SatelliteEvent = (PipelineStarted | Audio | AudioBegins | AudioEnds | Alive | PingAsked | DescribeAsked | RunAsked
                  | Heard | Failed | StopAsked | Unusable)


class _Unfit(Exception):
    """A field does not fit (internal to this module)."""


async def read(reader: asyncio.StreamReader) -> SatelliteEvent | Closed:
    """The next frame on the connection, as a tagged event; `Closed` when the connection is over.
    Never raises (cancellation aside). `reader`'s limit must be at least `MAX_HEADER_BYTES`
    (asyncio's default is)."""
    try:
        line = await reader.readline()
    except ValueError:  # asyncio's LimitOverrunError, as readline reports it
        return Closed(f"a header line over {MAX_HEADER_BYTES} bytes")
    except (OSError, ConnectionError) as exc:
        return Closed(str(exc) or exc.__class__.__name__)
    if not line:
        return Closed("the connection closed")
    if not line.endswith(b"\n"):
        return Closed("the connection closed in the middle of a frame")
    head = header(line)
    if isinstance(head, Closed):
        return head
    kind, data, data_length, payload_length = head
    try:
        extra = await reader.readexactly(data_length) if data_length else b""
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return Closed("the connection closed in the middle of a frame")
    except (OSError, ConnectionError) as exc:
        return Closed(str(exc) or exc.__class__.__name__)
    more = _json_object(extra) if extra else {}
    if data is None or more is None:
        return Unusable((kind or "?")[:64], "its data is not a JSON object")
    if kind is None:
        return Unusable("?", "no type")
    return parse(Event(kind, {**data, **more}, payload))


def header(line: bytes) -> Closed | tuple[str | None, dict[str, Any] | None, int, int]:
    """A frame's header line -> (type or None, data or None when it is not an object,
    data_length, payload_length), or `Closed` when the lengths of what follows cannot be known.
    Never raises."""
    head = _json_object(line)
    if head is None:
        return Closed("it sent something that is not Wyoming (a header that is not a JSON object)")
    lengths = []
    for name, limit in (("data_length", MAX_DATA_BYTES), ("payload_length", MAX_PAYLOAD_BYTES)):
        value = head.get(name)
        if value is None:
            value = 0
        if type(value) is not int or not 0 <= value <= limit:
            return Closed(f"it sent something that is not Wyoming ({name} {str(value)[:40]}, at most {limit})")
        lengths.append(value)
    kind = head.get("type")
    data = head.get("data")
    data = {} if data is None else data if isinstance(data, dict) else None
    return (kind if isinstance(kind, str) and kind else None), data, lengths[0], lengths[1]


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def parse(event: Event) -> SatelliteEvent:
    """A Wyoming event -> a tagged event; `Unusable` when it is unknown or its fields do not fit.
    Never raises."""
    kind = event.type if isinstance(event.type, str) else "?"
    data = event.data if isinstance(event.data, dict) else {}
    reader = _PARSERS.get(kind)
    if reader is None:
        return Unusable(kind[:64])
    try:
        return reader(data, event.payload)
    except _Unfit as exc:
        return Unusable(kind, str(exc))


def _audio_format(data: dict[str, Any]) -> tuple[int, int, int]:
    rate, width, channels = data.get("rate"), data.get("width"), data.get("channels")
    if type(rate) is not int or not RATES[0] <= rate <= RATES[1] or width != 2 or type(width) is not int \
            or channels not in (1, 2) or type(channels) is not int:  # fmt: skip
        raise _Unfit(f"audio as {_short(rate)} Hz, {_short(width)} bytes, {_short(channels)} channels")
    return rate, width, channels


def _short(value: object) -> str:
    return repr(value)[:24]


def _chunk(data: dict[str, Any], payload: bytes | None) -> Audio:
    rate, width, channels = _audio_format(data)
    pcm = payload or b""
    if len(pcm) % (width * channels):
        raise _Unfit(f"{len(pcm)} bytes of audio is not a whole number of {width * channels}-byte frames")
    return Audio(pcm, rate, width, channels)


def _begins(data: dict[str, Any], _payload: bytes | None) -> AudioBegins:
    return AudioBegins(*_audio_format(data))


def _pipeline(data: dict[str, Any], _payload: bytes | None) -> PipelineStarted:
    start = data.get("start_stage")
    if start != "wake" and start not in _STAGES_WOKEN:
        raise _Unfit(f"start stage {_short(start)}")
    return PipelineStarted(woken=start != "wake")


def _info(data: dict[str, Any], _payload: bytes | None) -> Alive:
    snd = data.get("snd")
    for program in snd if isinstance(snd, list) else ():
        fmt = program.get("snd_format") if isinstance(program, dict) else None
        rate = fmt.get("rate") if isinstance(fmt, dict) else None
        if type(rate) is int and RATES[0] <= rate <= RATES[1]:
            return Alive(rate)
    return Alive()


def _text(data: dict[str, Any], optional: bool = False, key: str = "text") -> str | None:
    text = data.get(key)
    if text is None and optional:
        return None
    if not isinstance(text, str):
        raise _Unfit(f"{key} {_short(text)}")
    return text[:4000]


_PARSERS: dict[str, Callable[[dict[str, Any], bytes | None], SatelliteEvent]] = {
    "audio-chunk": _chunk,
    "run-pipeline": _pipeline,
    "audio-start": _begins,
    "audio-stop": lambda _d, _p: AudioEnds(),
    "info": _info,
    "pong": lambda _d, _p: Alive(),
    "ping": lambda d, _p: PingAsked(_text(d, optional=True)),
    "describe": lambda _d, _p: DescribeAsked(),
    "run-satellite": lambda _d, _p: RunAsked(True),
    "pause-satellite": lambda _d, _p: RunAsked(False),
    "transcript": lambda d, _p: Heard(_text(d) or ""),
    "error": lambda d, _p: Failed(_text(d) or ""),
    STOP_TYPE: lambda d, _p: StopAsked(_text(d, key="phrase") or ""),
}
