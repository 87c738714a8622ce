"""What a scripted or random fault does to a session once it strikes (`FaultMatcher` says when):
the real server's error messages, closes, drops, stalls, failed responses and hostile frames."""

from __future__ import annotations

import json
import random
from typing import Any

from realtime_sim.hostile import hostile_frame, huge_answer, many_calls
from realtime_sim.ids import IdFactory
from realtime_sim.outputs import Close, Drop, Outbox, SendRaw, Stall
from realtime_sim.responses import Responses
from realtime_sim.script import Fault

SERVER_ERROR_MESSAGE = (
    "The server had an error while processing your request. Sorry about that! You can retry your "
    "request, or contact us through our help center at help.openai.com if the error persists."
)
SESSION_EXPIRED_MESSAGE = "Your session hit the maximum duration of 60 minutes."
QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more information on "
    "this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)
INVALID_KEY_MESSAGE = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
MODEL_NOT_FOUND_MESSAGE = "The model does not exist or you do not have access to it."
# Refusals after the upgrade: (error type, error code, message; None = no error event), then close 1008 naming it.
REFUSALS: dict[str, tuple[tuple[str, str, str] | None, str]] = {
    "refuse_quota": (("insufficient_quota", "credit_balance_exhausted", QUOTA_MESSAGE), "insufficient_quota"),
    "refuse_quota_close_only": (None, "insufficient_quota"),
    "refuse_key": (("invalid_request_error", "invalid_api_key", INVALID_KEY_MESSAGE), "invalid_api_key"),
    "refuse_model": (("invalid_request_error", "model_not_found", MODEL_NOT_FOUND_MESSAGE), "model_not_found"),
}


def expire(out: Outbox) -> None:
    """The session reached its maximum length."""
    out.error("session_expired", SESSION_EXPIRED_MESSAGE)
    out.close(Close(1001, "session expired"))


def apply_fault(fault: Fault, *, out: Outbox, responses: Responses, ids: IdFactory, hostile: random.Random) -> None:
    """Strike with `fault` (`hostile` draws mistyped frames)."""
    kind = fault.kind
    if kind in ("drop", "drop_in_flight"):
        if kind == "drop_in_flight":
            out.lose_last_sent()
        out.close(Drop())
    elif kind == "close_1011":
        out.close(Close(1011, "simulated server fault"))
    elif kind == "session_expired":
        expire(out)
    elif kind == "delay":
        out.add(Stall(fault.delay_s))
    elif kind == "server_error":
        out.error(None, SERVER_ERROR_MESSAGE, error_type="server_error")
    elif kind in ("response_failed", "response_failed_quota"):
        details = _failed_details() if kind == "response_failed" else _quota_details()
        active = responses.active()
        if active is None:
            responses.fail_next = details
        else:
            responses.end(active, "failed", details)
    elif kind == "quota_error":
        out.error("credit_balance_exhausted", QUOTA_MESSAGE, error_type="insufficient_quota")
    elif kind == "session_expired_no_code":
        out.error(None, SESSION_EXPIRED_MESSAGE)
        out.close(Close(1001, "session expired"))
    elif kind in REFUSALS:
        error, reason = REFUSALS[kind]
        if error is not None:
            error_type, code, message = error
            out.error(code, message, error_type=error_type)
        out.close(Close(1008, reason))
    elif kind in ("many_calls", "huge_answer"):
        active = responses.active()
        response_id = active.response_id if active is not None else ids.new("resp")
        out.add(SendRaw(many_calls(response_id) if kind == "many_calls" else huge_answer(response_id)))
    elif kind == "mistyped_frame":
        out.add(SendRaw(hostile_frame(hostile, oversized_share=0.1)))
    elif kind == "malformed_frame":
        out.add(SendRaw('{"type": "response.output_text.delta", "delta": "trunc'))
    elif kind == "unknown_event":
        out.add(SendRaw(json.dumps({"type": "response.sim_unannounced", "event_id": ids.event(), "detail": "x"})))
    # handshake faults never reach a session: the shell refuses the upgrade


def _failed_details() -> dict[str, Any]:
    return {"type": "failed", "error": {"type": "server_error", "code": "server_error", "message": SERVER_ERROR_MESSAGE}}


def _quota_details() -> dict[str, Any]:
    return {"type": "failed", "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": QUOTA_MESSAGE}}
