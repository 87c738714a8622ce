"""What the simulated model says and does next, and which faults to inject.

A `SimScript` is shared by every connection of one `SimServer`. Each `push_*` queues one
occurrence; the next connection/response that needs one consumes it (first in, first out).
Tests push before or during a conversation; nothing here does I/O.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, get_args

FaultKind = Literal[
    "drop",  # close the TCP connection without a close frame: the client sees 1006
    "drop_in_flight",  # the same, and the event it struck after never arrives (it was in flight)
    "close_1011",  # close frame 1011 (server fault / keepalive timeout)
    "session_expired",  # error `session_expired`, then close 1001
    "handshake_401",  # refuse the upgrade: 401 with an `invalid_api_key` body
    "handshake_500",  # refuse the upgrade: 500
    "delay",  # hold every following frame back for `delay_s` (a network stall)
    "server_error",  # an `error` event of type `server_error`; the session stays open
    "response_failed",  # the active (or next) response ends with `response.done` status `failed`
    "malformed_frame",  # a text frame that is not JSON
    "unknown_event",  # a JSON frame whose `type` the protocol does not have
    "mistyped_frame",  # a real event with one field mistyped or oversized (realtime_sim.hostile)
    "many_calls",  # a response.done asking for 10,000 function calls (get_time), ahead of the real one
    "huge_answer",  # a response.done answering a megabyte of text and calling no tool, ahead of the real one
    "quota_error",  # an `error` of type `insufficient_quota`, code `credit_balance_exhausted`
    "response_failed_quota",  # the active (or next) response fails; `status_details.error` says no quota
    "session_expired_no_code",  # `session_expired` with only its message (no code), then close 1001
    "handshake_429",  # refuse the upgrade: 429 rate limited (`rate_limit_exceeded`)
    "handshake_429_quota",  # refuse the upgrade: 429 with an `insufficient_quota` body
    # An account the service refuses after the upgrade: the `error` and a close 1008 naming it
    # go out in the same instant (a client must read the error before it sees the close).
    "refuse_quota",  # error `insufficient_quota` / `credit_balance_exhausted`, close 1008 "insufficient_quota"
    "refuse_quota_close_only",  # no error event: only the close 1008 "insufficient_quota"
    "refuse_key",  # error `invalid_api_key`, close 1008 "invalid_api_key"
    "refuse_model",  # error `model_not_found` (no access to the model), close 1008 "model_not_found"
]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
HANDSHAKE_FAULTS: frozenset[str] = frozenset({"handshake_401", "handshake_500", "handshake_429", "handshake_429_quota"})
# Faults that are no network weather: not drawn at random in a soak (a phantom speech_started
# from a mistyped frame would hold the listener "busy" until the next session).
HOSTILE_FAULTS: frozenset[str] = frozenset({"mistyped_frame", "many_calls", "huge_answer"})
# Faults a client must treat as fatal (it stops): never drawn at random in a soak.
FATAL_FAULTS: frozenset[str] = frozenset(
    {"handshake_401", "handshake_429_quota", "quota_error", "response_failed_quota",
     "refuse_quota", "refuse_quota_close_only", "refuse_key", "refuse_model"}
)

FaultTarget = Literal["any", "listener", "narrator"]
FAULT_TARGETS: tuple[FaultTarget, ...] = get_args(FaultTarget)


@dataclass(frozen=True)
class Fault:
    """One fault and when it strikes.

    Triggers (pick one; handshake kinds need none):
    - `after_sent="response.created", nth=1`: right after the server sent the nth event of that
      type on a matching connection, counted from when the fault was pushed;
    - `after_s=2.0`: once a matching connection has been open that long;
    - neither: right after `session.created` (for non-handshake kinds).
    `target` is checked when the trigger fires: "listener" = a text-only session, "narrator" = a
    session with audio output; before the client's first `session.update` or `response.create`
    the role is unknown and only "any" matches. Handshake faults always target "any".
    """

    kind: FaultKind
    target: FaultTarget = "any"
    after_sent: str | None = None
    nth: int = 1
    after_s: float | None = None
    delay_s: float = 1.0  # for kind "delay": how long frames are held back

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known kinds: {', '.join(FAULT_KINDS)}")
        if self.target not in FAULT_TARGETS:
            raise ValueError(f"unknown fault target {self.target!r}; use one of {', '.join(FAULT_TARGETS)}")
        if self.after_sent is not None and self.after_s is not None:
            raise ValueError("give a fault either after_sent or after_s, not both")
        if self.nth < 1:
            raise ValueError(f"nth counts events from 1, got {self.nth}")
        if self.after_s is not None and self.after_s < 0:
            raise ValueError(f"after_s cannot be negative, got {self.after_s}")
        if self.delay_s < 0:
            raise ValueError(f"delay_s cannot be negative, got {self.delay_s}")
        if self.kind in HANDSHAKE_FAULTS:
            if self.after_sent is not None or self.after_s is not None:
                raise ValueError(f"a {self.kind} fault strikes at the handshake; drop after_sent/after_s")
            if self.target != "any":
                raise ValueError(
                    f"a {self.kind} fault cannot target {self.target!r}: the role is only known after "
                    "session.update; push it when the next connection is the one you mean"
                )

    @property
    def at_handshake(self) -> bool:
        return self.kind in HANDSHAKE_FAULTS

    @property
    def trigger_event(self) -> str | None:
        """The server event type after which this fault strikes (None for time/handshake faults)."""
        if self.at_handshake or self.after_s is not None:
            return None
        return self.after_sent or "session.created"


@dataclass(frozen=True)
class PendingFault:
    """A queued fault with a sequence number, so connections can count events per fault."""

    seq: int
    fault: Fault


@dataclass(frozen=True)
class ToolCall:
    """A function call the simulated model makes; `arguments` is the exact JSON text sent."""

    name: str
    arguments: str


@dataclass(frozen=True)
class BrainAnswer:
    text: str


@dataclass(frozen=True)
class BrainError:
    status: int
    message: str | None = None
    code: str | None = None
    error_type: str | None = None


@dataclass(frozen=True)
class BrainDelay:
    seconds: float
    text: str | None = None  # None: the default answer
    # Set: the answer waits for it instead (at most `seconds`): a test lets it go at an event of
    # its own rather than betting on a sleep that a busy machine outruns.
    until: asyncio.Event | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BrainSearch:
    """An answer found by the web search tool (when the request offers it): its text and the
    pages it cites, as (title, url)."""

    text: str
    sources: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class BrainToolCall:
    """A function call the next request offering function tools makes (`arguments`: JSON text)."""

    name: str
    arguments: str


BrainStep = BrainAnswer | BrainError | BrainDelay | BrainSearch | BrainToolCall


class SimScript:
    """Queues of scripted behaviour, consumed in order by whichever connection needs one."""

    def __init__(self) -> None:
        self._transcripts: deque[str] = deque()
        self._tool_calls: deque[ToolCall] = deque()
        self._readings: deque[str] = deque()
        self._replies: deque[str] = deque()
        self._untooled: deque[str] = deque()
        self._brain_steps: deque[BrainStep] = deque()
        self._faults: list[PendingFault] = []
        self._fault_seq = 0
        self._fault_listeners: list[Callable[[], None]] = []

    # -- pushing (tests, demo) -------------------------------------------------------------

    def push_transcript(self, text: str) -> None:
        """What the next committed speech segment "says" (its input transcription)."""
        self._transcripts.append(text)

    def push_tool_call(self, name: str, arguments: dict[str, Any] | str) -> None:
        """The function the next response with tools calls. A dict is sent as JSON; a str as-is
        (for malformed-argument tests). Scripted calls skip the declared-tools check on purpose,
        so a test can make the model call a tool the session does not have."""
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        self._tool_calls.append(ToolCall(name, text))

    def push_reading(self, text: str) -> None:
        """What the next audio response says instead of its script (a narrator that deviates)."""
        self._readings.append(text)

    def push_reply(self, text: str) -> None:
        """What the next response that calls no tool answers (text or audio)."""
        self._replies.append(text)

    def push_text_instead_of_tool(self, text: str) -> None:
        """The next response offered tools answers this text and calls none, whatever its
        tool_choice (a model that ignores "required": the client's fallback path)."""
        self._untooled.append(text)

    def push_brain_answer(self, text: str) -> None:
        """The next `POST /v1/responses` answers with this text."""
        self._brain_steps.append(BrainAnswer(text))

    def push_brain_search(self, text: str, sources: list[tuple[str, str]]) -> None:
        """The next `POST /v1/responses` that offers the web search tool searches, and answers
        `text` citing `sources` (title, url) as the real API does (realtime_sim.web_search)."""
        self._brain_steps.append(BrainSearch(text, tuple(sources)))

    def push_brain_tool_call(self, name: str, arguments: dict[str, Any] | str) -> None:
        """The next `POST /v1/responses` that offers function tools calls `name` (scripted calls
        skip the declared-tools check, as `push_tool_call` does)."""
        self._brain_steps.append(BrainToolCall(name, arguments if isinstance(arguments, str) else json.dumps(arguments)))

    def push_brain_error(
        self, status: int = 429, message: str | None = None, code: str | None = None, error_type: str | None = None
    ) -> None:
        """The next `POST /v1/responses` fails with this HTTP status (429 and 5xx are typical);
        `code` / `error_type` replace the body's (429 + "insufficient_quota": no credit left)."""
        if not 400 <= status <= 599:
            raise ValueError(f"a brain error needs an HTTP error status (400-599), got {status}")
        self._brain_steps.append(BrainError(status, message, code, error_type))

    def push_brain_delay(self, seconds: float, text: str | None = None, until: asyncio.Event | None = None) -> None:
        """The next `POST /v1/responses` waits this long (or, with `until`, until it is set, at
        most this long), then answers `text` (default: the usual default answer). Each push
        shapes exactly one request, so a slow reply followed by a scripted answer for the
        client's retry is `push_brain_delay(5); push_brain_answer(...)`."""
        if seconds < 0:
            raise ValueError(f"a brain delay cannot be negative, got {seconds}")
        self._brain_steps.append(BrainDelay(seconds, text, until))

    def push_fault(self, fault: Fault) -> None:
        """Inject a fault into the next connection/occurrence that matches it (see `Fault`)."""
        self._fault_seq += 1
        self._faults.append(PendingFault(self._fault_seq, fault))
        for listener in list(self._fault_listeners):
            listener()

    # -- consuming (the simulator) ---------------------------------------------------------

    def take_transcript(self) -> str | None:
        return self._transcripts.popleft() if self._transcripts else None

    def peek_transcript(self) -> str | None:
        """What the next segment says, left in the queue (the same audio sent inline in a response)."""
        return self._transcripts[0] if self._transcripts else None

    def take_tool_call(self) -> ToolCall | None:
        return self._tool_calls.popleft() if self._tool_calls else None

    def take_reading(self) -> str | None:
        return self._readings.popleft() if self._readings else None

    def take_text_instead_of_tool(self) -> str | None:
        return self._untooled.popleft() if self._untooled else None

    def take_reply(self) -> str | None:
        return self._replies.popleft() if self._replies else None

    def take_brain_step(self) -> BrainStep | None:
        return self._brain_steps.popleft() if self._brain_steps else None

    @property
    def pending_faults(self) -> tuple[PendingFault, ...]:
        return tuple(self._faults)

    def take_fault(self, seq: int) -> Fault | None:
        """Consume the pending fault with this sequence number (None if another took it)."""
        for index, pending in enumerate(self._faults):
            if pending.seq == seq:
                del self._faults[index]
                return pending.fault
        return None

    def take_handshake_fault(self) -> Fault | None:
        for pending in self._faults:
            if pending.fault.at_handshake:
                return self.take_fault(pending.seq)
        return None

    def subscribe_faults(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` whenever a fault is pushed (connections re-plan their timers);
        returns the function that unsubscribes it."""
        self._fault_listeners.append(listener)
        return lambda: self._fault_listeners.remove(listener)
