"""The protocol of one Realtime connection as a synchronous state machine.

Fed client frames (and synthesized speech, and clock ticks), it returns what to do: server
events to send, raw frames, a close, a dropped connection, a stall, a request for speech audio.
No I/O, no asyncio: the aiohttp shell in `server.py` performs the outputs.

The core dispatches client events and keeps the session's configuration and clock; its parts
are the input buffer (`input_buffer.py`), the conversation's items (`conversation.py`), the
responses (`responses.py`) and the faults (`faults.py`), all writing into one `Outbox`.

Behaviour follows the recorded sessions (`shared/fixtures/realtime-recorded`) and
`shared/realtime-protocol.md`: event order, shapes, errors, and the quirks the real server has
(e.g. conversation edits sent while a response is streaming take effect after it finishes).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import random
import time
from collections import deque
from typing import Any, Callable, Sequence

from realtime_sim import session_config
from realtime_sim.config import SimConfig
from realtime_sim.conversation import Conversation, Entry
from realtime_sim.fault_matcher import FaultMatcher
from realtime_sim.faults import apply_fault, expire
from realtime_sim.ids import IdFactory
from realtime_sim.input_buffer import MIN_COMMIT_MS, InputBuffer
from realtime_sim.outputs import Close, Outbox, Output, PumpResult, Transcribe
from realtime_sim.performance import Performer
from realtime_sim.response_run import text_deltas
from realtime_sim.responses import Responses
from realtime_sim.script import Fault, SimScript
from realtime_sim.session_config import Role
from realtime_sim.transcriber import RecordingPosition, Transcriber, session_words
from realtime_sim.validation import ClientEventValidator

# Conversation edits the real server applies only after the response in progress is done.
_DEFERRED_WHILE_RESPONDING = frozenset({"conversation.item.create", "conversation.item.delete"})
# A route with its audio inline waits this long for the commit that names the speech's words,
# then the simulator hears the audio itself (a real model hears it at once: docs/HANDOFF.md,
# "Routes by audio wait for the simulator's transcriber").
HEAR_INLINE_AFTER_S = 1.5


class SessionCore:
    """One connection's session: configuration, conversation, input audio, responses, faults."""

    def __init__(
        self,
        *,
        config: SimConfig,
        script: SimScript,
        validator: ClientEventValidator,
        ids: IdFactory,
        model: str | None = None,
        random_faults: Sequence[Fault] = (),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        transcriber: Transcriber | None = None,
        recording: RecordingPosition | None = None,
    ) -> None:
        """`transcriber` finds the words of segments no test scripted (else they say
        `fallback_transcript`); `recording` counts the audio all listener sessions received, so a
        cue sheet's times can be placed (shared by every session of one server)."""
        self._config = config
        self._transcriber = transcriber
        self._script = script
        self._validator = validator
        self._ids = ids
        self._clock = clock
        self._opened_at = clock()
        self._expires_at_mono = self._opened_at + config.session_length_s
        self._session = session_config.default_session(
            session_id=ids.new("sess"),
            model=model or config.model,
            instructions=config.default_instructions,
            expires_at=int(wall_clock() + config.session_length_s),
        )
        seed = None if config.seed is None else f"{config.seed}:{self._session['id']}"
        self._performer = Performer(config, random.Random(seed))
        self._hostile = random.Random(f"hostile:{seed}" if seed is not None else None)  # mistyped_frame faults
        # Transcripts still being "transcribed": (due on the clock, item id, transcript, audio ms).
        self._late_transcripts: list[tuple[float, str, str, float]] = []
        # When a route waiting for the words of speech still in progress hears its inline audio
        # itself (inf: it has); the ids of those hearings (`_hear_speech_in_progress`).
        self._hear_inline_at: float | None = None
        self._inline_hearings: set[str] = set()
        self._configured = False  # role is unknown until the client configures or asks for a response
        self._out = Outbox(ids)
        self._out.after_sent = self._after_sent
        self._buffer = InputBuffer(recording)
        self._conversation = Conversation(config=config, script=script, ids=ids, outbox=self._out)
        self._responses = Responses(
            config=config, script=script, ids=ids, outbox=self._out, conversation=self._conversation,
            buffer=self._buffer, performer=self._performer, session=lambda: self._session,
            conversation_id=ids.new("conv"), listens=transcriber is not None, on_idle=self._run_deferred,
        )
        self._deferred: deque[dict[str, Any]] = deque()
        self._faults = FaultMatcher(script, random_faults)
        self.received: list[dict[str, Any]] = []  # client events (when config.record_events)
        self.faults_applied: list[Fault] = []
        self._buffer.reconfigure(session_config.vad_settings(self._session))

    # -- state the shell reads ---------------------------------------------------------------

    @property
    def session(self) -> dict[str, Any]:
        return self._session

    @property
    def role(self) -> Role:
        return session_config.role_of(self._session) if self._configured else "unknown"

    @property
    def closed(self) -> bool:
        return self._out.closed

    @property
    def has_runnable_work(self) -> bool:
        return not self._out.closed and self._responses.has_runnable_work

    def next_deadline(self) -> float | None:
        """The next clock time (monotonic) at which `tick()` has something to do."""
        if self._out.closed:
            return None
        deadlines = [self._expires_at_mono] + [due for due, *_ in self._late_transcripts[:1]]
        if self._hear_inline_at is not None and self._hear_inline_at != math.inf:
            deadlines.append(self._hear_inline_at)
        next_fault_age = self._faults.next_due_s(self._clock() - self._opened_at)
        if next_fault_age is not None:
            deadlines.append(self._opened_at + next_fault_age)
        return min(deadlines)

    # -- inputs ----------------------------------------------------------------------------

    def start(self) -> list[Output]:
        self._out.send({"type": "session.created", "session": self._session})
        return self._finish_call()

    def handle_client_text(self, text: str) -> list[Output]:
        if self._out.closed:
            return []
        try:
            event = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nesting too deep to parse; the session goes on
            self._out.error(
                "invalid_json",
                "The server could not parse your message as JSON. Send one JSON object per text frame.",
            )
            return self._finish_call()
        if isinstance(event, dict) and self._config.record_events:
            self.received.append(event)
        problem = self._validator.check(event)
        if problem is not None:
            client_event_id = event.get("event_id") if isinstance(event, dict) else None
            self._out.error(problem.code, problem.message, param=problem.param,
                            client_event_id=_str_or_none(client_event_id))
        elif event["type"] in _DEFERRED_WHILE_RESPONDING and self._responses.default_run is not None:
            self._deferred.append(event)
        else:
            self._dispatch(event)
        return self._finish_call()

    def handle_client_binary(self) -> list[Output]:
        self._out.error("invalid_value", "Binary frames are not supported; send JSON text frames.")
        return self._finish_call()

    def speech_ready(self, response_id: str, pcm: bytes) -> list[Output]:
        self._responses.speech_ready(response_id, pcm)
        return self._finish_call()

    def transcript_ready(self, item_id: str, text: str) -> list[Output]:
        """The words of a segment the transcriber was asked for ("" = none it could make out)."""
        transcript = text.strip() or self._config.fallback_transcript
        if item_id in self._inline_hearings:  # heard for the routes alone: no transcript is sent
            self._inline_hearings.discard(item_id)
            self._responses.words_named(None, transcript)
            return self._finish_call()
        index = self._conversation.index_of(item_id)
        if index is not None:  # the model understands the item as what was recognised
            self._conversation.entries[index].text = transcript
        self._responses.words_named(item_id, transcript)
        if not self._out.closed and session_config.transcription_enabled(self._session):
            audio_ms = self._conversation.entries[index].audio_ms if index is not None else 0.0
            self._send_transcript(item_id, transcript, audio_ms)
        return self._finish_call()

    def pump(self) -> PumpResult:
        paused = self._responses.pump()
        return PumpResult(self._finish_call(), self._config.audio_frame_delay_s if paused else 0.0)

    def tick(self) -> list[Output]:
        return self._finish_call()

    def shutdown(self) -> list[Output]:
        """The server is stopping: close like a server going away."""
        if not self._out.closed:
            self._out.close(Close(1001, "server shutting down"))
        return self._finish_call()

    # -- plumbing, the clock and faults ----------------------------------------------------------

    def _finish_call(self) -> list[Output]:
        self._check_clock()
        return self._out.take()

    def _after_sent(self, event_type: str) -> None:
        for fault in self._faults.after_sent(event_type, self.role):
            self._apply_fault(fault)
            if self._out.closed:
                break

    def _check_clock(self) -> None:
        if self._out.closed:
            return
        now = self._clock()
        if now >= self._expires_at_mono:
            expire(self._out)
            return
        while self._late_transcripts and self._late_transcripts[0][0] <= now and not self._out.closed:
            _due, item_id, transcript, audio_ms = self._late_transcripts.pop(0)
            self._send_transcript(item_id, transcript, audio_ms)
        if not self._responses.waits_for_speech_in_progress:
            self._hear_inline_at = None
        elif self._hear_inline_at is None:
            self._hear_inline_at = now + HEAR_INLINE_AFTER_S
        elif now >= self._hear_inline_at:
            self._hear_inline_at = math.inf
            self._hear_speech_in_progress()
        for fault in self._faults.due(now - self._opened_at, self.role):
            self._apply_fault(fault)
            if self._out.closed:
                break

    def _apply_fault(self, fault: Fault) -> None:
        self.faults_applied.append(fault)
        apply_fault(fault, out=self._out, responses=self._responses, ids=self._ids, hostile=self._hostile)

    # -- client events -----------------------------------------------------------------------

    def _dispatch(self, event: dict[str, Any]) -> None:
        handler: Callable[[dict[str, Any]], None] = {
            "session.update": self._session_update,
            "input_audio_buffer.append": self._append_audio,
            "input_audio_buffer.commit": self._commit_audio,
            "input_audio_buffer.clear": self._clear_audio,
            "conversation.item.create": self._conversation.create,
            "conversation.item.delete": self._conversation.delete,
            "conversation.item.retrieve": self._conversation.retrieve,
            "conversation.item.truncate": self._conversation.truncate,
            "response.create": self._create_response,
            "response.cancel": self._responses.cancel,
            "output_audio_buffer.clear": self._clear_output_audio,
        }[event["type"]]
        handler(event)

    def _run_deferred(self) -> None:
        """The default response ended: the conversation edits held back while it ran apply now."""
        while self._deferred and self._responses.default_run is None and not self._out.closed:
            self._dispatch(self._deferred.popleft())

    def _session_update(self, event: dict[str, Any]) -> None:
        update = event["session"]
        event_id = event.get("event_id")
        if update.get("type") != "realtime":
            self._out.error(
                "invalid_value",
                "This is a realtime session; session.type must be 'realtime' (transcription sessions are not simulated).",
                param="session.type",
                client_event_id=event_id,
            )
            return
        new_voice = ((update.get("audio") or {}).get("output") or {}).get("voice")
        if self._responses.audio_produced and new_voice is not None and new_voice != session_config.voice(self._session):
            self._out.error(
                "cannot_update_voice",
                "Cannot update a conversation's voice if assistant audio is present.",
                param="session.audio.output.voice",
                client_event_id=event_id,
            )
            return
        self._session = session_config.apply_update(self._session, update)
        self._configured = True
        self._buffer.reconfigure(session_config.vad_settings(self._session))
        self._out.send({"type": "session.updated", "session": self._session})

    def _create_response(self, event: dict[str, Any]) -> None:
        self._configured = True
        self._responses.start(event.get("response") or {}, client_event_id=event.get("event_id"))

    def _clear_output_audio(self, event: dict[str, Any]) -> None:
        self._out.error(
            "invalid_value",
            "output_audio_buffer.clear is only supported on WebRTC and SIP connections; on a WebSocket, "
            "stop playback yourself and send conversation.item.truncate.",
            param="type",
            client_event_id=event.get("event_id"),
        )

    # -- input audio ---------------------------------------------------------------------------

    def _append_audio(self, event: dict[str, Any]) -> None:
        try:
            pcm = base64.b64decode(event["audio"], validate=True)
        except (binascii.Error, ValueError):
            self._out.error(
                "invalid_value",
                "Invalid value for 'audio': expected base64-encoded pcm16 audio.",
                param="audio",
                client_event_id=event.get("event_id"),
            )
            return
        keep = self._transcriber is not None and self._transcriber.needs_audio
        turns = self._buffer.append(pcm, event.get("event_id"), recorded=self.role != "narrator", keep=keep)
        for turn, at_ms in turns:
            if turn == "started":
                self._speech_started(at_ms)
            else:
                self._speech_stopped(at_ms)

    def _speech_started(self, audio_start_ms: int) -> None:
        item_id = self._buffer.segment_item_id = self._ids.item()
        self._buffer.segment_start_ms = audio_start_ms
        self._out.send({"type": "input_audio_buffer.speech_started", "audio_start_ms": audio_start_ms, "item_id": item_id})
        detection = session_config.turn_detection(self._session) or {}
        default_run = self._responses.default_run
        if detection.get("interrupt_response") and default_run is not None:
            self._responses.end(default_run, "cancelled", {"type": "cancelled", "reason": "turn_detected"})

    def _speech_stopped(self, audio_end_ms: int) -> None:
        item_id = self._buffer.take_segment_id() or self._ids.item()
        self._out.send({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": audio_end_ms, "item_id": item_id})
        start_ms = self._buffer.segment_start_ms
        self._commit_segment(item_id, max(0, audio_end_ms - start_ms), start_ms, audio_end_ms)
        detection = session_config.turn_detection(self._session) or {}
        if detection.get("create_response") and self._responses.default_run is None:
            self._responses.start({}, client_event_id=None)

    def _commit_audio(self, event: dict[str, Any]) -> None:
        buffer_ms = self._buffer.buffer_ms
        if buffer_ms < MIN_COMMIT_MS:
            self._out.error(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                f"but buffer only has {buffer_ms:.2f}ms of audio.",
                client_event_id=event.get("event_id"),
            )
            return
        item_id = self._buffer.take_segment_id() or self._ids.item()
        self._buffer.reset_vad_segment()
        input_ms = self._buffer.input_ms
        self._commit_segment(item_id, buffer_ms, input_ms - buffer_ms, input_ms)

    def _commit_segment(self, item_id: str, audio_ms: float, start_ms: float, end_ms: float) -> None:
        """The buffered audio (input positions start_ms..end_ms) becomes a user item; what it
        "says" comes from the script, else from the transcriber, else it is the fallback."""
        scripted = self._script.take_transcript()
        segment_pcm = self._buffer.take_kept_audio(start_ms, end_ms)
        if scripted is None and self._transcriber is not None:
            hints, wake_words = session_words(self._session)
            segment = self._buffer.segment(start_ms, end_ms, segment_pcm, self._session, hints, wake_words)
            self._out.add(Transcribe(item_id, segment))
        transcript = scripted or self._config.fallback_transcript
        pending = scripted is None and self._transcriber is not None
        previous = self._conversation.last_id()
        item = {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        entry = Entry(item, text=transcript, audio_ms=audio_ms)
        self._conversation.append(entry)
        self._buffer.committed(entry, start_ms, end_ms)
        self._out.send({"type": "input_audio_buffer.committed", "previous_item_id": previous, "item_id": item_id})
        self._out.send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self._out.send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})
        if pending:
            self._responses.words_pending(item_id)
            return  # the transcript comes with transcript_ready, when the transcriber is done
        if session_config.transcription_enabled(self._session):
            delay = self._performer.transcription_delay_s()
            if delay:  # a real transcriber finishes later, after other events
                self._late_transcripts.append((self._clock() + delay, item_id, transcript, audio_ms))
                self._late_transcripts.sort()
            else:
                self._send_transcript(item_id, transcript, audio_ms)

    def _hear_speech_in_progress(self) -> None:
        """A route sent audio inline while the speech was still in the buffer, and no commit has
        named its words since (the client sends nothing more: muted for the working sound). A
        model hears inline audio at once; this one asks the transcriber for the words of the
        speech so far, without using up what the commit will take (`Segment.peek`)."""
        if self._buffer.segment_item_id is None or self._transcriber is None:
            return
        start = self._buffer.segment_start_ms
        hints, wake_words = session_words(self._session)
        segment = self._buffer.segment(start, self._buffer.input_ms, self._buffer.peek_kept_audio(start), self._session,
                                       hints, wake_words)
        hearing = self._ids.new("hearing")
        self._inline_hearings.add(hearing)
        self._out.add(Transcribe(hearing, dataclasses.replace(segment, peek=True)))

    def _send_transcript(self, item_id: str, transcript: str, audio_ms: float) -> None:
        for delta in text_deltas(transcript):
            self._out.send(
                {
                    "type": "conversation.item.input_audio_transcription.delta",
                    "item_id": item_id,
                    "content_index": 0,
                    "delta": delta,
                }
            )
        self._out.send(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item_id,
                "content_index": 0,
                "transcript": transcript,
                "usage": {"type": "duration", "seconds": max(1, round(audio_ms / 1000))},
            }
        )

    def _clear_audio(self, event: dict[str, Any]) -> None:
        self._buffer.clear()
        self._out.send({"type": "input_audio_buffer.cleared"})
        self._responses.words_named(None, self._config.fallback_transcript)  # the speech they waited for is gone


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
