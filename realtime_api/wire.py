"""The one place that parses the Realtime wire, and builds the client events we send.

Server frames become small tagged dataclasses. Parsing never raises: a frame that is not JSON, or
whose fields are missing or of the wrong type (every field is type-checked here, so the cores
get only what their dataclasses promise), becomes `Malformed`; an unknown type becomes
`Unhandled`, so the receive loops survive anything the server sends. Free text is capped
(`MAX_TRANSCRIPT_CHARS`, `MAX_TEXT_CHARS`) and at most `MAX_FUNCTION_CALLS` calls are read. Dispatch is on `type` (the SDK does not validate frames; real ones carry fields
it does not declare).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable, Union

from realtime_api.fatal import ErrorKind, Verdict, classify
from safety.text import clean

# User audio is billed at 1 token per 100 ms (OpenAI's Realtime cost guide): a token-billed
# transcription's audio tokens say how long the audio was.
AUDIO_INPUT_TOKENS_PER_SECOND = 10
# An audio append's id names where its chunk lies in the microphone's stream: `mic_<ms>`.
MIC_EVENT_PREFIX = "mic_"


# --- usage, as response.done and transcription.completed report it ------------------------------


@dataclass(frozen=True)
class Usage:
    """A response's tokens (response.done `usage`). Cached tokens are part of the input counts."""

    input_text_tokens: int = 0
    input_audio_tokens: int = 0
    cached_text_tokens: int = 0
    cached_audio_tokens: int = 0
    output_text_tokens: int = 0
    output_audio_tokens: int = 0

    @property
    def cached_tokens(self) -> int:
        return self.cached_text_tokens + self.cached_audio_tokens


@dataclass(frozen=True)
class TranscriptionUsage:
    """What one input transcription cost: a duration (whisper-class models) or tokens (gpt-4o-*-transcribe)."""

    seconds: float = 0.0  # `{"type": "duration", "seconds": N}`
    input_audio_tokens: int = 0  # `{"type": "tokens", ...}`
    input_text_tokens: int = 0  # the prompt (our transcription hints)
    output_tokens: int = 0

    @property
    def audio_seconds(self) -> float:
        """The audio transcribed, from the duration or else from the audio tokens."""
        return self.seconds or self.input_audio_tokens / AUDIO_INPUT_TOKENS_PER_SECOND


# --- server events, as the listener and narrator cores see them ---------------------------------


@dataclass(frozen=True)
class SessionCreated:
    session_id: str
    expires_at: int | None


@dataclass(frozen=True)
class SessionUpdated:
    output_modalities: tuple[str, ...]


@dataclass(frozen=True)
class SpeechStarted:
    item_id: str
    audio_start_ms: int


@dataclass(frozen=True)
class SpeechStopped:
    item_id: str
    audio_end_ms: int


@dataclass(frozen=True)
class AudioCommitted:
    item_id: str


@dataclass(frozen=True)
class TranscriptCompleted:
    item_id: str
    transcript: str
    usage: TranscriptionUsage = TranscriptionUsage()


@dataclass(frozen=True)
class TranscriptFailed:
    item_id: str
    message: str


@dataclass(frozen=True)
class ItemDeleted:
    item_id: str


@dataclass(frozen=True)
class ResponseCreated:
    response_id: str
    metadata: dict[str, Any] | None


@dataclass(frozen=True)
class FunctionCall:
    call_id: str
    name: str
    arguments: str
    item_id: str


@dataclass(frozen=True)
class ResponseDone:
    response_id: str
    status: str  # completed | cancelled | failed | incomplete
    function_calls: tuple[FunctionCall, ...]
    text: str  # text output (text sessions), joined
    transcript: str  # audio transcript (audio sessions), joined
    metadata: dict[str, Any] | None
    failure: str | None  # status_details reason / error message when not completed
    error: Verdict | None = None  # what status_details.error means (a failed response: quota, ...)
    usage: Usage = Usage()  # zero when the server reported none
    calls_dropped: int = 0  # function calls past MAX_FUNCTION_CALLS, not read


