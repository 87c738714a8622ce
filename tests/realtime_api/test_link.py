"""The link reads every frame that arrived before a close (issue 24: a refused account's `error`
and its close 1008 arrive together; the send of our session.update may meet the close first)."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.frames import Close

from config.schema import RealtimeSettings
from realtime_api import wire
from realtime_api.fatal import ErrorKind
from realtime_api.link import HandshakeFailed, RealtimeLink, make_client

REFUSED = Close(1008, "insufficient_quota")
ERROR = json.dumps({"type": "error", "error": {"type": "insufficient_quota", "code": "credit_balance_exhausted", "message": "no"}})


class ClosedConnection:
    """A socket whose close frame has arrived, with frames still buffered before it."""

    def __init__(self, frames: list[str]) -> None:
        self.frames = frames

    async def send_raw(self, data: str) -> None:
        raise ConnectionClosedError(REFUSED, None)

    async def recv_bytes(self) -> bytes:
        if self.frames:
            return self.frames.pop(0).encode()
        raise ConnectionClosedError(REFUSED, None)

    async def close(self) -> None:
        pass


async def events_after_a_failed_send(frames: list[str]) -> list[wire.ServerEvent]:
    link = RealtimeLink(_connection=ClosedConnection(frames), _manager=None, label="test")
    assert not await link.send({"type": "session.update"})
    return [event async for event in link.events()]


async def test_a_send_that_meets_the_close_does_not_hide_the_error_before_it():
    first, last = await events_after_a_failed_send([ERROR])
    assert isinstance(first, wire.ServerError) and first.verdict.kind is ErrorKind.NO_CREDIT
    assert last == wire.Closed(1008, "insufficient_quota")


async def test_a_close_naming_the_refusal_is_fatal_without_an_error_event():
    [closed] = await events_after_a_failed_send([])
    assert isinstance(closed, wire.Closed) and closed.verdict.kind is ErrorKind.NO_CREDIT
    assert not wire.Closed(1006, "").verdict.fatal and not wire.Closed(1000, "closed by handoff").verdict.fatal


@pytest.mark.parametrize("body", [b'{"error": "Bad gateway"}', b'{"error": {"code": ["x"], "message": {"a": 1}}}', b"[]"])
async def test_a_refused_handshake_with_an_odd_body_is_a_handshake_failure(body: bytes) -> None:
    # A proxy in front of the API answers with its own body ({"error": "Bad gateway"}): the link
    # still says the connection failed (it raised AttributeError and TypeError before).
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))  # fmt: skip
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = RealtimeSettings(api_key="sk-test", base_url=f"http://127.0.0.1:{port}/v1", connect_timeout_s=5.0)
    client = make_client(settings)
    try:
        with pytest.raises(HandshakeFailed, match="^the server answered HTTP 502 to the connection$") as failed:
            await RealtimeLink.open(client, settings, "test")
        assert failed.value.status == 502 and not failed.value.fatal
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
