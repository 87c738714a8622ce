"""The aiohttp shell: one port serving the Realtime WebSocket and the Responses endpoint.

Each WebSocket gets a `SessionCore` (the protocol, synchronous) and five owned tasks: a reader
taking client frames off the socket, an inbox feeding them to the core, a writer sending its
outputs in order, a pump streaming responses at the configured pace, and a clock for session
expiry and timed faults. `SimConfig.network_delay_s` holds each frame back (both directions, in
order, per connection) and `upgrade_delay_s` the handshake, so latency can be measured. Everything recorded goes
into `ConnectionRecord`s, and every change wakes `SimServer.wait_for`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import WSMsgType, web

from concurrency.changes import Changes
from realtime_sim.brain_endpoint import MISSING_KEY_MESSAGE, BrainEndpoint, bearer_token, error_response
from realtime_sim.config import SimConfig
from realtime_sim.ids import IdFactory
from realtime_sim.script import HANDSHAKE_FAULTS, Fault, SimScript
from realtime_sim.session_config import Role
from realtime_sim.faults import QUOTA_MESSAGE
from realtime_sim.outputs import Close, Drop, Output, Send, SendRaw, Stall, Synthesize, Transcribe
from realtime_sim.session_core import SessionCore
from realtime_sim.transcriber import RecordingPosition, Transcriber
from speech.synth import SpeechSynthesizer
from realtime_sim.validation import ClientEventValidator

log = logging.getLogger(__name__)

INVALID_KEY_MESSAGE = (
    "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
)
# Where a random mid-session fault strikes: events every kind of session sends.
_RANDOM_TRIGGERS = ("session.updated", "response.created", "response.done", "input_audio_buffer.committed")
_MAX_FRAME_BYTES = 16 * 1024 * 1024


@dataclass
class ConnectionRecord:
    """What one WebSocket connection did, in order, for tests to inspect."""

    id: str
    model: str | None = None  # the `model` query parameter
    role: Role = "unknown"  # "listener" (text-only), "narrator" (audio out), "unknown" (not configured yet)
    handshake_status: int | None = None  # 101 upgraded; 401/500 refused at the handshake
    opened_at: float = field(default_factory=time.monotonic)  # when the client's request arrived
    received: list[dict[str, Any]] = field(default_factory=list)  # client events
    # time.monotonic() of each received event, when the server handled it (after the network delay)
    received_at: list[float] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)  # server events, once actually sent
    # time.monotonic() of each sent event, when it went onto the socket (after the network delay,
    # so: when it reached the client)
    sent_at: list[float] = field(default_factory=list)
    injected: list[str] = field(default_factory=list)  # fault frames that are no protocol event
    faults: list[Fault] = field(default_factory=list)  # faults that struck this connection
    session: dict[str, Any] = field(default_factory=dict)  # the effective session config
    close_code: int | None = None  # 1006 when the connection was dropped without a close frame

    @property
    def is_open(self) -> bool:
        return self.handshake_status == 101 and self.close_code is None

    def sent_types(self) -> list[str]:
        return [event["type"] for event in self.sent]

    def sent_of(self, event_type: str) -> list[dict[str, Any]]:
        return [event for event in self.sent if event["type"] == event_type]


class _ConnectionFinished(Exception):
    """Ends a connection's task group (the socket closed, either side)."""


