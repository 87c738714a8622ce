"""Microphone audio on its way to the listener session: a bounded buffer, what the current session
has been sent (with where each chunk starts in session time), and replay of what a lost session
never transcribed. Pure: the coordinator's shell moves the bytes, this decides which ones."""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

# After a drop, how far back from the end of what was sent the audio may hold speech the session
# never told of: the server says speech_started some 300-800 ms after the onset (its VAD's onset,
# with the prefix padding before it), a drop loses what was in flight (about a round trip), and
# the client may send a little more before it sees the drop.
UNTOLD_MS = 3000
# The most audio one append frame carries: chunks waiting back to back in the stream go up as one
# frame (issue 34: a frame per 20 ms chunk was an eighth of a talking room's CPU, mostly its send).
FRAME_MS = 200


@dataclass
class UplinkStats:
    chunks_sent: int = 0
    chunks_muted: int = 0  # read from a live mic while muted, and dropped
    chunks_buffered: int = 0  # taken while no session could take them
    chunks_echo: int = 0  # heard by the echo gate as the narrator's echo: sent as silence (if not muted)


class Outgoing(NamedTuple):
    """The audio to send next (one chunk, or several back to back: `Uplink(frame_ms=...)`):
    `token` for `Uplink.sent`, and where it lies in the microphone's stream (ms from its first
    sample; None when unknown)."""

    token: int
    chunk: bytes
    at_ms: int | None


def placed_in_stream(pieces: list[bytes], chunk: bytes, chunk_start: int) -> list[tuple[int, bytes]]:
    """Where in the microphone stream (bytes from its start) each piece an upload filter passed
    for `chunk` begins. The pieces are contiguous (held pre-roll, then maybe the chunk): they end
    with the chunk when it is the last one, else where the chunk begins."""
    end = chunk_start + len(chunk) if pieces and pieces[-1] is chunk else chunk_start
    placed: list[tuple[int, bytes]] = []
    for piece in reversed(pieces):
        end -= len(piece)
        placed.append((end, piece))
    return placed[::-1]


