"""The one place that decides what an OpenAI error means: stop (retrying cannot fix it), back off
(rate limited), or carry on, and the one sentence the user hears about it.

The API reports the same trouble in several shapes: `error.type` ("insufficient_quota") or
`error.code` ("insufficient_quota", "credit_balance_exhausted", "invalid_api_key"), an HTTP status
at the handshake (401, 403, 404, 429 with or without a body), and a failed `response.done` with
the error under `status_details.error`. Each shape goes through `classify`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ErrorKind(enum.Enum):
    NO_CREDIT = "no credit"  # quota used up, billing limit reached: fatal
    INVALID_KEY = "invalid key"  # fatal
    NO_ACCESS = "no access"  # deactivated account, a key without Realtime access: fatal
    MODEL_NOT_FOUND = "model not found"  # fatal
    BAD_SETTINGS = "bad settings"  # the server refused our session settings: fatal (a bug)
    RATE_LIMITED = "rate limited"  # back off and retry; the user is told once
    SESSION_EXPIRED = "session expired"  # reconnect at once, silently
    OTHER = "other"  # the caller's usual handling (retry, apology)

    @property
    def fatal(self) -> bool:
        return self in _FATAL


_FATAL = frozenset(
    {ErrorKind.NO_CREDIT, ErrorKind.INVALID_KEY, ErrorKind.NO_ACCESS, ErrorKind.MODEL_NOT_FOUND, ErrorKind.BAD_SETTINGS}
)

# What the user hears: what happened, what happens next, what to do.
SPOKEN = {
    ErrorKind.NO_CREDIT: "Your OpenAI account has no credit left; the assistant will stop. "
    "Add credit at platform.openai.com under billing, then start it again.",
    ErrorKind.INVALID_KEY: "OpenAI refused the API key; the assistant will stop. Check OPENAI_API_KEY in the .env file.",
    ErrorKind.NO_ACCESS: "OpenAI refused this account or key; the assistant will stop. "
    "Check the account and the key's permissions at platform.openai.com.",
    ErrorKind.MODEL_NOT_FOUND: "OpenAI does not know the model in the settings; the assistant will stop. "
    "Check REALTIME_MODEL in the .env file.",
    ErrorKind.BAD_SETTINGS: "OpenAI did not accept the assistant's session settings; the assistant will stop. "
    "This is a bug, please report it.",
    ErrorKind.RATE_LIMITED: "OpenAI is limiting how fast I can ask it; I'll keep trying, so this may take a little longer.",
}

_QUOTA_CODES = frozenset(
    {"insufficient_quota", "credit_balance_exhausted", "billing_hard_limit_reached", "billing_not_active"}
)
_CODES = {
    "invalid_api_key": ErrorKind.INVALID_KEY,
    "account_deactivated": ErrorKind.NO_ACCESS,
    "model_not_found": ErrorKind.MODEL_NOT_FOUND,
    "unknown_parameter": ErrorKind.BAD_SETTINGS,
    "rate_limit_exceeded": ErrorKind.RATE_LIMITED,
    "session_expired": ErrorKind.SESSION_EXPIRED,
    **{code: ErrorKind.NO_CREDIT for code in _QUOTA_CODES},
}
_TYPES = {
    "insufficient_quota": ErrorKind.NO_CREDIT,
    "rate_limit_exceeded": ErrorKind.RATE_LIMITED,
    "rate_limit_error": ErrorKind.RATE_LIMITED,
    "authentication_error": ErrorKind.INVALID_KEY,
}
_STATUSES = {401: ErrorKind.INVALID_KEY, 403: ErrorKind.NO_ACCESS, 404: ErrorKind.MODEL_NOT_FOUND, 429: ErrorKind.RATE_LIMITED}
SESSION_EXPIRED_WORDS = "maximum duration"  # the message of a session_expired error that lost its code


@dataclass(frozen=True)
class Verdict:
    kind: ErrorKind
    detail: str  # for the log: the server's own words and codes

    @property
    def fatal(self) -> bool:
        return self.kind.fatal

    @property
    def spoken(self) -> str | None:
        """The sentence the user hears (None: nothing to say)."""
        return SPOKEN.get(self.kind)


def classify(
    error_type: str | None = None, code: str | None = None, message: str | None = None, status: int | None = None
) -> Verdict:
    """What an error means, from whichever of its type, code, message and HTTP status it has.
    The code decides first, then the type, then the message, then the status (a 429 whose body
    says insufficient_quota is a used-up quota, a bare 429 a rate limit)."""
    kind = _CODES.get(code or "") or _TYPES.get(error_type or "")
    if kind is None and message and SESSION_EXPIRED_WORDS in message.lower():
        kind = ErrorKind.SESSION_EXPIRED
    if kind is None and status is not None:
        kind = _STATUSES.get(status)
    parts = [p for p in (f"HTTP {status}" if status else None, error_type, code) if p]
    detail = f"{message or 'no message'} ({', '.join(parts)})" if parts else (message or "no message")
    return Verdict(kind or ErrorKind.OTHER, detail)


def fatal_message(verdict: Verdict) -> str:
    """What the user hears (and the log says) for a fatal verdict: one sentence saying what to do."""
    return verdict.spoken or f"OpenAI refused the request: {verdict.detail}"
