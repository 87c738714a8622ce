"""The simulator's network delay: every frame, both directions, arrives `network_delay_s` later
and in order; the handshake takes `upgrade_delay_s` more; connections do not wait for each other.

Bounds come from the simulator's own timestamps (and lower bounds only on the client's side)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from realtime_sim import SimConfig
from realtime_sim.command import add_arguments, run as run_command
from tests.support.sim import FAST, recv_until, running_sim, sdk, text_session, user_text

DELAY = 0.04
UPGRADE = 0.08
DELAYED = dataclasses.replace(FAST, network_delay_s=DELAY, upgrade_delay_s=UPGRADE)


async def test_a_round_trip_through_the_sdk_grows_by_the_delay_each_way():
    async with running_sim(DELAYED) as sim:
        started = time.monotonic()
        async with sdk(sim).realtime.connect(model="gpt-realtime") as connection:
            connected = time.monotonic()
            assert connected - started >= UPGRADE
            await recv_until(connection, "session.created")
            sent = time.monotonic()
            await connection.session.update(session=text_session())
            await recv_until(connection, "session.updated")
            answered = time.monotonic()
        record = sim.connections[0]
        update_at = record.received_at[[e["type"] for e in record.received].index("session.update")]
        updated_at = record.sent_at[record.sent_types().index("session.updated")]
        assert update_at - sent >= DELAY  # client -> server
        assert updated_at - update_at >= DELAY  # server -> client
        assert answered >= updated_at and answered - sent >= 2 * DELAY
        # session.created left when the upgrade was done, and took the one-way delay too.
        assert record.sent_at[0] - started >= UPGRADE + DELAY


async def test_frames_keep_their_order_under_delay():
    async with running_sim(DELAYED) as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as connection:
            await connection.session.update(session=text_session())
            await recv_until(connection, "session.updated")
            for index in range(30):
                await connection.conversation.item.create(item=user_text(f"message {index}"))
            for _ in range(30):  # read them all: a connection closed with frames unread lingers
                await recv_until(connection, "conversation.item.added")
        record = sim.connections[0]
        texts = [e["item"]["content"][0]["text"] for e in record.received if e["type"] == "conversation.item.create"]
        assert texts == [f"message {index}" for index in range(30)]
        assert record.received_at == sorted(record.received_at)
        assert record.sent_at == sorted(record.sent_at)
        added = [e["item"]["content"][0]["text"] for e in record.sent_of("conversation.item.added")]
        assert added == texts


async def test_connections_do_not_wait_for_each_other():
    config = dataclasses.replace(FAST, network_delay_s=DELAY, upgrade_delay_s=1.0)
    async with running_sim(config) as sim:
        client = sdk(sim)

        async def connect_once() -> None:
            async with client.realtime.connect(model="gpt-realtime") as connection:
                await recv_until(connection, "session.created")

        await asyncio.gather(*(connect_once() for _ in range(3)))
        created = [record.sent_at[0] for record in sim.connections]
        # One after another, the third would have come two upgrade delays after the first.
        assert max(created) - min(created) < 2 * config.upgrade_delay_s


def test_negative_delays_are_refused():
    with pytest.raises(ValueError, match="cannot be negative"):
        SimConfig(network_delay_s=-0.01)


def test_the_sim_command_takes_the_delays_in_milliseconds(monkeypatch):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--delay-ms", "25", "--upgrade-delay-ms", "50"])
    seen: list[SimConfig] = []

    async def serve(config: SimConfig, host: str, port: int, *rest: object) -> None:
        seen.append(config)

    monkeypatch.setattr("realtime_sim.command.serve", serve)
    assert run_command(args) == 0
    assert (seen[0].network_delay_s, seen[0].upgrade_delay_s) == (0.025, 0.05)
    assert (parser.parse_args([]).delay_ms, parser.parse_args([]).upgrade_delay_ms) == (0.0, 0.0)
