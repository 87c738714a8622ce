"""Errors retrying cannot fix (bad key, no quota, unknown model), and what to tell the user about each."""

from __future__ import annotations

# Errors after which retrying cannot help: tell the user and stop.
FATAL_ERROR_CODES = frozenset(
    {"invalid_api_key", "insufficient_quota", "account_deactivated", "billing_hard_limit_reached", "model_not_found"}
)

# What to tell the user for each fatal code: what happened and where to fix it.
FATAL_ADVICE = {
    "invalid_api_key": "OpenAI refused the API key (invalid_api_key): check OPENAI_API_KEY in .env",
    "insufficient_quota": "the OpenAI account has no quota left (insufficient_quota): add credit at platform.openai.com, billing",
    "billing_hard_limit_reached": "the OpenAI account reached its billing limit (billing_hard_limit_reached): raise it at platform.openai.com, billing",
    "account_deactivated": "the OpenAI account is deactivated (account_deactivated): see platform.openai.com",
    "model_not_found": "the model was not found (model_not_found): check REALTIME_MODEL in .env",
    "unknown_parameter": "the server did not accept handoff's session settings (unknown_parameter): this is a bug, please report it",
}


def fatal_message(code: str | None, fallback: str) -> str:
    return FATAL_ADVICE.get(code or "", fallback)
