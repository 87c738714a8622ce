"""What the rest of the house needs of an MCP server link without loading the MCP SDK: its
timing and its failure. (The SDK costs about a second of CPU to import; a start with no MCP
servers configured, and every `handoff` process the tests start, need not pay it.)"""

from __future__ import annotations

from dataclasses import dataclass


class Unreachable(Exception):
    """The server is down (or went down during the call); the message is one spoken sentence."""


@dataclass(frozen=True)
class LinkTiming:
    connect_timeout_s: float = 20.0  # start (or reach) the server and list its tools
    call_timeout_s: float = 15.0  # one tool call
    # How long a command waits for a call's answer; a slower call goes on in the background (its
    # answer, or its timeout, said later as a notice) so the next command is not held up.
    answer_wait_s: float = 3.0
    backoff_initial_s: float = 0.5  # the first restart after a death
    backoff_max_s: float = 60.0
    jitter: float = 0.1  # each backoff is stretched by up to this fraction
