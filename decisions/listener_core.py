"""The listener's decisions for one Realtime session (sync): fed parsed server events,
`ListenerCore` returns actions (events to send, commands heard, tool calls to run) that the async
`main_agent.Listener` carries out."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from decisions.stages import Stage, StageTimes
from decisions.wake_gate import Command, Decision, WakeGate
from speech.speakable import speakable_text
from realtime_api import wire
from realtime_api.fatal import fatal_message
from realtime_api.wire import ClientEvents

log = logging.getLogger("handoff.listener")

# One command asks for at most this many tool runs (a hostile or confused model may ask for
# thousands in one response: each would run, and be read out); the rest are logged, not run.
MAX_CALLS_PER_RESPONSE = 8

# The server VAD's `audio_start_ms` already includes its prefix padding (300 ms before the
# detected start of speech): the pre-roll of a replay. Its `audio_end_ms` includes the silence
# that ended the utterance, so an utterance's padded start may lie inside the one before's
# trailing silence: only silence is replayed twice, never speech.


# --- actions the core asks the shell / coordinator to carry out ----------------------------------


@dataclass(frozen=True)
class Send:
    event: dict[str, Any]


@dataclass(frozen=True)
class Heard:
    """A transcript arrived; `decision` is what the wake gate made of it."""

    transcript: str
    decision: Decision


Stages = tuple[tuple[Stage, float], ...]  # (stage, monotonic time) marks of one utterance


@dataclass(frozen=True)
class CommandHeard:
    text: str
    stages: Stages = field(default=(), compare=False)  # end of speech, commit, transcript


@dataclass(frozen=True)
class CommandCommitted:
    """An utterance that began with a wake the device heard was committed, long enough to hold a
    command: it may be routed now by its audio, before its transcript (`ListenerCore.route_audio`)."""

    item_id: str
    stages: Stages = field(default=(), compare=False)


@dataclass(frozen=True)
class CommandConfirmed:
    """The transcript of an utterance routed by its audio says it was a command: what it said."""

    item_id: str
    text: str
    stages: Stages = field(default=(), compare=False)


@dataclass(frozen=True)
class CommandRejected:
    """The transcript of an utterance routed by its audio has nothing like the wake phrase up
    front: the device's wake was wrong. Its response was cancelled; nothing more of it may act.
    The coordinator gives the command its one verdict: withdrawn if nothing of an answer was said
    yet, else answered as heard (`transcript`: its words, then)."""

    item_id: str
    transcript: str = ""


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
class ProvisionalBilled:
    """What a provisional route (sent at a pause inside a command, issue 33) used: `sent`, once its
    response is done; `withdrawn`, once it is both done and withdrawn (the user went on talking:
    those tokens bought nothing). A route withdrawn after its response reports twice."""

    usage: wire.Usage
    sent: bool
    withdrawn: bool


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
    replay_from_ms: int | None  # session audio from here on was never transcribed...
    heard_spans: tuple[tuple[int, int], ...] = ()  # ...but for these utterances (start, end ms): heard already
    # Dropped without a close frame: what the server sent last may be lost with it (a speech_started
    # among it), so audio after the latest utterance the session ended may hold untold speech.
    untold_from_ms: int | None = None

    @property
    def failure(self) -> bool:
        """Counts as a failed connection attempt: backed off, and not worth announcing alone."""
        return not (self.by_us or self.expired or self.healthy)


Action = (
    Send | Heard | CommandHeard | CommandCommitted | CommandConfirmed | CommandRejected | RunTools | SpeakText
    | RoutingFailed | Fatal | UsageReported | TranscriptionBilled | ProvisionalBilled
)


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
    Heard | CommandHeard | CommandCommitted | CommandConfirmed | CommandRejected | RunTools | SpeakText | RoutingFailed | Fatal | SessionReady | SessionEnd | ConnectFailed
    | QuietChanged | UsageReported | TranscriptionBilled | ProvisionalBilled
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
    stopped_at_ms: dict[str, int] = field(default_factory=dict)  # where unheard utterances ended
    last_end_ms: int = 0  # where the latest utterance the VAD ended ends (its trailing silence included)
    heard_spans: list[tuple[int, int]] = field(default_factory=list)  # (start, end) ms of those transcribed
    expired: bool = False
    # Handed over (`retire`): the session takes no more audio and routes nothing; it stays open
    # only until what it heard is transcribed. The utterance that was in progress went to the
    # next session whole; should a transcript of its fragment come here, it is not ours.
    retired: bool = False
    handed_over: set[str] = field(default_factory=set)
    # Routing at the commit (issue 20): the silence that ends a turn (end of speech = the arrival
    # of speech_stopped minus this), and the speech an utterance needs after its wake phrase to
    # hold a command (less: the wake phrase alone, routed only once its transcript says so).
    turn_silence_s: float = 0.5
    command_min_s: float = 0.3
    prefix_padding_s: float = 0.3  # the server VAD's, inside audio_start_ms
    stage_times: dict[str, StageTimes] = field(default_factory=dict)  # per utterance, until its transcript
    _wake: float | None = None  # the device heard the wake phrase (its length, s): the next utterance holds it
    woken: dict[str, float] = field(default_factory=dict)  # utterances that began with a device wake -> phrase s
    # Utterances the device heard the wake phrase at the start of, until their transcript: it is
    # judged knowing that (a transcriber's own spelling of the phrase does not undo the wake).
    device_woke: set[str] = field(default_factory=set)
    carried_wake: float | None = None  # retired mid-utterance the device woke for: its phrase s, for the next session
    early: set[str] = field(default_factory=set)  # routed by their audio, transcript not judged yet
    _route_item: str | None = None  # the utterance the route in flight carries by reference
    _route_tag: str | None = None  # the metadata of the route in flight: its response is known by it
    _route_response: str | None = None  # its response id, once created
    _cancel_tag: str | None = None  # cancel the response with this tag as soon as it is created
    _delete_after: dict[str, str] = field(default_factory=dict)  # route tag -> item deleted once it is done
    _stashed: dict[str, str] = field(default_factory=dict)  # transcripts waiting for an earlier utterance's
    _routes: int = 0
    _route_event_ids: set[str] = field(default_factory=set)
    # The provisional route (sent at a pause inside a woken utterance): its tag, its utterance and
    # that utterance's wake phrase (s), so a withdrawal can route it whole at its end.
    _provisional: tuple[str, str, float] | None = None
    _provisional_done: tuple[str, wire.Usage] | None = None  # its response is done: what it used
    _withdrawn_tags: set[str] = field(default_factory=set)  # withdrawn before their response was done

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
        return min(starts) if starts else None

    def heard_after(self, start_ms: int | None) -> tuple[tuple[int, int], ...]:
        """Utterances already transcribed that begin after `start_ms`: a replay skips them (a
        later utterance's transcript may come first), so nothing is heard twice."""
        if start_ms is None:
            return ()
        return tuple(span for span in self.heard_spans if span[0] > start_ms)

    def retire(self, keep_in_progress: bool) -> tuple[int | None, str | None, list[Action]]:
        """The next session takes over the microphone. Returns where the utterance in progress
        starts (session ms with the VAD's prefix padding), if `keep_in_progress`: it goes to the
        next session from its start, never half to each (a file paused mid-utterance goes on
        where it stopped); else it is dropped (a room's speaker, cut off by the narrator's mute:
        a fragment is not worth hearing again). Also the command whose response had not come
        (routed again there; a late response here is ignored), and what to send this session."""
        self.retired = True
        replay: int | None = None
        actions: list[Action] = []
        if keep_in_progress and not self.speaking:
            # A file may have paused just as an utterance began, before the VAD said so: what
            # came after the last utterance goes to the next session too (silence, at worst).
            replay = self.last_end_ms
            actions.append(Send(ClientEvents.clear_audio()))
        routed = [item for item in self.early if item in self.unheard_starts and item not in self.awaiting_transcripts]
        if self.speaking and routed:
            # Routed at the device's end of turn and answered before the server ended the turn:
            # it is committed here, so its transcript (the verdict) still comes, in this session.
            actions.append(Send(ClientEvents.commit_audio()))
            self.speaking = False
        elif self.speaking:
            progress = [(start, item) for item, start in self.unheard_starts.items() if item not in self.awaiting_transcripts]
            if progress:
                start, item = max(progress)
                self.unheard_starts.pop(item)
                self.spoken_at.pop(item, None)
                self.handed_over.add(item)
                replay = start if keep_in_progress else None
                if keep_in_progress and item in self.device_woke:  # the next session hears it begin with the wake
                    self.carried_wake = self.woken.get(item, 0.0)
            actions.append(Send(ClientEvents.clear_audio()))
            self.speaking = False
        command, self.in_flight = self.in_flight, None
        return replay, command or None, actions  # ("": routed by its audio, unconfirmed: its replay brings it back)

    @property
    def settled(self) -> bool:
        """Retired and everything it heard is transcribed: it may close."""
        return self.retired and not self.awaiting_transcripts and not self.unheard_starts

    def abandon_route(self) -> None:
        """Stop waiting for the current route's response (the coordinator gave up on it)."""
        self.in_flight = None
        self._route_item = self._route_tag = None

    def local_wake(self, phrase_s: float) -> None:
        """The device heard the wake phrase (`phrase_s` long): the next utterance the server hears
        begins with it (with the on-device wake nothing is uploaded before a wake)."""
        self._wake = phrase_s

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
        response = ClientEvents.route_command(command, list(tools))
        response["response"]["metadata"] = {"handoff_route": self._new_route()}
        response["event_id"] = f"{self._route_tag}-response"
        return [Send(response)]

    def route_audio(self, item_id: str, tools: Sequence[dict[str, Any]] = ()) -> list[Action] | None:
        """Route an utterance the device heard the wake phrase in by its audio, at its commit,
        before its transcript (which still confirms or cancels it). None: its transcript came
        first (it is routed by its words instead) or the session was handed over."""
        if self.in_flight is not None:
            raise RuntimeError("a command is already being routed; the coordinator must queue the next one")
        if item_id not in self.awaiting_transcripts or self.retired:
            return None
        return self._route_unheard(item_id, lambda metadata: ClientEvents.route_audio(item_id, list(tools), metadata))

    def route_inline(self, pcm: bytes, tools: Sequence[dict[str, Any]] = (), provisional: bool = False
                     ) -> list[Action] | None:  # fmt: skip
        """Route the utterance in progress that the device heard the wake in, at the device's own
        end of turn, with its audio inline (`pcm`): no waiting for the server to end the turn.
        Its segment, when the server commits it, is not offered again; its transcript confirms
        or cancels the route. None: no such utterance here (the commit routes it, or its words).
        `provisional`: sent at a pause inside it, with its audio so far (`withdraw_provisional`)."""
        if self.in_flight is not None:
            raise RuntimeError("a command is already being routed; the coordinator must queue the next one")
        candidates = [item for item in self.woken if item in self.unheard_starts]
        if not candidates or self.retired:
            return None
        item = candidates[-1]
        phrase_s = self.woken.pop(item)  # routed now: its commit does not offer it again
        actions = self._route_unheard(item, lambda metadata: ClientEvents.route_inline_audio(pcm, list(tools), metadata))
        if provisional:
            assert self._route_tag is not None
            self._provisional = (self._route_tag, item, phrase_s)
        return actions

    def withdraw_provisional(self) -> list[Action]:
        """The user went on talking after the pause the provisional route was sent at: its
        response is cancelled (or ignored when it comes), and its utterance is again one the
        device heard the wake in, to be routed whole at its end (or at its commit, or by its words)."""
        if self._provisional is None:
            return []
        (tag, item, phrase_s), self._provisional = self._provisional, None
        actions: list[Action] = []
        if self._route_tag == tag and self.in_flight is not None:
            actions += self._cancel_route()
        elif self._route_tag == tag:
            self._route_item = None
        self.early.discard(item)
        if item in self.unheard_starts and item not in self.awaiting_transcripts:
            self.woken[item] = phrase_s
        if self._provisional_done is not None and self._provisional_done[0] == tag:
            actions.append(ProvisionalBilled(self._provisional_done[1], sent=False, withdrawn=True))
        else:
            self._withdrawn_tags.add(tag)
        self._provisional_done = None
        return actions

    def _route_unheard(self, item: str, response_for: Callable[[dict[str, str]], dict[str, Any]]) -> list[Action]:
        """Send the route `response_for(metadata)` builds for `item`, an utterance whose words are
        not known yet: its transcript, when it comes, confirms or cancels the route."""
        self.in_flight = ""
        self.early.add(item)
        tag = self._new_route()
        self._route_item = item
        response = response_for({"handoff_route": tag})
        response["event_id"] = f"{tag}-response"
        return [Send(response)]

    @property
    def routed_item(self) -> str | None:
        """The utterance the route in flight carries (by reference or inline)."""
        return self._route_item

    def _new_route(self) -> str:
        self._provisional = self._provisional_done = None  # (a later route: that one stands, or went)
        self._routes += 1
        self._route_tag = f"route-{self._routes}"
        self._route_response = None
        # Tagged, so an error the server reports for it ends this route.
        self._route_event_ids = {f"{self._route_tag}-response"}
        return self._route_tag

    def _cancel_route(self) -> list[Action]:
        """The route in flight was not addressed after all: cancel its response (now, or as soon
        as it is created); whatever it returns is ignored."""
        tag, self._route_tag, self.in_flight, self._route_item = self._route_tag, None, None, None
        if self._route_response is not None:
            return [Send(ClientEvents.cancel_response(self._route_response))]
        self._cancel_tag = tag
        return []

    def _stages(self, item_id: str) -> StageTimes:
        return self.stage_times.setdefault(item_id, StageTimes())

    def feed(self, event: wire.ServerEvent) -> list[Action]:
        match event:
            case wire.SpeechStarted() if self.retired:
                pass  # no audio comes any more: only a late VAD event
            case wire.SpeechStarted(item_id=item_id, audio_start_ms=start):
                self.speaking = True
                self.unheard_starts[item_id] = start
                self.spoken_at[item_id] = self.clock()
                if self._wake is not None:
                    self.woken[item_id], self._wake = self._wake, None
                    self.device_woke.add(item_id)
            case wire.SpeechStopped(item_id=item_id, audio_end_ms=end):
                self.speaking = False
                self.last_end_ms = max(self.last_end_ms, end)
                if item_id in self.unheard_starts:
                    self.stopped_at_ms[item_id] = end
                    self._stages(item_id).mark(Stage.END_OF_SPEECH, self.clock() - self.turn_silence_s)
            case wire.AudioCommitted(item_id=item_id) if item_id not in self.handed_over:
                self.awaiting_transcripts.add(item_id)
                self._stages(item_id).mark(Stage.COMMIT, self.clock())
                if self._holds_a_command(item_id):
                    return [CommandCommitted(item_id, tuple(self._stages(item_id).times.items()))]
            case wire.ResponseCreated(response_id=response_id, metadata=metadata):
                tag = (metadata or {}).get("handoff_route")
                if tag is not None and tag == self._cancel_tag:
                    self._cancel_tag = None
                    return [Send(ClientEvents.cancel_response(response_id))]
                if tag is not None and tag == self._route_tag:
                    self._route_response = response_id
            case wire.TranscriptCompleted(item_id=item_id, transcript=transcript, usage=usage):
                billed: list[Action] = [TranscriptionBilled(usage.audio_seconds)] if usage.audio_seconds else []
                self._stashed[item_id] = transcript
                return billed + self._judge_in_order()
            case wire.TranscriptFailed(item_id=item_id, message=message):
                self.awaiting_transcripts.discard(item_id)
                self.device_woke.discard(item_id)
                self.unheard_starts.pop(item_id, None)
                self.stopped_at_ms.pop(item_id, None)
                self.spoken_at.pop(item_id, None)
                log.warning("could not transcribe an utterance (%s); it is dropped", message)
                return [Send(ClientEvents.delete_item(item_id)), *self._judge_in_order()]
            case wire.ResponseDone(usage=usage):
                reported: list[Action] = [UsageReported(usage)] if usage != wire.Usage() else []
                return reported + self._on_response_done(event)
            case wire.ServerError():
                return self._on_error(event)
            case wire.Malformed():
                pass  # logged and counted by the link that read it
        return []

    def _judge_in_order(self) -> list[Action]:
        """Transcripts are judged in the order the utterances were spoken, not the order they
        complete (a real transcriber's delays vary): "computer ... what time is it" said as two
        utterances must meet the wake gate phrase first, or the command is judged without it."""
        actions: list[Action] = []
        while self._stashed:
            first = min(self._stashed, key=lambda item: self.unheard_starts.get(item, -1))
            start = self.unheard_starts.get(first)
            earlier = [item for item in self.awaiting_transcripts - self._stashed.keys()
                       if start is not None and self.unheard_starts.get(item, start) < start]
            if earlier:
                break  # an utterance said before it is still being transcribed
            actions += self._on_transcript(first, self._stashed.pop(first))
        return actions

    def _holds_a_command(self, item_id: str) -> bool:
        """The utterance began with a wake the device heard and has speech enough after the
        phrase for a command (less is the wake phrase alone: its transcript opens the window)."""
        phrase_s = self.woken.pop(item_id, None)
        start, end = self.unheard_starts.get(item_id), self.stopped_at_ms.get(item_id)
        if phrase_s is None or start is None or end is None or self.retired:
            return False
        padding = self.prefix_padding_s if start > 0 else 0.0  # (clamped at the session's start)
        speech_s = (end - start) / 1000 - padding - self.turn_silence_s
        log.debug("a wake heard on the device: %.2f s of speech, the phrase %.2f s", speech_s, phrase_s)
        return speech_s >= phrase_s + self.command_min_s

    def _on_transcript(self, item_id: str, transcript: str) -> list[Action]:
        self.woken.pop(item_id, None)
        stages = self.stage_times.pop(item_id, StageTimes())
        stages.mark(Stage.TRANSCRIPT, self.clock())
        marks = tuple(stages.times.items())
        if item_id in self.handed_over:  # the next session heard it whole
            self.awaiting_transcripts.discard(item_id)
            return [Send(ClientEvents.delete_item(item_id))]
        self.awaiting_transcripts.discard(item_id)
        start = self.unheard_starts.pop(item_id, None)
        end = self.stopped_at_ms.pop(item_id, None)
        if start is not None and end is not None:
            self.heard_spans = [*self.heard_spans[-20:], (start, end)]  # recent ones: a replay reaches back seconds
        # The audio item goes whatever was said: the conversation holds text only, so every later
        # command stays cheap however long the session runs. (One its route in flight reads goes
        # once that response is done.)
        carried = item_id == self._route_item and self.in_flight is not None and self._route_tag is not None
        actions: list[Action] = []
        if carried:
            assert self._route_tag is not None
            self._delete_after[self._route_tag] = item_id
        else:
            actions.append(Send(ClientEvents.delete_item(item_id)))
        woken = item_id in self.device_woke
        self.device_woke.discard(item_id)
        decision = self.gate.classify(transcript, self.spoken_at.pop(item_id, 0.0) or self.clock(), woken=woken)
        if item_id in self.early:
            # Routed by its audio at the commit: the words confirm it, or cancel what has not
            # acted yet; the coordinator gives it its one verdict (never "overheard" once answered).
            self.early.discard(item_id)
            if isinstance(decision, Command):
                actions.append(Heard(transcript, decision))
                if carried and self.in_flight == "":
                    self.in_flight = decision.text
                return [*actions, CommandConfirmed(item_id, decision.text, marks)]
            if carried:
                actions += self._cancel_route()
            return [*actions, CommandRejected(item_id, transcript)]
        actions.append(Heard(transcript, decision))  # the gate's own decision, passed on as it is
        if isinstance(decision, Command):
            actions.append(CommandHeard(decision.text, marks))
        return actions

    def _on_response_done(self, done: wire.ResponseDone) -> list[Action]:
        if done.error is not None and done.error.fatal:  # e.g. out of credit, in status_details.error
            self.in_flight = None
            log.error("a listener response failed: %s", done.error.detail)
            return [Fatal(fatal_message(done.error))]
        tag = (done.metadata or {}).get("handoff_route")
        kept = self._delete_after.pop(tag, None) if tag is not None else None
        deleted: list[Action] = [Send(ClientEvents.delete_item(kept))] if kept is not None else []
        if tag is not None and tag in self._withdrawn_tags:
            self._withdrawn_tags.discard(tag)
            deleted.append(ProvisionalBilled(done.usage, sent=True, withdrawn=True))
        elif tag is not None and self._provisional is not None and self._provisional[0] == tag:
            self._provisional_done = (tag, done.usage)
            deleted.append(ProvisionalBilled(done.usage, sent=True, withdrawn=False))
        if tag is not None and tag != self._route_tag:
            if tag == self._cancel_tag:
                self._cancel_tag = None
            return deleted  # a cancelled (or abandoned) route's response: nothing of it acts
        self._route_item = None
        command, self.in_flight = self.in_flight, None
        if command is None:
            return deleted  # not ours (nothing else creates responses here)
        return deleted + self._outcome(command, done)

    def _outcome(self, command: str, done: wire.ResponseDone) -> list[Action]:
        if done.status == "completed" and done.function_calls:
            calls = done.function_calls[:MAX_CALLS_PER_RESPONSE]
            skipped = len(done.function_calls) - len(calls) + done.calls_dropped
            if skipped:
                log.warning("the model asked for %d tool calls for one command; only the first %d run",
                            len(calls) + skipped, len(calls))
            return [RunTools(command, calls, self.session)]
        spoken = speakable_text(done.text) if done.status == "completed" else ""
        if spoken:  # the model's own words, filtered and capped like every other script
            return [SpeakText(command, spoken)]
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
        if error.code == "response_cancel_not_active":
            return []  # a cancelled route's response had already ended: nothing to cancel
        if self.in_flight is not None and error.client_event_id in self._route_event_ids:
            # The server refused our route: no response will come for it.
            command, self.in_flight = self.in_flight, None
            return [RoutingFailed(command, error.message)]
        return []
