"""The brain against the simulator's Responses endpoint: answers, retries, budgets, fatal errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx2
import openai
import pytest

from brain import (
    APOLOGY_EMPTY,
    APOLOGY_SETUP,
    APOLOGY_TRY_AGAIN,
    INSTRUCTIONS,
    Brain,
    BrainAnswer,
    is_setup_problem,
    is_transient,
    retry_after_s,
)
from realtime_sim import SimServer
from config.settings import BrainSettings, RealtimeSettings, Settings, SettingsError

API_KEY = "sk-test-brain-0123456789"

# Millisecond backoffs keep retries fast; the budget is generous so only the timeout case exhausts it.
FAST = BrainSettings(
    model="gpt-test-brain",
    timeout_s=5.0,
    retry_budget_s=10.0,
    max_attempts=4,
    backoff_initial_s=0.001,
    backoff_max_s=0.005,
)


@pytest.fixture
async def sim() -> AsyncIterator[SimServer]:
    server = SimServer()
    await server.start(host="127.0.0.1", port=0)
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client(sim: SimServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(api_key=API_KEY, base_url=sim.base_url, max_retries=0) as client:
        yield client


def brain_requests(sim: SimServer) -> list[dict]:
    return list(sim.brain_requests)


async def test_answer_is_returned_with_markdown_and_urls_stripped(sim: SimServer, client: openai.AsyncOpenAI) -> None:
    sim.script.push_brain_answer("## Why\nThe sky is **blue** because of [scattering](https://example.com/rayleigh).")
    answer = await Brain(FAST, client).ask("why is the sky blue")
    assert answer == BrainAnswer("Why. The sky is blue because of scattering.", ok=True, attempts=1, error=None)
    (request,) = brain_requests(sim)
    assert request["model"] == "gpt-test-brain"
    assert request["input"] == "why is the sky blue"
    assert request["instructions"] == INSTRUCTIONS


async def test_rate_limits_are_retried_until_the_answer_comes(sim: SimServer, client: openai.AsyncOpenAI) -> None:
    sim.script.push_brain_error(status=429)
    sim.script.push_brain_error(status=429)
    sim.script.push_brain_answer("Third time lucky.")
    answer = await Brain(FAST, client).ask("anything")
    assert (answer.ok, answer.text, answer.attempts, answer.error) == (True, "Third time lucky.", 3, None)
    assert len(brain_requests(sim)) == 3


async def test_the_answered_request_reports_its_usage_and_failed_attempts_none(
    sim: SimServer, client: openai.AsyncOpenAI
) -> None:
    sim.script.push_brain_error(status=429)
    sim.script.push_brain_answer("Forty two.")
    usages: list[tuple[int, int]] = []
    answer = await Brain(FAST, client, on_usage=lambda i, o: usages.append((i, o))).ask("what is six times seven")
    assert answer.ok and answer.attempts == 2
    # The simulator counts a token per four characters, plus one: the JSON-quoted question and the
    # tools offered (the web search tool), the answer.
    question, tools = '"what is six times seven"', '[{"type": "web_search"}]'
    assert usages == [((len(question) + len(tools)) // 4 + 1, len("Forty two.") // 4 + 1)]


async def test_server_errors_are_retried(sim: SimServer, client: openai.AsyncOpenAI) -> None:
    sim.script.push_brain_error(status=500)
    sim.script.push_brain_error(status=503)
    sim.script.push_brain_answer("Back again.")
    answer = await Brain(FAST, client).ask("anything")
    assert (answer.ok, answer.text, answer.attempts) == (True, "Back again.", 3)


async def test_attempts_are_bounded_and_end_in_an_apology(sim: SimServer, client: openai.AsyncOpenAI) -> None:
    for _ in range(FAST.max_attempts + 2):
        sim.script.push_brain_error(status=502)
    answer = await Brain(FAST, client).ask("anything")
    assert not answer.ok
    assert answer.text == APOLOGY_TRY_AGAIN
    assert answer.attempts == FAST.max_attempts
    assert answer.error == f"HTTP 502 (after {FAST.max_attempts} attempts)"
    assert len(brain_requests(sim)) == FAST.max_attempts


async def test_timeouts_exhaust_the_budget_and_end_in_an_apology(sim: SimServer, client: openai.AsyncOpenAI) -> None:
    impatient = BrainSettings(
        model="gpt-test-brain", timeout_s=0.05, retry_budget_s=0.4, max_attempts=50,
        backoff_initial_s=0.001, backoff_max_s=0.005,
    )
    for _ in range(60):
        sim.script.push_brain_delay(0.5)
    answer = await Brain(impatient, client).ask("anything")
    assert not answer.ok
    assert answer.text == APOLOGY_TRY_AGAIN
    assert answer.error is not None and answer.error.startswith("the request timed out")
    # The budget, not max_attempts, ended it.
    assert 1 <= answer.attempts < impatient.max_attempts


@pytest.mark.parametrize(
    "status, reason",
    [
        (401, "the API key was refused (HTTP 401); check OPENAI_API_KEY"),
        (403, "access was denied (HTTP 403); check the key's project and permissions"),
        (404, "the model was not found (HTTP 404); check BRAIN_MODEL"),
    ],
)
async def test_setup_errors_are_not_retried(
    sim: SimServer, client: openai.AsyncOpenAI, status: int, reason: str
) -> None:
    sim.script.push_brain_error(status=status)
    sim.script.push_brain_answer("must not be reached")
    answer = await Brain(FAST, client).ask("anything")
    assert answer == BrainAnswer(APOLOGY_SETUP, ok=False, attempts=1, error=f"{reason} (after 1 attempt)")
    assert len(brain_requests(sim)) == 1


async def test_other_client_errors_are_not_retried(sim: SimServer, client: openai.AsyncOpenAI) -> None:
    sim.script.push_brain_error(status=400)
    sim.script.push_brain_answer("must not be reached")
    answer = await Brain(FAST, client).ask("anything")
    assert (answer.ok, answer.text, answer.attempts) == (False, APOLOGY_TRY_AGAIN, 1)
    assert answer.error is not None and answer.error.startswith("HTTP 400")


async def test_a_client_with_sdk_retries_gets_them_turned_off(sim: SimServer) -> None:
    sim.script.push_brain_error(status=500)
    sim.script.push_brain_answer("Fine.")
    async with openai.AsyncOpenAI(api_key=API_KEY, base_url=sim.base_url, max_retries=5) as retrying:
        answer = await Brain(FAST, retrying).ask("anything")
    # Our retry made the second request; the SDK's own retries would have hidden the 500.
    assert (answer.ok, answer.attempts) == (True, 2)
    assert len(brain_requests(sim)) == 2


async def test_from_settings_builds_a_client_for_the_configured_endpoint(sim: SimServer) -> None:
    settings = Settings(realtime=RealtimeSettings(api_key=API_KEY, base_url=sim.base_url), brain=FAST)
    sim.script.push_brain_error(status=429)
    sim.script.push_brain_answer("Configured.")
    brain = Brain.from_settings(settings)
    try:
        answer = await brain.ask("anything")
    finally:
        await brain.aclose()
    assert (answer.ok, answer.text, answer.attempts) == (True, "Configured.", 2)


def test_from_settings_without_a_key_says_where_to_set_it() -> None:
    with pytest.raises(SettingsError, match="OPENAI_API_KEY"):
        Brain.from_settings(Settings(realtime=RealtimeSettings(api_key="")))


async def test_logs_record_attempts_without_the_key(
    sim: SimServer, client: openai.AsyncOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    sim.script.push_brain_error(status=429)
    sim.script.push_brain_answer("Logged.")
    with caplog.at_level(logging.DEBUG, logger="brain"):
        await Brain(FAST, client).ask("anything")
    messages = [r.getMessage() for r in caplog.records if r.name == "brain"]
    assert any("attempt 1 failed (HTTP 429" in m for m in messages)
    assert any("answered after 2 attempt(s)" in m for m in messages)
    assert not any(API_KEY in m for m in caplog.text.splitlines())


@pytest.mark.parametrize("text", ["", "https://example.com/only-a-link"])
async def test_an_answer_with_nothing_speakable_is_a_failure(
    sim: SimServer, client: openai.AsyncOpenAI, text: str
) -> None:
    sim.script.push_brain_answer(text)
    answer = await Brain(FAST, client).ask("anything")
    assert (answer.ok, answer.text, answer.attempts) == (False, APOLOGY_EMPTY, 1)
    assert len(brain_requests(sim)) == 1


async def test_cancelling_ask_cancels_the_request(sim: SimServer, client: openai.AsyncOpenAI) -> None:
    sim.script.push_brain_delay(0.5, "too late")
    task = asyncio.create_task(Brain(FAST, client).ask("anything"))
    await sim.wait_for(lambda s: len(s.brain_requests) == 1, timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(brain_requests(sim)) == 1  # not retried as if it had failed


def status_error(cls: type[openai.APIStatusError], status: int, code: str | None = None,
                 headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/responses")
    response = httpx2.Response(status, headers=headers or {}, request=request)
    return cls(f"HTTP {status}", response=response, body={"code": code, "message": "m"})


def test_used_up_quota_is_a_setup_problem_not_a_rate_limit() -> None:
    quota = status_error(openai.RateLimitError, 429, code="insufficient_quota")
    busy = status_error(openai.RateLimitError, 429, code="rate_limit_exceeded")
    assert (is_transient(quota), is_setup_problem(quota)) == (False, True)
    assert (is_transient(busy), is_setup_problem(busy)) == (True, False)


def test_retry_after_headers_are_read() -> None:
    assert retry_after_s(status_error(openai.RateLimitError, 429, headers={"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(status_error(openai.RateLimitError, 429, headers={"retry-after": "3"})) == 3.0
    assert retry_after_s(status_error(openai.RateLimitError, 429, headers={"retry-after": "soon"})) == 0.0
    assert retry_after_s(TimeoutError()) == 0.0


async def test_the_sdk_warm_up_runs_without_the_network_and_its_canned_answer_parses() -> None:
    """`warm_responses_sdk` (run at every start, so the first question is not 0.5 s slower) must
    keep parsing with the pinned SDK, and touch nothing outside the process."""
    from brain import warm_responses_sdk

    async with asyncio.timeout(30):
        await warm_responses_sdk()  # raises if the SDK refuses the canned answer; it has no network to reach
