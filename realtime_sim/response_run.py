"""One model response as a step generator: the events it sends, in the recorded order.

The generator yields `Emit` (events to send, without event ids), `NeedSpeech` (the core asks the
shell for audio and sends the pcm back in) and `FRAME_PAUSE` (after each audio delta, so audio
streams over time). A run can be ended early (cancelled, failed) from any pause point; the
closing events then come from `finish_early`.
"""

from __future__ import annotations

import base64
import copy
import re
from dataclasses import dataclass, field
from typing import Any, Generator, Protocol

from speech.synth import BYTES_PER_MS


@dataclass(frozen=True)
class MessagePlan:
    """The model answers with this text (as text, or spoken with a transcript)."""

    text: str


@dataclass(frozen=True)
class FunctionCallPlan:
    """The model calls a function; `arguments` is the exact JSON text it streams."""

    name: str
    arguments: str
    call_id: str


ResponsePlan = MessagePlan | FunctionCallPlan


@dataclass(frozen=True)
class Emit:
    events: list[dict[str, Any]]


@dataclass(frozen=True)
class NeedSpeech:
    text: str


class _FramePause:
    """Marker: one audio frame went out; the shell may wait before the next."""


FRAME_PAUSE = _FramePause()
Step = Emit | NeedSpeech | _FramePause


class ConversationHooks(Protocol):
    """How a default-conversation response writes its output item into the conversation."""

    def item_added(self, item: dict[str, Any]) -> str | None:
        """Append the item; returns the id of the item before it (None if first)."""

    def item_done(self, item: dict[str, Any]) -> str | None:
        """Replace the stored item with its final form; returns the id of the item before it."""


@dataclass(frozen=True)
class TokenEstimate:
    """Input tokens the response would be billed for (text and audio parts)."""

    text: int = 0
    audio: int = 0


def text_deltas(text: str) -> list[str]:
    """Word-sized pieces that join back to exactly `text`."""
    pieces = re.findall(r"\s*\S+", text)
    tail = text[len("".join(pieces)) :]
    if tail:
        pieces.append(tail)
    return pieces


def argument_deltas(arguments: str, size: int = 6) -> list[str]:
    return [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]


