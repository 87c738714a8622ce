"""Seeded mutated Wyoming frames, for the fuzz of both sides (tests/rooms/test_hostile_wyoming.py).

Each frame is a valid event of a type either side reads, then, most of the time, mutated: a field
of the wrong type or out of range (rates like 16000.5, widths, channels), the type missing or not
a string, the data not an object, audio that is not a whole number of frames, data bytes that are
not JSON or nested too deep, unknown types. A few (`breaks`) lose the framing: a header that is not
a JSON object, a length that is not a small whole number, a header line too long, a frame cut
short; after one of those the connection must end, so the sender starts a new one.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from typing import Any, Iterator

MAX_HEADER_BYTES = 64 * 1024  # asyncio's default StreamReader limit: the longest header line either side reads

BREAK_SHARE = 0.01  # frames that lose the framing (each costs a reconnect)


@dataclass(frozen=True)
class Frame:
    raw: bytes
    breaks: bool  # the connection cannot go on after it


def _valid(rng: random.Random) -> tuple[dict[str, Any], bytes]:
    """A valid event: header fields (type, data) and its payload."""
    choice = rng.randrange(12)
    audio_format = {"rate": 16000, "width": 2, "channels": 1}
    if choice < 4:
        return {"type": "audio-chunk", "data": dict(audio_format)}, bytes(2 * rng.randrange(1, 32))
    return [
        ({"type": "audio-start", "data": dict(audio_format)}, b""),
        ({"type": "audio-stop", "data": {}}, b""),
        ({"type": "run-pipeline", "data": {"start_stage": "asr", "end_stage": "tts"}}, b""),
        ({"type": "info", "data": {"snd": [{"name": "s", "snd_format": dict(audio_format)}]}}, b""),
        ({"type": "ping", "data": {"text": "x"}}, b""),
        ({"type": "pong", "data": {}}, b""),
        ({"type": "transcript", "data": {"text": "hello"}}, b""),
        ({"type": "error", "data": {"text": "oops"}}, b""),
    ][choice - 4]


_ODD_VALUES: list[Any] = [16000.5, "16000", -1, 0, 10**12, True, None, [16000], {"rate": 1}, 1.5, 3, 4, "2", 2**64]


def _mutate_fields(rng: random.Random, head: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
    data = head.get("data", {})
    kind = rng.randrange(9)
    if kind == 0:
        head.pop("type")
    elif kind == 1:
        head["type"] = rng.choice([1, None, ["audio-chunk"], {"t": 1}, "", "x" * 300])
    elif kind == 2:
        head["data"] = rng.choice([[1, 2], "data", 7, True])
    elif kind == 3 and data:
        data[rng.choice(list(data))] = rng.choice(_ODD_VALUES)
    elif kind == 4:
        data.update({rng.choice(["rate", "width", "channels"]): rng.choice(_ODD_VALUES)})
    elif kind == 5:
        payload = bytes(rng.choice([1, 3, 5, 7]))  # not a whole number of frames
        if rng.random() < 0.5:
            data.update({"channels": 2})
            payload = bytes(rng.choice([2, 6]))
    elif kind == 6:
        head["type"] = f"unknown-{rng.randrange(1000)}"
    elif kind == 7:
        data["snd"] = rng.choice([[1], "snd", [{"snd_format": {"rate": 16000.5}}], [{"snd_format": []}]])
    else:
        data["text"] = rng.choice([1, None, ["a"], {"a": 1}])
    return head, payload


def _encode(head: dict[str, Any], payload: bytes, data_bytes: bytes = b"") -> bytes:
    head = dict(head)
    if payload:
        head["payload_length"] = len(payload)
    if data_bytes:
        head["data_length"] = len(data_bytes)
    return json.dumps(head).encode() + b"\n" + data_bytes + payload


def _breaking(rng: random.Random, head: dict[str, Any], payload: bytes) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:
        return b"this is not json\n"
    if kind == 1:
        return b"[" * 5000 + b"]" * 5000 + b"\n"  # not an object (nor parseable: too deep)
    if kind == 2:
        return _encode({**head, "payload_length": rng.choice([8_000_000_000, -5, "640", 12.5, [1]])}, b"")
    if kind == 3:
        return _encode({**head, "data_length": rng.choice([10**9, -1, "40", 2.5])}, b"")
    if kind == 4:
        return b'{"type": "' + b"a" * (MAX_HEADER_BYTES + 10) + b'"}\n'
    if kind == 5:
        return _encode(head, payload or bytes(64))[:-3]  # cut short: the connection then closes
    return b"\x00\xff\xfe garbage \x80\n"


def frames(seed: int, count: int) -> Iterator[Frame]:
    rng = random.Random(seed)
    for _ in range(count):
        head, payload = _valid(rng)
        roll = rng.random()
        if roll < BREAK_SHARE:
            yield Frame(_breaking(rng, head, payload), breaks=True)
            continue
        if roll < 0.75:
            head, payload = _mutate_fields(rng, head, payload)
        if roll > 0.9 and isinstance(head.get("data"), dict):  # the data after the header, as the package writes it
            data = head.pop("data")
            extra = rng.choice([json.dumps(data).encode(), b"[1, 2]", b"not json", b"[" * 3000 + b"]" * 3000])
            yield Frame(_encode(head, payload, extra), breaks=False)
            continue
        yield Frame(_encode(head, payload), breaks=False)


class Sender:
    """Sends `frames` over as many connections as their lost framings take."""

    def __init__(self, frames: list[Frame]) -> None:
        self.frames, self.position = frames, 0

    @property
    def done(self) -> bool:
        return self.position >= len(self.frames)

    async def send(self, writer: asyncio.StreamWriter) -> bool:
        """From where the last connection stopped, until a frame loses the framing (False: this
        connection is over) or all are sent (True)."""
        while not self.done:
            frame = self.frames[self.position]
            self.position += 1
            writer.write(frame.raw)
            if frame.breaks:
                await writer.drain()
                return False
            if self.position % 50 == 0:
                await writer.drain()
        await writer.drain()
        return True
