"""A minimal `POST /v1/responses` (Responses API) for the brain: scripted answers, errors, delays.

Replies are shaped so the `openai` SDK parses them (`response.output_text` works); errors carry
OpenAI-shaped bodies so the SDK raises its usual exceptions (RateLimitError, InternalServerError).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from types import MappingProxyType
from typing import Any, Awaitable, Callable, Mapping

from aiohttp import web

from realtime_sim.ids import IdFactory
from realtime_sim import tool_choice, web_search
from realtime_sim.script import BrainAnswer, BrainDelay, BrainError, BrainSearch, BrainToolCall, SimScript

MISSING_KEY_MESSAGE = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
_ERROR_BODIES: Mapping[int, Mapping[str, Any]] = MappingProxyType({
    429: {
        "message": "Rate limit reached for requests. Please try again in 1s.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    },
    500: {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    },
    503: {
        "message": "The engine is currently overloaded, please try again later.",
        "type": "server_error",
        "param": None,
        "code": None,
    },
})


def error_response(
    status: int, message: str | None = None, code: str | None = None, error_type: str | None = None
) -> web.Response:
    body = dict(
        _ERROR_BODIES.get(
            status,
            {"message": f"Simulated HTTP {status} error.", "type": "invalid_request_error", "param": None, "code": None},
        )
    )
    if message is not None:
        body["message"] = message
    if code is not None:
        body["code"] = code
    if error_type is not None:
        body["type"] = error_type
    return web.json_response({"error": body}, status=status)


def bearer_token(request: web.Request) -> str | None:
    """The bearer token if the request carries a non-empty one (never logged)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def last_user_text(request_input: Any) -> str:
    """The newest user text in a Responses-API `input` (a string or a list of messages)."""
    if isinstance(request_input, str):
        return request_input
    if not isinstance(request_input, list):
        return ""
    for message in reversed(request_input):
        if not isinstance(message, dict) or message.get("role", "user") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [part.get("text", "") for part in content if isinstance(part, dict)]
            return " ".join(t for t in texts if t)
    return ""


def default_answer(request_input: Any) -> str:
    question = " ".join(last_user_text(request_input).split()).rstrip("?.! ")
    if not question:
        return "I have nothing to answer yet."
    if len(question) > 80:
        question = question[:80].rsplit(" ", 1)[0]
    return f"Here is a short answer about {question}."


class BrainEndpoint:
    """Handles `POST /v1/responses`, taking one scripted step per request."""

    def __init__(
        self, script: SimScript, ids: IdFactory, record: Callable[[dict[str, Any]], Awaitable[None]], read_timeout_s: float,
        network_delay_s: float = 0.0,
    ) -> None:
        self._script = script
        self._ids = ids
        self._record = record
        self._read_timeout_s = read_timeout_s
        # Behind the configured network a request and its reply cross it once each (a kept-alive
        # connection: no handshake): 1 RTT, as the WebSocket's frames are held back.
        self._rtt_s = 2 * network_delay_s

    async def handle(self, request: web.Request) -> web.Response:
        if bearer_token(request) is None:
            return error_response(401, MISSING_KEY_MESSAGE)
        try:
            async with asyncio.timeout(self._read_timeout_s):  # a half-sent body must not hold the handler forever
                body = await request.json()
        except TimeoutError:
            return error_response(408, "The request body did not arrive in time.")
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):  # RecursionError: absurdly deep nesting
            return error_response(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return error_response(400, "The request body must be a JSON object.")
        await self._record(body)
        if self._rtt_s:
            await asyncio.sleep(self._rtt_s)
        if body.get("stream"):
            return error_response(
                400, "The simulator does not stream Responses API replies; call responses.create without stream."
            )
        step = self._script.take_brain_step()
        question = " ".join(last_user_text(body.get("input")).split())
        if web_search.offered(body) and (isinstance(step, BrainSearch) or (step is None and web_search.wants_search(question))):
            found = step if isinstance(step, BrainSearch) else web_search.default_search(question.rstrip("?.! "))
            output = web_search.searched_output(self._ids, body, question, found)
            return web.json_response(self._response_object(body, found.text, output))
        functions = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"]
        if functions and (isinstance(step, BrainToolCall) or step is None):
            call = (step.name, step.arguments) if isinstance(step, BrainToolCall) else self._chosen(question, functions)
            if call is not None:
                return web.json_response(self._response_object(body, "", [self._function_call(*call)]))
        if isinstance(step, BrainSearch):  # scripted, but the request offered no search: a plain answer
            step = BrainAnswer(step.text)
        elif isinstance(step, BrainToolCall):  # scripted, but no function was offered
            step = None
        if isinstance(step, BrainDelay):
            if step.until is None:
                await asyncio.sleep(step.seconds)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(step.until.wait(), step.seconds)
            text = step.text if step.text is not None else default_answer(body.get("input"))
        elif isinstance(step, BrainError):
            return error_response(step.status, step.message, step.code, step.error_type)
        elif isinstance(step, BrainAnswer):
            text = step.text
        else:
            text = default_answer(body.get("input"))
        return web.json_response(self._response_object(body, text))

    @staticmethod
    def _chosen(question: str, functions: list[dict[str, Any]]) -> tuple[str, str] | None:
        chosen = tool_choice.choose(question, functions)
        return None if chosen is None else (chosen[0], json.dumps(chosen[1]))

    def _function_call(self, name: str, arguments: str) -> dict[str, Any]:
        """A `function_call` output item, as the Responses API returns one."""
        return {"id": self._ids.new("fc", 48), "type": "function_call", "status": "completed",
                "call_id": self._ids.new("call", 24), "name": name, "arguments": arguments}  # fmt: skip

    def _response_object(self, body: dict[str, Any], text: str, output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        # Tools are input too (the real API bills their definitions on every request).
        input_tokens = (len(json.dumps(body.get("input", ""))) + len(json.dumps(body.get("tools") or []))) // 4 + 1
        output_tokens = len(text) // 4 + 1
        now = int(time.time())
        return {
            "id": self._ids.new("resp", 48),
            "object": "response",
            "created_at": now,
            "status": "completed",
            "background": False,
            "completed_at": now,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body.get("model") or "gpt-5.2",
            "output": output or [
                {
                    "id": self._ids.new("msg", 48),
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
                }
            ],
            "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "store": bool(body.get("store", True)),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": {
                "input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input_tokens + output_tokens,
            },
            "user": None,
            "metadata": body.get("metadata") or {},
        }