@dataclass
class ResponseRun:
    """State and steps of one response; the session core drives it."""

    response_id: str
    item_id: str
    conversation_id: str | None  # None: out-of-band (`conversation: "none"`)
    output_modalities: list[str]
    voice: str
    output_format: dict[str, Any]
    max_output_tokens: int | str
    metadata: dict[str, str] | None
    plan: ResponsePlan
    chunk_ms: int
    conversation: ConversationHooks | None
    input_tokens: TokenEstimate = field(default_factory=TokenEstimate)
    # progress: read by the core and by finish_early()
    finished: bool = field(default=False, init=False)
    waiting_for_speech: bool = field(default=False, init=False)
    audio_ms: float = field(default=0.0, init=False)  # assistant audio sent so far
    _output: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)  # finished items
    _item: dict[str, Any] | None = field(default=None, init=False, repr=False)  # the item being produced
    _part: str | None = field(default=None, init=False, repr=False)  # "audio" | "text" while a part is open
    _said: str = field(default="", init=False, repr=False)  # text/transcript produced so far

    def __post_init__(self) -> None:
        self.steps: Generator[Step, bytes | None, None] = self._steps()

    @property
    def in_conversation(self) -> bool:
        return self.conversation_id is not None

    @property
    def speaks(self) -> bool:
        return "audio" in self.output_modalities

    # -- event shapes --------------------------------------------------------------------

    def response_object(self, status: str, status_details: dict[str, Any] | None = None) -> dict[str, Any]:
        done = status != "in_progress"
        return {
            "object": "realtime.response",
            "id": self.response_id,
            "status": status,
            "status_details": status_details,
            "output": copy.deepcopy(self._output) if done else [],
            "conversation_id": self.conversation_id,
            "output_modalities": list(self.output_modalities),
            "max_output_tokens": self.max_output_tokens,
            "audio": {"output": {"format": dict(self.output_format), "voice": self.voice}},
            "usage": self._usage() if done else None,
            "metadata": self.metadata,
        }

    def _usage(self) -> dict[str, Any]:
        output_text = sum(len(_item_text(item)) for item in self._output) // 4 + 1
        output_audio = int(self.audio_ms / 50)  # assistant audio: 1 token per 50 ms
        input_total = self.input_tokens.text + self.input_tokens.audio
        output_total = output_text + output_audio
        return {
            "total_tokens": input_total + output_total,
            "input_tokens": input_total,
            "output_tokens": output_total,
            "input_token_details": {
                "text_tokens": self.input_tokens.text,
                "audio_tokens": self.input_tokens.audio,
                "image_tokens": 0,
                "cached_tokens": 0,
                "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
            },
            "output_token_details": {"text_tokens": output_text, "audio_tokens": output_audio},
        }

    def total_tokens(self) -> int:
        total: int = self._usage()["total_tokens"]
        return total

    def _ref(self, **extra: Any) -> dict[str, Any]:
        return {"response_id": self.response_id, "item_id": self.item_id, "output_index": 0, **extra}

    def _item_events(self, phase: str, item: dict[str, Any]) -> list[dict[str, Any]]:
        """output_item.added/done plus, in the default conversation, conversation.item.added/done
        (recorded order: output_item.added before conversation.item.added; conversation.item.done
        before output_item.done)."""
        output_event = {
            "type": f"response.output_item.{phase}",
            "response_id": self.response_id,
            "output_index": 0,
            "item": copy.deepcopy(item),
        }
        if self.conversation is None:
            return [output_event]
        hook = self.conversation.item_added if phase == "added" else self.conversation.item_done
        conversation_event = {
            "type": f"conversation.item.{phase}",
            "previous_item_id": hook(copy.deepcopy(item)),
            "item": copy.deepcopy(item),
        }
        return [output_event, conversation_event] if phase == "added" else [conversation_event, output_event]

    def _final_message(self, status: str) -> dict[str, Any]:
        if self.speaks:
            content = [{"type": "output_audio", "transcript": self._said}]
        else:
            content = [{"type": "output_text", "text": self._said}]
        return {"id": self.item_id, "type": "message", "status": status, "role": "assistant", "content": content}

    def _close_part(self) -> list[dict[str, Any]]:
        if self._part == "audio":
            events = [
                {"type": "response.output_audio.done", **self._ref(content_index=0)},
                {"type": "response.output_audio_transcript.done", **self._ref(content_index=0), "transcript": self._said},
                {
                    "type": "response.content_part.done",
                    **self._ref(content_index=0),
                    "part": {"type": "audio", "transcript": self._said},
                },
            ]
        elif self._part == "text":
            events = [
                {"type": "response.output_text.done", **self._ref(content_index=0), "text": self._said},
                {"type": "response.content_part.done", **self._ref(content_index=0), "part": {"type": "text", "text": self._said}},
            ]
        else:
            events = []
        self._part = None
        return events

    # -- the steps -----------------------------------------------------------------------

    def _steps(self) -> Generator[Step, bytes | None, None]:
        yield Emit([{"type": "response.created", "response": self.response_object("in_progress")}])
        if isinstance(self.plan, FunctionCallPlan):
            yield from self._function_call(self.plan)
        elif self.speaks:
            yield from self._spoken_message(self.plan.text)
        else:
            yield from self._text_message(self.plan.text)
        self.finished = True
        yield Emit([{"type": "response.done", "response": self.response_object("completed")}])

    def _function_call(self, plan: FunctionCallPlan) -> Generator[Step, bytes | None, None]:
        item = {
            "id": self.item_id,
            "type": "function_call",
            "status": "in_progress",
            "name": plan.name,
            "call_id": plan.call_id,
            "arguments": "",
        }
        self._item = item
        yield Emit(self._item_events("added", item))
        call_ref = self._ref(call_id=plan.call_id)
        yield Emit(
            [{"type": "response.function_call_arguments.delta", **call_ref, "delta": d} for d in argument_deltas(plan.arguments)]
        )
        final = {**item, "status": "completed", "arguments": plan.arguments}
        self._output.append(final)
        self._item = None
        events = [{"type": "response.function_call_arguments.done", **call_ref, "name": plan.name, "arguments": plan.arguments}]
        yield Emit(events + self._item_events("done", final))

    def _open_message(self) -> list[dict[str, Any]]:
        item = {"id": self.item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        self._item = item
        return self._item_events("added", item)

    def _text_message(self, text: str) -> Generator[Step, bytes | None, None]:
        yield Emit(self._open_message())
        self._part = "text"
        events: list[dict[str, Any]] = [
            {"type": "response.content_part.added", **self._ref(content_index=0), "part": {"type": "text", "text": ""}}
        ]
        for delta in text_deltas(text):
            self._said += delta
            events.append({"type": "response.output_text.delta", **self._ref(content_index=0), "delta": delta})
        yield Emit(events)
        yield Emit(self._close_message("completed"))

    def _spoken_message(self, text: str) -> Generator[Step, bytes | None, None]:
        yield Emit(self._open_message())
        self._part = "audio"
        yield Emit(
            [{"type": "response.content_part.added", **self._ref(content_index=0), "part": {"type": "audio", "transcript": ""}}]
        )
        self.waiting_for_speech = True
        pcm = yield NeedSpeech(text)
        self.waiting_for_speech = False
        chunk_bytes = self.chunk_ms * BYTES_PER_MS
        pcm = pcm or b""
        chunks = [pcm[i : i + chunk_bytes] for i in range(0, len(pcm), chunk_bytes)]
        words = text_deltas(text)
        # Spread the transcript over the audio: each word goes out with the chunk it falls in.
        by_chunk: dict[int, list[str]] = {}
        for index, word in enumerate(words):
            by_chunk.setdefault(index * len(chunks) // len(words) if chunks else 0, []).append(word)
        for index, chunk in enumerate(chunks):
            events = []
            for word in by_chunk.get(index, []):
                self._said += word
                events.append({"type": "response.output_audio_transcript.delta", **self._ref(content_index=0), "delta": word})
            events.append(
                {"type": "response.output_audio.delta", **self._ref(content_index=0), "delta": base64.b64encode(chunk).decode()}
            )
            self.audio_ms += len(chunk) / BYTES_PER_MS
            yield Emit(events)
            yield FRAME_PAUSE
        if not chunks and words:
            self._said = text
            yield Emit(
                [{"type": "response.output_audio_transcript.delta", **self._ref(content_index=0), "delta": w} for w in words]
            )
        yield Emit(self._close_message("completed"))

    def _close_message(self, status: str) -> list[dict[str, Any]]:
        events = self._close_part()
        final = self._final_message(status)
        self._output.append(final)
        self._item = None
        return events + self._item_events("done", final)

    # -- ending early --------------------------------------------------------------------

    def finish_early(self, status: str, status_details: dict[str, Any]) -> list[dict[str, Any]]:
        """Close whatever is open (the item ends `incomplete`) and report `response.done`."""
        self.steps.close()
        self.finished = True
        self.waiting_for_speech = False
        events: list[dict[str, Any]] = []
        if self._item is not None:
            if self._item["type"] == "message":
                events += self._close_message("incomplete")
            else:
                final = {**self._item, "status": "incomplete"}
                self._output.append(final)
                self._item = None
                events += self._item_events("done", final)
        events.append({"type": "response.done", "response": self.response_object(status, status_details)})
        return events


def _item_text(item: dict[str, Any]) -> str:
    if item.get("type") == "function_call":
        return item.get("arguments") or ""
    return "".join(part.get("text") or part.get("transcript") or "" for part in item.get("content") or [])
