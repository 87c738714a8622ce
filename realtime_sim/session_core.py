"""The protocol of one Realtime connection as a synchronous state machine.

Fed client frames (and synthesized speech, and clock ticks), it returns what to do: server
events to send, raw frames, a close, a dropped connection, a stall, a request for speech audio.
No I/O, no asyncio: the aiohttp shell in `server.py` performs the outputs.

Behaviour follows the recorded sessions (`shared/fixtures/realtime-recorded`) and
`shared/realtime-protocol.md`: event order, shapes, errors, and the quirks the real server has
(e.g. conversation edits sent while a response is streaming take effect after it finishes).
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from realtime_sim import session_config
from realtime_sim.config import SimConfig
from realtime_sim.fault_matcher import FaultMatcher
from realtime_sim.ids import IdFactory
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
    text_deltas,
)
from realtime_sim.router import route
from realtime_sim.hostile import hostile_frame, huge_answer, many_calls
from realtime_sim.script import Fault, SimScript
from realtime_sim.session_config import Role
from realtime_sim.transcriber import RecordingPosition, Segment, StreamPlaces, Transcriber, session_words
from realtime_sim.validation import ClientEventValidator
from realtime_sim.vad import BYTES_PER_MS, EnergyVad, SpeechStarted

SERVER_ERROR_MESSAGE = (
    "The server had an error while processing your request. Sorry about that! You can retry your "
    "request, or contact us through our help center at help.openai.com if the error persists."
)
SESSION_EXPIRED_MESSAGE = "Your session hit the maximum duration of 60 minutes."
QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more information on "
    "this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)
INVALID_KEY_MESSAGE = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
MODEL_NOT_FOUND_MESSAGE = "The model does not exist or you do not have access to it."
# Refusals after the upgrade: (error type, error code, message; None = no error event), then close 1008 naming it.
REFUSALS: dict[str, tuple[tuple[str, str, str] | None, str]] = {
    "refuse_quota": (("insufficient_quota", "credit_balance_exhausted", QUOTA_MESSAGE), "insufficient_quota"),
    "refuse_quota_close_only": (None, "insufficient_quota"),
    "refuse_key": (("invalid_request_error", "invalid_api_key", INVALID_KEY_MESSAGE), "invalid_api_key"),
    "refuse_model": (("invalid_request_error", "model_not_found", MODEL_NOT_FOUND_MESSAGE), "model_not_found"),
}
MIN_COMMIT_MS = 100
MAX_WAITING_ROUTES = 4  # responses with inline audio waiting for the transcriber (the client routes one at a time)
# Conversation edits the real server applies only after the response in progress is done.
_DEFERRED_WHILE_RESPONDING = frozenset({"conversation.item.create", "conversation.item.delete"})


# -- outputs: what the shell must do ----------------------------------------------------------


@dataclass(frozen=True)
class Send:
    """Send this server event (a protocol event; recorded in `ConnectionRecord.sent`)."""

    event: dict[str, Any]


@dataclass(frozen=True)
class SendRaw:
    """Send this text frame as-is: injected junk that is not a protocol event."""

    text: str


@dataclass(frozen=True)
class Close:
    code: int
    reason: str


@dataclass(frozen=True)
class Drop:
    """Cut the TCP connection without a close frame (the client sees 1006)."""


@dataclass(frozen=True)
class Stall:
    """Hold back every frame after this one for `seconds`."""

    seconds: float


@dataclass(frozen=True)
class Synthesize:
    """Produce speech for `text` and hand it back with `SessionCore.speech_ready(response_id, pcm)`."""

    response_id: str
    text: str


@dataclass(frozen=True)
class Transcribe:
    """Find the words of a committed segment no test scripted, and hand them back with
    `SessionCore.transcript_ready(item_id, text)` (a cue sheet, or the offline recogniser)."""

    item_id: str
    segment: Segment


Output = Send | SendRaw | Close | Drop | Stall | Synthesize | Transcribe

MAX_KEPT_AUDIO_MS = 60_000  # uncommitted input kept for the recogniser (a segment longer than this is cut)


@dataclass(frozen=True)
class PumpResult:
    outputs: list[Output]
    pause_s: float  # how long to wait before pumping again (audio pacing)


@dataclass
class _Entry:
    """One conversation item as the server stores it, plus what the model understood of it."""

    item: dict[str, Any]
    text: str = ""
    audio_ms: float = 0.0
    size: int = 0  # JSON bytes counted against max_conversation_bytes (client-created items)

    @property
    def id(self) -> str:
        return self.item["id"]

    @property
    def kind(self) -> str:
        """The role ("user", "assistant", "system") for messages, else the item type."""
        if self.item["type"] == "message":
            return self.item.get("role") or "message"
        return self.item["type"]


def _has_unheard_audio(message: dict[str, Any]) -> bool:
    """A client message carrying audio inline with no transcript: the model hears it itself."""
    return message.get("type") == "message" and any(
        p.get("type") == "input_audio" and p.get("transcript") is None for p in message.get("content") or [])


def _audio_ms(message: dict[str, Any]) -> float:
    """How long the audio a client message carries inline (base64 pcm16 24 kHz) lasts, in ms."""
    return sum(len(p.get("audio") or "") * 3 / 4 / BYTES_PER_MS for p in message.get("content") or [])


def _client_item_text(item: dict[str, Any]) -> str:
    if item["type"] == "function_call":
        return item.get("arguments", "")
    if item["type"] == "function_call_output":
        return item.get("output", "")
    texts = [part.get("text") or part.get("transcript") or "" for part in item.get("content") or []]
    return " ".join(t for t in texts if t)


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
        self._recording = recording
        self._recording_offset: float | None = None  # where this session's audio starts in the recording
        self._places = StreamPlaces()  # ... as the client's appends name it (preferred)
        # The last segment committed, and the input position it ended at: audio sent inline in a
        # response after the server already committed that speech is heard as what it said.
        self._last_segment: tuple[_Entry, float, float] | None = None  # (entry, start ms, end ms)
        self._words_pending: set[str] = set()  # committed segments the transcriber has not named yet
        # Routes whose inline audio's words the transcriber has not named yet: (params, client event
        # id, the segment they wait for; None: the one still in the buffer). A model hears audio
        # at once; this one answers once it knows what the audio says.
        self._waiting_routes: list[tuple[dict[str, Any], str | None, str | None]] = []
        self._kept_audio = bytearray()  # uncommitted input, for a transcriber that listens
        self._kept_from_ms = 0.0  # the input position where _kept_audio begins
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
        self._conversation_id = ids.new("conv")
        seed = None if config.seed is None else f"{config.seed}:{self._session['id']}"
        self._performer = Performer(config, random.Random(seed))
        self._hostile = random.Random(f"hostile:{seed}" if seed is not None else None)  # mistyped_frame faults
        # Transcripts still being "transcribed": (due on the clock, item id, transcript, audio ms).
        self._late_transcripts: list[tuple[float, str, str, float]] = []
        self._configured = False  # role is unknown until the client configures or asks for a response
        self._entries: list[_Entry] = []
        self._conversation_bytes = 0  # JSON size of the items clients created (the cap's measure)
        self._vad: EnergyVad | None = None
        self._vad_offset_ms = 0.0  # input audio received before the current detector was made
        self._input_ms = 0.0  # all input audio received, in ms
        self._buffer_ms = 0.0  # input audio not yet committed or cleared
        self._segment_item_id: str | None = None
        self._segment_start_ms = 0
        self._runs: dict[str, ResponseRun] = {}
        self._default_run: ResponseRun | None = None
        self._deferred: deque[dict[str, Any]] = deque()
        self._fail_next_response: dict[str, Any] | None = None  # the status_details of the next response's failure
        self._audio_produced = False
        self._rate_remaining = config.rate_limit_tokens
        self._faults = FaultMatcher(script, random_faults)
        self._closed = False
        self._out: list[Output] = []
        self.received: list[dict[str, Any]] = []  # client events (when config.record_events)
        self.faults_applied: list[Fault] = []
        self._reconfigure_vad()

    # -- state the shell reads ---------------------------------------------------------------

    @property
    def session(self) -> dict[str, Any]:
        return self._session

    @property
    def role(self) -> Role:
        return session_config.role_of(self._session) if self._configured else "unknown"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def has_runnable_work(self) -> bool:
        return not self._closed and any(not r.finished and not r.waiting_for_speech for r in self._runs.values())

    def next_deadline(self) -> float | None:
        """The next clock time (monotonic) at which `tick()` has something to do."""
        if self._closed:
            return None
        deadlines = [self._expires_at_mono] + [due for due, *_ in self._late_transcripts[:1]]
        next_fault_age = self._faults.next_due_s(self._clock() - self._opened_at)
        if next_fault_age is not None:
            deadlines.append(self._opened_at + next_fault_age)
        return min(deadlines)

    # -- inputs ----------------------------------------------------------------------------

    def start(self) -> list[Output]:
        self._send({"type": "session.created", "session": self._session})
        return self._finish_call()

    def handle_client_text(self, text: str) -> list[Output]:
        if self._closed:
            return []
        try:
            event = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nesting too deep to parse; the session goes on
            self._error(
                "invalid_json",
                "The server could not parse your message as JSON. Send one JSON object per text frame.",
            )
            return self._finish_call()
        if isinstance(event, dict) and self._config.record_events:
            self.received.append(event)
        problem = self._validator.check(event)
        if problem is not None:
            client_event_id = event.get("event_id") if isinstance(event, dict) else None
            self._error(problem.code, problem.message, param=problem.param, client_event_id=_str_or_none(client_event_id))
        elif event["type"] in _DEFERRED_WHILE_RESPONDING and self._default_run is not None:
            self._deferred.append(event)
        else:
            self._dispatch(event)
        return self._finish_call()

    def handle_client_binary(self) -> list[Output]:
        self._error("invalid_value", "Binary frames are not supported; send JSON text frames.")
        return self._finish_call()

    def speech_ready(self, response_id: str, pcm: bytes) -> list[Output]:
        run = self._runs.get(response_id)
        if run is not None and run.waiting_for_speech and not self._closed:
            self._audio_produced = True
            self._advance(run, pcm)
        return self._finish_call()

    def transcript_ready(self, item_id: str, text: str) -> list[Output]:
        """The words of a segment the transcriber was asked for ("" = none it could make out)."""
        transcript = text.strip() or self._config.fallback_transcript
        index = self._index_of(item_id)
        if index is not None:  # the model understands the item as what was recognised
            self._entries[index].text = transcript
        self._words_pending.discard(item_id)
        self._resume_routes(item_id, transcript)
        if not self._closed and session_config.transcription_enabled(self._session):
            audio_ms = self._entries[index].audio_ms if index is not None else 0.0
            self._send_transcript(item_id, transcript, audio_ms)
        return self._finish_call()

    def pump(self) -> PumpResult:
        paused = False
        for run in list(self._runs.values()):
            if not run.finished and not run.waiting_for_speech and not self._closed:
                paused = self._advance(run) or paused
        return PumpResult(self._finish_call(), self._config.audio_frame_delay_s if paused else 0.0)

    def tick(self) -> list[Output]:
        return self._finish_call()

    def shutdown(self) -> list[Output]:
        """The server is stopping: close like a server going away."""
        if not self._closed:
            self._close(Close(1001, "server shutting down"))
        return self._finish_call()

    # -- plumbing ----------------------------------------------------------------------------

    def _finish_call(self) -> list[Output]:
        self._check_clock()
        out, self._out = self._out, []
        return out

    def _send(self, event: dict[str, Any]) -> None:
        if self._closed:
            return
        stamped = {"type": event["type"], "event_id": self._ids.event(), **event}
        self._out.append(Send(stamped))
        self._after_sent(event["type"])

    def _error(
        self,
        code: str | None,
        message: str,
        *,
        param: str | None = None,
        client_event_id: str | None = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        self._send(
            {
                "type": "error",
                "error": {"type": error_type, "code": code, "message": message, "param": param, "event_id": client_event_id},
            }
        )

    def _close(self, output: Close | Drop) -> None:
        self._out.append(output)
        self._closed = True

    # -- faults ------------------------------------------------------------------------------

    def _after_sent(self, event_type: str) -> None:
        for fault in self._faults.after_sent(event_type, self.role):
            self._apply_fault(fault)
            if self._closed:
                break

    def _check_clock(self) -> None:
        if self._closed:
            return
        now = self._clock()
        if now >= self._expires_at_mono:
            self._expire()
            return
        while self._late_transcripts and self._late_transcripts[0][0] <= now and not self._closed:
            _due, item_id, transcript, audio_ms = self._late_transcripts.pop(0)
            self._send_transcript(item_id, transcript, audio_ms)
        for fault in self._faults.due(now - self._opened_at, self.role):
            self._apply_fault(fault)
            if self._closed:
                break

    def _expire(self) -> None:
        self._error("session_expired", SESSION_EXPIRED_MESSAGE)
        self._close(Close(1001, "session expired"))

    def _apply_fault(self, fault: Fault) -> None:
        self.faults_applied.append(fault)
        kind = fault.kind
        if kind == "drop":
            self._close(Drop())
        elif kind == "close_1011":
            self._close(Close(1011, "simulated server fault"))
        elif kind == "session_expired":
            self._expire()
        elif kind == "delay":
            self._out.append(Stall(fault.delay_s))
        elif kind == "server_error":
            self._error(None, SERVER_ERROR_MESSAGE, error_type="server_error")
        elif kind in ("response_failed", "response_failed_quota"):
            details = _failed_details() if kind == "response_failed" else _quota_details()
            active = next((r for r in self._runs.values() if not r.finished), None)
            if active is None:
                self._fail_next_response = details
            else:
                self._end_run(active, "failed", details)
        elif kind == "quota_error":
            self._error("credit_balance_exhausted", QUOTA_MESSAGE, error_type="insufficient_quota")
        elif kind == "session_expired_no_code":
            self._error(None, SESSION_EXPIRED_MESSAGE)
            self._close(Close(1001, "session expired"))
        elif kind in REFUSALS:
            error, reason = REFUSALS[kind]
            if error is not None:
                error_type, code, message = error
                self._error(code, message, error_type=error_type)
            self._close(Close(1008, reason))
        elif kind in ("many_calls", "huge_answer"):
            active = next((r for r in self._runs.values() if not r.finished), None)
            response_id = active.response_id if active is not None else self._ids.new("resp")
            self._out.append(SendRaw(many_calls(response_id) if kind == "many_calls" else huge_answer(response_id)))
        elif kind == "mistyped_frame":
            self._out.append(SendRaw(hostile_frame(self._hostile, oversized_share=0.1)))
        elif kind == "malformed_frame":
            self._out.append(SendRaw('{"type": "response.output_text.delta", "delta": "trunc'))
        elif kind == "unknown_event":
            self._out.append(
                SendRaw(json.dumps({"type": "response.sim_unannounced", "event_id": self._ids.event(), "detail": "x"}))
            )
        # handshake faults never reach a session: the shell refuses the upgrade

    # -- client events -----------------------------------------------------------------------

    def _dispatch(self, event: dict[str, Any]) -> None:
        handler = {
            "session.update": self._session_update,
            "input_audio_buffer.append": self._append_audio,
            "input_audio_buffer.commit": self._commit_audio,
            "input_audio_buffer.clear": self._clear_audio,
            "conversation.item.create": self._create_item,
            "conversation.item.delete": self._delete_item,
            "conversation.item.retrieve": self._retrieve_item,
            "conversation.item.truncate": self._truncate_item,
            "response.create": self._create_response,
            "response.cancel": self._cancel_response,
            "output_audio_buffer.clear": self._clear_output_audio,
        }[event["type"]]
        handler(event)

    def _session_update(self, event: dict[str, Any]) -> None:
        update = event["session"]
        event_id = event.get("event_id")
        if update.get("type") != "realtime":
            self._error(
                "invalid_value",
                "This is a realtime session; session.type must be 'realtime' (transcription sessions are not simulated).",
                param="session.type",
                client_event_id=event_id,
            )
            return
        new_voice = ((update.get("audio") or {}).get("output") or {}).get("voice")
        if self._audio_produced and new_voice is not None and new_voice != session_config.voice(self._session):
            self._error(
                "cannot_update_voice",
                "Cannot update a conversation's voice if assistant audio is present.",
                param="session.audio.output.voice",
                client_event_id=event_id,
            )
            return
        self._session = session_config.apply_update(self._session, update)
        self._configured = True
        self._reconfigure_vad()
        self._send({"type": "session.updated", "session": self._session})

    def _reconfigure_vad(self) -> None:
        settings = session_config.vad_settings(self._session)
        if settings is None:
            self._vad = None
        elif self._vad is None:
            self._vad = EnergyVad(settings)
            self._vad_offset_ms = self._input_ms
        else:
            self._vad.update_settings(settings)

    def _append_audio(self, event: dict[str, Any]) -> None:
        try:
            pcm = base64.b64decode(event["audio"], validate=True)
        except (binascii.Error, ValueError):
            self._error(
                "invalid_value",
                "Invalid value for 'audio': expected base64-encoded pcm16 audio.",
                param="audio",
                client_event_id=event.get("event_id"),
            )
            return
        ms = len(pcm) / BYTES_PER_MS
        if self._recording is not None and self.role != "narrator":
            if self._recording_offset is None:
                self._recording_offset = self._recording.total_ms - self._input_ms
            self._recording.total_ms += ms
        self._places.note(self._input_ms, event.get("event_id"))
        if self._transcriber is not None and self._transcriber.needs_audio:
            self._keep_audio(pcm)
        self._input_ms += ms
        self._buffer_ms += ms
        if self._vad is None:
            return
        for vad_event in self._vad.feed(pcm):
            if isinstance(vad_event, SpeechStarted):
                self._speech_started(int(vad_event.audio_start_ms + self._vad_offset_ms))
            else:
                self._speech_stopped(int(vad_event.audio_end_ms + self._vad_offset_ms))

    def _speech_started(self, audio_start_ms: int) -> None:
        self._segment_item_id = self._ids.item()
        self._segment_start_ms = audio_start_ms
        self._send(
            {"type": "input_audio_buffer.speech_started", "audio_start_ms": audio_start_ms, "item_id": self._segment_item_id}
        )
        detection = session_config.turn_detection(self._session) or {}
        if detection.get("interrupt_response") and self._default_run is not None:
            self._end_run(self._default_run, "cancelled", {"type": "cancelled", "reason": "turn_detected"})

    def _speech_stopped(self, audio_end_ms: int) -> None:
        item_id = self._segment_item_id or self._ids.item()
        self._segment_item_id = None
        self._send({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": audio_end_ms, "item_id": item_id})
        self._commit_segment(item_id, max(0, audio_end_ms - self._segment_start_ms), self._segment_start_ms, audio_end_ms)
        detection = session_config.turn_detection(self._session) or {}
        if detection.get("create_response") and self._default_run is None:
            self._start_response({}, client_event_id=None)

    def _commit_audio(self, event: dict[str, Any]) -> None:
        if self._buffer_ms < MIN_COMMIT_MS:
            self._error(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                f"but buffer only has {self._buffer_ms:.2f}ms of audio.",
                client_event_id=event.get("event_id"),
            )
            return
        item_id = self._segment_item_id or self._ids.item()
        self._segment_item_id = None
        if self._vad is not None:
            self._vad.reset_segment()
        self._commit_segment(item_id, self._buffer_ms, self._input_ms - self._buffer_ms, self._input_ms)

    def _commit_segment(self, item_id: str, audio_ms: float, start_ms: float, end_ms: float) -> None:
        """The buffered audio (input positions start_ms..end_ms) becomes a user item; what it
        "says" comes from the script, else from the transcriber, else it is the fallback."""
        scripted = self._script.take_transcript()
        segment_pcm = self._take_kept_audio(start_ms, end_ms)
        if scripted is None and self._transcriber is not None:
            hints, wake_words = session_words(self._session)
            offset = self._recording_offset or 0.0
            placed_start, placed_end = self._places.place(start_ms), self._places.place(end_ms, ending=True)
            if placed_start is None or placed_end is None:
                placed_start, placed_end = offset + start_ms, offset + end_ms
            segment = Segment(placed_start, placed_end, segment_pcm, hints, wake_words,
                              session=str(self._session.get("id", "")), session_start_ms=self._places.first_ms)
            self._out.append(Transcribe(item_id, segment))
        transcript = scripted or self._config.fallback_transcript
        pending = scripted is None and self._transcriber is not None
        previous = self._entries[-1].id if self._entries else None
        item = {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        entry = _Entry(item, text=transcript, audio_ms=audio_ms)
        self._entries.append(entry)
        self._last_segment = (entry, start_ms, end_ms)
        self._buffer_ms = 0.0
        self._send({"type": "input_audio_buffer.committed", "previous_item_id": previous, "item_id": item_id})
        self._send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self._send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})
        if pending:
            self._words_pending.add(item_id)
            self._waiting_routes = [(p, e, item_id if waits is None else waits) for p, e, waits in self._waiting_routes]
            return  # the transcript comes with transcript_ready, when the transcriber is done
        if session_config.transcription_enabled(self._session):
            delay = self._performer.transcription_delay_s()
            if delay:  # a real transcriber finishes later, after other events
                self._late_transcripts.append((self._clock() + delay, item_id, transcript, audio_ms))
                self._late_transcripts.sort()
            else:
                self._send_transcript(item_id, transcript, audio_ms)

    def _send_transcript(self, item_id: str, transcript: str, audio_ms: float) -> None:
        for delta in text_deltas(transcript):
            self._send(
                {
                    "type": "conversation.item.input_audio_transcription.delta",
                    "item_id": item_id,
                    "content_index": 0,
                    "delta": delta,
                }
            )
        self._send(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item_id,
                "content_index": 0,
                "transcript": transcript,
                "usage": {"type": "duration", "seconds": max(1, round(audio_ms / 1000))},
            }
        )

    def _keep_audio(self, pcm: bytes) -> None:
        self._kept_audio += pcm
        excess = len(self._kept_audio) - MAX_KEPT_AUDIO_MS * BYTES_PER_MS
        if excess > 0:
            excess -= excess % 2
            del self._kept_audio[:excess]
            self._kept_from_ms += excess / BYTES_PER_MS

    def _take_kept_audio(self, start_ms: float, end_ms: float) -> bytes:
        """The kept input between two positions; what came before `end_ms` is dropped."""
        if not self._kept_audio:
            return b""
        first = max(0, int((start_ms - self._kept_from_ms) * BYTES_PER_MS) & ~1)
        last = max(first, int((end_ms - self._kept_from_ms) * BYTES_PER_MS) & ~1)
        pcm = bytes(self._kept_audio[first:last])
        del self._kept_audio[:last]
        self._kept_from_ms += last / BYTES_PER_MS
        return pcm

    def _clear_audio(self, event: dict[str, Any]) -> None:
        if self._kept_audio:
            self._kept_from_ms += len(self._kept_audio) / BYTES_PER_MS
            self._kept_audio.clear()
        self._buffer_ms = 0.0
        self._segment_item_id = None
        if self._vad is not None:
            self._vad.reset_segment()
        self._send({"type": "input_audio_buffer.cleared"})
        self._resume_routes(None, self._config.fallback_transcript)  # the speech they waited for is gone

    # conversation items

    def _index_of(self, item_id: str) -> int | None:
        return next((i for i, entry in enumerate(self._entries) if entry.id == item_id), None)

    def _create_item(self, event: dict[str, Any]) -> None:
        raw = event["item"]
        if raw["type"] not in ("message", "function_call", "function_call_output"):
            self._error(
                "invalid_value",
                f"Invalid value: '{raw['type']}'. The simulator supports message, function_call and "
                "function_call_output items.",
                param="item.type",
                client_event_id=event.get("event_id"),
            )
            return
        after = event.get("previous_item_id")
        if after is None:
            position = len(self._entries)
        elif after == "root":
            position = 0
        else:
            index = self._index_of(after)
            if index is None:
                self._error(
                    "item_create_invalid_previous_item_id",
                    f"Error adding item: the previous item with id '{after}' does not exist.",
                    param="previous_item_id",
                    client_event_id=event.get("event_id"),
                )
                return
            position = index + 1
        item_id = raw.get("id") or self._ids.item()
        if self._index_of(item_id) is not None:
            self._error(
                "item_create_duplicate_id",
                f"Error adding item: an item with id '{item_id}' already exists.",
                param="item.id",
                client_event_id=event.get("event_id"),
            )
            return
        item, text = self._stored_item(item_id, raw)
        size = len(json.dumps(item))
        if len(self._entries) >= self._config.max_conversation_items or self._conversation_bytes + size > self._config.max_conversation_bytes:
            self._error(
                "conversation_too_large",
                f"The conversation is full (at most {self._config.max_conversation_items} items and "
                f"{self._config.max_conversation_bytes} bytes); delete items before adding more.",
                client_event_id=event.get("event_id"),
            )
            return
        self._conversation_bytes += size
        self._entries.insert(position, _Entry(item, text=text, size=size))
        previous = self._entries[position - 1].id if position > 0 else None
        self._send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self._send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    def _stored_item(self, item_id: str, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The item as the server reports it (recorded shapes) and what the model takes it to say."""
        if raw["type"] == "function_call_output":
            item = {"id": item_id, "type": "function_call_output", "call_id": raw["call_id"], "output": raw["output"]}
            return item, raw["output"]
        if raw["type"] == "function_call":
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "completed",
                "name": raw["name"],
                "call_id": raw.get("call_id") or self._ids.call(),
                "arguments": raw["arguments"],
            }
            return item, raw["arguments"]
        content = []
        text_parts = []
        for part in raw.get("content") or []:
            if part["type"] == "input_audio":
                transcript = part.get("transcript")
                if transcript is None:
                    transcript = self._script.take_transcript() or self._config.fallback_transcript
                text_parts.append(transcript)
                content.append({"type": "input_audio", "transcript": part.get("transcript")})
            else:
                content.append(dict(part))
                text_parts.append(part.get("text") or part.get("transcript") or "")
        item = {"id": item_id, "type": "message", "status": "completed", "role": raw["role"], "content": content}
        return item, " ".join(t for t in text_parts if t)

    def _existing_item(self, event: dict[str, Any], verb: str, noun: str) -> int | None:
        """The index of the item an event names, or None after sending the real server's error."""
        index = self._index_of(event["item_id"])
        if index is None:
            self._error(
                f"item_{verb}_invalid_item_id",
                f"Error {noun} item: the item with id '{event['item_id']}' does not exist.",
                client_event_id=event.get("event_id"),
            )
        return index

    def _delete_item(self, event: dict[str, Any]) -> None:
        index = self._existing_item(event, "delete", "deleting")
        if index is None:
            return
        self._conversation_bytes -= self._entries[index].size
        del self._entries[index]
        self._send({"type": "conversation.item.deleted", "item_id": event["item_id"]})

    def _retrieve_item(self, event: dict[str, Any]) -> None:
        index = self._existing_item(event, "retrieve", "retrieving")
        if index is None:
            return
        self._send({"type": "conversation.item.retrieved", "item": self._entries[index].item})

    def _truncate_item(self, event: dict[str, Any]) -> None:
        index = self._existing_item(event, "truncate", "truncating")
        if index is None:
            return
        self._send(
            {
                "type": "conversation.item.truncated",
                "item_id": event["item_id"],
                "content_index": event["content_index"],
                "audio_end_ms": event["audio_end_ms"],
            }
        )

    def _clear_output_audio(self, event: dict[str, Any]) -> None:
        self._error(
            "invalid_value",
            "output_audio_buffer.clear is only supported on WebRTC and SIP connections; on a WebSocket, "
            "stop playback yourself and send conversation.item.truncate.",
            param="type",
            client_event_id=event.get("event_id"),
        )

    # responses

    def _create_response(self, event: dict[str, Any]) -> None:
        self._configured = True
        self._start_response(event.get("response") or {}, client_event_id=event.get("event_id"))

    def _resume_routes(self, segment: str | None, words: str) -> None:
        """Answer the routes that waited for `segment`'s words (None: for the buffer's segment)."""
        ready = [(p, e) for p, e, waits in self._waiting_routes if waits == segment]
        self._waiting_routes = [r for r in self._waiting_routes if r[2] != segment]
        for params, client_event_id in ready:
            self._start_response(params, client_event_id=client_event_id, inline_words=words)

    def _start_response(self, params: dict[str, Any], *, client_event_id: str | None, inline_words: str | None = None) -> None:
        out_of_band = params.get("conversation") == "none"
        if not out_of_band and self._default_run is not None:
            self._error(
                "conversation_already_has_active_response",
                f"Conversation already has an active response in progress: {self._default_run.response_id}. "
                "Wait until the response is finished before creating a new one.",
                client_event_id=client_event_id,
            )
            return
        if inline_words is None and (waits := self._inline_wait(params)) is not None:
            if len(self._waiting_routes) < MAX_WAITING_ROUTES:
                self._waiting_routes.append((params, client_event_id, waits or None))
                return
        context = self._response_context(params, client_event_id, inline_words)
        if context is None:
            return
        session = self._session
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
            conversation=None if out_of_band else _ConversationWriter(self._entries),
            input_tokens=TokenEstimate(
                text=sum(len(e.text) // 4 + 1 for e in context if not e.audio_ms)
                + len(params.get("instructions") or session["instructions"]) // 4,
                audio=sum(int(e.audio_ms / 100) for e in context),  # user audio: 1 token per 100 ms
            ),
        )
        self._runs[run.response_id] = run
        if not out_of_band:
            self._default_run = run
        if self._fail_next_response is not None:
            details, self._fail_next_response = self._fail_next_response, None
            self._advance_one(run)  # response.created
            if not run.finished:
                self._end_run(run, "failed", details)
            return
        self._advance(run)

    def _response_context(self, params: dict[str, Any], client_event_id: str | None,
                          inline_words: str | None = None) -> list[_Entry] | None:
        """What the model reads: the `input` items if given, else the conversation."""
        if "input" not in params:
            return list(self._entries)
        context: list[_Entry] = []
        for index, raw in enumerate(params["input"]):
            if raw.get("type") == "item_reference":
                found = self._index_of(raw["id"])
                if found is None:
                    self._error(
                        "invalid_value",
                        f"Invalid value: item '{raw['id']}' is not in this session's conversation.",
                        param=f"response.input[{index}].id",
                        client_event_id=client_event_id,
                    )
                    return None
                context.append(self._entries[found])
            else:
                if _has_unheard_audio(raw):
                    # Audio sent inline (a command routed at the client's own end of turn): the
                    # same speech is also in the input buffer, where its segment's transcript is
                    # taken at the commit; the model hears what it says without using that up.
                    heard = inline_words or self._inline_words(raw)
                    raw = {**raw, "content": [{**p, "transcript": heard} if p.get("type") == "input_audio" else p
                                              for p in raw["content"]]}
                item, text = self._stored_item(raw.get("id") or self._ids.item(), raw)
                context.append(_Entry(item, text=text, audio_ms=_audio_ms(raw)))
        return context

    def _inline_segment(self, message: dict[str, Any]) -> _Entry | None:
        """The segment the server committed from the same speech as audio sent inline, if its VAD
        ended the turn first: the one that covers more of the span the inline audio covers (the
        input's last `audio ms`) than the segment now in the buffer does. New speech may have
        begun since the commit (a cough, the next words): the inline audio is still the
        committed segment's, and must be heard as its words, not the new segment's."""
        if self._last_segment is None:
            return None
        entry, started_ms, ended_ms = self._last_segment
        span_start = self._input_ms - _audio_ms(message)
        committed = max(0.0, ended_ms - max(started_ms, span_start))
        buffered = self._input_ms - max(self._segment_start_ms, span_start) if self._segment_item_id is not None else 0.0
        return entry if committed > 0 and committed >= buffered else None

    def _inline_words(self, message: dict[str, Any]) -> str:
        """What audio sent inline says: the words of its committed segment (see `_inline_segment`),
        else of the segment still in the buffer (scripted, peeked, not taken)."""
        entry = self._inline_segment(message)
        if entry is not None:
            return entry.text
        return self._script.peek_transcript() or self._config.fallback_transcript

    def _inline_wait(self, params: dict[str, Any]) -> str | None:
        """The segment whose words a response with audio inline must wait for ("" for the one still
        in the buffer), or None: they are known (scripted), or no transcriber will name them."""
        if self._transcriber is None or "input" not in params:
            return None
        for raw in params["input"]:
            if _has_unheard_audio(raw):
                entry = self._inline_segment(raw)
                if entry is not None:
                    return entry.id if entry.id in self._words_pending else None
                if self._segment_item_id is not None and self._script.peek_transcript() is None:
                    return ""
        return None

    def _plan(
        self, context: list[_Entry], modalities: list[str], tools: list[dict[str, Any]], tool_choice: Any,
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

    def _cancel_response(self, event: dict[str, Any]) -> None:
        wanted = event.get("response_id")
        run = self._runs.get(wanted) if wanted else self._default_run
        if run is None or run.finished:
            self._error(
                "response_cancel_not_active",
                "Cancellation failed: no active response found",
                client_event_id=event.get("event_id"),
            )
            return
        self._end_run(run, "cancelled", {"type": "cancelled", "reason": "client_cancelled"})

    # -- driving responses -------------------------------------------------------------------

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
                self._send(event)
        elif isinstance(step, NeedSpeech):
            self._out.append(Synthesize(run.response_id, step.text))
        return step

    def _advance(self, run: ResponseRun, value: bytes | None = None) -> bool:
        """Run until the response pauses for pacing (True), waits for speech, or ends (False)."""
        while run.response_id in self._runs and not self._closed:
            step = self._advance_one(run, value)
            value = None
            if step is None or isinstance(step, NeedSpeech):
                return False
            if step is FRAME_PAUSE:
                return True
        return False

    def _end_run(self, run: ResponseRun, status: str, details: dict[str, Any]) -> None:
        if run.finished or run.response_id not in self._runs:
            return
        for event in run.finish_early(status, details):
            self._send(event)
        self._after_run(run)

    def _after_run(self, run: ResponseRun) -> None:
        if self._runs.pop(run.response_id, None) is None:
            return
        if self._default_run is run:
            self._default_run = None
        self._rate_remaining = max(0, self._rate_remaining - run.total_tokens())
        self._send(
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
        while self._deferred and self._default_run is None and not self._closed:
            self._dispatch(self._deferred.popleft())


class _ConversationWriter:
    """Lets a default-conversation response append and finish its output item."""

    def __init__(self, entries: list[_Entry]) -> None:
        self._entries = entries

    def item_added(self, item: dict[str, Any]) -> str | None:
        previous = self._entries[-1].id if self._entries else None
        self._entries.append(_Entry(item))
        return previous

    def item_done(self, item: dict[str, Any]) -> str | None:
        for index, entry in enumerate(self._entries):
            if entry.id == item["id"]:
                entry.item = item
                entry.text = _client_item_text(item)
                return self._entries[index - 1].id if index > 0 else None
        return None  # the client deleted it meanwhile


def _default_answer(last: _Entry | None, speaks: bool) -> str:
    """What the model says when nothing is scripted: a narrator reads the user's text verbatim; a
    text answer restates a tool result or acknowledges the user."""
    if last is None or not last.text:
        return "Okay."
    if last.kind == "function_call_output":
        return last.text[:300]
    if last.kind == "user":
        return last.text if speaks else f"I heard: {last.text}"
    return "Okay."


def _failed_details() -> dict[str, Any]:
    return {"type": "failed", "error": {"type": "server_error", "code": "server_error", "message": SERVER_ERROR_MESSAGE}}


def _quota_details() -> dict[str, Any]:
    return {"type": "failed", "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": QUOTA_MESSAGE}}


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
