"""The brain: a text model (Responses API) answering questions the listener cannot, for the ear.

Retries are ours, not the SDK's: transient failures (429, 5xx, timeouts, connection errors)
are retried with exponential backoff and jitter inside a total time budget; configuration
failures (bad key, no access, unknown model, used-up quota) are not. `ask` never raises: a
final failure comes back as `ok=False` with a spoken apology and the reason for the logs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from typing import Callable

import openai
from openai.types.responses import ToolParam, WebSearchToolParam
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from config.logging_setup import redact
from config.settings import BrainSettings, Settings, require_api_key
from realtime_api.fatal import ErrorKind, Verdict, classify
from speech.speakable import speakable_text

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "You answer questions for a voice assistant; your answer is read aloud to the user. "
    "Answer in two to four short, plain spoken sentences. "
    "No lists, no headings, no markdown, no code, no tables, no URLs, no emoji. "
    "Spell out symbols and abbreviations the way a person would say them. "
    "If you are not sure, say so briefly instead of guessing."
)
APOLOGY_TRY_AGAIN = "Sorry, I couldn't reach the brain just now. Please try again in a minute."
APOLOGY_SETUP = "Sorry, I can't ask the brain because it isn't set up correctly. The log says what to fix."
APOLOGY_EMPTY = "Sorry, the brain gave me an empty answer."
DEFAULT_MAX_ANSWER_CHARS = 800
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class BrainAnswer:
    """The outcome of one `ask`: `text` is always speakable (the answer or an apology)."""

    text: str
    ok: bool
    attempts: int
    error: str | None = None  # why it failed, for logs; None when ok
    citations: tuple[dict[str, str], ...] = ()  # {"url", "title"} of the pages a web search used: kept, never said


class Brain:
    """Asks the text model one question at a time, with bounded retries.

    The client must not retry on its own (the SDK's default is 2 retries per call, which would
    multiply our attempts and overrun the time budget): build it with `max_retries=0`. A client
    with SDK retries left on is copied with `max_retries=0`, so the budget holds either way.
    """

    def __init__(
        self,
        settings: BrainSettings,
        client: openai.AsyncOpenAI,
        *,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
        owns_client: bool = False,
        on_usage: Callable[[int, int], object] = lambda input_tokens, output_tokens: None,
    ) -> None:
        # on_usage(input_tokens, output_tokens) hears what each answered request used: the cost meter.
        self._settings = settings
        self._on_usage = on_usage
        self._client = client if client.max_retries == 0 else client.with_options(max_retries=0)
        self._max_answer_chars = max_answer_chars
        self._owns_client = owns_client
        self._backoff = wait_exponential_jitter(
            multiplier=settings.backoff_initial_s, max=settings.backoff_max_s, jitter=settings.backoff_initial_s
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> "Brain":
        """A Brain with its own client (key and base URL from `settings.realtime`, SDK retries off)."""
        require_api_key(settings)
        client = openai.AsyncOpenAI(
            api_key=settings.realtime.api_key,
            base_url=settings.realtime.base_url,
            max_retries=0,
        )
        return cls(settings.brain, client, owns_client=True)

    async def aclose(self) -> None:
        """Close the HTTP client if this Brain created it."""
        if self._owns_client:
            await self._client.close()

    async def ask(self, query: str) -> BrainAnswer:
        settings = self._settings
        started = time.monotonic()
        attempts = 0
        retrying = AsyncRetrying(
            # stop_before_delay: no retry is started if its backoff would end past the budget.
            stop=stop_after_attempt(settings.max_attempts) | stop_before_delay(settings.retry_budget_s),
            wait=self._wait,
            retry=retry_if_exception(is_transient),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    remaining = settings.retry_budget_s - (time.monotonic() - started)
                    raw, citations = await self._request(query, timeout=max(0.001, min(settings.timeout_s, remaining)))
        except Exception as exc:  # every failure becomes an answer; only cancellation propagates
            return self._failure(exc, attempts)
        text = speakable_text(raw, self._max_answer_chars)
        if not text:
            log.warning("brain returned no speakable text (attempt %d)", attempts)
            return BrainAnswer(APOLOGY_EMPTY, ok=False, attempts=attempts, error="the answer had no speakable text")
        log.info("brain answered after %d attempt(s), %d characters, %d source(s)", attempts, len(text), len(citations))
        return BrainAnswer(text, ok=True, attempts=attempts, error=None, citations=citations)

    async def _request(self, query: str, timeout: float) -> tuple[str, tuple[dict[str, str], ...]]:
        log.debug("asking brain (model=%s, %d characters, timeout %.3fs)", self._settings.model, len(query), timeout)
        # The web search tool (BRAIN_WEB_SEARCH): the model searches when the question needs it
        # (news, scores, weather); its sources come back as url_citation annotations.
        tools: list[ToolParam] | openai.Omit = openai.omit
        if self._settings.web_search:
            tools = [WebSearchToolParam(type="web_search")]
        # The SDK's timeout applies per network phase; this one bounds the whole call.
        async with asyncio.timeout(timeout):
            response = await self._client.responses.create(
                model=self._settings.model,
                instructions=INSTRUCTIONS,
                input=query,
                timeout=timeout,
                tools=tools,
            )
        if response.usage is not None:
            self._on_usage(response.usage.input_tokens, response.usage.output_tokens)
        return without_citations(response)

    def _wait(self, state: RetryCallState) -> float:
        """Exponential backoff with jitter, stretched to a server's Retry-After, capped at backoff_max_s."""
        exc = state.outcome.exception() if state.outcome else None
        return min(max(self._backoff(state), retry_after_s(exc)), self._settings.backoff_max_s)

    @staticmethod
    def _log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        log.warning("brain attempt %d failed (%s); retrying in %.2fs", state.attempt_number, describe(exc), delay)

    def _failure(self, exc: BaseException, attempts: int) -> BrainAnswer:
        reason = f"{describe(exc)} (after {attempts} attempt{'s' if attempts != 1 else ''})"
        verdict = verdict_of(exc)
        if verdict is not None and verdict.kind is ErrorKind.NO_CREDIT:  # the same line the assistant says when it stops
            log.error("brain unavailable: %s", reason)
            return BrainAnswer(verdict.spoken or APOLOGY_SETUP, ok=False, attempts=attempts, error=reason)
        if is_setup_problem(exc):
            log.error("brain unavailable: %s", reason)
            return BrainAnswer(APOLOGY_SETUP, ok=False, attempts=attempts, error=reason)
        if isinstance(exc, openai.OpenAIError) or isinstance(exc, TimeoutError):
            log.warning("brain gave up: %s", reason)
        else:
            log.error("brain failed unexpectedly: %s", reason, exc_info=exc)
        return BrainAnswer(APOLOGY_TRY_AGAIN, ok=False, attempts=attempts, error=reason)


