"""One session's input audio buffer: positions, the server VAD, the audio kept for a transcriber,
and where the session's audio lies in the user's recording.

Positions are in ms of input audio received. The session core turns what this reports (speech
started/stopped, a span to commit) into protocol events and conversation items.
"""

from __future__ import annotations

from typing import Any, Literal

from realtime_sim.conversation import Entry, audio_ms
from realtime_sim.transcriber import RecordingPosition, Segment, StreamPlaces
from realtime_sim.vad import BYTES_PER_MS, EnergyVad, SpeechStarted, VadSettings

MIN_COMMIT_MS = 100
MAX_KEPT_AUDIO_MS = 60_000  # uncommitted input kept for the recogniser (a segment longer than this is cut)

Turn = tuple[Literal["started", "stopped"], int]  # what the VAD heard, at which input position (ms)


class InputBuffer:
    """The input audio of one session, from `input_audio_buffer.append` to a commit or a clear."""

    def __init__(self, recording: RecordingPosition | None) -> None:
        """`recording` counts the audio all listener sessions received, so a cue sheet's times can
        be placed (shared by every session of one server)."""
        self._recording = recording
        self._recording_offset: float | None = None  # where this session's audio starts in the recording
        self._places = StreamPlaces()  # ... as the client's appends name it (preferred)
        self._vad: EnergyVad | None = None
        self._vad_offset_ms = 0.0  # input audio received before the current detector was made
        self.input_ms = 0.0  # all input audio received, in ms
        self.buffer_ms = 0.0  # input audio not yet committed or cleared
        self.segment_item_id: str | None = None  # the item the speech in progress will become
        self.segment_start_ms = 0
        # The last segment committed, and the input position it ended at: audio sent inline in a
        # response after the server already committed that speech is heard as what it said.
        self.last_segment: tuple[Entry, float, float] | None = None  # (entry, start ms, end ms)
        self._kept_audio = bytearray()  # uncommitted input, for a transcriber that listens
        self._kept_from_ms = 0.0  # the input position where _kept_audio begins

    def reconfigure(self, settings: VadSettings | None) -> None:
        """The session's turn detection changed (None: no server VAD)."""
        if settings is None:
            self._vad = None
        elif self._vad is None:
            self._vad = EnergyVad(settings)
            self._vad_offset_ms = self.input_ms
        else:
            self._vad.update_settings(settings)

    def append(self, pcm: bytes, event_id: Any, *, recorded: bool, keep: bool) -> list[Turn]:
        """Audio arrives (`recorded`: it counts in the recording; `keep`: a transcriber listens);
        returns the turns the server VAD detected in it."""
        ms = len(pcm) / BYTES_PER_MS
        if self._recording is not None and recorded:
            if self._recording_offset is None:
                self._recording_offset = self._recording.total_ms - self.input_ms
            self._recording.total_ms += ms
        self._places.note(self.input_ms, event_id)
        if keep:
            self._keep_audio(pcm)
        self.input_ms += ms
        self.buffer_ms += ms
        if self._vad is None:
            return []
        turns: list[Turn] = []
        for vad_event in self._vad.feed(pcm):
            if isinstance(vad_event, SpeechStarted):
                turns.append(("started", int(vad_event.audio_start_ms + self._vad_offset_ms)))
            else:
                turns.append(("stopped", int(vad_event.audio_end_ms + self._vad_offset_ms)))
        return turns

    def take_segment_id(self) -> str | None:
        """The id the speech in progress was announced with (None: none), which it now gives up."""
        item_id, self.segment_item_id = self.segment_item_id, None
        return item_id

    def reset_vad_segment(self) -> None:
        if self._vad is not None:
            self._vad.reset_segment()

    def segment(self, start_ms: float, end_ms: float, pcm: bytes, session: dict[str, Any],
                hints: tuple[str, ...], wake_words: tuple[str, ...]) -> Segment:
        """A committed span as the transcriber sees it: placed in the user's stream or recording."""
        offset = self._recording_offset or 0.0
        placed_start, placed_end = self._places.place(start_ms), self._places.place(end_ms, ending=True)
        if placed_start is None or placed_end is None:
            placed_start, placed_end = offset + start_ms, offset + end_ms
        return Segment(placed_start, placed_end, pcm, hints, wake_words,
                       session=str(session.get("id", "")), session_start_ms=self._places.first_ms)

    def committed(self, entry: Entry, start_ms: float, end_ms: float) -> None:
        """The buffer's audio became `entry`."""
        self.last_segment = (entry, start_ms, end_ms)
        self.buffer_ms = 0.0

    def clear(self) -> None:
        if self._kept_audio:
            self._kept_from_ms += len(self._kept_audio) / BYTES_PER_MS
            self._kept_audio.clear()
        self.buffer_ms = 0.0
        self.segment_item_id = None
        self.reset_vad_segment()

    def inline_segment(self, message: dict[str, Any]) -> Entry | None:
        """The segment the server committed from the same speech as audio sent inline, if its VAD
        ended the turn first: the one that covers more of the span the inline audio covers (the
        input's last `audio ms`) than the segment now in the buffer does. New speech may have
        begun since the commit (a cough, the next words): the inline audio is still the
        committed segment's, and must be heard as its words, not the new segment's."""
        if self.last_segment is None:
            return None
        entry, started_ms, ended_ms = self.last_segment
        span_start = self.input_ms - audio_ms(message)
        committed = max(0.0, ended_ms - max(started_ms, span_start))
        buffered = self.input_ms - max(self.segment_start_ms, span_start) if self.segment_item_id is not None else 0.0
        return entry if committed > 0 and committed >= buffered else None

    def _keep_audio(self, pcm: bytes) -> None:
        self._kept_audio += pcm
        excess = len(self._kept_audio) - MAX_KEPT_AUDIO_MS * BYTES_PER_MS
        if excess > 0:
            excess -= excess % 2
            del self._kept_audio[:excess]
            self._kept_from_ms += excess / BYTES_PER_MS

    def peek_kept_audio(self, start_ms: float) -> bytes:
        """The kept input from a position to now; nothing is dropped."""
        return bytes(self._kept_audio[self._kept_index(start_ms):])

    def take_kept_audio(self, start_ms: float, end_ms: float) -> bytes:
        """The kept input between two positions; what came before `end_ms` is dropped."""
        if not self._kept_audio:
            return b""
        first = self._kept_index(start_ms)
        last = max(first, self._kept_index(end_ms))
        pcm = bytes(self._kept_audio[first:last])
        del self._kept_audio[:last]
        self._kept_from_ms += last / BYTES_PER_MS
        return pcm

    def _kept_index(self, ms: float) -> int:
        """Where an input position lies in the kept audio (bytes, a whole sample; 0 before it)."""
        return max(0, int((ms - self._kept_from_ms) * BYTES_PER_MS) & ~1)
