"""A thin async shell around one Realtime WebSocket, opened with the official SDK.

It only does I/O: open (classifying handshake failures), send, receive parsed events (ending with
exactly one `Closed`), close. What to do with the events is decided by the sync cores in
`main_agent.py` and `reader_agent.py`. The SDK's own reconnect is left off on purpose: it would
start a blank server session and replay stale frames; the listener owns reconnects instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from openai import AsyncOpenAI, OpenAIError
from tenacity import AsyncRetrying, retry_if_exception, wait_exponential_jitter
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, WebSocketException

from config.settings import RealtimeSettings, Settings
from realtime_api import wire
from realtime_api.fatal import ErrorKind, Verdict, classify, fatal_message
from realtime_api.wire import ClientEvents, Closed, ServerEvent, parse_server_frame

log = logging.getLogger("handoff.link")

MAX_FRAME_BYTES = 16 * 1024 * 1024  # the longest real frame (a long answer's response.done) is far smaller
CLOSE_NO_FRAME = 1006  # what a client sees when the network drops without a close frame
# What a broken connection raises (network errors and timeouts are OSErrors; protocol errors are
# WebSocketExceptions). Anything else is a bug: it propagates, it is not reported as a 1006 close.
LINK_ERRORS: tuple[type[BaseException], ...] = (OSError, WebSocketException)
_HANDSHAKE_ERRORS: tuple[type[BaseException], ...] = (*LINK_ERRORS, OpenAIError)  # ... or the SDK refusing


class HandshakeFailed(Exception):
    """The WebSocket could not be opened. `fatal` means retrying cannot help (bad key, no quota)."""

    def __init__(
        self, message: str, *, status: int | None = None, fatal: bool = False, verdict: Verdict | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.fatal = fatal
        self.verdict = verdict  # what the server's refusal means, when it said

    @property
    def rate_limited(self) -> bool:
        return self.verdict is not None and self.verdict.kind is ErrorKind.RATE_LIMITED


@dataclass
class Refusal:
    """The account's first fatal refusal (no credit, a bad key, no access to the model), shared
    by every connection the program opens: once one connection is refused, no other attempt is
    made (warm-ups included) and each asks here instead of the server."""

    message: str | None = None

    def refuse(self, message: str) -> None:
        if self.message is None:
            self.message = message

    def check(self) -> None:
        if self.message is not None:
            raise HandshakeFailed(self.message, fatal=True)


def make_client(settings: RealtimeSettings) -> AsyncOpenAI:
    # max_retries=0: retry policy is ours (tenacity / the listener loop), never stacked on the SDK's.
    return AsyncOpenAI(api_key=settings.api_key or "sk-none", base_url=settings.base_url, max_retries=0)


def _error_fields(body: bytes | bytearray | None) -> dict[str, str]:
    """The text fields of a refusal's `{"error": {...}}` body; a bare `{"error": "..."}` (as proxies
    send) is its message; any other body says nothing."""
    try:
        parsed = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        return {}
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, str):
        return {"message": error}
    if not isinstance(error, dict):
        return {}
    return {key: value for key, value in error.items() if isinstance(value, str)}


def _describe_handshake_failure(exc: BaseException) -> HandshakeFailed:
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        error = _error_fields(exc.response.body)
        verdict = classify(error.get("type"), error.get("code"), error.get("message"), status)
        if verdict.fatal:
            return HandshakeFailed(fatal_message(verdict), status=status, fatal=True, verdict=verdict)
        if verdict.kind is ErrorKind.RATE_LIMITED:
            return HandshakeFailed(f"rate limited at connect: {verdict.detail}", status=status, verdict=verdict)
        return HandshakeFailed(f"the server answered HTTP {status} to the connection", status=status, verdict=verdict)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return HandshakeFailed("the connection attempt timed out")
    if isinstance(exc, (OSError, InvalidHandshake)):
        return HandshakeFailed(f"could not connect ({exc.__class__.__name__}: {exc})")
    return HandshakeFailed(f"could not connect ({exc.__class__.__name__})")


@dataclass
class RealtimeLink:
    """One open Realtime connection. Create with `RealtimeLink.open(...)`."""

    _connection: Any
    _manager: Any
    label: str
    closed: Closed | None = None
    closed_by_us: bool = False  # close() was called before the server or network ended it
    malformed: int = 0  # frames that did not fit the protocol (logged, passed on as `Malformed`)

    @classmethod
    async def open(cls, client: AsyncOpenAI, settings: RealtimeSettings, label: str) -> "RealtimeLink":
        # A frame past MAX_FRAME_BYTES closes the link (1009) instead of filling the memory.
        manager = client.realtime.connect(
            model=settings.realtime_model, websocket_connection_options={"max_size": MAX_FRAME_BYTES}
        )
        try:
            async with asyncio.timeout(settings.connect_timeout_s):
                connection = await manager.enter()
        except _HANDSHAKE_ERRORS as exc:  # a bug in here propagates as itself
            raise _describe_handshake_failure(exc) from None
        return cls(_connection=connection, _manager=manager, label=label)

    async def send(self, event: dict[str, Any]) -> bool:
        """Send one client event. Returns False (never raises) when the connection is gone."""
        if self.closed is not None:
            return False
        try:
            await self._connection.send_raw(json.dumps(event))
            return True
        except ConnectionClosed as exc:  # events() still reads what arrived before the close
            self._note_closed(exc)
            return False
        except LINK_ERRORS as exc:  # a send failure is a closed link, reported through events()
            log.warning("%s: send failed (%s)", self.label, exc.__class__.__name__)
            self.closed = self.closed or Closed(CLOSE_NO_FRAME, str(exc))
            return False

    async def events(self) -> AsyncIterator[ServerEvent]:
        """Parsed server events; the last one is always `Closed`. Every frame that arrived before
        the close is read, even after a send found the connection closed: an account's refusal
        comes as an `error` and a close in the same instant, and the error says why."""
        while not self.closed_by_us:
            try:
                frame = await self._connection.recv_bytes()
            except ConnectionClosed as exc:
                self._note_closed(exc)
                break
            except LINK_ERRORS as exc:
                self.closed = self.closed or Closed(CLOSE_NO_FRAME, f"{exc.__class__.__name__}: {exc}")
                break
            event = parse_server_frame(frame)
            if isinstance(event, wire.Malformed):
                self.malformed += 1
                log.warning("%s: ignored a frame that does not fit the protocol (%d so far): %s",
                            self.label, self.malformed, event.reason)
            yield event
        assert self.closed is not None
        yield self.closed

    async def close(self) -> None:
        if self.closed is None:
            self.closed = Closed(1000, "closed by handoff")
            self.closed_by_us = True
        try:
            async with asyncio.timeout(2.0):
                await self._connection.close()
        except LINK_ERRORS:  # already gone: nothing to clean up
            pass

    def _note_closed(self, exc: ConnectionClosed) -> None:
        frame = exc.rcvd
        if self.closed is None or (frame is not None and self.closed.code == CLOSE_NO_FRAME):
            # A send that failed first knew no close frame; the one received says why.
            self.closed = Closed(frame.code, frame.reason) if frame is not None else Closed(CLOSE_NO_FRAME, "")


async def open_configured(
    client: AsyncOpenAI, settings: Settings, label: str, session: dict[str, Any], refusal: Refusal | None = None
) -> RealtimeLink:
    """Open a link and wait until the server confirmed our session config, all within
    `connect_timeout_s`. A link that closes, errors or stalls before that counts as a failed
    connection attempt (fatal only for errors retrying cannot fix), and is closed. Once `refusal`
    holds a fatal refusal, no connection is attempted; a fatal failure here is noted in it."""
    if refusal is not None:
        refusal.check()
    try:
        return await _open_configured(client, settings, label, session)
    except HandshakeFailed as failure:
        if failure.fatal and refusal is not None:
            refusal.refuse(str(failure))
        raise


async def _open_configured(client: AsyncOpenAI, settings: Settings, label: str, session: dict[str, Any]) -> RealtimeLink:
    link: RealtimeLink | None = None
    try:
        async with asyncio.timeout(settings.realtime.connect_timeout_s):
            link = await RealtimeLink.open(client, settings.realtime, label)
            return await _configure(link, label, session)
    except BaseException as exc:  # cancellation included: never leave a half-open session behind
        if link is not None:
            await link.close()
        if isinstance(exc, TimeoutError):
            raise HandshakeFailed(
                f"the {label} session was not ready within {settings.realtime.connect_timeout_s:g} s"
            ) from None
        raise


async def _configure(link: RealtimeLink, label: str, session: dict[str, Any]) -> RealtimeLink:
    await link.send(ClientEvents.session_update(session))
    async for event in link.events():
        if isinstance(event, wire.SessionUpdated):
            return link
        if isinstance(event, wire.ServerError):
            # Our request was refused (bad key, quota, a setting the server rejects): retrying the
            # same setup cannot help. A server_error can pass: that one is retried.
            verdict = event.verdict
            if verdict.fatal:
                raise HandshakeFailed(fatal_message(verdict), fatal=True, verdict=verdict)
            if event.error_type == "invalid_request_error":
                raise HandshakeFailed(f"the server refused the {label} session: {verdict.detail}", fatal=True, verdict=verdict)
            raise HandshakeFailed(f"the {label} session failed during setup: {verdict.detail}", verdict=verdict)
        if isinstance(event, wire.Closed):
            verdict = event.verdict  # a refused account may close without an error event, naming it
            if verdict.fatal:
                raise HandshakeFailed(fatal_message(verdict), fatal=True, verdict=verdict)
            raise HandshakeFailed(f"the {label} connection closed during setup (code {event.code})")
    raise HandshakeFailed(f"the {label} connection ended during setup")


def reconnect_policy(settings: Settings, on_retry: Callable[[HandshakeFailed, int], None]) -> AsyncRetrying:
    """Failed attempts (handshakes, sessions that die young) back off exponentially with jitter,
    capped, forever; fatal ones stop. Each policy object counts its own attempts, so making a new
    one after a healthy session resets the backoff."""

    def before_sleep(state: Any) -> None:
        on_retry(state.outcome.exception(), state.attempt_number)

    return AsyncRetrying(
        retry=retry_if_exception(lambda e: isinstance(e, HandshakeFailed) and not e.fatal),
        wait=wait_exponential_jitter(
            multiplier=settings.reconnect.initial_s, max=settings.reconnect.max_s, jitter=settings.reconnect.jitter_s
        ),
        before_sleep=before_sleep,
        reraise=True,
    )
