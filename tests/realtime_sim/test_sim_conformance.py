"""Acceptance: the simulator speaks the GA Realtime protocol like the recorded real service.

- server events validate against the SDK's RealtimeServerEvent (every test, via running_sim);
- client events are checked against the SDK's RealtimeClientEvent, with real-server errors;
- replaying recorded client events yields the recorded sequence of server event types;
- the official SDK completes a function-call round through both ways of pointing it here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from openai import AsyncOpenAI
from websockets.exceptions import InvalidStatus

from realtime_sim import Fault, SimServer
from tests.support.recordings import RECORDINGS_DIR, load_recording
from tests.support.sim import FAST, check_server_event, recv_until, running_sim, sdk, text_session, tool, user_text

RECORDINGS = RECORDINGS_DIR
REPLAYED = [
    "test_openai_ws_test_tool_call_round.yaml",
    "test_parity_ws_test_text_tool_round_parityopenai-previous.yaml",
    "test_openai_ws_test_text_in_audio_out_turn.yaml",
    "test_openai_ws_test_message_history_seeding.yaml",
]


# -- the checker itself must be able to fail -------------------------------------------------


def test_checker_accepts_a_well_formed_event_and_rejects_bad_ones() -> None:
    good = {"type": "input_audio_buffer.cleared", "event_id": "event_X"}
    check_server_event(good)
    with pytest.raises(AssertionError, match="not a valid"):
        check_server_event({"type": "response.done", "event_id": "event_X", "response": {"status": "weird"}})
    with pytest.raises(AssertionError, match="not a valid"):
        check_server_event({"type": "response.sim_unannounced", "event_id": "event_X"})
    with pytest.raises(AssertionError, match="does not declare"):
        check_server_event({**good, "obfuscation": "abc"})


# -- client events: validated like the real server ------------------------------------------


async def test_unknown_session_field_rejects_the_whole_update_and_keeps_the_session_open() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            created = await recv_until(conn, "session.created")
            default_instructions = created[-1].session.instructions
            await conn.send(
                {
                    "type": "session.update",
                    "event_id": "evt_bad_1",
                    "session": {"type": "realtime", "instructions": "changed", "foo": 1},
                }
            )
            error = (await recv_until(conn, "error"))[-1]
            assert (error.error.type, error.error.code) == ("invalid_request_error", "unknown_parameter")
            assert error.error.param == "session.foo"
            assert error.error.event_id == "evt_bad_1"
            # Nested, too; and the session is still open and unchanged by the rejected updates.
            await conn.send(
                {
                    "type": "session.update",
                    "session": {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "bar": 2}}}},
                }
            )
            nested = (await recv_until(conn, "error"))[-1]
            assert nested.error.param == "session.audio.input.turn_detection.bar"
            await conn.session.update(session={"type": "realtime", "tool_choice": "none"})
            updated = (await recv_until(conn, "session.updated"))[-1]
            assert updated.session.instructions == default_instructions
            assert updated.session.tool_choice == "none"
        assert sim.connections[0].sent_types().count("session.updated") == 1


@pytest.mark.parametrize(
    ("event", "code", "param"),
    [
        ({"type": "session.update", "session": {"type": "realtime", "output_modalities": ["txt"]}}, "invalid_value", "session.output_modalities[0]"),
        ({"type": "session.update", "session": {"type": "realtime", "instructions": 5}}, "invalid_type", "session.instructions"),
        ({"type": "session.update", "session": {"instructions": "x"}}, "missing_required_parameter", "session.type"),
        ({"type": "conversation.item.create", "item": {**user_text("hi"), "colour": "red"}}, "unknown_parameter", "item.colour"),
        (
            {"type": "conversation.item.create", "item": {"type": "message", "role": "usr", "content": [{"type": "input_text", "text": "hi"}]}},
            "invalid_value",
            "item.role",
        ),
        ({"type": "response.create", "response": {"modalities": ["text"]}}, "unknown_parameter", "response.modalities"),
        ({"type": "input_audio_buffer.append"}, "missing_required_parameter", "audio"),
        ({"type": "response.make"}, "invalid_value", "type"),
    ],
)
async def test_invalid_client_events_get_the_real_servers_error(event: dict[str, Any], code: str, param: str) -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            await conn.send_raw(json.dumps({**event, "event_id": "evt_7"}))
            error = (await recv_until(conn, "error"))[-1]
            assert (error.error.code, error.error.param, error.error.event_id) == (code, param, "evt_7")
            assert error.error.message  # a sentence, not empty
        assert sim.connections[0].received[-1]["event_id"] == "evt_7"


async def test_a_frame_that_is_not_json_gets_an_error_and_the_session_stays() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await recv_until(conn, "session.created")
            await conn.send_raw("{not json")
            error = (await recv_until(conn, "error"))[-1]
            assert error.error.code == "invalid_json"
            await conn.input_audio_buffer.clear()
            await recv_until(conn, "input_audio_buffer.cleared")


# -- replaying the recordings ---------------------------------------------------------------


def normalise(types: list[str]) -> list[Any]:
    """Runs of consecutive *.delta events become one entry (their set of types); the "usually"
    sent rate_limits.updated is ignored."""
    out: list[Any] = []
    for event_type in types:
        if event_type == "rate_limits.updated":
            continue
        if event_type.endswith(".delta"):
            if out and isinstance(out[-1], frozenset):
                out[-1] = out[-1] | {event_type}
            else:
                out.append(frozenset({event_type}))
            continue
        out.append(event_type)
    return out


def _anchor(received: list[str]) -> tuple[str, int]:
    """The last non-delta server event seen so far, and how many of its type came by then."""
    meaningful = [t for t in received if not t.endswith(".delta") and t != "rate_limits.updated"]
    return meaningful[-1], meaningful.count(meaningful[-1])


def _load(name: str) -> list[dict[str, Any]]:
    return load_recording(name)


def test_normalise_collapses_delta_runs_and_drops_rate_limits() -> None:
    types = ["a", "x.delta", "y.delta", "x.delta", "b", "rate_limits.updated", "x.delta", "c"]
    assert normalise(types) == ["a", frozenset({"x.delta", "y.delta"}), "b", frozenset({"x.delta"}), "c"]


@pytest.mark.parametrize("name", REPLAYED)
async def test_replaying_recorded_client_events_gives_the_recorded_server_events(name: str) -> None:
    interactions = [i for i in _load(name) if i["kind"] == "message"]
    recorded = [i["data"] for i in interactions if i["direction"] == "received"]
    async with running_sim() as sim:
        # Answer alike: the recorded calls and answers, in order.
        for event in recorded:
            if event["type"] == "response.function_call_arguments.done":
                sim.script.push_tool_call(event["name"], event["arguments"])
            elif event["type"] == "response.output_text.done":
                sim.script.push_reply(event["text"])
            elif event["type"] == "response.output_audio_transcript.done":
                sim.script.push_reply(event["transcript"])
        client = AsyncOpenAI(api_key="sk-test", websocket_base_url=sim.ws_base_url)
        async with client.realtime.connect(model="gpt-realtime") as conn:
            seen: list[str] = []  # recorded server events so far
            got: list[str] = []  # what our client has received so far
            for interaction in interactions:
                if interaction["direction"] == "received":
                    seen.append(interaction["data"]["type"])
                    continue
                # Send when the real client did: after the same server event arrived. (A client
                # event sent mid-response was processed by the real server after the response.)
                anchor, count = _anchor(seen)
                while got.count(anchor) < count:
                    got.append((await conn.recv()).type)
                await conn.send(interaction["data"])
            anchor, count = _anchor(seen)
            while got.count(anchor) < count:
                got.append((await conn.recv()).type)
        ours = sim.connections[0].sent
    assert normalise([e["type"] for e in ours]) == normalise([e["type"] for e in recorded])
    # What was scripted came out verbatim, as in the recording.
    for kind, key in (("response.function_call_arguments.done", "arguments"), ("response.output_text.done", "text")):
        assert [e[key] for e in ours if e["type"] == kind] == [e[key] for e in recorded if e["type"] == kind]


# -- the official SDK, both ways of pointing it at the simulator ----------------------------


def _client(sim: SimServer, via: str) -> AsyncOpenAI:
    if via == "websocket_base_url":
        return AsyncOpenAI(api_key="sk-test", websocket_base_url=sim.ws_base_url)
    return AsyncOpenAI(api_key="sk-test", base_url=sim.base_url)


@pytest.mark.parametrize("via", ["websocket_base_url", "base_url"])
async def test_sdk_completes_a_function_call_round(via: str) -> None:
    async with running_sim() as sim:
        async with _client(sim, via).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session(tools=[tool("get_weather", city="string")]))
            await recv_until(conn, "session.updated")
            sim.script.push_tool_call("get_weather", {"city": "London"})
            await conn.conversation.item.create(item=user_text("What is the weather in London?"))
            await conn.response.create()
            call = (await recv_until(conn, "response.function_call_arguments.done"))[-1]
            assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "London"})
            await recv_until(conn, "response.done")
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": call.call_id, "output": "Foggy, 12 degrees."}
            )
            await conn.response.create()
            events = await recv_until(conn, "response.done")
            text = next(e for e in events if e.type == "response.output_text.done").text
            assert text == "Foggy, 12 degrees."  # unscripted: the model restates the tool result
            assert events[-1].response.status == "completed"
        assert sim.connections[0].model == "gpt-realtime"
        assert sim.connections[0].role == "listener"


async def test_records_keep_events_in_order_with_their_times() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())
            await recv_until(conn, "session.updated")
            await conn.input_audio_buffer.clear()
            await recv_until(conn, "input_audio_buffer.cleared")
        await sim.wait_for(lambda s: s.connections[0].close_code is not None, 5)
        record = sim.connections[0]
        assert [e["type"] for e in record.received] == ["session.update", "input_audio_buffer.clear"]
        assert record.sent_types() == ["session.created", "session.updated", "input_audio_buffer.cleared"]
        assert len(record.received_at) == 2 and len(record.sent_at) == 3
        assert record.sent_at == sorted(record.sent_at) and record.received_at == sorted(record.received_at)
        assert record.sent_at[0] <= record.received_at[0] <= record.sent_at[1]  # update answered after it came
        assert record.session["output_modalities"] == ["text"] and record.close_code == 1000


async def test_records_can_be_turned_off_for_long_runs() -> None:
    config = dataclasses.replace(FAST, record_events=False, fault_rate=0.0)
    async with running_sim(config) as sim:
        sim.script.push_fault(Fault("handshake_500"))
        with pytest.raises(InvalidStatus):
            async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
                await conn.session.update(session=text_session())
                await recv_until(conn, "session.updated")
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=text_session())
            await recv_until(conn, "session.updated")
            record = sim.connections[-1]
            assert (record.sent, record.received, record.sent_at, record.received_at) == ([], [], [], [])
            assert record.role == "listener" and record.is_open  # the rest is kept while it is open
        # Once closed, a connection's record (and its session) is gone; the totals remain.
        await sim.wait_for(lambda s: not s.connections, 5)
        assert sim.connections_opened == 2 and sim.faults_struck == {"handshake_500": 1}