class SimServer:
    """The simulator. `await start()` returns the base URL to give the SDK."""

    def __init__(
        self, config: SimConfig = SimConfig(), script: SimScript | None = None, transcriber: Transcriber | None = None
    ) -> None:
        """`transcriber`: what unscripted speech says (`handoff sim --transcripts`, or the offline
        recogniser); None = the fallback transcript, as the tests want."""
        self.config = config
        self.script = script if script is not None else SimScript()
        self.transcriber = transcriber
        self.recording = RecordingPosition()  # the audio every listener session received, in order
        # One at a time, in the order segments ended (the recogniser is one decoder).
        self._transcribing = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim-transcribe")
        # Every connection's record while `config.record_events`; without it only the open ones
        # (a closed connection's record and session are dropped, so a server left running for
        # days keeps flat memory) and the totals below.
        self.connections: list[ConnectionRecord] = []
        self.connections_opened = 0
        self.faults_struck: Counter[str] = Counter()  # every fault that struck a connection, by kind
        self.brain_requests: list[dict[str, Any]] = []  # bodies of POST /v1/responses, in order
        self._rng = random.Random(config.seed)
        self._validator = ClientEventValidator()
        self._speech = SpeechSynthesizer(
            use_espeak=config.use_espeak,
            voice=config.espeak_voice,
            words_per_minute=config.espeak_words_per_minute,
            ms_per_char=config.synthetic_ms_per_char,
        )
        self._brain = BrainEndpoint(
            self.script, IdFactory(random.Random(self._rng.random())), self._record_brain_request,
            read_timeout_s=config.request_read_timeout_s, network_delay_s=config.network_delay_s,
        )  # fmt: skip
        self._changed = Changes()
        self._live: set[_Connection] = set()
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.base_events.Server | None = None
        self._header_deadlines: dict[Any, asyncio.TimerHandle] = {}  # connections still owing their request headers
        self._host = "127.0.0.1"
        self._port: int | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        if self._runner is not None:
            raise RuntimeError("the simulator is already running; stop() it before starting again")
        app = web.Application(middlewares=[self._headers_arrived])
        app.router.add_get("/v1/realtime", self._realtime)
        app.router.add_post("/v1/responses", self._brain.handle)
        # Idle keep-alive connections are closed after the read timeout too.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=self.config.shutdown_timeout_s,
                               keepalive_timeout=self.config.request_read_timeout_s)  # fmt: skip
        await runner.setup()
        loop = asyncio.get_running_loop()
        try:
            # Our own listener rather than TCPSite: each connection must get a deadline for its
            # request headers (aiohttp has none, so a half-sent request was held forever).
            server = runner.server
            assert server is not None  # set by setup()
            listener = await loop.create_server(lambda: self._with_header_deadline(server()), host, port)
        except OSError as exc:
            await runner.cleanup()
            raise OSError(f"the simulator cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self._runner = runner
        self._listener = listener
        self._host = host
        self._port = listener.sockets[0].getsockname()[1]
        return self.base_url

    def _with_header_deadline(self, protocol: Any) -> asyncio.Protocol:
        """The connection's protocol, behind a shim that arms the header deadline when the
        connection is made; `_headers_arrived` disarms it."""
        return _HeaderDeadline(protocol, self)

    def _arm_header_deadline(self, protocol: Any, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        self._header_deadlines[protocol] = loop.call_later(
            self.config.request_read_timeout_s, self._header_timeout, protocol, transport
        )

    def _header_timeout(self, protocol: Any, transport: asyncio.BaseTransport) -> None:
        if self._header_deadlines.pop(protocol, None) is not None:
            log.info("closing a connection whose request headers did not arrive within %ss", self.config.request_read_timeout_s)
            transport.close()

    @web.middleware
    async def _headers_arrived(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        deadline = self._header_deadlines.pop(request.protocol, None)
        if deadline is not None:
            deadline.cancel()
        response: web.StreamResponse = await handler(request)
        return response

    async def stop(self) -> None:
        """Close every connection (1001, like a server going away), then stop listening."""
        for connection in list(self._live):
            connection.shutdown()
        try:
            await self.wait_for(lambda sim: not sim._live, self.config.shutdown_timeout_s)
        except TimeoutError:
            # A stalled writer or a client that never answers the close: cut the TCP connection.
            log.warning("%d simulator connection(s) did not close in time; cutting them", len(self._live))
            for connection in list(self._live):
                connection.abort()
            try:
                await self.wait_for(lambda sim: not sim._live, self.config.shutdown_timeout_s)
            except TimeoutError:
                pass  # the runner's cleanup cancels what is left
        for deadline in self._header_deadlines.values():
            deadline.cancel()
        self._header_deadlines.clear()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._speech.close()
        self._transcribing.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the simulator is not running; await start() first")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    @property
    def ws_base_url(self) -> str:
        return f"ws://{self._host}:{self.port}/v1"

    # -- observing -------------------------------------------------------------------------

    async def wait_for(self, predicate: Callable[[SimServer], bool], timeout: float) -> None:
        """Return once `predicate(sim)` holds, re-checking whenever anything is recorded.

        A predicate that raises LookupError (e.g. `sim.connections[0]` before anyone connected)
        counts as not yet true. Raises TimeoutError saying what the simulator last saw."""

        def holds() -> bool:
            try:
                return bool(predicate(self))
            except LookupError:
                return False

        try:
            await self._changed.wait_until(holds, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"the simulator did not reach the awaited state within {timeout} s; {self.describe()}"
            ) from None

    def describe(self) -> str:
        """A one-line summary of what happened so far (for failure messages)."""
        parts = []
        for record in self.connections:
            state = "open" if record.is_open else f"closed {record.close_code}"
            if record.handshake_status not in (None, 101):
                state = f"refused {record.handshake_status}"
            parts.append(f"{record.id} ({record.role}, {state}, last sent: {record.sent_types()[-5:]})")
        connections = "; ".join(parts) or "no connections"
        return f"{connections}; {len(self.brain_requests)} brain request(s)"

    async def notify(self) -> None:
        self._changed.notify()

    async def _record_brain_request(self, body: dict[str, Any]) -> None:
        if self.config.record_events:
            self.brain_requests.append(body)
        await self.notify()

    # -- the WebSocket -----------------------------------------------------------------------

    async def _realtime(self, request: web.Request) -> web.StreamResponse:
        self.connections_opened += 1
        record = ConnectionRecord(id=f"conn_{self.connections_opened}", model=request.query.get("model"))
        self.connections.append(record)
        try:
            return await self._serve(request, record)
        finally:
            self.faults_struck.update(fault.kind for fault in record.faults)
            if not self.config.record_events:
                self.connections.remove(record)

    async def _serve(self, request: web.Request, record: ConnectionRecord) -> web.StreamResponse:
        if self.config.upgrade_delay_s > 0:
            await asyncio.sleep(self.config.upgrade_delay_s)  # the handshake's round trips; other connections go on
        random_fault = self._random_fault()
        refusal = self._refusal(request, record, random_fault)
        if refusal is not None:
            record.handshake_status = refusal.status
            await self.notify()
            return refusal
        ws = web.WebSocketResponse(max_msg_size=_MAX_FRAME_BYTES, compress=False)
        await ws.prepare(request)
        record.handshake_status = 101
        core = SessionCore(
            config=self.config,
            script=self.script,
            validator=self._validator,
            ids=IdFactory(random.Random(self._rng.random())),
            model=record.model,
            random_faults=[random_fault] if random_fault is not None else [],
            transcriber=self.transcriber,
            recording=self.recording,
        )
        record.received = core.received
        record.faults = core.faults_applied
        connection = _Connection(self, ws, request, record, core, self._speech)
        self._live.add(connection)
        log.debug("%s opened (model %s)", record.id, record.model)
        try:
            await connection.run()
        finally:
            self._live.discard(connection)
            log.debug("%s closed with %s", record.id, record.close_code)
            await self.notify()
        return ws

    def _random_fault(self) -> Fault | None:
        if self.config.fault_rate <= 0 or self._rng.random() >= self.config.fault_rate:
            return None
        kind = self._rng.choice(self.config.random_fault_kinds)
        if kind in HANDSHAKE_FAULTS:
            return Fault(kind)
        return Fault(kind, after_sent=self._rng.choice(_RANDOM_TRIGGERS), delay_s=self.config.random_fault_delay_s)

    def _refusal(self, request: web.Request, record: ConnectionRecord, random_fault: Fault | None) -> web.Response | None:
        if bearer_token(request) is None:
            return error_response(401, MISSING_KEY_MESSAGE)
        fault = self.script.take_handshake_fault()
        if fault is None and random_fault is not None and random_fault.at_handshake:
            fault = random_fault
        if fault is None:
            return None
        record.faults.append(fault)
        if fault.kind == "handshake_401":
            return error_response(401, INVALID_KEY_MESSAGE, code="invalid_api_key")
        if fault.kind == "handshake_429":
            return error_response(429)
        if fault.kind == "handshake_429_quota":
            return error_response(429, QUOTA_MESSAGE, code="insufficient_quota", error_type="insufficient_quota")
        return error_response(500)


class _HeaderDeadline(asyncio.Protocol):
    """Passes every transport callback to aiohttp's protocol (which has __slots__, so it cannot
    be patched), arming the request-header deadline first."""

    def __init__(self, inner: Any, server: SimServer) -> None:
        self._inner = inner
        self._server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)
        self._server._arm_header_deadline(self._inner, transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        received: bool | None = self._inner.eof_received()
        return received

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


@dataclass(frozen=True)
class _Encoded(Send):
    """A Send with its JSON already made (its size counts against the outbox cap)."""

    text: str = ""


class _Connection:
    """Runs one upgraded WebSocket around its SessionCore until either side closes it."""

    def __init__(
        self,
        server: SimServer,
        ws: web.WebSocketResponse,
        request: web.Request,
        record: ConnectionRecord,
        core: SessionCore,
        speech: SpeechSynthesizer,
    ) -> None:
        self._server = server
        self._ws = ws
        self._request = request
        self._record = record
        self._core = core
        self._speech = speech
        # (due time, output): the network delay holds each until due; FIFO with one delay, so in order
        self._outbox: asyncio.Queue[tuple[float, Output]] = asyncio.Queue()
        # client frames as they came off the socket, with the time the core may see them (None = ended)
        self._inbox: asyncio.Queue[tuple[float, Any]] = asyncio.Queue()
        self._outbox_bytes = 0  # JSON bytes queued for the client (bounded by max_outbox_bytes)
        self._work = asyncio.Event()  # the core has response steps to pump
        self._timers_changed = asyncio.Event()  # a fault was pushed: re-plan the clock
        self._tasks: asyncio.TaskGroup | None = None
        self._closing = False  # the writer is closing: it, not the reader, ends the connection

    async def run(self) -> None:
        unsubscribe = self._server.script.subscribe_faults(self._timers_changed.set)
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                self._dispatch(self._core.start())
                tasks.create_task(self._write_loop())
                tasks.create_task(self._read_loop())
                tasks.create_task(self._inbox_loop())
                tasks.create_task(self._pump_loop())
                tasks.create_task(self._clock_loop())
        except* _ConnectionFinished:
            pass
        except* Exception as failure:
            # A simulator bug: say so loudly, and close the way a failing real server does.
            log.error("simulator connection %s failed", self._record.id, exc_info=failure)
            self._record.close_code = 1011
            await self._ws.close(code=1011, message=b"simulator error")
        finally:
            unsubscribe()
            if self._record.close_code is None:
                self._record.close_code = self._ws.close_code or 1006

    def shutdown(self) -> None:
        """Close politely (1001), after whatever is already queued."""
        self._dispatch(self._core.shutdown())

    def abort(self) -> None:
        """Cut the TCP connection now; the reader then ends the connection's tasks."""
        if self._request.transport is not None:
            self._request.transport.abort()

    def _dispatch(self, outputs: list[Output]) -> None:
        """Queue the core's outputs in order; speech requests run as owned tasks. A client that
        stops reading is disconnected (1008) once its queue passes max_outbox_bytes."""
        for output in outputs:
            if isinstance(output, Synthesize):
                assert self._tasks is not None
                self._tasks.create_task(self._synthesize(output))
                continue
            if isinstance(output, Transcribe):
                assert self._tasks is not None
                self._tasks.create_task(self._transcribe(output))
                continue
            if isinstance(output, Send):
                text = json.dumps(output.event)
                output = _Encoded(output.event, text)
                self._outbox_bytes += len(text)
                if self._outbox_bytes > self._server.config.max_outbox_bytes:
                    self._overflowed()
                    return
            self._outbox.put_nowait((time.monotonic() + self._server.config.network_delay_s, output))
        self._record.role = self._core.role
        self._record.session = self._core.session
        if self._core.has_runnable_work:
            self._work.set()
        self._timers_changed.set()  # the core may have a new deadline (a late transcript)

    async def _read_loop(self) -> None:
        """Takes frames off the socket as they come (stamped, so a delay never piles up)."""
        delay = self._server.config.network_delay_s
        async for message in self._ws:
            if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                self._inbox.put_nowait((time.monotonic() + delay, message))
        self._inbox.put_nowait((time.monotonic() + delay, None))

    async def _inbox_loop(self) -> None:
        """Hands each client frame to the core once the network delay has passed."""
        while True:
            due, message = await self._inbox.get()
            await _sleep_until(due)
            if message is None:
                break
            if message.type == WSMsgType.TEXT:
                outputs = self._core.handle_client_text(message.data)
            else:
                outputs = self._core.handle_client_binary()
            arrived = time.monotonic()
            while len(self._record.received_at) < len(self._record.received):
                self._record.received_at.append(arrived)
            self._dispatch(outputs)
            await self._server.notify()
        if self._closing:
            return  # our own close interrupted the read; the writer completes the handshake
        if self._record.close_code is None:
            self._record.close_code = self._ws.close_code or 1006
        raise _ConnectionFinished()

    def _overflowed(self) -> None:
        """The client is not reading: drop what is queued and cut the connection, recording 1008
        (a close frame could not get through a full socket buffer either)."""
        log.warning("%s: client stopped reading; over %d bytes queued; closing", self._record.id, self._server.config.max_outbox_bytes)
        while not self._outbox.empty():
            self._outbox.get_nowait()
        self._outbox_bytes = 0
        self._core.shutdown()  # no more output from the session (its close frame is dropped too)
        self._record.close_code = 1008  # the reader, seeing the cut, ends the connection's tasks
        self.abort()

    async def _write_loop(self) -> None:
        while True:
            due, output = await self._outbox.get()
            await _sleep_until(due)
            try:
                if isinstance(output, _Encoded):
                    self._outbox_bytes -= len(output.text)
                    await self._ws.send_str(output.text)
                    if self._server.config.record_events:
                        self._record.sent.append(output.event)
                        self._record.sent_at.append(time.monotonic())
                elif isinstance(output, SendRaw):
                    await self._ws.send_str(output.text)
                    if self._server.config.record_events:
                        self._record.injected.append(output.text)
                elif isinstance(output, Stall):
                    await asyncio.sleep(output.seconds)
                elif isinstance(output, Close):
                    self._closing = True
                    self._record.close_code = output.code
                    await self._ws.close(code=output.code, message=output.reason.encode())
                    raise _ConnectionFinished()
                elif isinstance(output, Drop):
                    self._record.close_code = 1006
                    if self._request.transport is not None:
                        self._request.transport.abort()
                    raise _ConnectionFinished()
            except ConnectionError:
                raise _ConnectionFinished() from None
            finally:
                await self._server.notify()

    async def _pump_loop(self) -> None:
        while True:
            await self._work.wait()
            self._work.clear()
            while self._core.has_runnable_work:
                result = self._core.pump()
                self._dispatch(result.outputs)
                await self._server.notify()
                await asyncio.sleep(result.pause_s)  # sleep(0) still lets client frames in

    async def _clock_loop(self) -> None:
        while True:
            deadline = self._core.next_deadline()
            self._timers_changed.clear()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                async with asyncio.timeout(timeout):
                    await self._timers_changed.wait()
            except TimeoutError:
                pass
            self._dispatch(self._core.tick())
            await self._server.notify()

    async def _transcribe(self, request: Transcribe) -> None:
        transcriber = self._server.transcriber
        assert transcriber is not None
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(self._server._transcribing, transcriber.transcribe, request.segment)
        log.debug("%s: heard %r (%.1f-%.1f s into the recording)", self._record.id, text,
                 request.segment.start_ms / 1000, request.segment.end_ms / 1000)  # fmt: skip
        self._dispatch(self._core.transcript_ready(request.item_id, text))
        await self._server.notify()

    async def _synthesize(self, request: Synthesize) -> None:
        pcm = await self._speech.synthesize(request.text)
        self._dispatch(self._core.speech_ready(request.response_id, pcm))
        await self._server.notify()


async def _sleep_until(due: float) -> None:
    wait = due - time.monotonic()
    if wait > 0:
        await asyncio.sleep(wait)
