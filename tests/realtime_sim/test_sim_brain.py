"""The Responses-API endpoint the brain talks to, through the official SDK."""

from __future__ import annotations

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI
from openai.types.responses import Response

from tests.support.sim import running_sim, sdk


async def test_scripted_answer_parses_with_the_sdk() -> None:
    async with running_sim() as sim:
        sim.script.push_brain_answer("The sky is blue because air scatters blue light the most.")
        response = await sdk(sim).responses.create(model="gpt-5.2", input="Why is the sky blue?")
        assert response.output_text == "The sky is blue because air scatters blue light the most."
        assert response.status == "completed" and response.model == "gpt-5.2"
        assert response.usage is not None and response.usage.total_tokens > 0
        assert sim.brain_requests == [{"model": "gpt-5.2", "input": "Why is the sky blue?"}]


async def test_replies_are_complete_responses_objects() -> None:
    async with running_sim() as sim:
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer sk-test"}) as http:
            async with http.post(f"{sim.base_url}/responses", json={"model": "m", "input": "hi"}) as reply:
                body = await reply.json()
        Response.model_validate(body)  # every field the SDK requires is present and well-typed


async def test_default_answer_is_a_sentence_about_the_last_user_input() -> None:
    async with running_sim() as sim:
        response = await sdk(sim).responses.create(
            model="gpt-5.2",
            instructions="Answer briefly.",
            input=[
                {"role": "user", "content": "What is a monad?"},
                {"role": "assistant", "content": "A design pattern."},
                {"role": "user", "content": [{"type": "input_text", "text": "How tall is Mount Everest?"}]},
            ],
        )
        assert response.output_text == "Here is a short answer about How tall is Mount Everest."


async def test_429_then_success_without_sdk_retries() -> None:
    async with running_sim() as sim:
        sim.script.push_brain_error(429)
        sim.script.push_brain_answer("second time lucky")
        client = sdk(sim)  # max_retries=0: each attempt is ours to count
        with pytest.raises(openai.RateLimitError) as limited:
            await client.responses.create(model="gpt-5.2", input="q")
        assert limited.value.code == "rate_limit_exceeded"
        response = await client.responses.create(model="gpt-5.2", input="q")
        assert response.output_text == "second time lucky"
        assert len(sim.brain_requests) == 2


async def test_500_is_a_server_error() -> None:
    async with running_sim() as sim:
        sim.script.push_brain_error(500)
        with pytest.raises(openai.InternalServerError):
            await sdk(sim).responses.create(model="gpt-5.2", input="q")


async def test_slow_reply_times_out_a_short_client_and_answers_a_patient_one() -> None:
    async with running_sim() as sim:
        sim.script.push_brain_delay(0.6)
        sim.script.push_brain_delay(0.1, "worth the wait")
        impatient = AsyncOpenAI(api_key="sk-test", base_url=sim.base_url, max_retries=0, timeout=0.2)
        with pytest.raises(openai.APITimeoutError):
            await impatient.responses.create(model="gpt-5.2", input="q")
        response = await sdk(sim).responses.create(model="gpt-5.2", input="q")
        assert response.output_text == "worth the wait"
        assert len(sim.brain_requests) == 2


async def test_a_missing_api_key_is_401() -> None:
    async with running_sim() as sim:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{sim.base_url}/responses", json={"model": "m", "input": "hi"}) as reply:
                assert reply.status == 401
                assert "API key" in (await reply.json())["error"]["message"]
        assert sim.brain_requests == []
