"""The simulator stays up against a hostile client: absurdly nested JSON is an error event, not a
1011; a half-sent request is dropped after a deadline; a conversation and a client's unread
queue are bounded (issue 10, defect 10)."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import aiohttp

from tests.support.sim import FAST, recv_until, running_sim, sdk


async def test_deeply_nested_json_is_an_invalid_json_error_and_the_session_stays() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            await conn.send_raw("[" * 200_000 + "]" * 200_000)
            error = (await recv_until(conn, "error"))[-1]
            assert (error.error.type, error.error.code) == ("invalid_request_error", "invalid_json")
            await conn.input_audio_buffer.clear()
            await recv_until(conn, "input_audio_buffer.cleared")
        assert sim.connections[0].close_code != 1011


async def test_a_half_sent_request_is_closed_after_the_read_timeout() -> None:
    async with running_sim(dataclasses.replace(FAST, request_read_timeout_s=0.3)) as sim:
        reader, writer = await asyncio.open_connection("127.0.0.1", sim.port)
        writer.write(b"GET /v1/realtime?model=gpt-realtime HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        await writer.drain()
        async with asyncio.timeout(10):
            assert await reader.read() == b""  # the server closed it
        writer.close()
        # A normal client is still served.
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")


async def test_a_half_sent_brain_request_body_gets_408() -> None:
    async with running_sim(dataclasses.replace(FAST, request_read_timeout_s=0.3)) as sim:
        reader, writer = await asyncio.open_connection("127.0.0.1", sim.port)
        writer.write(
            b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-test\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\": "
        )
        await writer.drain()
        async with asyncio.timeout(10):
            status = await reader.readline()
        assert status.startswith(b"HTTP/1.1 408")
        writer.close()


def item(text: str) -> str:
    return json.dumps({
        "type": "conversation.item.create",
        "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
    })  # fmt: skip


async def test_a_full_conversation_refuses_more_items_with_an_error() -> None:
    async with running_sim(dataclasses.replace(FAST, max_conversation_items=3)) as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            for n in range(4):
                await conn.send_raw(item(f"message {n}"))
            error = (await recv_until(conn, "error"))[-1]
            assert error.error.code == "conversation_too_large"
            await conn.input_audio_buffer.clear()
            await recv_until(conn, "input_audio_buffer.cleared")
        added = sim.connections[0].sent_of("conversation.item.added")
        assert len(added) == 3


async def test_a_client_that_never_reads_is_disconnected_before_its_queue_grows_unbounded() -> None:
    config = dataclasses.replace(FAST, max_outbox_bytes=512 * 1024, max_conversation_bytes=1 << 30, max_conversation_items=1 << 20)
    async with running_sim(config) as sim:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(
                f"{sim.ws_base_url}/realtime?model=gpt-realtime",
                headers={"Authorization": "Bearer sk-test"},
                max_msg_size=0,
            ) as ws:
                frame = item("x" * 60_000)  # each is echoed twice (added, done)
                for _ in range(400):  # ~48 MB of replies if they were all queued; the client never reads
                    try:
                        await ws.send_str(frame)
                    except ConnectionError:  # the server cut it: what this test waits for
                        break
                await sim.wait_for(lambda s: s.connections[0].close_code is not None, 10)
        assert sim.connections[0].close_code == 1008