def verdict_of(exc: BaseException | None) -> Verdict | None:
    """What an API error means (realtime_api.fatal decides, whichever shape it came in)."""
    if isinstance(exc, openai.APIStatusError):
        return classify(exc.type, exc.code, exc.message, exc.status_code)
    return None


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, connection failures."""
    if isinstance(exc, (openai.APIConnectionError, TimeoutError)):  # APITimeoutError is a connection error
        return True
    verdict = verdict_of(exc)
    if verdict is not None and verdict.fatal:
        return False  # a used-up quota or a bad key does not come back in a minute
    if isinstance(exc, openai.RateLimitError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500 or exc.status_code == 408
    return False


def is_setup_problem(exc: BaseException) -> bool:
    """Failures only the user can fix (key, access, model name, quota); retrying cannot help."""
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)):
        return True
    verdict = verdict_of(exc)
    return verdict is not None and verdict.fatal


def describe(exc: BaseException | None) -> str:
    """A short, secret-free reason for logs and BrainAnswer.error."""
    if exc is None:
        return "unknown failure"
    if isinstance(exc, openai.APITimeoutError) or isinstance(exc, TimeoutError):
        return "the request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "could not connect to the API"
    if isinstance(exc, openai.AuthenticationError):
        return "the API key was refused (HTTP 401); check OPENAI_API_KEY"
    if isinstance(exc, openai.PermissionDeniedError):
        return "access was denied (HTTP 403); check the key's project and permissions"
    if isinstance(exc, openai.NotFoundError):
        return "the model was not found (HTTP 404); check BRAIN_MODEL"
    if isinstance(exc, openai.APIStatusError):
        detail = f": {exc.code}" if exc.code else ""
        return f"HTTP {exc.status_code}{detail}"
    return redact(f"{type(exc).__name__}: {exc}")[:MAX_ERROR_CHARS]


def retry_after_s(exc: BaseException | None) -> float:
    """The server's requested wait (Retry-After / retry-after-ms headers), 0 when absent."""
    if not isinstance(exc, openai.APIStatusError):
        return 0.0
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, ""))
        except ValueError:
            continue
        if value >= 0:
            return value * scale
    return 0.0