@dataclass(frozen=True)
class AudioDelta:
    response_id: str
    pcm: bytes


@dataclass(frozen=True)
class AudioTranscriptDone:
    response_id: str
    transcript: str


@dataclass(frozen=True)
class ServerError:
    code: str | None
    message: str
    error_type: str | None
    client_event_id: str | None

    @property
    def verdict(self) -> Verdict:
        return classify(self.error_type, self.code, self.message)

    @property
    def fatal(self) -> bool:
        return self.verdict.fatal

    @property
    def session_expired(self) -> bool:
        """By its code, or by its message alone (it sometimes arrives without the code)."""
        return self.verdict.kind is ErrorKind.SESSION_EXPIRED


@dataclass(frozen=True)
class Malformed:
    reason: str


@dataclass(frozen=True)
class Unhandled:
    type: str


@dataclass(frozen=True)
class Closed:
    """Made by the connection shell when the socket ends (1006 when no close frame arrived)."""

    code: int
    reason: str = ""

    @property
    def verdict(self) -> Verdict:
        """What the close's reason says: the service closes a refused account with 1008 and the
        error's code ("insufficient_quota", "invalid_api_key"), sometimes with no error event."""
        reason = self.reason.strip()
        word = reason if reason and " " not in reason and len(reason) <= 100 else None
        return classify(word, word, reason or None)


ServerEvent = Union[
    SessionCreated,
    SessionUpdated,
    SpeechStarted,
    SpeechStopped,
    AudioCommitted,
    TranscriptCompleted,
    TranscriptFailed,
    ItemDeleted,
    ResponseCreated,
    ResponseDone,
    AudioDelta,
    AudioTranscriptDone,
    ServerError,
    Malformed,
    Unhandled,
    Closed,
]


# Caps on what one frame may hand the rest of the program (a hostile or broken server can send
# anything): longer text is cut, more function calls than this are not read (see docs/HANDOFF.md).
MAX_TRANSCRIPT_CHARS = 1_000  # a heard utterance: about a minute of fast speech
MAX_TEXT_CHARS = 20_000  # a response's text or audio transcript, an error message, ids, names
MAX_MESSAGE_CHARS = 500  # an error's message (it is logged)
MAX_FUNCTION_CALLS = 64  # read from one response.done; the core runs even fewer
CUT_MARK = " [cut]"


class Unfit(ValueError):
    """A field of a server event is missing or of the wrong type (caught in this module)."""


def parse_server_frame(frame: str | bytes) -> ServerEvent:
    """Parse one raw frame. Never raises."""
    try:
        data = json.loads(frame)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        return Malformed(f"frame is not JSON ({exc.__class__.__name__})")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        return Malformed("frame has no event type")
    return parse_server_event(data)


def parse_server_event(data: dict[str, Any]) -> ServerEvent:
    """One decoded frame as an event; a frame whose fields do not fit is `Malformed`. Never raises."""
    kind = data.get("type")
    if not isinstance(kind, str):
        return Malformed("frame has no event type")
    parser = _PARSERS.get(kind)
    if parser is None:
        return Unhandled(_cut(kind, 100))
    try:
        return parser(data)
    except Unfit as exc:
        return Malformed(f"{kind} event could not be read: {exc}")


# --- typed field readers: each returns the field's value or raises Unfit ---------------------------


def _cut(text: str, limit: int) -> str:
    """Every string a frame hands on passes here: bounded, and a lone surrogate (a JSON `\\ud800`
    escape, which no log, database or HTTP request can encode) becomes U+FFFD."""
    return clean(text if len(text) <= limit else text[:limit] + CUT_MARK)


def _obj(data: dict[str, Any], key: str, required: bool = False) -> dict[str, Any]:
    value = data.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise Unfit(f"{key} is not an object")
    return value


