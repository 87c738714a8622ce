"""Running out of credit, rate limits and a code-less session expiry, in each shape the API uses:
the user hears one clear sentence, and the daemon stops (exit 3) or backs off as docs/HANDOFF.md says."""

from __future__ import annotations

import asyncio

import pytest

from decisions.coordinator import CANNOT_CONNECT_MESSAGE, CONNECTION_LOST_MESSAGE, RECONNECTED_MESSAGE
from realtime_api.fatal import SPOKEN, ErrorKind
from realtime_sim import Fault
from tests.support.pipeline_harness import narrated_scripts, running_pipeline

NO_CREDIT = SPOKEN[ErrorKind.NO_CREDIT]



def final_messages(p) -> int:
    return sum(1 for holder, *_ in p.coordinator.core.mute.history if holder == "final message")


async def stopped_for_no_credit(p) -> None:
    assert await asyncio.wait_for(asyncio.shield(p.task), 20) == 3
    assert p.coordinator.fatal_message == NO_CREDIT
    assert "no credit left" in NO_CREDIT and "will stop" in NO_CREDIT
    assert final_messages(p) == 1 and p.speaker.played  # said once, in the local voice


async def test_a_quota_error_by_type_stops_the_daemon_after_saying_so_once(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        listeners = len(p.listener_connections())
        sim.script.push_fault(Fault("quota_error", target="listener", after_s=0.3))  # type insufficient_quota, code credit_balance_exhausted
        await stopped_for_no_credit(p)
        assert len(p.listener_connections()) == listeners  # no reconnect loop


async def test_a_429_quota_handshake_stops_the_daemon(tmp_path, sim):
    sim.script.push_fault(Fault("handshake_429_quota"))
    async with running_pipeline(tmp_path, sim) as p:
        await stopped_for_no_credit(p)
        assert len(sim.connections) == 1  # not retried


async def test_a_routing_response_failed_for_quota_stops_the_daemon(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_fault(Fault("response_failed_quota", target="listener", after_sent="response.created"))
        p.say("Computer, what time is it")
        await stopped_for_no_credit(p)
        assert p.counts()["tool"] == 0
        assert not any("couldn't work out" in s for s in narrated_scripts(p))


async def test_a_narration_refused_for_quota_stops_the_daemon(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_fault(Fault("response_failed_quota", target="narrator", after_sent="response.created"))
        p.say("Computer, what time is it")
        await stopped_for_no_credit(p)
        assert len(p.narrator_connections()) == 1  # not retried, not read by the local voice instead


async def test_a_rate_limited_handshake_backs_off_and_is_told_once(tmp_path, sim):
    for _ in range(3):
        sim.script.push_fault(Fault("handshake_429"))
    async with running_pipeline(tmp_path, sim) as p:
        await p.wait(lambda t: RECONNECTED_MESSAGE in narrated_scripts(p) and t.count("narrated") >= 2)
        # Told once, after the third refusal in a row, why the wait: not the generic "can't reach" line.
        assert narrated_scripts(p).count(SPOKEN[ErrorKind.RATE_LIMITED]) == 1
        assert CANNOT_CONNECT_MESSAGE not in narrated_scripts(p)
        assert p.coordinator.fatal_message is None and not p.task.done()
        assert [c.handshake_status for c in sim.connections[:3]] == [429] * 3
        before = await p.ask("Computer, what time is it")
        assert p.counts()["tool"] == before["tool"] + 1


async def test_session_expired_without_its_code_reconnects_silently(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_fault(Fault("session_expired_no_code", target="listener", after_s=0.8))
        await p.wait(lambda t: t.count("listening") >= 2)
        assert p.listener_connections()[0].close_code == 1001
        assert any("expired" in e.text for e in p.timeline.entries)
        assert CONNECTION_LOST_MESSAGE not in narrated_scripts(p)
        await p.ask("Computer, what time is it")


async def test_the_brain_out_of_credit_says_so_without_retrying(tmp_path, sim):
    async with running_pipeline(tmp_path, sim) as p:
        sim.script.push_brain_error(429, "You exceeded your current quota.", code="insufficient_quota", error_type="insufficient_quota")
        sim.script.push_brain_answer("must not be reached")
        sim.script.push_tool_call("ask_brain", {"query": "why is the sky blue"})
        await p.ask("Computer, ask the brain why the sky is blue")
        assert narrated_scripts(p)[-1] == NO_CREDIT
        assert len(sim.brain_requests) == 1


REFUSALS = {
    "refuse_quota": ErrorKind.NO_CREDIT,
    "refuse_quota_close_only": ErrorKind.NO_CREDIT,  # no error event: the close's 1008 reason says it
    "refuse_key": ErrorKind.INVALID_KEY,
    "refuse_model": ErrorKind.MODEL_NOT_FOUND,
}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
# Before the client's session.update is answered (its send may meet the close), or after it.
@pytest.mark.parametrize("after", ["session.created", "session.updated"])
async def test_an_account_refused_after_the_upgrade_stops_after_at_most_three_connections(tmp_path, sim, kind, after):
    """Issue 24: every connection answers the handshake, then an `error` and a close 1008 arrive
    together. The error (or the close's reason) is read and classified, the first refusal stops
    every other attempt (the narrator's and the listener's warm-ups too), it is said once, exit 3."""
    for _ in range(20):  # the account is refused on every connection
        sim.script.push_fault(Fault(kind, after_sent=after))
    async with running_pipeline(tmp_path, sim, narrator_warm=True) as p:
        assert await asyncio.wait_for(asyncio.shield(p.task), 20) == 3
        assert p.coordinator.fatal_message == SPOKEN[REFUSALS[kind]]
        assert final_messages(p) == 1
        assert len(sim.connections) <= 3, [(c.role, c.close_code) for c in sim.connections]
        assert CONNECTION_LOST_MESSAGE not in narrated_scripts(p) and CANNOT_CONNECT_MESSAGE not in narrated_scripts(p)