class Uplink:
    def __init__(self, capacity_chunks: int, bytes_per_second: int, frame_ms: int = 0) -> None:
        """`frame_ms`: `next_chunk` joins waiting chunks that follow each other in the stream up
        to this much audio (0: a chunk at a time)."""
        self._capacity = max(1, capacity_chunks)
        self._bytes_per_second = bytes_per_second
        self._frame_bytes = frame_ms * bytes_per_second // 1000
        # Chunks with where each lies in the mic stream (ms), bounded by `_evict`, not maxlen: see
        # there; each with a serial number (`_serial`: the next one), so `sent` removes exactly
        # those of a frame that still wait, whatever was evicted while it was on its way.
        self._waiting: deque[tuple[int | None, bytes, int]] = deque()
        self._serial = 0
        self._outgoing: tuple[int, int, list[tuple[int | None, bytes, int]]] | None = None  # (token, generation, chunks)
        # How many chunks at the head of `_waiting` are replayed speech: an utterance is kept
        # whole, so these are never evicted (newer audio goes first).
        self._protected = 0
        # Audio sent to the current session and where each chunk starts (ms of session audio).
        # Twice the buffer, so an utterance that began before the buffer's span is still whole.
        self._sent: deque[tuple[int, int | None, bytes]] = deque(maxlen=2 * self._capacity)
        self._sent_bytes = 0
        # Bumped whenever the waiting audio is rearranged (a replay), so a send that was under
        # way meanwhile does not pop a chunk it did not send.
        self._generation = 0
        self.stats = UplinkStats()

    # -- taking audio -------------------------------------------------------------------------
    def take(self, chunk: bytes, *, session_ready: bool, at_ms: int | None = None) -> None:
        """`at_ms`: where the chunk lies in the microphone's stream (sent with it, so a simulator's
        cue sheet, written in recording time, places it whatever was not uploaded)."""
        if not session_ready:
            self.stats.chunks_buffered += 1
        self._waiting.append((at_ms, chunk, self._next_serial()))
        self._evict()

    def _evict(self) -> None:
        """Over capacity, the oldest audio that is not replayed speech goes (a live mic cannot
        wait): never the start of an utterance a lost session did not transcribe."""
        while len(self._waiting) - self._protected > self._capacity:  # replayed speech is on top
            del self._waiting[self._protected]

    def dropped_as_echo(self) -> None:
        self.stats.chunks_echo += 1

    def dropped_while_muted(self) -> None:
        self.stats.chunks_muted += 1

    @property
    def full(self) -> bool:
        """A file microphone waits while this holds, so nothing in it is dropped."""
        return len(self._waiting) >= self._capacity - 1

    @property
    def empty(self) -> bool:
        return not self._waiting

    # -- sending ------------------------------------------------------------------------------
    def next_chunk(self) -> Outgoing | None:
        """The audio to send next: the first waiting chunk and those right after it in the stream
        (up to `frame_ms`), with a token for `sent`."""
        if not self._waiting:
            return None
        first = self._waiting[0]
        pieces, size, end_ms = [first], len(first[1]), self._end_ms(first[0], first[1])
        for piece in itertools.islice(self._waiting, 1, None):
            if end_ms is None or piece[0] != end_ms or size + len(piece[1]) > self._frame_bytes:
                break
            pieces.append(piece)
            size, end_ms = size + len(piece[1]), self._end_ms(piece[0], piece[1])
        token = pieces[-1][2]
        self._outgoing = (token, self._generation, pieces)
        return Outgoing(token, first[1] if len(pieces) == 1 else b"".join(c for _, c, _ in pieces), first[0])

    def _end_ms(self, at_ms: int | None, chunk: bytes) -> int | None:
        """Where the next chunk in the stream begins (None: unknown, or not a whole ms)."""
        if at_ms is None or (len(chunk) * 1000) % self._bytes_per_second:
            return None
        return at_ms + len(chunk) * 1000 // self._bytes_per_second

    def sent(self, token: int) -> bool:
        """The audio from `next_chunk` went out. Returns True when the buffer had been full (a file
        reader may be waiting for room). A replay in between makes this a no-op."""
        outgoing, self._outgoing = self._outgoing, None
        if outgoing is None or outgoing[0] != token or outgoing[1] != self._generation:
            return False
        was_full = self.full
        serials = {serial for _, _, serial in outgoing[2]}
        while self._waiting and self._waiting[0][2] in serials:  # (those evicted meanwhile are gone already)
            self._waiting.popleft()
            self._protected = max(0, self._protected - 1)
        for at_ms, chunk, _ in outgoing[2]:
            self._sent.append((self._sent_bytes * 1000 // self._bytes_per_second, at_ms, chunk))
            self._sent_bytes += len(chunk)
            self.stats.chunks_sent += 1
        return was_full

    # -- sessions -----------------------------------------------------------------------------
    def _next_serial(self) -> int:
        self._serial += 1
        return self._serial - 1

    def new_session(self) -> None:
        self._sent.clear()
        self._sent_bytes = 0

    def session_lost(self, replay_from_ms: int | None, chunk_ms: int,
                     heard: tuple[tuple[int, int], ...] = (), untold_from_ms: int | None = None) -> int:
        """The session went away. Audio it was sent from `replay_from_ms` on (never transcribed)
        goes to the next session first, but for the `heard` spans (start, end ms: utterances
        transcribed already, whose chunks lie wholly inside); returns how many ms that is. With
        no such utterance, a dropped session's `untold_from_ms` (the end of the last utterance it
        told of) replays its last `UNTOLD_MS` after that: speech it heard begin but whose
        speech_started was lost with the connection (silence, at worst)."""
        if replay_from_ms is None and untold_from_ms is not None and self._sent:
            sent_end_ms = self._sent[-1][0] + chunk_ms
            replay_from_ms = max(untold_from_ms, sent_end_ms - UNTOLD_MS)
        replayed = 0
        if replay_from_ms is not None:
            unheard = [
                (at_ms, chunk, self._next_serial()) for start, at_ms, chunk in self._sent
                if start + chunk_ms > replay_from_ms
                and not any(low <= start and start + chunk_ms <= high for low, high in heard)
            ]
            unheard = unheard[-2 * self._capacity:]  # bounded: at most what the sent record holds
            self._waiting = deque([*unheard, *self._waiting])
            self._protected = len(unheard) + self._protected
            self._generation += 1
            self._evict()
            replayed = sum(len(c) for _, c, _ in unheard) * 1000 // self._bytes_per_second
        self._sent.clear()
        self._sent_bytes = 0
        return replayed