def _opt_obj(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, dict):
        raise Unfit(f"{key} is not an object")
    return value


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise Unfit(f"{key} is not a list")
    return value


def _str(data: dict[str, Any], key: str, required: bool = False, limit: int = MAX_TEXT_CHARS) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise Unfit(f"{key} is not a string")
    return _cut(value, limit)


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else _str(data, key)


def _ms(data: dict[str, Any], key: str) -> int:
    """A time in ms: a finite, non-negative number (0 when missing)."""
    value = data.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**53:
        raise Unfit(f"{key} is not a time in ms")
    return int(value)


def _opt_int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        raise Unfit(f"{key} is not a whole number")
    return value


def _pcm(data: dict[str, Any]) -> bytes:
    encoded = _str(data, "delta", required=True, limit=2**31)
    try:
        pcm = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise Unfit("delta is not base64") from None
    return pcm  # may end mid-sample (recorded ones do): the narrator core carries the odd byte over


def _parts(item: dict[str, Any]) -> list[dict[str, Any]]:
    parts = _list(item, "content")
    if not all(isinstance(part, dict) for part in parts):
        raise Unfit("a content part is not an object")
    return parts


def _response_done(data: dict[str, Any]) -> ResponseDone:
    response = _obj(data, "response")
    calls: list[FunctionCall] = []
    texts: list[str] = []
    transcripts: list[str] = []
    output = _list(response, "output")
    for item in output:
        if not isinstance(item, dict):
            raise Unfit("an output item is not an object")
        kind = item.get("type")
        if kind == "function_call" and len(calls) < MAX_FUNCTION_CALLS:
            calls.append(
                FunctionCall(
                    call_id=_str(item, "call_id", limit=200),
                    name=_str(item, "name", limit=200),
                    arguments=_str(item, "arguments"),
                    item_id=_str(item, "id", limit=200),
                )
            )
        elif kind == "message":
            for part in _parts(item):
                if part.get("type") in ("output_text", "text"):
                    texts.append(_str(part, "text"))
                elif part.get("type") in ("output_audio", "audio"):
                    transcripts.append(_str(part, "transcript"))
    dropped = sum(1 for item in output if item.get("type") == "function_call") - len(calls)
    details = _obj(response, "status_details")
    status = _str(response, "status", limit=40) or "completed"
    failure = verdict = None
    if status != "completed":
        error = _obj(details, "error")
        failure = (
            _str(error, "message", limit=MAX_MESSAGE_CHARS) or _str(details, "reason", limit=200) or _str(details, "type", limit=200) or "unknown reason"
        )
        if error:
            verdict = classify(_opt_str(error, "type"), _opt_str(error, "code"), _str(error, "message", limit=MAX_MESSAGE_CHARS) or None)
    return ResponseDone(
        response_id=_str(response, "id", limit=200),
        status=status,
        function_calls=tuple(calls),
        text=_cut(" ".join(t for t in texts if t), MAX_TEXT_CHARS),
        transcript=_cut(" ".join(t for t in transcripts if t), MAX_TEXT_CHARS),
        metadata=_opt_obj(response, "metadata"),
        failure=failure,
        error=verdict,
        usage=_usage(response.get("usage")),
        calls_dropped=dropped,
    )


# Usage is read leniently: a field missing or of the wrong type counts as zero, so an odd usage
# block never costs us the response it came with (its function calls, its status).


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**53 else 0


def _details(block: dict[str, Any], key: str) -> dict[str, Any]:
    details = block.get(key)
    return details if isinstance(details, dict) else {}


def _text(details: dict[str, Any], total: Any, audio: int) -> int:
    """The text tokens; without that figure, whatever of `total` is not audio."""
    return _count(details.get("text_tokens")) if "text_tokens" in details else _count(_count(total) - audio)


