"""The listener: one always-on Realtime session that hears everything and only routes.

`ListenerCore` is the synchronous decision-maker for one session: fed parsed server events, it
returns actions (events to send, commands heard, tool calls to run). `Listener` is the async shell:
it owns the connection loop (connect, configure, receive, reconnect) and applies the actions.
The listener never speaks: its session is text-only and every command must end in a tool call.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from openai import AsyncOpenAI

import realtime_wire as wire
from realtime_link import HandshakeFailed, RealtimeLink, fatal_message, open_configured, reconnect_policy
from realtime_wire import ClientEvents
from settings import Settings
from wake_gate import Command, Ignore, WakeGate, WakeOnly

log = logging.getLogger("handoff.listener")

VAD_PREFIX_PADDING_MS = 300  # audio the server VAD keeps before the detected start of speech

LISTENER_INSTRUCTIONS = (
    "You are the router of a voice assistant. Each user message is one spoken command. "
    "Route every command to exactly one tool, choosing the tool that best fits, and fill its "
    "arguments from the command. Questions that need knowledge or thought go to ask_brain with "
    "the question as the query. Never answer in text yourself."
)


# --- actions the core asks the shell / coordinator to carry out ----------------------------------


@dataclass(frozen=True)
class Send:
    event: dict[str, Any]


@dataclass(frozen=True)
class Heard:
    """A transcript arrived; `decision` is what the wake gate made of it."""

    transcript: str
    decision: str  # "ignored" | "wake" | "command"


@dataclass(frozen=True)
class CommandHeard:
    text: str


@dataclass(frozen=True)
class RunTools:
    command: str
    calls: tuple[wire.FunctionCall, ...]


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


Action = Send | Heard | CommandHeard | RunTools | SpeakText | RoutingFailed | Fatal


def listener_session(settings: Settings, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The listener's session config: text only, VAD that never answers by itself, transcription on."""
    return {
        "output_modalities": ["text"],
        "instructions": LISTENER_INSTRUCTIONS,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": settings.realtime.transcribe_model},
                "turn_detection": {
                    "type": "server_vad",
                    "silence_duration_ms": settings.listener.vad_silence_ms,
                    "create_response": False,
                    "interrupt_response": False,
                },
            }
        },
        "tools": tools,
        "tool_choice": "required",
    }


@dataclass
class ListenerCore:
    """Decisions for ONE listener session. The wake gate is shared across sessions (its window
    survives a restart); everything else starts fresh with each session."""

    gate: WakeGate
    clock: Callable[[], float] = time.monotonic
    in_flight: str | None = None  # the command whose response we are waiting for
    speaking: bool = False  # VAD says someone is talking
    awaiting_transcripts: set[str] = field(default_factory=set)
    # Utterances not transcribed yet: item id -> where their audio starts (ms of session audio).
    unheard_starts: dict[str, int] = field(default_factory=dict)
    expired: bool = False
    _routes: int = 0
    _route_event_ids: set[str] = field(default_factory=set)

    @property
    def all_heard(self) -> bool:
        """Every utterance sent so far has been transcribed: no speech going on or pending."""
        return not self.speaking and not self.awaiting_transcripts

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

    def route(self, command: str) -> list[Action]:
        """Put an addressed command to the model as text and require a tool call."""
        if self.in_flight is not None:
            raise RuntimeError("a command is already being routed; the coordinator must queue the next one")
        self.in_flight = command
        self._routes += 1
        # Tagged, so an error the server reports for either event ends this route.
        self._route_event_ids = {f"route-{self._routes}-item", f"route-{self._routes}-response"}
        item, response = ClientEvents.user_text(command), ClientEvents.route_command()
        item["event_id"], response["event_id"] = sorted(self._route_event_ids)
        return [Send(item), Send(response)]

    def feed(self, event: wire.ServerEvent) -> list[Action]:
        match event:
            case wire.SpeechStarted(item_id=item_id, audio_start_ms=start):
                self.speaking = True
                self.unheard_starts[item_id] = start
            case wire.SpeechStopped():
                self.speaking = False
            case wire.AudioCommitted(item_id=item_id):
                self.awaiting_transcripts.add(item_id)
            case wire.TranscriptCompleted(item_id=item_id, transcript=transcript):
                return self._on_transcript(item_id, transcript)
            case wire.TranscriptFailed(item_id=item_id, message=message):
                self.awaiting_transcripts.discard(item_id)
                self.unheard_starts.pop(item_id, None)
                log.warning("could not transcribe an utterance (%s); it is dropped", message)
                return [Send(ClientEvents.delete_item(item_id))]
            case wire.ResponseDone():
                return self._on_response_done(event)
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
        decision = self.gate.classify(transcript, self.clock())
        match decision:
            case Ignore():
                actions.append(Heard(transcript, "ignored"))
            case WakeOnly():
                actions.append(Heard(transcript, "wake"))
            case Command(text=text):
                actions += [Heard(transcript, "command"), CommandHeard(text)]
        return actions

    def _on_response_done(self, done: wire.ResponseDone) -> list[Action]:
        command, self.in_flight = self.in_flight, None
        if command is None:
            return []  # not ours (nothing else creates responses here)
        if done.status == "completed" and done.function_calls:
            return [RunTools(command, done.function_calls)]
        if done.status == "completed" and done.text.strip():
            return [SpeakText(command, done.text)]
        return [RoutingFailed(command, done.failure or f"the model returned no tool call (status {done.status})")]

    def _on_error(self, error: wire.ServerError) -> list[Action]:
        if error.fatal:
            return [Fatal(fatal_message(error.code, f"OpenAI refused the listener: {error.message} ({error.code})"))]
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


