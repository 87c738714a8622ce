"""Every fault kind, as the official SDK / websockets client observes it."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
import websockets
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from realtime_sim import Fault
from tests.support.sim import FAST, recv_until, running_sim, sdk, text_session, user_text


async def _drain(conn) -> list[str]:
    """Read until the SDK's iterator ends (close 1000/1001) and return the event types."""
    return [event.type async for event in conn]


async def test_drop_closes_without_a_close_frame_so_the_client_sees_1006() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("drop", after_sent="session.updated"))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())
            with pytest.raises(ConnectionClosedError) as closed:
                await _drain(conn)
        assert closed.value.rcvd is None  # no close frame: 1006
        await sim.wait_for(lambda s: s.connections[0].close_code == 1006, 5)
        assert sim.connections[0].sent_types() == ["session.created", "session.updated"]


async def test_close_1011_is_an_error_close_for_the_client() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("close_1011"))  # right after session.created
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            with pytest.raises(ConnectionClosedError) as closed:
                await _drain(conn)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        assert sim.connections[0].close_code == 1011


async def test_session_expires_after_its_length_with_the_real_error_then_1001() -> None:
    config = dataclasses.replace(FAST, session_length_s=1.0)
    async with running_sim(config) as sim:
        before = time.time()
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            created = (await recv_until(conn, "session.created"))[-1]
            after = time.time()
            rest = [event async for event in conn]  # ends silently on 1001
        assert before + 1.0 - 1 <= created.session.expires_at <= after + 1.0  # expires_at agrees
        assert [e.type for e in rest] == ["error"]
        assert (rest[0].error.type, rest[0].error.code) == ("invalid_request_error", "session_expired")
        assert "maximum duration" in rest[0].error.message
        assert sim.connections[0].close_code == 1001


async def test_session_expired_fault_strikes_on_its_trigger() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("session_expired", target="listener", after_sent="session.updated"))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())
            types = await _drain(conn)
        assert types == ["session.created", "session.updated", "error"]
        assert sim.connections[0].close_code == 1001


@pytest.mark.parametrize(("kind", "status", "code"), [("handshake_401", 401, "invalid_api_key"), ("handshake_500", 500, None)])
async def test_handshake_faults_refuse_the_upgrade_with_an_openai_shaped_body(kind: str, status: int, code: str | None) -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault(kind))
        with pytest.raises(InvalidStatus) as refused:
            async with sdk(sim).realtime.connect(model="gpt-realtime"):
                pass
        assert refused.value.response.status_code == status
        body = json.loads(bytes(refused.value.response.body))
        assert body["error"]["code"] == code and body["error"]["message"]
        # The fault was consumed: the next connection gets through.
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
        assert [r.handshake_status for r in sim.connections] == [status, 101]


async def test_a_missing_api_key_is_refused_with_401() -> None:
    async with running_sim() as sim:
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(f"{sim.ws_base_url}/realtime?model=gpt-realtime"):
                pass
        assert refused.value.response.status_code == 401
        async with websockets.connect(
            f"{sim.ws_base_url}/realtime?model=gpt-realtime", additional_headers={"Authorization": "Bearer x"}
        ) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"


async def test_delay_fault_holds_back_the_frames_after_its_trigger() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("delay", delay_s=30.0))  # right after session.created
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            await conn.session.update(session=text_session())
            await sim.wait_for(lambda s: len(s.connections[0].received) == 1, 5)
            # The update was handled, but its answer waits behind the stall.
            assert sim.connections[0].sent_types() == ["session.created"]
            assert sim.connections[0].session["output_modalities"] == ["text"]
        sim.script.push_fault(Fault("delay", delay_s=0.05))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())
            await recv_until(conn, "session.updated")  # held back, not lost
        assert [len(r.faults) for r in sim.connections] == [1, 1]


async def test_server_error_event_leaves_the_session_usable() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("server_error", after_sent="session.updated"))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())
            error = (await recv_until(conn, "error"))[-1]
            assert error.error.type == "server_error"
            await conn.conversation.item.create(item=user_text("still there?"))
            await conn.response.create()
            done = (await recv_until(conn, "response.done"))[-1]
            assert done.response.status == "completed"


async def test_response_failed_fault_fails_one_response_only() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("response_failed", target="listener", after_sent="response.created", nth=1))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())
            await conn.conversation.item.create(item=user_text("hello"))
            await conn.response.create()
            failed = (await recv_until(conn, "response.done"))[-1]
            await conn.response.create()
            retried = (await recv_until(conn, "response.done"))[-1]
        assert failed.response.status == "failed"
        assert failed.response.status_details.error.type == "server_error"
        assert retried.response.status == "completed"


async def test_malformed_frame_is_not_json() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("malformed_frame"))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            with pytest.raises(json.JSONDecodeError):
                await conn.recv()
            await conn.input_audio_buffer.clear()
            await recv_until(conn, "input_audio_buffer.cleared")  # the session goes on
        assert len(sim.connections[0].injected) == 1


async def test_unknown_event_type_reaches_the_client_as_an_unknown_type() -> None:
    async with running_sim() as sim:
        sim.script.push_fault(Fault("unknown_event", target="narrator", after_sent="session.updated"))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())  # a listener: not this one
            await conn.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
            events = [await conn.recv() for _ in range(4)]
        assert [e.type for e in events] == ["session.created", "session.updated", "session.updated", "response.sim_unannounced"]


async def test_timed_fault_strikes_after_the_connection_is_that_old() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            sim.script.push_fault(Fault("close_1011", after_s=0.2))  # pushed mid-session: re-planned
            with pytest.raises(ConnectionClosedError):
                await _drain(conn)
        assert sim.connections[0].close_code == 1011


async def _handshake_outcomes(seed: int) -> list[int | None]:
    config = dataclasses.replace(FAST, seed=seed, fault_rate=0.5, random_fault_kinds=("handshake_500",))
    async with running_sim(config) as sim:
        for _ in range(8):
            try:
                async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
                    await recv_until(conn, "session.created")
            except InvalidStatus:
                pass
    return [record.handshake_status for record in sim.connections]


async def test_random_faults_follow_the_seed() -> None:
    first = await _handshake_outcomes(seed=11)
    assert first == await _handshake_outcomes(seed=11)
    assert set(first) == {101, 500}  # some connections refused, some not, at rate 0.5


async def test_wait_for_times_out_with_a_summary_of_what_happened() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            with pytest.raises(TimeoutError, match=r"within 0.05 s; conn_1 \(unknown, open, last sent: \['session.created'\]\)"):
                await sim.wait_for(lambda s: "response.done" in s.connections[0].sent_types(), 0.05)


async def test_stop_cuts_a_connection_whose_frames_are_stalled() -> None:
    config = dataclasses.replace(FAST, shutdown_timeout_s=0.2)
    async with running_sim(config) as sim:
        sim.script.push_fault(Fault("delay", delay_s=60.0))
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            await sim.stop()  # the 1001 close is stuck behind the stall: stop() must not wait 60 s
            with pytest.raises(ConnectionClosedError):
                await _drain(conn)
        assert sim.connections[0].close_code == 1006  # cut, not closed