def _usage(block: Any) -> Usage:
    if not isinstance(block, dict):
        return Usage()
    inputs, outputs = _details(block, "input_token_details"), _details(block, "output_token_details")
    cached = _details(inputs, "cached_tokens_details")
    input_audio, output_audio = _count(inputs.get("audio_tokens")), _count(outputs.get("audio_tokens"))
    cached_audio = _count(cached.get("audio_tokens"))
    return Usage(
        input_text_tokens=_text(inputs, block.get("input_tokens"), input_audio),
        input_audio_tokens=input_audio,
        # Cached tokens without details count as text: instructions and tools are what gets cached.
        cached_text_tokens=_text(cached, inputs.get("cached_tokens"), cached_audio),
        cached_audio_tokens=cached_audio,
        output_text_tokens=_text(outputs, block.get("output_tokens"), output_audio),
        output_audio_tokens=output_audio,
    )


def _transcription_usage(block: Any) -> TranscriptionUsage:
    if not isinstance(block, dict):
        return TranscriptionUsage()
    if block.get("type") == "duration":
        seconds = block.get("seconds")
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 < seconds < 2**53:
            return TranscriptionUsage(seconds=float(seconds))
        return TranscriptionUsage(seconds=0.0)
    inputs = _details(block, "input_token_details")
    audio = _count(inputs.get("audio_tokens"))
    return TranscriptionUsage(
        input_audio_tokens=audio,
        input_text_tokens=_text(inputs, block.get("input_tokens"), audio),
        output_tokens=_count(block.get("output_tokens")),
    )


def _error(data: dict[str, Any]) -> ServerError:
    error = _obj(data, "error")
    return ServerError(
        code=_opt_str(error, "code"),
        message=_str(error, "message", limit=MAX_MESSAGE_CHARS) or "unknown error",
        error_type=_opt_str(error, "type"),
        client_event_id=_opt_str(error, "event_id"),
    )


def _session(data: dict[str, Any]) -> dict[str, Any]:
    return _obj(data, "session", required=True)


def _modalities(data: dict[str, Any]) -> tuple[str, ...]:
    values = _list(_session(data), "output_modalities")
    if not all(isinstance(v, str) for v in values):
        raise Unfit("output_modalities holds a non-string")
    return tuple(values)


def _item_id(data: dict[str, Any]) -> str:
    return _str(data, "item_id", required=True, limit=200)


_PARSERS: dict[str, Callable[[dict[str, Any]], ServerEvent]] = {
    "session.created": lambda d: SessionCreated(_str(_session(d), "id", limit=200), _opt_int(_session(d), "expires_at")),
    "session.updated": lambda d: SessionUpdated(_modalities(d)),
    "input_audio_buffer.speech_started": lambda d: SpeechStarted(_item_id(d), _ms(d, "audio_start_ms")),
    "input_audio_buffer.speech_stopped": lambda d: SpeechStopped(_item_id(d), _ms(d, "audio_end_ms")),
    "input_audio_buffer.committed": lambda d: AudioCommitted(_item_id(d)),
    "conversation.item.input_audio_transcription.completed": lambda d: TranscriptCompleted(
        _item_id(d), _str(d, "transcript", limit=MAX_TRANSCRIPT_CHARS), _transcription_usage(d.get("usage"))
    ),
    "conversation.item.input_audio_transcription.failed": lambda d: TranscriptFailed(
        _item_id(d), _str(_obj(d, "error"), "message", limit=MAX_MESSAGE_CHARS) or "transcription failed"
    ),
    "conversation.item.deleted": lambda d: ItemDeleted(_item_id(d)),
    "response.created": lambda d: ResponseCreated(
        _str(_obj(d, "response", required=True), "id", limit=200), _opt_obj(_obj(d, "response"), "metadata")
    ),
    "response.done": _response_done,
    "response.output_audio.delta": lambda d: AudioDelta(_str(d, "response_id", limit=200), _pcm(d)),
    "response.output_audio_transcript.done": lambda d: AudioTranscriptDone(
        _str(d, "response_id", limit=200), _str(d, "transcript")
    ),
    "error": _error,
}


