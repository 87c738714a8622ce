"""The hub's connection to one satellite (the satellite is the server, as with Home Assistant):
connect, say `run-satellite`, read its events, keep it alive (`describe` -> `info` every
`ping_s`: wyoming-satellite 1.0 answers it, whatever its state), and reconnect with backoff when
it goes away. Its microphone and speaker are a `MicrophoneSource` and a `SpeakerSink`, so the
room's coordinator sees a room like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from wyoming.asr import Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.ping import Pong
from wyoming.satellite import RunSatellite

from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, SAMPLE_WIDTH, PcmConverter, pcm_duration_s
from concurrency.changes import Changes
from config.rooms import RoomSettings, SatelliteSpec, address_problem
from decisions.errors import IllegalTransition
from decisions.rooms import Announce, LinkCore, LinkEvent, LinkState
from rooms.keys import NotPaired, exposure, paired_client
from rooms.pairing import HubKeys
from rooms.wire import Alive, Audio, AudioEnds, DescribeAsked, Failed, PingAsked, PipelineStarted, Unusable, parse

log = logging.getLogger("handoff.rooms")

STOP_SILENCE_S = 1.0  # after a satellite's audio-stop: silence, so the listener's VAD ends the utterance
MAX_BUFFERED_S = 10.0  # mic audio not yet read by the room (bounded: oldest dropped)


class SatelliteMicrophone:
    """What the satellite streams, as 24 kHz mono chunks of `chunk_ms`. A room, not a file
    (`live`), paced by the network (`pace` 0: no echo gate on the hub, which cannot know when the
    satellite's speaker really played); nothing comes while the satellite sends nothing, so an
    idle room costs the hub nothing."""

    live = True
    pace = 0.0

    def __init__(self, chunk_ms: int = 20) -> None:
        self._chunk_bytes = SAMPLE_WIDTH * SAMPLE_RATE * chunk_ms // 1000
        self._buffer = bytearray()
        self._changes = Changes()
        self._converter: PcmConverter | None = None
        self._closed = False
        self._nudged = False
        self.dropped_bytes = 0

    async def start(self) -> None:
        pass

    def push(self, pcm: bytes, rate: int, channels: int) -> None:
        converter = self._converter
        if converter is None or (converter.in_rate, converter.in_channels) != (rate, channels):
            converter = self._converter = PcmConverter(rate, SAMPLE_RATE, channels, 1)
        self._buffer += converter.convert(pcm)
        excess = len(self._buffer) - int(MAX_BUFFERED_S * BYTES_PER_SECOND)
        if excess > 0:
            excess += excess % SAMPLE_WIDTH
            del self._buffer[:excess]
            self.dropped_bytes += excess
        self._changes.notify()

    def silence(self, seconds: float) -> None:
        self._buffer += bytes(SAMPLE_WIDTH * int(SAMPLE_RATE * seconds))
        self._changes.notify()

    def gap(self) -> None:
        """The stream broke (a reconnect): the resampler's history is not the next audio's."""
        self._converter = None

    def nudge(self) -> None:
        """Wake the reader now with an empty chunk (rooms.arbiter: a verdict released held audio)."""
        self._nudged = True
        self._changes.notify()

    async def chunks(self) -> AsyncIterator[bytes]:
        size = self._chunk_bytes
        while not self._closed:
            await self._changes.wait_until(lambda: self._closed or len(self._buffer) >= size or self._nudged)
            if self._nudged:
                self._nudged = False
                yield b""
            while len(self._buffer) >= size:
                chunk = bytes(self._buffer[:size])
                del self._buffer[:size]
                yield chunk

    async def close(self) -> None:
        self._closed = True
        self._changes.notify()


class SatelliteSpeaker:
    """Plays on the satellite: `audio-start` / `audio-chunk` / `audio-stop` at the rate it takes.
    `drained()` returns when the satellite will have played what was sent (it plays in real
    time from the first chunk; wyoming-satellite 1.0 reports nothing back). While the satellite
    is away, what is played is dropped (a narration for that room is not heard; it is logged)."""

    CHUNK_S = 0.05  # audio per audio-chunk event

    def __init__(self, send: Callable[[Event], None], rate: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._send = send
        self.rate = rate
        self._clock = clock
        self._converter = PcmConverter(SAMPLE_RATE, rate)
        self._streaming = False
        self._plays_until = 0.0  # clock time the satellite finishes what it was sent
        self.played_bytes = 0  # interface-format audio handed to the satellite
        self.first_audio_at: float | None = None  # clock time of the latest stream's first chunk

    def set_rate(self, rate: int) -> None:
        if rate != self.rate and not self._streaming:
            self.rate, self._converter = rate, PcmConverter(SAMPLE_RATE, rate)

    async def start(self) -> None:
        pass

    def play(self, pcm: bytes) -> None:
        if not pcm:
            return
        now = self._clock()
        if not self._streaming:
            self._streaming = True
            self.first_audio_at = now
            self._converter.reset()
            self._send(AudioStart(rate=self.rate, width=2, channels=1).event())
        out = self._converter.convert(pcm)
        step = 2 * int(self.rate * self.CHUNK_S)
        for offset in range(0, len(out), step):
            self._send(AudioChunk(rate=self.rate, width=2, channels=1, audio=out[offset:offset + step]).event())
        self.played_bytes += len(pcm)
        self._plays_until = max(now, self._plays_until) + pcm_duration_s(pcm)

    def flush(self) -> None:
        """Nothing more of this stream: the satellite plays what it already has (it cannot be
        told to drop it), the hub sends no more."""
        self._end()
        self._plays_until = self._clock()

    async def drained(self) -> None:
        self._end()
        delay = self._plays_until - self._clock()
        if delay > 0:
            await asyncio.sleep(delay)

    def _end(self) -> None:
        if self._streaming:
            self._streaming = False
            self._send(AudioStop().event())

    async def close(self) -> None:
        self._end()


@dataclass
class LinkStatus:
    """What `handoff status` shows for a satellite."""

    room: str
    uri: str
    state: str
    last_command_at: float | None = None  # wall clock
    last_error: str = ""
    reconnects: int = 0
    security: str = ""  # what the link protects (rooms.keys.exposure)


class SatelliteLink:
    """Keeps one satellite connected forever (`run`); the room's microphone and speaker."""

    def __init__(self, spec: SatelliteSpec, settings: RoomSettings, chunk_ms: int = 20,
                 on_announce: Callable[[Announce], None] = lambda _a: None,
                 on_pipeline: Callable[[PipelineStarted], None] = lambda _p: None,
                 clock: Callable[[], float] = time.monotonic, keys: HubKeys | None = None) -> None:  # fmt: skip
        self.spec, self.settings = spec, settings
        self.keys = keys  # the hub's key and pinned satellites (a paired room: not unauthenticated)
        self.microphone = SatelliteMicrophone(chunk_ms)
        self._outbox: deque[Event] = deque()
        self._outbox_changed = Changes()
        self.speaker = SatelliteSpeaker(self.send, settings.satellite_rate, clock)
        self.core = LinkCore(spec.room, settings.reconnect_initial_s, settings.reconnect_max_s, settings.announce_after_s)
        self._on_announce, self.on_pipeline, self._clock = on_announce, on_pipeline, clock
        self.changes = Changes()  # the link's state changed
        self.connected = False
        self.connections = 0
        self.unusable = 0  # events that did not fit
        self.last_command_at: float | None = None
        self._alive_at = 0.0  # clock time the satellite was last heard from
        self._pipeline_until: float | None = None  # a woken satellite's command is due by then

    def status(self) -> LinkStatus:
        return LinkStatus(self.spec.room, self.spec.uri, self.core.state.value, self.last_command_at,
                          self.core.last_error, max(0, self.connections - 1), exposure(self.spec))  # fmt: skip

    def send(self, event: Event) -> None:
        if not self.connected:
            return  # the satellite is away: what it would play is not heard (logged by the room)
        self._outbox.append(event)
        self._outbox_changed.notify()

    def _event(self, event: LinkEvent, error: str = "") -> None:
        try:
            said = self.core.handle(event, self._clock(), error)
        except IllegalTransition:
            log.exception("satellite %s: a bug in the link's state", self.spec.room)
            return
        for announce in said:
            log.warning("%s", announce.text)
            self._on_announce(announce)
        self.changes.notify()

    async def run(self) -> None:
        """Forever: connect, serve, and after a drop try again (at once, then with backoff)."""
        while True:
            try:
                client = await self._connect()
            except (OSError, TimeoutError, ConnectionRefusedError, RefusedAddress, NotPaired) as exc:
                why = str(exc) or exc.__class__.__name__
                if self.core.failures == 0:
                    log.info("satellite %s (%s) cannot be reached: %s; trying again", self.spec.room, self.spec.uri, why)
                self._event(LinkEvent.FAILED, why)
                await self._wait(self.core.retry_in())
                continue
            self.connections += 1
            log.info("satellite %s connected (%s)", self.spec.room, self.spec.uri)
            self.connected = True
            self._event(LinkEvent.CONNECTED)
            why = await self._serve(client)
            self.connected = False
            self._outbox.clear()
            self.speaker.flush()
            self.microphone.gap()
            log.warning("satellite %s lost: %s; reconnecting", self.spec.room, why)
            self._event(LinkEvent.LOST, why)

    async def _wait(self, delay: float) -> None:
        """Sleep until the next attempt, waking for the core's announcement deadline."""
        until = self._clock() + delay
        while (now := self._clock()) < until:
            deadline = self.core.next_deadline()
            step = until - now if deadline is None or deadline <= now else min(until, deadline) - now
            await asyncio.sleep(max(0.0, step))
            self._event(LinkEvent.TICK)

    async def _connect(self) -> AsyncTcpClient:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.settings.connect_timeout_s):
            infos = await loop.getaddrinfo(self.spec.host, self.spec.port, type=socket.SOCK_STREAM)
            address = infos[0][4][0]
            problem = address_problem(address, self.settings.allow_public)
            if problem:
                raise RefusedAddress(f"{self.spec.host} resolves to {problem}")
            client = paired_client(self.spec, address, self.keys) if not self.spec.unauthenticated else AsyncTcpClient(address, self.spec.port)
            await client.connect()
        await client.write_event(Describe().event())
        await client.write_event(RunSatellite().event())
        return client

    async def _serve(self, client: AsyncTcpClient) -> str:
        """Until the connection ends; returns why."""
        reason = "the connection closed"
        try:
            reason = await self._serve_until_closed(client)
        finally:  # on a stop too (cancelled): the satellite sees the hub go at once
            with contextlib.suppress(OSError, ConnectionError):
                await client.disconnect()
        return reason

    async def _serve_until_closed(self, client: AsyncTcpClient) -> str:
        reason = "the connection closed"
        try:
            async with asyncio.TaskGroup() as tg:
                writer = tg.create_task(self._write(client), name=f"satellite {self.spec.room} writer")
                pinger = tg.create_task(self._keep_alive(client), name=f"satellite {self.spec.room} ping")
                try:
                    reason = await self._read(client)
                finally:
                    writer.cancel()
                    pinger.cancel()
        except* (OSError, ConnectionError, asyncio.IncompleteReadError) as group:
            reason = str(group.exceptions[0]) or group.exceptions[0].__class__.__name__
        except* (KeyError, AttributeError, TypeError) as group:
            # JSON that is not a Wyoming event (no type, not an object): the framing is lost. (Lines
            # that are not JSON at all the wyoming package reads as the end of the connection.)
            reason = f"it sent something that is not Wyoming ({group.exceptions[0].__class__.__name__})"
        except* _Silent:
            reason = "it stopped answering"
        return reason

    async def _read(self, client: AsyncTcpClient) -> str:
        while True:
            event = await client.read_event()
            if event is None:
                return "the satellite closed the connection"
            self._alive_at = self._clock()
            match parse(event):
                case Audio(pcm=pcm, rate=rate, channels=channels):
                    self.microphone.push(pcm, rate, channels)
                case PipelineStarted() as started:
                    self.last_command_at = time.time()
                    if started.woken:
                        self._pipeline_until = self._clock() + self.settings.pipeline_timeout_s
                    self.on_pipeline(started)
                case AudioEnds():
                    self.microphone.silence(STOP_SILENCE_S)
                case Alive(snd_rate=rate):
                    if rate:
                        self.speaker.set_rate(rate)
                case PingAsked(text=text):
                    self.send(Pong(text=text).event())
                case Failed(text=text):
                    log.warning("satellite %s reports an error: %s", self.spec.room, text)
                case Unusable(type=kind, why=why):
                    self.unusable += 1
                    if why:
                        log.debug("satellite %s: ignored %s (%s)", self.spec.room, kind, why)
                case DescribeAsked() | _:
                    pass

    def understood(self, text: str) -> None:
        """What the hub made of the command ("" for nothing): a satellite that woke itself stops
        streaming on it."""
        self._pipeline_until = None
        self.send(Transcript(text=text).event())

    async def _write(self, client: AsyncTcpClient) -> None:
        while True:
            await self._outbox_changed.wait_until(lambda: bool(self._outbox))
            while self._outbox:
                await client.write_event(self._outbox.popleft())

    async def _keep_alive(self, client: AsyncTcpClient) -> None:
        """A `describe` every ping_s; nothing heard for two of them: the satellite is gone (a
        machine that lost power sends no FIN). Also, on the same beat, the end of a woken
        pipeline that brought no command."""
        self._alive_at = self._clock()
        while True:
            await asyncio.sleep(self.settings.ping_s)
            if self._clock() - self._alive_at > 2 * self.settings.ping_s:
                raise _Silent()
            self.send(Describe().event())
            if self._pipeline_until is not None and self._clock() >= self._pipeline_until:
                log.info("satellite %s woke, but no command came: telling it to stop streaming", self.spec.room)
                self.understood("")


class RefusedAddress(Exception):
    """The satellite's name resolves outside the home network (and the override is off)."""


class _Silent(Exception):
    """The satellite stopped answering keep-alives."""