def without_citations(response: object) -> tuple[str, tuple[dict[str, str], ...]]:
    """The answer's text with each cited span cut out (the inline "([site](url))" a search answer
    carries: never read aloud), and the cited pages, each once, in order."""
    texts: list[str] = []
    citations: dict[str, dict[str, str]] = {}
    for item in getattr(response, "output", None) or []:
        if getattr(item, "type", None) != "message":
            continue  # a web_search_call, reasoning: nothing to say
        for part in getattr(item, "content", None) or []:
            if getattr(part, "type", None) != "output_text":
                continue
            text = part.text
            spans = []
            for note in getattr(part, "annotations", None) or []:
                if getattr(note, "type", None) != "url_citation":
                    continue
                citations.setdefault(note.url, {"url": note.url, "title": note.title})
                if 0 <= note.start_index < note.end_index <= len(text):
                    spans.append((note.start_index, note.end_index))
            for start, end in sorted(set(spans), reverse=True):
                text = text[:start] + text[end:]
            texts.append(_CITATION_GAP.sub(r"\1", text))
    return "".join(texts), tuple(citations.values())


_CITATION_GAP = re.compile(r"\s+([.,;:!?])")  # "won 2-1 ." after its citation was cut: "won 2-1."


_CANNED = {  # every field a real answer carries: each type the SDK builds on first sight
    "id": "resp_warm", "object": "response", "created_at": 0, "completed_at": 0, "model": "warm-up", "status": "completed",
    "background": False, "error": None, "incomplete_details": None, "instructions": "-", "max_output_tokens": None,
    "output": [{"id": "fc_warm", "type": "function_call", "status": "completed", "call_id": "call_warm", "name": "warm",
                "arguments": "{}"},
               {"id": "msg_warm", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "-", "annotations": [], "logprobs": []}]}],
    "parallel_tool_calls": False, "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
    "store": False, "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "required",
    "tools": [{"type": "function", "name": "warm", "description": "-", "parameters": {"type": "object", "properties": {}},
               "strict": False}],
    "top_p": 1.0, "truncation": "disabled", "user": None, "metadata": {},
    "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
              "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 0}},
}  # fmt: skip


async def warm_responses_sdk() -> None:
    """The SDK's first Responses call builds its request and response types: measured, the first
    brain answer in a process took 0.5-0.75 s more than the next ones on a busy two-core machine
    (34 ms after this). One call to a canned answer in memory (no network) pays it at start
    instead of the user's first question (or first device command through the brain)."""
    import httpx2

    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=_CANNED))
    async with httpx2.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(api_key="sk-warm-up-only", base_url="http://warm.invalid/v1", http_client=http, max_retries=0)
        await client.responses.create(model="warm-up", input="warm up", tool_choice="required", store=False, tools=[
            {"type": "function", "name": "warm", "description": "-", "parameters": {"type": "object", "properties": {}},
             "strict": False}])
