"""The responses of one session: what the model reads and answers (its plan), the runs streaming,
cancels and failures, rate limits, and routes waiting for a transcriber to name their audio.

Synchronous: events go into the session's `Outbox`; speech is asked of the shell with `Synthesize`.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from realtime_sim import session_config
from realtime_sim.config import SimConfig
from realtime_sim.conversation import Conversation, ConversationWriter, Entry, audio_ms, has_unheard_audio
from realtime_sim.ids import IdFactory
from realtime_sim.input_buffer import InputBuffer
from realtime_sim.outputs import Outbox, Synthesize
from realtime_sim.performance import Performer, framed_script
from realtime_sim.response_run import (
    FRAME_PAUSE,
    Emit,
    FunctionCallPlan,
    MessagePlan,
    NeedSpeech,
    ResponsePlan,
    ResponseRun,
    TokenEstimate,
)
from realtime_sim.router import route
from realtime_sim.script import SimScript

MAX_WAITING_ROUTES = 4  # responses with inline audio waiting for the transcriber (the client routes one at a time)


class Responses:
    """The response runs of one session, and the routes waiting for words."""

    def __init__(
        self,
        *,
        config: SimConfig,
        script: SimScript,
        ids: IdFactory,
        outbox: Outbox,
        conversation: Conversation,
        buffer: InputBuffer,
        performer: Performer,
        session: Callable[[], dict[str, Any]],
        conversation_id: str,
        listens: bool,
        on_idle: Callable[[], None],
    ) -> None:
        """`session` reads the session's configuration as it is now; `listens`: a transcriber names
        segments no test scripted; `on_idle` runs when the default conversation's response ends."""
        self._config = config
        self._script = script
        self._ids = ids
        self._out = outbox
        self._conversation = conversation
        self._buffer = buffer
        self._performer = performer
        self._session = session
        self._conversation_id = conversation_id
        self._listens = listens
        self._on_idle = on_idle
        self._runs: dict[str, ResponseRun] = {}
        self.default_run: ResponseRun | None = None
        self.fail_next: dict[str, Any] | None = None  # the status_details of the next response's failure
        self.audio_produced = False
        self._rate_remaining = config.rate_limit_tokens
        self._words_pending: set[str] = set()  # committed segments the transcriber has not named yet
        # Routes whose inline audio's words the transcriber has not named yet: (params, client event
        # id, the segment they wait for; None: the one still in the buffer). A model hears audio
        # at once; this one answers once it knows what the audio says.
        self._waiting_routes: list[tuple[dict[str, Any], str | None, str | None]] = []

    @property
    def has_runnable_work(self) -> bool:
        return any(not r.finished and not r.waiting_for_speech for r in self._runs.values())

    def active(self) -> ResponseRun | None:
        """The first response still running, if any."""
        return next((r for r in self._runs.values() if not r.finished), None)

    # -- words for routes ---------------------------------------------------------------------

    def words_pending(self, item_id: str) -> None:
        """Segment `item_id` was committed; the transcriber will name its words later."""
        self._words_pending.add(item_id)
        self._waiting_routes = [(p, e, item_id if waits is None else waits) for p, e, waits in self._waiting_routes]

    @property
    def waits_for_speech_in_progress(self) -> bool:
        """A route that sent audio inline waits for the words of the segment still in the buffer."""
        return any(waits is None for _p, _e, waits in self._waiting_routes)

    def words_named(self, segment: str | None, words: str) -> None:
        """Answer the routes that waited for `segment`'s words (None: for the buffer's segment)."""
        if segment is not None:
            self._words_pending.discard(segment)
        ready = [(p, e) for p, e, waits in self._waiting_routes if waits == segment]
        self._waiting_routes = [r for r in self._waiting_routes if r[2] != segment]
        for params, client_event_id in ready:
            self.start(params, client_event_id=client_event_id, inline_words=words)

    # -- starting and ending ------------------------------------------------------------------

    def start(self, params: dict[str, Any], *, client_event_id: str | None, inline_words: str | None = None) -> None:
        out_of_band = params.get("conversation") == "none"
        if not out_of_band and self.default_run is not None:
            self._out.error(
                "conversation_already_has_active_response",
                f"Conversation already has an active response in progress: {self.default_run.response_id}. "
                "Wait until the response is finished before creating a new one.",
                client_event_id=client_event_id,
            )
            return
        if inline_words is None and (waits := self._inline_wait(params)) is not None:
            if len(self._waiting_routes) < MAX_WAITING_ROUTES:
                self._waiting_routes.append((params, client_event_id, waits or None))
                return
        context = self._context(params, client_event_id, inline_words)
        if context is None:
            return
        session = self._session()
        modalities = params.get("output_modalities") or session["output_modalities"]
        tools = params["tools"] if "tools" in params else session["tools"]
        tool_choice = params.get("tool_choice", session["tool_choice"])
        voice = ((params.get("audio") or {}).get("output") or {}).get("voice") or session_config.voice(session)
        run = ResponseRun(
            response_id=self._ids.response(),
            item_id=self._ids.item(),
            conversation_id=None if out_of_band else self._conversation_id,
            output_modalities=list(modalities),
            voice=voice,
            output_format=session["audio"]["output"]["format"],
            max_output_tokens=params.get("max_output_tokens", session["max_output_tokens"]),
            metadata=params.get("metadata"),
            plan=self._plan(context, modalities, tools, tool_choice, params.get("instructions")),
            chunk_ms=self._config.audio_chunk_ms,
            conversation=None if out_of_band else ConversationWriter(self._conversation.entries),
            input_tokens=TokenEstimate(
                text=sum(len(e.text) // 4 + 1 for e in context if not e.audio_ms)
                + len(params.get("instructions") or session["instructions"]) // 4,
                audio=sum(int(e.audio_ms / 100) for e in context),  # user audio: 1 token per 100 ms
            ),
        )
        self._runs[run.response_id] = run
        if not out_of_band:
            self.default_run = run
        if self.fail_next is not None:
            details, self.fail_next = self.fail_next, None
            self._advance_one(run)  # response.created
            if not run.finished:
                self.end(run, "failed", details)
            return
        self.advance(run)

    def cancel(self, event: dict[str, Any]) -> None:
        wanted = event.get("response_id")
        run = self._runs.get(wanted) if wanted else self.default_run
        if run is None or run.finished:
            self._out.error(
                "response_cancel_not_active",
                "Cancellation failed: no active response found",
                client_event_id=event.get("event_id"),
            )
            return
        self.end(run, "cancelled", {"type": "cancelled", "reason": "client_cancelled"})

    def end(self, run: ResponseRun, status: str, details: dict[str, Any]) -> None:
        """End `run` early (cancelled, failed)."""
        if run.finished or run.response_id not in self._runs:
            return
        for event in run.finish_early(status, details):
            self._out.send(event)
        self._after_run(run)

    # -- what the model reads and answers -----------------------------------------------------

    def _context(self, params: dict[str, Any], client_event_id: str | None,
                 inline_words: str | None = None) -> list[Entry] | None:
        """What the model reads: the `input` items if given, else the conversation."""
        entries = self._conversation.entries
        if "input" not in params:
            return list(entries)
        context: list[Entry] = []
        for index, raw in enumerate(params["input"]):
            if raw.get("type") == "item_reference":
                found = self._conversation.index_of(raw["id"])
                if found is None:
                    self._out.error(
                        "invalid_value",
                        f"Invalid value: item '{raw['id']}' is not in this session's conversation.",
                        param=f"response.input[{index}].id",
                        client_event_id=client_event_id,
                    )
                    return None
                context.append(entries[found])
            else:
                if has_unheard_audio(raw):
                    # Audio sent inline (a command routed at the client's own end of turn): the
                    # same speech is also in the input buffer, where its segment's transcript is
                    # taken at the commit; the model hears what it says without using that up.
                    heard = inline_words or self._inline_words(raw)
                    raw = {**raw, "content": [{**p, "transcript": heard} if p.get("type") == "input_audio" else p
                                              for p in raw["content"]]}
                item, text = self._conversation.stored_item(raw.get("id") or self._ids.item(), raw)
                context.append(Entry(item, text=text, audio_ms=audio_ms(raw)))
        return context

    def _inline_words(self, message: dict[str, Any]) -> str:
        """What audio sent inline says: the words of its committed segment (see
        `InputBuffer.inline_segment`), else of the segment still in the buffer (scripted, peeked,
        not taken)."""
        entry = self._buffer.inline_segment(message)
        if entry is not None:
            return entry.text
        return self._script.peek_transcript() or self._config.fallback_transcript

    def _inline_wait(self, params: dict[str, Any]) -> str | None:
        """The segment whose words a response hearing audio must wait for ("" for the one still in
        the buffer), or None: they are known (scripted), or no transcriber will name them. Audio
        sent inline, or a committed segment named by reference (a route by its audio at the
        commit): a model hears the audio at once, this one only once it knows what it says
        (answered with the fallback words, such a route would run a tool nobody asked for)."""
        if not self._listens or "input" not in params:
            return None
        for raw in params["input"]:
            if raw.get("type") == "item_reference" and raw.get("id") in self._words_pending:
                return str(raw["id"])
            if has_unheard_audio(raw):
                entry = self._buffer.inline_segment(raw)
                if entry is not None:
                    return entry.id if entry.id in self._words_pending else None
                if self._buffer.segment_item_id is not None and self._script.peek_transcript() is None:
                    return ""
        return None

    def _plan(
        self, context: list[Entry], modalities: list[str], tools: list[dict[str, Any]], tool_choice: Any,
        instructions: str | None = None,
    ) -> ResponsePlan:
        last = context[-1] if context else None
        if tools and tool_choice != "none":
            untooled = self._script.take_text_instead_of_tool()
            if untooled is not None:
                return MessagePlan(untooled)
            scripted = self._script.take_tool_call()
            if scripted is not None:
                return FunctionCallPlan(scripted.name, scripted.arguments, self._ids.call())
            # Only a user's words start a call: after a tool result the model answers instead.
            if last is not None and last.kind == "user":
                routed = route(last.text, tools, tool_choice)
                if routed is not None:
                    return FunctionCallPlan(routed.name, json.dumps(routed.arguments), self._ids.call())
        speaks = "audio" in modalities
        scripted_text = (self._script.take_reading() if speaks else None) or self._script.take_reply()
        if scripted_text is not None:
            return MessagePlan(scripted_text)
        script = framed_script(instructions) if speaks else None
        if script is not None:  # a narrator told what to read: it performs the script
            return MessagePlan(self._performer.perform(script))
        if speaks and last is not None and last.kind == "user" and last.text:
            return MessagePlan(self._performer.respond(last.text))
        return MessagePlan(_default_answer(last, speaks))

    # -- driving runs -------------------------------------------------------------------------

    def speech_ready(self, response_id: str, pcm: bytes) -> None:
        run = self._runs.get(response_id)
        if run is not None and run.waiting_for_speech and not self._out.closed:
            self.audio_produced = True
            self.advance(run, pcm)

    def pump(self) -> bool:
        """Advance every runnable run; True when one paused for audio pacing."""
        paused = False
        for run in list(self._runs.values()):
            if not run.finished and not run.waiting_for_speech and not self._out.closed:
                paused = self.advance(run) or paused
        return paused

    def _advance_one(self, run: ResponseRun, value: bytes | None = None) -> object:
        """Run one step of `run`; returns the step, or None when the run is over."""
        try:
            step = run.steps.send(value)
        except StopIteration:
            self._after_run(run)
            return None
        if isinstance(step, Emit):
            for event in step.events:
                if run.response_id not in self._runs:
                    break  # a fault ended the run while this batch was going out
                self._out.send(event)
        elif isinstance(step, NeedSpeech):
            self._out.add(Synthesize(run.response_id, step.text))
        return step

    def advance(self, run: ResponseRun, value: bytes | None = None) -> bool:
        """Run until the response pauses for pacing (True), waits for speech, or ends (False)."""
        while run.response_id in self._runs and not self._out.closed:
            step = self._advance_one(run, value)
            value = None
            if step is None or isinstance(step, NeedSpeech):
                return False
            if step is FRAME_PAUSE:
                return True
        return False

    def _after_run(self, run: ResponseRun) -> None:
        if self._runs.pop(run.response_id, None) is None:
            return
        if self.default_run is run:
            self.default_run = None
        self._rate_remaining = max(0, self._rate_remaining - run.total_tokens())
        self._out.send(
            {
                "type": "rate_limits.updated",
                "rate_limits": [
                    {
                        "name": "tokens",
                        "limit": self._config.rate_limit_tokens,
                        "remaining": self._rate_remaining,
                        "reset_seconds": 0.001,
                    }
                ],
            }
        )
        self._on_idle()


def _default_answer(last: Entry | None, speaks: bool) -> str:
    """What the model says when nothing is scripted: a narrator reads the user's text verbatim; a
    text answer restates a tool result or acknowledges the user."""
    if last is None or not last.text:
        return "Okay."
    if last.kind == "function_call_output":
        return last.text[:300]
    if last.kind == "user":
        return last.text if speaks else f"I heard: {last.text}"
    return "Okay."
