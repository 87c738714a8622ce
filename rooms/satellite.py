"""`handoff satellite`: this machine as a satellite for a hub on another machine (as
wyoming-satellite is): its microphone, on-device wake word and VAD, and its speaker, served over
the Wyoming protocol. The hub connects; one hub at a time (a new connection replaces the old
once it has sent a valid event: a rebooted hub's old connection may linger half-open, and a
stray connection that sends nothing Wyoming must not take the room from its hub).

It listens where SATELLITE_LISTEN says: 127.0.0.1 by default, so nothing outside this machine
reaches it until the user names a LAN address. Wyoming has no authentication.

Frames are read by `rooms.wire.read` (bounded, never raises) and written by the `wyoming`
package; the listening socket is asyncio's own: the package's `AsyncServer` starts tasks nobody
owns and installs its own SIGTERM handler, and handoff stops cleanly by its own.

Only what passed the on-device wake word crosses the network: while the hub's voice plays here,
the microphone goes to this satellite's own stop detector, and a hit is sent as `handoff-stop`.
A barge-in ("hey jarvis, what time is it" over the hub's voice) cuts it the same way, and what the
user said is held here (`CommandHold`) until it is known to be a command and the speaker is quiet,
then goes through the on-device wake word like any command: "hey jarvis, stop" never leaves.
Everything is bounded: one frame (rooms.wire), the events the hub has not read
(`MAX_OUTBOX_EVENTS`: a hub that stops reading is dropped), the audio queued ahead of the
speaker (`MAX_AHEAD_S`: more is dropped), and connections not yet a hub (`MAX_NEWCOMERS`, each
given `HELLO_S` to send its first event).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from wyoming.audio import AudioChunk, AudioFormat, AudioStop
from wyoming.event import Event, async_write_event
from wyoming.info import Attribution, Info, Satellite, SndProgram
from wyoming.ping import Pong
from wyoming.pipeline import PipelineStage, RunPipeline

from audio_io import MicrophoneSource, SpeakerSink
from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, PcmConverter
from concurrency.changes import Changes
from config.rooms import SatelliteSpec
from audio_io.echo_reference import RoomEcho
from detectors.barge_in_ear import BargeInEar
from detectors.stop_word import StopDetector, StopHit
from rooms.keys import SatelliteContexts
from rooms.pairing import SatelliteKeys, answer_pairing
from rooms.wire import (
    Audio, AudioBegins, AudioEnds, Closed, DescribeAsked, Heard, PingAsked, RunAsked, SatelliteEvent, Unusable, read,
    stop_event,
)

log = logging.getLogger("handoff.satellite")

END_AFTER_S = 1.2  # nothing passed the detectors for this long: the command is over (audio-stop)
MAX_OUTBOX_EVENTS = 1000  # events the hub has not read (20 s of commands' audio): more, and it is dropped
MAX_AHEAD_S = 120.0  # audio queued ahead of the speaker: what comes beyond is dropped (counted)
MAX_NEWCOMERS = 4  # connections at once that have not yet sent a valid event; more are closed at once
HELLO_S = 10.0  # a newcomer's first event is due within this (else it is closed)


class MicFilter(Protocol):
    """What of the microphone is a command (detectors.pipeline.UploadFilter)."""

    def feed(self, chunk: bytes, woke_s: float | None = None) -> list[bytes]: ...  # woke_s: a barge-in's wake ended in it
    def skip(self, chunk: bytes) -> None: ...
    def reset(self) -> None: ...


@dataclass
class SatelliteCounts:
    """What the satellite did, for the log, the tests and the benchmark."""

    commands: int = 0  # run-pipeline sent
    streams: list[int] = field(default_factory=list)  # bytes (24 kHz) of each stream the hub played here
    stream_starts: list[float] = field(default_factory=list)  # monotonic clock: each stream's first audio
    overlaps: int = 0  # a stream began while another still played: two voices at once
    connections: int = 0  # hubs that took the room (sent a valid event)
    refused: int = 0  # connections closed before they became the hub: nothing valid, too slow, too many
    unusable: int = 0  # frames from the hub that did not fit (ignored)
    dropped_audio_s: float = 0.0  # the hub's audio beyond MAX_AHEAD_S
    stops: int = 0  # "computer, stop" (or a barge-in's wake phrase) heard here and sent to the hub
    barge_ins: int = 0  # commands said over the hub's voice, held here and then sent as commands
    pairings: int = 0  # hubs paired while it ran
    stopped_by_hub: int = 0  # commands the hub ended early (a transcript: another room took it)


class SatelliteServer:
    """Serves one room to a hub. `woken`: the filter passes audio only after the on-device wake
    word (the command follows as start stage asr); otherwise the hub decides (start stage wake).
    While the hub's voice plays here, the microphone stays here: `stop_detector` (when given)
    hears "computer, stop" and the hub is told (`handoff-stop`), so it works in this room as at
    the hub's own microphone."""

    def __init__(self, listen: SatelliteSpec, name: str, microphone: MicrophoneSource, speaker: SpeakerSink,
                 mic_filter: MicFilter, woken: bool = True, stop_detector: StopDetector | None = None,
                 keys: SatelliteKeys | None = None, echo: RoomEcho | None = None) -> None:  # fmt: skip
        self.listen, self.name = listen, name
        self.keys = keys  # paired: TLS, only the pinned hub (None: plain Wyoming, as wyoming-satellite)
        self.echo = echo  # the room's echo gate and canceller (`speaker` is its speaker): what its stop detector hears
        self.microphone, self.speaker, self.mic_filter, self.woken = microphone, speaker, mic_filter, woken
        self._ear = (BargeInEar(stop_detector, echo.canceller if echo is not None else None, echo.gate if echo is not None else None)
                     if stop_detector is not None else None)  # fmt: skip
        self._mic_offset = 0  # bytes of microphone audio read (where a held chunk lies)
        self.counts = SatelliteCounts()
        self.changes = Changes()  # a hub came or went, a stream ended
        self._writer: asyncio.StreamWriter | None = None  # the hub's connection, while it runs us
        self._newcomers = 0  # connections that have not sent a valid event yet
        self._outbox: deque[Event] = deque()
        self._outbox_changed = Changes()
        self._plays_until = 0.0  # monotonic clock: when the speaker will have played what it was given
        self._running = False  # run-satellite received
        self._streaming = False  # a command is being sent
        self._quiet_s = 0.0
        self._told_to_stop = False  # the hub said stop (a transcript): nothing more of this command
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
        contexts = SatelliteContexts(self.keys.identity, self.keys.hub_pem()) if self.keys is not None else None
        async with asyncio.TaskGroup() as tg:
            server = await asyncio.start_server(
                lambda r, w: tg.create_task(self._accept(r, w, contexts), name="hub connection"), self.listen.host,
                self.listen.port, ssl=contexts.listening if contexts is not None else None)  # fmt: skip
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
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      contexts: SatelliteContexts | None) -> None:  # fmt: skip
        """A connection that passed TLS (paired) is the pinned hub, or one that asked to pair:
        that one gets pairing and nothing else. (One that failed TLS never gets here.)"""
        connection = writer.get_extra_info("ssl_object")
        if contexts is not None and self.keys is not None and contexts.is_pairing(connection):
            if await answer_pairing(reader, writer, self.keys, on_paired=contexts.pin):
                self.counts.pairings += 1
            return
        if contexts is not None and not contexts.verified(connection):
            writer.close()  # no certificate: nothing read, nothing sent
            return
        await self._serve(reader, writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = await self._hello(reader)
            if first is None:
                self.counts.refused += 1
                self.changes.notify()
                return
            self._take_over(writer)
            event: SatelliteEvent | Closed = first
            unusable_logged = False
            while not isinstance(event, Closed):
                if isinstance(event, Unusable):
                    self.counts.unusable += 1
                    if event.why and not unusable_logged:
                        unusable_logged = True
                        log.warning("the hub sent an unusable %s (%s): ignored; more are counted, not logged",
                                    event.type, event.why)  # fmt: skip
                else:
                    self._from_hub(event)
                event = await read(reader)
            log.info("the hub connection ended: %s", event.why)
        finally:
            if self._writer is writer:
                self._writer, self._running, self._streaming = None, False, False
                self._outbox.clear()
                self._end_stream()
                self.changes.notify()
            writer.close()

    async def _hello(self, reader: asyncio.StreamReader) -> SatelliteEvent | None:
        """A newcomer's first event, if it sends a valid one in time (None: it is closed, and the
        hub it would replace keeps the room)."""
        if self._newcomers >= MAX_NEWCOMERS:
            return None
        self._newcomers += 1
        try:
            async with asyncio.timeout(HELLO_S):
                first = await read(reader)
        except TimeoutError:
            return None
        finally:
            self._newcomers -= 1
        return None if isinstance(first, (Closed, Unusable)) else first

    def _take_over(self, writer: asyncio.StreamWriter) -> None:
        if self._writer is not None:
            log.info("a new hub connection replaces the old one")
            self._writer.close()
            self._end_stream()
        self._writer, self._running, self._streaming = writer, False, False
        self._outbox.clear()
        self.counts.connections += 1
        self.changes.notify()

    def _from_hub(self, event: SatelliteEvent) -> None:
        match event:
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
                now = time.monotonic()
                if self._plays_until - now > MAX_AHEAD_S:  # a burst far beyond real time: bounded
                    self.counts.dropped_audio_s += len(audio) / BYTES_PER_SECOND
                    return
                self._plays_until = max(now, self._plays_until) + len(audio) / BYTES_PER_SECOND
                self._stream_bytes += len(audio)
                self.speaker.play(audio)
            case AudioEnds():
                self._end_stream()
            case Heard(text=""):
                self._stop_streaming()
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
        self._told_to_stop = False
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
        writer = self._writer
        if writer is None:
            return
        if len(self._outbox) >= MAX_OUTBOX_EVENTS:  # the hub stopped reading: it is dropped, memory bounded
            log.warning("the hub stopped reading (%d events waiting): dropping its connection", len(self._outbox))
            self._outbox.clear()
            writer.transport.abort()
            return
        self._outbox.append(event)
        self._outbox_changed.notify()

    async def _write_forever(self) -> None:
        while True:
            await self._outbox_changed.wait_until(lambda: bool(self._outbox))
            writer = self._writer
            if writer is None:
                self._outbox.clear()
                continue
            try:
                while self._outbox and self._writer is writer:
                    await async_write_event(self._outbox.popleft(), writer)
            except (OSError, ConnectionError) as exc:
                log.info("could not write to the hub: %s", exc)

    def _stop_streaming(self) -> None:
        """An empty `transcript`: the hub wants none of this command (another room took it, or
        it was a false wake). The rest of what the detectors pass now is not sent: the next
        command needs the next wake (or comes after END_AFTER_S with nothing passed, or after
        the hub played something here)."""
        if self._streaming:
            self._streaming, self._told_to_stop, self._quiet_s = False, True, 0.0
            self._send(AudioStop().event())
            self.counts.stopped_by_hub += 1

    # -- the microphone ------------------------------------------------------------------------
    async def _listen(self) -> None:
        """Every chunk through the detectors; what they pass is a command for the hub. The mic is
        not heard while the speaker plays (the hub's voice must not reach the hub)."""
        async for chunk in self.microphone.chunks():
            for piece, woke_s in self._listen_for_stop(chunk) if self._ear is not None else [(chunk, None)]:
                self._hear(piece, woke_s)

    def _hear(self, chunk: bytes, woke_s: float | None = None) -> None:
        """One chunk for the detectors (read just now, or held through a barge-in: `woke_s`, the
        wake phrase the barge-in detector heard ended in it, and its filter takes it as its own)."""
        chunk_s = len(chunk) / BYTES_PER_SECOND
        if self._playing:
            self.mic_filter.skip(chunk)  # the hub's voice: nothing of it leaves this machine
            return
        pieces = self.mic_filter.feed(chunk, woke_s)
        if not self.hub_connected:
            return
        if self._told_to_stop:  # until the detectors have passed nothing for END_AFTER_S
            self._quiet_s = 0.0 if pieces else self._quiet_s + chunk_s
            self._told_to_stop = self._quiet_s < END_AFTER_S
            return
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

    def _listen_for_stop(self, chunk: bytes) -> list[tuple[bytes, float | None]]:
        """While the hub's voice plays: "computer, stop" (or the wake phrase of a barge-in) stops
        it here at once and tells the hub; a barge-in's command is held until it is one and the
        speaker is quiet (`BargeInEar`, as at the hub's own microphone). Returns what goes to the
        detectors now, each chunk with the barge-in's wake it carries (`Held.woke_s`)."""
        assert self._ear is not None
        offset, self._mic_offset = self._mic_offset, self._mic_offset + len(chunk)
        passed, heard = self.echo.hear(chunk) if self.echo is not None else (True, chunk)
        gated = chunk if passed else bytes(len(chunk))  # the hub's voice alone (its tail too) reaches no detector
        cut, released = self._ear.hear(offset, chunk, gated, heard, self._playing, self._playing, self.hub_connected)
        if cut is not None:
            self._stopped_here(cut)
        if len(released) > 1:
            self.counts.barge_ins += 1
            log.info("barge-in: %.1f s said over the hub's voice goes to the detectors as a command",
                     sum(len(held.chunk) for held in released) / BYTES_PER_SECOND)  # fmt: skip
        return [(held.chunk, held.woke_s) for held in released]

    def _stopped_here(self, hit: StopHit) -> None:
        self.counts.stops += 1
        log.info("stop: %r heard; telling the hub", hit.phrase)
        self.speaker.flush()
        self._plays_until = time.monotonic()
        self._send(stop_event(hit.phrase))
        if self._streaming:  # the answer played: its command is over, and what is said now is another
            self._streaming = False
            self._send(AudioStop().event())


def describe(counts: SatelliteCounts) -> dict[str, Any]:
    return {"commands": counts.commands, "streams": len(counts.streams), "overlaps": counts.overlaps}