class ListenerObserver(Protocol):
    """What the coordinator hears from the listener. All callbacks are sync (they set state)."""

    def listener_ready(self) -> None: ...
    def listener_lost(self, end: SessionEnd) -> None: ...
    def listener_connect_failed(self, error: HandshakeFailed, attempt: int) -> None: ...
    def listener_fatal(self, message: str) -> None: ...
    def heard(self, transcript: str, decision: str) -> None: ...
    def command_heard(self, text: str) -> None: ...
    def tools_requested(self, command: str, calls: tuple[wire.FunctionCall, ...]) -> None: ...
    def text_answer(self, command: str, text: str) -> None: ...
    def routing_failed(self, command: str, reason: str) -> None: ...


class Listener:
    """The async shell: keeps one configured listener session alive forever."""

    def __init__(
        self,
        settings: Settings,
        client: AsyncOpenAI,
        tools: list[dict[str, Any]],
        observer: ListenerObserver,
        gate: WakeGate | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._client = client
        self._session = listener_session(settings, tools)
        self._observer = observer
        self._clock = clock
        self.gate = gate or WakeGate(
            settings.listener.wake_phrase, settings.listener.wake_aliases, settings.listener.wake_window_s
        )
        self._link: RealtimeLink | None = None
        self._core: ListenerCore | None = None
        self._closing = False  # restart() has begun closing the session: it takes no more audio
        self._session_started = 0.0
        self.sessions_opened = 0

    # -- state the coordinator reads -------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._link is not None and self._core is not None and not self._closing

    @property
    def quiet(self) -> bool:
        return self._core is not None and self._core.quiet

    @property
    def session_age_s(self) -> float:
        return self._clock() - self._session_started if self.ready else 0.0

    # -- commands from the coordinator ------------------------------------------------------------
    async def send_audio(self, pcm: bytes) -> bool:
        link = self._link
        return link is not None and self.ready and await link.send(ClientEvents.append_audio(pcm))

    async def route(self, command: str) -> bool:
        """Route a command in the current session; False when there is none (caller keeps it)."""
        if self._core is None:
            return False
        await self._apply(self._core.route(command))
        return True

    async def send_tool_output(self, call: wire.FunctionCall, output: str, session: int) -> None:
        """Return a result to the session whose model asked for it (a later session never saw
        the call). The listener makes no further response: the narrator speaks the result."""
        if self._link is not None and session == self.sessions_opened:
            await self._link.send(ClientEvents.function_output(call.call_id, output, call.item_id))

    def abandon_route(self) -> None:
        if self._core is not None:
            self._core.abandon_route()

    async def restart(self, reason: str) -> None:
        """Close the current session; the run loop opens and configures a fresh one."""
        link = self._link
        if link is not None:
            self._closing = True  # at once, so no audio goes to a session on its way out
            log.info("restarting the listener session: %s", reason)
            await link.close()

    # -- the loop ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Keep a configured session open, forever. Returns only on a fatal error."""
        while True:
            # A fresh policy per healthy session: the backoff starts again from its first step.
            try:
                await reconnect_policy(self._settings, self._observer.listener_connect_failed)(self._one_session)
            except HandshakeFailed as failure:  # only fatal ones get here; others are retried
                self._observer.listener_fatal(str(failure))
                return
            except _ListenerStopped:
                return

    async def _one_session(self) -> None:
        """One session, from open to end. Raises HandshakeFailed (retried with backoff) when it
        cannot be opened, or when it dies unexpectedly before it was healthy, so a server that
        drops every new session is not hammered."""
        link = await open_configured(self._client, self._settings, "listener", self._session)
        self.sessions_opened += 1
        core = self._core = ListenerCore(gate=self.gate, clock=self._clock)
        self._session_started = self._clock()
        self._link = link
        self._closing = False
        self._observer.listener_ready()
        end: SessionEnd | None = None
        try:
            async for event in link.events():
                if isinstance(event, wire.Closed):
                    end = self._session_end(link, core, event)
                    self._link = None
                    self._observer.listener_lost(end)
                elif await self._apply(core.feed(event)):
                    raise _ListenerStopped()
        finally:
            self._link = None
            self._core = None
            await link.close()
        if end is not None and end.failure:
            raise HandshakeFailed(f"the listener session ended after {self._clock() - self._session_started:.1f} s "
                                  f"(code {end.closed.code})")

    def _session_end(self, link: RealtimeLink, core: ListenerCore, closed: wire.Closed) -> SessionEnd:
        lived = self._clock() - self._session_started
        return SessionEnd(
            closed=closed,
            by_us=link.closed_by_us,
            expired=core.expired,
            healthy=lived >= self._settings.reconnect.healthy_after_s,
            # A command cut off before its response came back was not run: routed again next session.
            interrupted_command=core.in_flight,
            replay_from_ms=core.replay_from_ms(include_unfinished=not link.closed_by_us),
        )

    async def _apply(self, actions: list[Action]) -> bool:
        """Carry out the core's actions. Returns True when the listener must stop (fatal)."""
        obs = self._observer
        for action in actions:
            match action:
                case Send(event=event):
                    if self._link is not None:
                        await self._link.send(event)
                case Heard(transcript=t, decision=d):
                    obs.heard(t, d)
                case CommandHeard(text=text):
                    obs.command_heard(text)
                case RunTools(command=command, calls=calls):
                    obs.tools_requested(command, calls, self.sessions_opened)
                case SpeakText(command=command, text=text):
                    obs.text_answer(command, text)
                case RoutingFailed(command=command, reason=reason):
                    obs.routing_failed(command, reason)
                case Fatal(message=message):
                    obs.listener_fatal(message)
                    return True
        return False


class _ListenerStopped(Exception):
    """A fatal error inside a session: the listener stops (the coordinator was told why)."""
