"""The hub's connection to one satellite (the satellite is the server, as with Home Assistant):
connect, say `run-satellite`, read its events, keep it alive (`describe` -> `info` every
`ping_s`: wyoming-satellite 1.0 answers it, whatever its state), and reconnect with backoff when
it goes away. Its microphone and speaker are a `MicrophoneSource` and a `SpeakerSink`, so the
room's coordinator sees a room like any other.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from wyoming.asr import Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Pong
from wyoming.satellite import RunSatellite

from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, SAMPLE_WIDTH, PcmConverter, pcm_duration_s
from concurrency.changes import Changes
from config.rooms import RoomSettings, SatelliteSpec, address_problem
from decisions.errors import IllegalTransition
from decisions.rooms import Announce, LinkCore, LinkEvent, LinkState
from rooms.keys import NotPaired, exposure, open_paired
from rooms.pairing import HubKeys
from rooms.wire import (
    Alive, Audio, AudioEnds, Closed, DescribeAsked, Failed, PingAsked, PipelineStarted, StopAsked, Unusable, read,
)

log = logging.getLogger("handoff.rooms")

STOP_SILENCE_S = 1.0  # after a satellite's audio-stop: silence, so the listener's VAD ends the utterance
MAX_BUFFERED_S = 10.0  # mic audio not yet read by the room (bounded: oldest dropped)
MAX_OUTBOX_BYTES = 8 * 1024 * 1024  # events the satellite has not read yet (3 min of its speaker's audio)
MAX_OUTBOX_EVENTS = 4096  # (200 s of its speaker's audio in 50 ms chunks; a ping flood's pongs)


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
        self._flushed = Changes()  # wakes `drained`
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
        self._flushed.notify()

    async def drained(self) -> None:
        """When the satellite will have played what was sent, or at once on a `flush` (a stop
        must let the room's next command in now, not when the cut answer would have ended)."""
        self._end()
        while (delay := self._plays_until - self._clock()) > 0:
            await self._flushed.wait(delay)

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
                 on_stop: Callable[[str], None] = lambda _phrase: None,
                 clock: Callable[[], float] = time.monotonic, keys: HubKeys | None = None) -> None:  # fmt: skip
        self.spec, self.settings = spec, settings
        self.keys = keys  # the hub's key and pinned satellites (a paired room: not unauthenticated)
        self.microphone = SatelliteMicrophone(chunk_ms)
        self._outbox: deque[Event] = deque()
        self._outbox_bytes = 0
        self._stalled = False  # the satellite stopped reading: the outbox overflowed
        self._client: _Connection | None = None  # the connection, while up
        self._outbox_changed = Changes()
        self.speaker = SatelliteSpeaker(self.send, settings.satellite_rate, clock)
        self.core = LinkCore(spec.room, settings.reconnect_initial_s, settings.reconnect_max_s, settings.announce_after_s)
        self._on_announce, self.on_pipeline, self.on_stop, self._clock = on_announce, on_pipeline, on_stop, clock
        self.changes = Changes()  # the link's state changed
        self.connected = False
        self.connections = 0
        self.unusable = 0  # events that did not fit
        self._unusable_logged = False  # the first of a connection is logged, the rest only counted
        self.errors_reported = 0  # `error` events (the first, and every 1000th, logged)
        self.last_command_at: float | None = None
        self._alive_at = 0.0  # clock time the satellite was last heard from
        self._pipeline_until: float | None = None  # a woken satellite's command is due by then

    def status(self) -> LinkStatus:
        return LinkStatus(self.spec.room, self.spec.uri, self.core.state.value, self.last_command_at,
                          self.core.last_error, max(0, self.connections - 1), exposure(self.spec))  # fmt: skip

    def send(self, event: Event) -> None:
        if not self.connected or self._stalled:
            return  # the satellite is away: what it would play is not heard (logged by the room)
        self._outbox.append(event)
        self._outbox_bytes += len(event.payload or b"") + 64
        if self._outbox_bytes > MAX_OUTBOX_BYTES or len(self._outbox) > MAX_OUTBOX_EVENTS:
            # It does not read: the connection is dropped (memory bounded).
            self._stalled = True
            self._outbox.clear()
            self._outbox_bytes = 0
            if self._client is not None:
                self._client.abort()  # the writer may be waiting on it: it ends now
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
        """Forever: connect, serve, and after a drop try again (at once after a connection that
        lasted, then with backoff). Ends only when cancelled."""
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
            self.connected, self._stalled, self._unusable_logged = True, False, False
            self._event(LinkEvent.CONNECTED)
            why = await self._serve(client)
            self.connected = False
            self._outbox.clear()
            self._outbox_bytes = 0
            self.speaker.flush()
            self.microphone.gap()
            self._event(LinkEvent.LOST, why)
            retry = self.core.retry_in()
            log.warning("satellite %s lost: %s; reconnecting%s", self.spec.room, why,
                        f" in {retry:.1f} s" if retry else "")  # fmt: skip
            await self._wait(retry)

    async def _wait(self, delay: float) -> None:
        """Sleep until the next attempt, waking for the core's announcement deadline."""
        until = self._clock() + delay
        while (now := self._clock()) < until:
            deadline = self.core.next_deadline()
            step = until - now if deadline is None or deadline <= now else min(until, deadline) - now
            await asyncio.sleep(max(0.0, step))
            self._event(LinkEvent.TICK)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.settings.connect_timeout_s):
            infos = await loop.getaddrinfo(self.spec.host, self.spec.port, type=socket.SOCK_STREAM)
            address = infos[0][4][0]
            if not isinstance(address, str):  # (an IP address is text; an int is another family's)
                raise RefusedAddress(f"{self.spec.host} resolves to no IP address")
            problem = address_problem(address, self.settings.allow_public)
            if problem:
                raise RefusedAddress(f"{self.spec.host} resolves to {problem}")
            if self.spec.unauthenticated:
                reader, writer = await asyncio.open_connection(address, self.spec.port)
            else:  # paired: TLS with both keys pinned (rooms.keys)
                reader, writer = await open_paired(self.spec, address, self.keys)
        client = _Connection(reader, writer)
        await client.write_event(Describe().event())
        await client.write_event(RunSatellite().event())
        return client

    async def _serve(self, client: _Connection) -> str:
        """Until the connection ends; returns why."""
        reason = "the connection closed"
        try:
            reason = await self._serve_until_closed(client)
        finally:  # on a stop too (cancelled): the satellite sees the hub go at once
            client.close()
        return reason

    async def _serve_until_closed(self, client: _Connection) -> str:
        """Read, write and keep alive until one of them ends (each returns why; none raises what
        the connection may do). Not a TaskGroup: in one, a child's error raised while the link is
        being stopped outranks the stop (Python 3.11), and the link would reconnect instead."""
        room = self.spec.room
        parts = [asyncio.create_task(self._read(client), name=f"satellite {room} reader"),
                 asyncio.create_task(self._write(client), name=f"satellite {room} writer"),
                 asyncio.create_task(self._keep_alive(client), name=f"satellite {room} ping")]  # fmt: skip
        self._client = client
        try:
            done, _pending = await asyncio.wait(parts, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._client = None
            for part in parts:
                part.cancel()
            await asyncio.gather(*parts, return_exceptions=True)
        reasons = [part.result() for part in done]
        return "it stopped reading what the hub sends" if self._stalled else reasons[0]

    async def _read(self, client: _Connection) -> str:
        streamed, silence_at = False, -STOP_SILENCE_S  # audio came since the last audio-stop; when silence was added
        while True:
            event = await read(client.reader)
            if isinstance(event, Closed):
                return event.why
            self._alive_at = self._clock()
            match event:
                case Audio(pcm=pcm, rate=rate, channels=channels):
                    self.microphone.push(pcm, rate, channels)
                    streamed = True
                case PipelineStarted() as started:
                    self.last_command_at = time.time()
                    if started.woken:
                        self._pipeline_until = self._clock() + self.settings.pipeline_timeout_s
                    self.on_pipeline(started)
                case AudioEnds():
                    # At most one second of silence a second: a flood of audio-stops must not become
                    # minutes of audio to upload.
                    if streamed and self._clock() - silence_at >= STOP_SILENCE_S:
                        silence_at = self._clock()
                        self.microphone.silence(STOP_SILENCE_S)
                    streamed = False
                case Alive(snd_rate=rate):
                    if rate:
                        self.speaker.set_rate(rate)
                case PingAsked(text=text):
                    self.send(Pong(text=text).event())
                case StopAsked(phrase=phrase):  # its own detector heard "computer, stop"
                    self.on_stop(phrase)
                case Failed(text=text):
                    self.errors_reported += 1
                    if self.errors_reported == 1 or self.errors_reported % 1000 == 0:
                        log.warning("satellite %s reports an error: %s (%d so far)", self.spec.room, text[:200],
                                    self.errors_reported)  # fmt: skip
                case Unusable(type=kind, why=why):
                    self.unusable += 1
                    if why and not self._unusable_logged:
                        self._unusable_logged = True
                        log.warning("satellite %s sent an unusable %s (%s): ignored; more are counted, not logged",
                                    self.spec.room, kind, why)  # fmt: skip
                case DescribeAsked() | _:
                    pass

    def understood(self, text: str) -> None:
        """What the hub made of the command ("" for nothing): a satellite that woke itself stops
        streaming on it."""
        self._pipeline_until = None
        self.send(Transcript(text=text).event())

    async def _write(self, client: _Connection) -> str:
        while True:
            await self._outbox_changed.wait_until(lambda: bool(self._outbox) or self._stalled)
            if self._stalled:
                return "it stopped reading what the hub sends"
            while self._outbox:
                event = self._outbox.popleft()
                self._outbox_bytes -= len(event.payload or b"") + 64
                try:
                    await client.write_event(event)
                except (OSError, ConnectionError) as exc:
                    return str(exc) or exc.__class__.__name__

    async def _keep_alive(self, client: _Connection) -> str:
        """A `describe` every ping_s; nothing heard for two of them: the satellite is gone (a
        machine that lost power sends no FIN). Also, on the same beat, the end of a woken
        pipeline that brought no command."""
        self._alive_at = self._clock()
        while True:
            beat = self._clock() + self.settings.ping_s
            await asyncio.sleep(self.settings.ping_s)
            now = self._clock()
            if now - beat > self.settings.ping_s / 2:
                # The hub itself was busy (its loop late by half a beat): what the satellite sent
                # meanwhile has not been read yet, so this beat judges nothing.
                self._alive_at = max(self._alive_at, now - self.settings.ping_s)
            elif now - self._alive_at > 2 * self.settings.ping_s:
                return "it stopped answering"
            self.send(Describe().event())
            if self._pipeline_until is not None and self._clock() >= self._pipeline_until:
                log.info("satellite %s woke, but no command came: telling it to stop streaming", self.spec.room)
                self.understood("")


class _Connection:
    """One connection to a satellite: frames are read by `rooms.wire.read`, written by the
    wyoming package."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def write_event(self, event: Event) -> None:
        await async_write_event(event, self.writer)

    def close(self) -> None:
        """At once: what a satellite that stopped reading was not sent is dropped, not waited for."""
        if self.writer.transport.get_write_buffer_size():
            self.abort()
        else:
            self.writer.close()

    def abort(self) -> None:
        self.writer.transport.abort()


class RefusedAddress(Exception):
    """The satellite's name resolves outside the home network (and the override is off)."""

