"""The listener's decisions for one Realtime session (sync): fed parsed server events,
`ListenerCore` returns actions (events to send, commands heard, tool calls to run) that the async
`main_agent.Listener` carries out."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from decisions.wake_gate import Command, Decision, WakeGate
from realtime_api import wire
from realtime_api.fatal import fatal_message
from realtime_api.wire import ClientEvents

log = logging.getLogger("handoff.listener")

VAD_PREFIX_PADDING_MS = 300  # audio the server VAD keeps before the detected start of speech


# --- actions the core asks the shell / coordinator to carry out ----------------------------------


@dataclass(frozen=True)
class Send:
    event: dict[str, Any]


@dataclass(frozen=True)
class Heard:
    """A transcript arrived; `decision` is what the wake gate made of it."""

    transcript: str
    decision: Decision


@dataclass(frozen=True)
class CommandHeard:
    text: str


@dataclass(frozen=True)
class RunTools:
    command: str
    calls: tuple[wire.FunctionCall, ...]
    session: int  # the session whose model asked: only it may get the outputs


@dataclass(frozen=True)
class SpeakText:
    """The model answered in text instead of calling a tool: narrate that text (fallback)."""

    command: str
    text: str


@dataclass(frozen=True)
class RoutingFailed:
    command: str
    reason: str


@dataclass(frozen=True)
class Fatal:
    message: str


@dataclass(frozen=True)
class UsageReported:
    """A response finished; what it used (for the cost meter)."""

    usage: wire.Usage


@dataclass(frozen=True)
class TranscriptionBilled:
    seconds: float  # of audio transcribed


@dataclass(frozen=True)
class SessionEnd:
    """How a listener session ended, for the coordinator."""

    closed: wire.Closed
    by_us: bool  # we closed it: a restart after a narration, a recycle
    expired: bool  # the server's time limit (session_expired, then 1001)
    healthy: bool  # it lived long enough to count as a good session (reconnect.healthy_after_s)
    interrupted_command: str | None  # routed, but its response never came: not run
    replay_from_ms: int | None  # session audio from here on was never transcribed

    @property
    def failure(self) -> bool:
        """Counts as a failed connection attempt: backed off, and not worth announcing alone."""
        return not (self.by_us or self.expired or self.healthy)


Action = Send | Heard | CommandHeard | RunTools | SpeakText | RoutingFailed | Fatal | UsageReported | TranscriptionBilled


# --- what the listener shell reports about its sessions ---------------------------------------------


@dataclass(frozen=True)
class SessionReady:
    session: int  # numbered from 1, one per configured session


@dataclass(frozen=True)
class ConnectFailed:
    attempt: int  # failures in a row
    error: str
    rate_limited: bool = False  # the server said to slow down: the user is told at once, once


@dataclass(frozen=True)
class QuietChanged:
    """Whether nothing is half-heard or half-routed changed (see ListenerCore.quiet)."""

    quiet: bool


# Everything the listener tells the coordinator: its core's actions but Send, and session news.
ListenerEvent = (
    Heard | CommandHeard | RunTools | SpeakText | RoutingFailed | Fatal | SessionReady | SessionEnd | ConnectFailed
    | QuietChanged | UsageReported | TranscriptionBilled
)


@dataclass
class ListenerCore:
    """Decisions for ONE listener session. The wake gate is shared across sessions (its window
    survives a restart); everything else starts fresh with each session."""

    gate: WakeGate
    clock: Callable[[], float] = time.monotonic
    session: int = 0  # this session's number, carried on the tool calls it asks for
    in_flight: str | None = None  # the command whose response we are waiting for
    speaking: bool = False  # VAD says someone is talking
    awaiting_transcripts: set[str] = field(default_factory=set)
    # Utterances not transcribed yet: item id -> where their audio starts (ms of session audio).
    unheard_starts: dict[str, int] = field(default_factory=dict)
    # When each utterance began (clock time): a wake or follow-up window is judged by when the user
    # spoke, not by when the transcript came back (late, with a real model).
    spoken_at: dict[str, float] = field(default_factory=dict)
    expired: bool = False
    _routes: int = 0
    _route_event_ids: set[str] = field(default_factory=set)

    @property
    def all_heard(self) -> bool:
        """Every utterance sent so far has been transcribed: no speech going on or pending. An
        utterance counts from its start until its transcript (not just until it stops: between
        speech_stopped and the commit it is neither speaking nor awaiting a transcript)."""
        return not self.speaking and not self.awaiting_transcripts and not self.unheard_starts

    def replay_from_ms(self, include_unfinished: bool) -> int | None:
        """Where the audio this session never transcribed begins (session ms, with the VAD's
        prefix padding), or None. Speech still going on counts only if `include_unfinished`:
        when we end a session ourselves (the narrator's mute cut the speaker off) a fragment
        is not worth hearing again, while after a drop the speaker may well still be talking."""
        starts = [
            start for item, start in self.unheard_starts.items()
            if include_unfinished or item in self.awaiting_transcripts
        ]
        return max(0, min(starts) - VAD_PREFIX_PADDING_MS) if starts else None

    def abandon_route(self) -> None:
        """Stop waiting for the current route's response (the coordinator gave up on it)."""
        self.in_flight = None

    @property
    def quiet(self) -> bool:
        """Nothing half-heard or half-routed: a safe moment to recycle the session."""
        return self.all_heard and self.in_flight is None

    def route(self, command: str, tools: Sequence[dict[str, Any]] = ()) -> list[Action]:
        """Put an addressed command to the model and require a tool call, out of band: the
        response reads only the command it is given (and the tools), never the conversation, so
        overheard audio committed but not yet transcribed or deleted cannot reach the router."""
        if self.in_flight is not None:
            raise RuntimeError("a command is already being routed; the coordinator must queue the next one")
        self.in_flight = command
        self._routes += 1
        # Tagged, so an error the server reports for it ends this route.
        self._route_event_ids = {f"route-{self._routes}-response"}
        response = ClientEvents.route_command(command, list(tools))
        response["event_id"] = f"route-{self._routes}-response"
        return [Send(response)]

    def feed(self, event: wire.ServerEvent) -> list[Action]:
        match event:
            case wire.SpeechStarted(item_id=item_id, audio_start_ms=start):
                self.speaking = True
                self.unheard_starts[item_id] = start
                self.spoken_at[item_id] = self.clock()
            case wire.SpeechStopped():
                self.speaking = False
            case wire.AudioCommitted(item_id=item_id):
                self.awaiting_transcripts.add(item_id)
            case wire.TranscriptCompleted(item_id=item_id, transcript=transcript, usage=usage):
                billed: list[Action] = [TranscriptionBilled(usage.audio_seconds)] if usage.audio_seconds else []
                return billed + self._on_transcript(item_id, transcript)
            case wire.TranscriptFailed(item_id=item_id, message=message):
                self.awaiting_transcripts.discard(item_id)
                self.unheard_starts.pop(item_id, None)
                self.spoken_at.pop(item_id, None)
                log.warning("could not transcribe an utterance (%s); it is dropped", message)
                return [Send(ClientEvents.delete_item(item_id))]
            case wire.ResponseDone(usage=usage):
                reported: list[Action] = [UsageReported(usage)] if usage != wire.Usage() else []
                return reported + self._on_response_done(event)
            case wire.ServerError():
                return self._on_error(event)
            case wire.Malformed(reason=reason):
                log.warning("ignored a malformed frame from the listener session: %s", reason)
        return []

    def _on_transcript(self, item_id: str, transcript: str) -> list[Action]:
        self.awaiting_transcripts.discard(item_id)
        self.unheard_starts.pop(item_id, None)
        # The audio item goes whatever was said: the conversation holds text only, so every later
        # command stays cheap however long the session runs.
        actions: list[Action] = [Send(ClientEvents.delete_item(item_id))]
        decision = self.gate.classify(transcript, self.spoken_at.pop(item_id, None) or self.clock())
        actions.append(Heard(transcript, decision))  # the gate's own decision, passed on as it is
        if isinstance(decision, Command):
            actions.append(CommandHeard(decision.text))
        return actions

    def _on_response_done(self, done: wire.ResponseDone) -> list[Action]:
        if done.error is not None and done.error.fatal:  # e.g. out of credit, in status_details.error
            self.in_flight = None
            log.error("a listener response failed: %s", done.error.detail)
            return [Fatal(fatal_message(done.error))]
        command, self.in_flight = self.in_flight, None
        if command is None:
            return []  # not ours (nothing else creates responses here)
        if done.status == "completed" and done.function_calls:
            return [RunTools(command, done.function_calls, self.session)]
        if done.status == "completed" and done.text.strip():
            return [SpeakText(command, done.text)]
        return [RoutingFailed(command, done.failure or f"the model returned no tool call (status {done.status})")]

    def _on_error(self, error: wire.ServerError) -> list[Action]:
        verdict = error.verdict
        if verdict.fatal:
            log.error("the listener session was refused: %s", verdict.detail)
            return [Fatal(fatal_message(verdict))]
        if error.session_expired:
            self.expired = True  # the server closes with 1001 next; reconnect at once
            log.info("listener session reached its maximum length; reconnecting")
            return []
        log.warning("listener session error %s: %s", error.code, error.message)
        if self.in_flight is not None and error.client_event_id in self._route_event_ids:
            # The server refused our route: no response will come for it.
            command, self.in_flight = self.in_flight, None
            return [RoutingFailed(command, error.message)]
        return []
