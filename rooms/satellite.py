"""`handoff satellite`: this machine as a satellite for a hub on another machine (as
wyoming-satellite is): its microphone, on-device wake word and VAD, and its speaker, served over
the Wyoming protocol. The hub connects; one hub at a time (a new connection replaces the old:
a rebooted hub's old connection may linger half-open).

It listens where SATELLITE_LISTEN says: 127.0.0.1 by default, so nothing outside this machine
reaches it until the user names a LAN address. Wyoming has no authentication.

The Wyoming framing is the `wyoming` package's (`async_read_event` / `async_write_event`, its event
classes); the listening socket is asyncio's own: the package's `AsyncServer` starts tasks nobody
owns and installs its own SIGTERM handler, and handoff stops cleanly by its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from wyoming.audio import AudioChunk, AudioFormat, AudioStop
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Attribution, Info, Satellite, SndProgram
from wyoming.ping import Pong
from wyoming.pipeline import PipelineStage, RunPipeline

from audio_io import MicrophoneSource, SpeakerSink
from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, PcmConverter
from concurrency.changes import Changes
from config.rooms import SatelliteSpec
from rooms.wire import Audio, AudioBegins, AudioEnds, DescribeAsked, PingAsked, RunAsked, parse

log = logging.getLogger("handoff.satellite")

END_AFTER_S = 1.2  # nothing passed the detectors for this long: the command is over (audio-stop)


class MicFilter(Protocol):
    """What of the microphone is a command (detectors.pipeline.UploadFilter)."""

    def feed(self, chunk: bytes) -> list[bytes]: ...
    def skip(self, chunk: bytes) -> None: ...
    def reset(self) -> None: ...


@dataclass
class SatelliteCounts:
    """What the satellite did, for the log, the tests and the benchmark."""

    commands: int = 0  # run-pipeline sent
    streams: list[int] = field(default_factory=list)  # bytes (24 kHz) of each stream the hub played here
    stream_starts: list[float] = field(default_factory=list)  # monotonic clock: each stream's first audio
    overlaps: int = 0  # a stream began while another still played: two voices at once
    connections: int = 0


class SatelliteServer:
    """Serves one room to a hub. `woken`: the filter passes audio only after the on-device wake
    word (the command follows as start stage asr); otherwise the hub decides (start stage wake).
    While the hub's voice plays here, the microphone goes to the hub too (held muted there, for
    its stop detector): "computer, stop" works in this room as at the hub's own microphone."""

    def __init__(self, listen: SatelliteSpec, name: str, microphone: MicrophoneSource, speaker: SpeakerSink,
                 mic_filter: MicFilter, woken: bool = True, cancel: Callable[[bytes], bytes] | None = None) -> None:  # fmt: skip
        self.listen, self.name = listen, name
        self.cancel = cancel  # the room's echo canceller (audio_io.echo_reference.cancelling): what the hub's stop detector hears
        self.microphone, self.speaker, self.mic_filter, self.woken = microphone, speaker, mic_filter, woken
        self.counts = SatelliteCounts()
        self.changes = Changes()  # a hub came or went, a stream ended
        self._writer: asyncio.StreamWriter | None = None  # the hub's connection, while it runs us
        self._outbox: list[Event] = []
        self._outbox_changed = Changes()
        self._running = False  # run-satellite received
        self._streaming = False  # a command is being sent
        self._quiet_s = 0.0
        self._playing = False
        self._converter: PcmConverter | None = None
        self._stream_bytes = 0
        self._drained: asyncio.Task[None] | None = None
        self.port: int | None = None  # the port it listens on (listen.port, or the one given for 0)

    @property
    def hub_connected(self) -> bool:
        return self._writer is not None and self._running

    async def run(self) -> None:
        await self.microphone.start()
        await self.speaker.start()
        async with asyncio.TaskGroup() as tg:
            server = await asyncio.start_server(
                lambda r, w: tg.create_task(self._serve(r, w), name="hub connection"), self.listen.host, self.listen.port)
            self.port = server.sockets[0].getsockname()[1]
            log.info("satellite %s waiting for its hub on tcp://%s:%d", self.name, self.listen.host, self.port)
            self.changes.notify()
            try:
                tg.create_task(self._write_forever(), name="to the hub")
                await self._listen()
            finally:
                server.close()
                with contextlib.suppress(Exception):
                    await self.speaker.close()
                await self.microphone.close()

    # -- the hub's side ------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._writer is not None:
            log.info("a new hub connection replaces the old one")
            self._writer.close()
        self._writer, self._running = writer, False
        self._outbox.clear()
        self.counts.connections += 1
        self.changes.notify()
        try:
            while (event := await async_read_event(reader)) is not None:
                await self._from_hub(event)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            log.info("the hub connection broke: %s", exc)
        finally:
            if self._writer is writer:
                self._writer, self._running, self._streaming = None, False, False
                self._end_stream()
                self.changes.notify()
            writer.close()

    async def _from_hub(self, event: Event) -> None:
        match parse(event):
            case RunAsked(run=run):
                self._running = run
                self.changes.notify()
            case DescribeAsked():
                self._send(self._info())
            case PingAsked(text=text):
                self._send(Pong(text=text).event())
            case AudioBegins():
                self._begin_stream()
            case Audio(pcm=pcm, rate=rate, channels=channels):
                if not self._playing or self._drained is not None:
                    self._begin_stream(announced=False)  # audio without its audio-start
                converter = self._converter
                if converter is None or (converter.in_rate, converter.in_channels) != (rate, channels):
                    converter = self._converter = PcmConverter(rate, SAMPLE_RATE, channels, 1)
                audio = converter.convert(pcm)
                self._stream_bytes += len(audio)
                self.speaker.play(audio)
            case AudioEnds():
                self._end_stream()
            case _:
                pass  # transcripts, errors, anything newer: nothing to do here

    def _begin_stream(self, announced: bool = True) -> None:
        """A stream begins. One that begins while another is still open (no audio-stop yet) is a
        second voice at once: counted (it should never happen). One that follows a finished
        stream still playing out queues behind it on the speaker."""
        if self._playing and self._drained is None:
            self.counts.overlaps += announced
            return
        if self._drained is not None:
            self._drained.cancel()
            self._drained = None
        self._playing, self._stream_bytes, self._converter = True, 0, None
        self.counts.stream_starts.append(time.monotonic())
        self.changes.notify()

    def _end_stream(self) -> None:
        if self._playing and self._drained is None:
            self.counts.streams.append(self._stream_bytes)
            self._drained = asyncio.get_running_loop().create_task(self._until_played())

    async def _until_played(self) -> None:
        """The mic listens again once the speaker has really played the answer (its own mute)."""
        with contextlib.suppress(Exception):
            await self.speaker.drained()
        self._playing, self._drained = False, None
        self.mic_filter.reset()
        self.changes.notify()

    def _info(self) -> Event:
        about = dict(attribution=Attribution(name="handoff", url=""), installed=True, description="handoff satellite",
                     version=None)  # fmt: skip
        return Info(
            satellite=Satellite(name=self.name, area=self.name, has_vad=True, **about),  # type: ignore[arg-type]
            snd=[SndProgram(name="speaker", snd_format=AudioFormat(rate=SAMPLE_RATE, width=2, channels=1), **about)],  # type: ignore[arg-type]
        ).event()

    def _send(self, event: Event) -> None:
        if self._writer is not None:
            self._outbox.append(event)
            self._outbox_changed.notify()

    async def _write_forever(self) -> None:
        while True:
            await self._outbox_changed.wait_until(lambda: bool(self._outbox))
            writer = self._writer
            events, self._outbox = self._outbox, []
            if writer is None:
                continue
            try:
                for event in events:
                    await async_write_event(event, writer)
            except (OSError, ConnectionError) as exc:
                log.info("could not write to the hub: %s", exc)

    # -- the microphone ------------------------------------------------------------------------
    async def _listen(self) -> None:
        """Every chunk through the detectors; what they pass is a command for the hub. The mic is
        not heard while the speaker plays (the hub's voice must not reach the hub)."""
        chunk_s = 0.0
        async for chunk in self.microphone.chunks():
            chunk_s = len(chunk) / BYTES_PER_SECOND
            if self._playing:
                self.mic_filter.skip(chunk)
                if self.hub_connected:
                    # While the hub's voice plays here the hub holds this room muted: what it
                    # hears goes only to its on-device stop detector ("computer, stop").
                    heard = chunk if self.cancel is None else self.cancel(chunk)
                    self._send(AudioChunk(rate=SAMPLE_RATE, width=2, channels=1, audio=heard).event())
                continue
            pieces = self.mic_filter.feed(chunk)
            if not self.hub_connected:
                continue
            if pieces:
                if not self._streaming:
                    self._streaming, self._quiet_s = True, 0.0
                    self.counts.commands += 1
                    start = PipelineStage.ASR if self.woken else PipelineStage.WAKE
                    self._send(RunPipeline(start_stage=start, end_stage=PipelineStage.TTS).event())
                for piece in pieces:
                    self._send(AudioChunk(rate=SAMPLE_RATE, width=2, channels=1, audio=piece).event())
                self._quiet_s = 0.0
            elif self._streaming:
                self._quiet_s += chunk_s
                if self._quiet_s >= END_AFTER_S:
                    self._streaming = False
                    self._send(AudioStop().event())


def describe(counts: SatelliteCounts) -> dict[str, Any]:
    return {"commands": counts.commands, "streams": len(counts.streams), "overlaps": counts.overlaps}