# --- client events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientEvents:
    """Builders for the client events we send; plain dicts the SDK's `send` accepts."""

    @staticmethod
    def session_update(session: dict[str, Any]) -> dict[str, Any]:
        return {"type": "session.update", "session": {"type": "realtime", **session}}

    @staticmethod
    def append_audio(pcm: bytes, at_ms: int | None = None) -> dict[str, Any]:
        """`at_ms`, where the chunk lies in the microphone's stream, becomes the event's id
        (`mic_<ms>`): the service names it in an error about this chunk, and the simulator places
        a cue sheet's recording times with it when silences were not uploaded."""
        event = {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode("ascii")}
        if at_ms is not None:
            event["event_id"] = f"{MIC_EVENT_PREFIX}{at_ms}"
        return event

    @staticmethod
    def commit_audio() -> dict[str, Any]:
        """End the utterance in the buffer now (the device heard its end before the server did)."""
        return {"type": "input_audio_buffer.commit"}

    @staticmethod
    def clear_audio() -> dict[str, Any]:
        """Drop the audio buffered and not committed (an utterance in progress)."""
        return {"type": "input_audio_buffer.clear"}

    @staticmethod
    def delete_item(item_id: str) -> dict[str, Any]:
        return {"type": "conversation.item.delete", "item_id": item_id}

    @staticmethod
    def function_output(call_id: str, output: str, previous_item_id: str | None) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": call_id, "output": output},
        }
        if previous_item_id:
            event["previous_item_id"] = previous_item_id
        return event

    @staticmethod
    def route_command(command: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
        # The listener answers only by calling a tool; it never produces audio. Out of band with
        # its own input: the model reads the approved command and nothing else of the session.
        return {
            "type": "response.create",
            "response": {
                "conversation": "none",
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": command}]}],
                "tools": tools,
                "tool_choice": "required",
                "output_modalities": ["text"],
            },
        }

    @staticmethod
    def route_audio(item_id: str, tools: list[dict[str, Any]], metadata: dict[str, str]) -> dict[str, Any]:
        # Routed at the commit: the model hears the committed utterance itself (by reference),
        # still out of band, so nothing else of the session reaches it. The wake was heard on
        # the device; the transcript, when it comes, still has to confirm it.
        return ClientEvents._route_by([{"type": "item_reference", "id": item_id}], tools, metadata)

    @staticmethod
    def route_inline_audio(pcm: bytes, tools: list[dict[str, Any]], metadata: dict[str, str]) -> dict[str, Any]:
        # Routed at the client's own end of turn: the command's audio travels inline, so nothing
        # waits for the server's VAD to end the turn and commit it (its transcript still comes
        # from the input buffer, which has the same audio, and still confirms or cancels it).
        audio = {"type": "input_audio", "audio": base64.b64encode(pcm).decode("ascii")}
        return ClientEvents._route_by([{"type": "message", "role": "user", "content": [audio]}], tools, metadata)

    @staticmethod
    def _route_by(items: list[dict[str, Any]], tools: list[dict[str, Any]], metadata: dict[str, str]) -> dict[str, Any]:
        return {
            "type": "response.create",
            "response": {"conversation": "none", "input": items, "tools": tools, "tool_choice": "required",
                         "output_modalities": ["text"], "metadata": metadata},
        }

    @staticmethod
    def cancel_response(response_id: str) -> dict[str, Any]:
        return {"type": "response.cancel", "response_id": response_id}

    @staticmethod
    def read_script(instructions: str, cue: str, metadata: dict[str, str]) -> dict[str, Any]:
        # Out of band: nothing is written to the narrator's conversation. The script travels in
        # the response's instructions (text to perform); the one user message is a fixed cue.
        return {
            "type": "response.create",
            "response": {
                "conversation": "none",
                "output_modalities": ["audio"],
                "instructions": instructions,
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": cue}]}],
                "tool_choice": "none",
                "metadata": metadata,
            },
        }
