"""Every shape an OpenAI error comes in, and what it means."""

import json

import pytest

from realtime_api import wire
from realtime_api.fatal import ErrorKind, classify


@pytest.mark.parametrize(
    "error_type, code, message, status, kind",
    [
        ("insufficient_quota", "credit_balance_exhausted", "Your credit balance is exhausted.", None, ErrorKind.NO_CREDIT),
        ("insufficient_quota", None, "You exceeded your current quota.", None, ErrorKind.NO_CREDIT),
        ("invalid_request_error", "insufficient_quota", "quota", None, ErrorKind.NO_CREDIT),
        ("insufficient_quota", "insufficient_quota", "quota", 429, ErrorKind.NO_CREDIT),  # a 429 that is no credit
        ("requests", "rate_limit_exceeded", "Rate limit reached", 429, ErrorKind.RATE_LIMITED),
        (None, None, None, 429, ErrorKind.RATE_LIMITED),  # a bare 429
        ("invalid_request_error", "invalid_api_key", "Incorrect API key", None, ErrorKind.INVALID_KEY),
        (None, None, None, 401, ErrorKind.INVALID_KEY),
        ("invalid_request_error", "session_expired", "Your session hit the maximum duration of 60 minutes.", None, ErrorKind.SESSION_EXPIRED),
        ("invalid_request_error", None, "Your session hit the maximum duration of 60 minutes.", None, ErrorKind.SESSION_EXPIRED),
        ("server_error", None, "The server had an error", None, ErrorKind.OTHER),
    ],
)
def test_each_shape_is_classified(error_type, code, message, status, kind):
    verdict = classify(error_type, code, message, status)
    assert verdict.kind is kind
    assert verdict.fatal == (kind in (ErrorKind.NO_CREDIT, ErrorKind.INVALID_KEY))


def test_fatal_verdicts_say_what_to_do():
    assert classify("insufficient_quota").spoken.startswith("Your OpenAI account has no credit left; the assistant will stop")
    assert classify(code="session_expired").spoken is None


def test_a_failed_response_carries_its_error_from_status_details():
    frame = {"type": "response.done", "response": {"id": "resp_1", "status": "failed", "output": [], "status_details": {
        "type": "failed", "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "quota"}}}}
    done = wire.parse_server_frame(json.dumps(frame))
    assert done.status == "failed" and done.error.kind is ErrorKind.NO_CREDIT and done.error.fatal


def test_session_expired_without_its_code_is_an_expiry():
    error = wire.parse_server_frame(json.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": "Your session hit the maximum duration of 60 minutes."}}
    ))
    assert error.session_expired and not error.fatal
