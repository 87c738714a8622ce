"""What a command costs the listener as a session goes on: handoff against a naive baseline.

Both hear the same utterances (chatter and commands, in rounds) through the simulator, which
bills input tokens the way the service does (1 token per 100 ms of user audio, about 4 characters
per text token, the whole conversation re-read by every response).

- handoff: audio items deleted as soon as their transcript is in, commands routed as text, the
  listener restarted after each answer.
- baseline: one long session that keeps every audio item and routes each command with
  response.create in the same conversation.

Run: .venv/bin/python -m benchmarks.listener_cost [--rounds N]
Prints the input tokens of each command's routing response and the ratio baseline / handoff.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import tempfile
from pathlib import Path

from openai import AsyncOpenAI

from audio_io.format import BYTES_PER_SECOND
from config.settings import ConversationSettings
from realtime_api.sessions import listener_session
from realtime_sim import SimServer
from tests.support.pipeline_harness import UTTERANCE, running_pipeline

AUDIO_IN_PER_M = 32.0  # $ per 1M audio input tokens (gpt-realtime class)
TEXT_IN_PER_M = 4.0
CHATTER_PER_ROUND = 3


def input_tokens(done_events: list[dict]) -> list[tuple[int, int]]:
    out = []
    for event in done_events:
        details = event["response"]["usage"]["input_token_details"]
        out.append((details["text_tokens"], details["audio_tokens"]))
    return out


def dollars(tokens: tuple[int, int]) -> float:
    text, audio = tokens
    return (text * TEXT_IN_PER_M + audio * AUDIO_IN_PER_M) / 1e6


async def handoff_run(rounds: int) -> list[tuple[int, int]]:
    async with SimServer() as sim:
        with tempfile.TemporaryDirectory() as tmp:
            # Chatter right after an answer must stay overheard: no follow-up window here.
            async with running_pipeline(Path(tmp), sim, conversation=ConversationSettings(follow_up_s=0)) as p:
                for n in range(rounds):
                    for i in range(CHATTER_PER_ROUND):
                        p.say(f"chatter {n}.{i} about nothing in particular")
                    await p.wait(lambda t, n=n: t.count("ignored") >= CHATTER_PER_ROUND * (n + 1), 60)
                    before = p.counts()
                    p.say("Computer, what time is it")
                    await p.answered(before, 60)
            dones = [e for c in sim.connections if c.role == "listener" for e in c.sent_of("response.done")]
    return input_tokens(dones)


async def baseline_run(rounds: int) -> list[tuple[int, int]]:
    """The naive listener: one session, nothing deleted, commands answered in the conversation."""
    from config.settings import Settings

    async with SimServer() as sim:
        client = AsyncOpenAI(api_key="sk-bench", base_url=sim.base_url, max_retries=0)
        tools = [{"type": "function", "name": "get_time", "description": "time", "parameters": {"type": "object", "properties": {}}}]
        async with client.realtime.connect(model="gpt-realtime") as conn:
            await conn.send({"type": "session.update", "session": {"type": "realtime", **listener_session(Settings(), tools)}})
            audio = base64.b64encode(UTTERANCE + bytes(BYTES_PER_SECOND * 600 // 1000)).decode()  # VAD needs its silence
            for n in range(rounds):
                for i in range(CHATTER_PER_ROUND + 1):
                    command = i == CHATTER_PER_ROUND
                    sim.script.push_transcript("Computer, what time is it" if command else f"chatter {n}.{i}")
                    await conn.send({"type": "input_audio_buffer.append", "audio": audio})
                    done_transcripts = 4 * n + i + 1
                    await sim.wait_for(
                        lambda s, k=done_transcripts: len(
                            s.connections[0].sent_of("conversation.item.input_audio_transcription.completed")
                        ) >= k,
                        30,
                    )
                await conn.send({"type": "response.create", "response": {"tool_choice": "required"}})
                await sim.wait_for(lambda s, k=n + 1: len(s.connections[0].sent_of("response.done")) >= k, 30)
        await client.close()
        return input_tokens(sim.connections[0].sent_of("response.done"))


async def main(rounds: int) -> None:
    ours = await handoff_run(rounds)
    naive = await baseline_run(rounds)
    print(f"input tokens of each command's routing response ({CHATTER_PER_ROUND} chatter utterances per round)")
    print(f"{'command':>8} {'handoff text/audio':>20} {'baseline text/audio':>20} {'ratio':>7}")
    for k, (a, b) in enumerate(zip(ours, naive, strict=True), 1):
        ratio = sum(b) / max(1, sum(a))
        print(f"{k:>8} {a[0]:>11}/{a[1]:<8} {b[0]:>11}/{b[1]:<8} {ratio:>6.1f}x")
    first, last = ours[0], ours[-1]
    print(f"\nhandoff: command 1 costs ${dollars(first):.6f}, command {rounds} costs ${dollars(last):.6f} of input")
    print(f"baseline: command 1 costs ${dollars(naive[0]):.6f}, command {rounds} costs ${dollars(naive[-1]):.6f}")
    print(f"baseline / handoff at command {rounds}: {dollars(naive[-1]) / max(1e-12, dollars(last)):.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    asyncio.run(main(parser.parse_args().rounds))
