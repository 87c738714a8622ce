"""The items of one session's conversation, as the server stores them, and the client events
that edit them (`conversation.item.create/delete/retrieve/truncate`).

Synchronous: errors and acknowledgements go into the session's `Outbox`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from realtime_sim.config import SimConfig
from realtime_sim.ids import IdFactory
from realtime_sim.outputs import Outbox
from realtime_sim.script import SimScript
from realtime_sim.vad import BYTES_PER_MS


@dataclass
class Entry:
    """One conversation item as the server stores it, plus what the model understood of it."""

    item: dict[str, Any]
    text: str = ""
    audio_ms: float = 0.0
    size: int = 0  # JSON bytes counted against max_conversation_bytes (client-created items)

    @property
    def id(self) -> str:
        item_id: str = self.item["id"]
        return item_id

    @property
    def kind(self) -> str:
        """The role ("user", "assistant", "system") for messages, else the item type."""
        if self.item["type"] == "message":
            role: str = self.item.get("role") or "message"
            return role
        kind: str = self.item["type"]
        return kind


def has_unheard_audio(message: dict[str, Any]) -> bool:
    """A client message carrying audio inline with no transcript: the model hears it itself."""
    return message.get("type") == "message" and any(
        p.get("type") == "input_audio" and p.get("transcript") is None for p in message.get("content") or [])


def audio_ms(message: dict[str, Any]) -> float:
    """How long the audio a client message carries inline (base64 pcm16 24 kHz) lasts, in ms."""
    return sum(len(p.get("audio") or "") * 3 / 4 / BYTES_PER_MS for p in message.get("content") or [])


def _client_item_text(item: dict[str, Any]) -> str:
    if item["type"] == "function_call":
        arguments: str = item.get("arguments", "")
        return arguments
    if item["type"] == "function_call_output":
        output: str = item.get("output", "")
        return output
    texts = [part.get("text") or part.get("transcript") or "" for part in item.get("content") or []]
    return " ".join(t for t in texts if t)


class Conversation:
    """The conversation's entries in order, and the item events of the client."""

    def __init__(self, *, config: SimConfig, script: SimScript, ids: IdFactory, outbox: Outbox) -> None:
        self._config = config
        self._script = script
        self._ids = ids
        self._out = outbox
        self.entries: list[Entry] = []
        self._bytes = 0  # JSON size of the items clients created (the cap's measure)

    def index_of(self, item_id: str) -> int | None:
        return next((i for i, entry in enumerate(self.entries) if entry.id == item_id), None)

    def last_id(self) -> str | None:
        return self.entries[-1].id if self.entries else None

    def append(self, entry: Entry) -> None:
        self.entries.append(entry)

    def create(self, event: dict[str, Any]) -> None:
        raw = event["item"]
        if raw["type"] not in ("message", "function_call", "function_call_output"):
            self._out.error(
                "invalid_value",
                f"Invalid value: '{raw['type']}'. The simulator supports message, function_call and "
                "function_call_output items.",
                param="item.type",
                client_event_id=event.get("event_id"),
            )
            return
        after = event.get("previous_item_id")
        if after is None:
            position = len(self.entries)
        elif after == "root":
            position = 0
        else:
            index = self.index_of(after)
            if index is None:
                self._out.error(
                    "item_create_invalid_previous_item_id",
                    f"Error adding item: the previous item with id '{after}' does not exist.",
                    param="previous_item_id",
                    client_event_id=event.get("event_id"),
                )
                return
            position = index + 1
        item_id = raw.get("id") or self._ids.item()
        if self.index_of(item_id) is not None:
            self._out.error(
                "item_create_duplicate_id",
                f"Error adding item: an item with id '{item_id}' already exists.",
                param="item.id",
                client_event_id=event.get("event_id"),
            )
            return
        item, text = self.stored_item(item_id, raw)
        size = len(json.dumps(item))
        config = self._config
        if len(self.entries) >= config.max_conversation_items or self._bytes + size > config.max_conversation_bytes:
            self._out.error(
                "conversation_too_large",
                f"The conversation is full (at most {config.max_conversation_items} items and "
                f"{config.max_conversation_bytes} bytes); delete items before adding more.",
                client_event_id=event.get("event_id"),
            )
            return
        self._bytes += size
        self.entries.insert(position, Entry(item, text=text, size=size))
        previous = self.entries[position - 1].id if position > 0 else None
        self._out.send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self._out.send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    def stored_item(self, item_id: str, raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
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

    def _existing(self, event: dict[str, Any], verb: str, noun: str) -> int | None:
        """The index of the item an event names, or None after sending the real server's error."""
        index = self.index_of(event["item_id"])
        if index is None:
            self._out.error(
                f"item_{verb}_invalid_item_id",
                f"Error {noun} item: the item with id '{event['item_id']}' does not exist.",
                client_event_id=event.get("event_id"),
            )
        return index

    def delete(self, event: dict[str, Any]) -> None:
        index = self._existing(event, "delete", "deleting")
        if index is None:
            return
        self._bytes -= self.entries[index].size
        del self.entries[index]
        self._out.send({"type": "conversation.item.deleted", "item_id": event["item_id"]})

    def retrieve(self, event: dict[str, Any]) -> None:
        index = self._existing(event, "retrieve", "retrieving")
        if index is None:
            return
        self._out.send({"type": "conversation.item.retrieved", "item": self.entries[index].item})

    def truncate(self, event: dict[str, Any]) -> None:
        index = self._existing(event, "truncate", "truncating")
        if index is None:
            return
        self._out.send(
            {
                "type": "conversation.item.truncated",
                "item_id": event["item_id"],
                "content_index": event["content_index"],
                "audio_end_ms": event["audio_end_ms"],
            }
        )


class ConversationWriter:
    """Lets a default-conversation response append and finish its output item."""

    def __init__(self, entries: list[Entry]) -> None:
        self._entries = entries

    def item_added(self, item: dict[str, Any]) -> str | None:
        previous = self._entries[-1].id if self._entries else None
        self._entries.append(Entry(item))
        return previous

    def item_done(self, item: dict[str, Any]) -> str | None:
        for index, entry in enumerate(self._entries):
            if entry.id == item["id"]:
                entry.item = item
                entry.text = _client_item_text(item)
                return self._entries[index - 1].id if index > 0 else None
        return None  # the client deleted it meanwhile
