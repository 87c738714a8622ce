"""Microphone audio on its way to the listener session: a bounded buffer, what the current session
has been sent (with where each chunk starts in session time), and replay of what a lost session
never transcribed. Pure: the coordinator's shell moves the bytes, this decides which ones."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

# After a drop, how far back from the end of what was sent the audio may hold speech the session
# never told of: the server says speech_started some 300-800 ms after the onset (its VAD's onset,
# with the prefix padding before it), a drop loses what was in flight (about a round trip), and
# the client may send a little more before it sees the drop.
UNTOLD_MS = 3000


@dataclass
class UplinkStats:
    chunks_sent: int = 0
    chunks_muted: int = 0  # read from a live mic while muted, and dropped
    chunks_buffered: int = 0  # taken while no session could take them
    chunks_echo: int = 0  # heard by the echo gate as the narrator's echo: sent as silence (if not muted)


class Outgoing(NamedTuple):
    """The chunk to send next: `token` for `Uplink.sent`, and where it lies in the microphone's
    stream (ms from its first sample; None when unknown)."""

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
    def __init__(self, capacity_chunks: int, bytes_per_second: int) -> None:
        self._capacity = max(1, capacity_chunks)
        self._bytes_per_second = bytes_per_second
        # Chunks with where each lies in the mic stream (ms), bounded by `_evict`, not maxlen: see there.
        self._waiting: deque[tuple[int | None, bytes]] = deque()
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
        self._waiting.append((at_ms, chunk))
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
        """The chunk to send next, with a token for `sent`."""
        if not self._waiting:
            return None
        at_ms, chunk = self._waiting[0]
        return Outgoing(self._generation, chunk, at_ms)

    def sent(self, token: int) -> bool:
        """The chunk from `next_chunk` went out. Returns True when the buffer had been full (a file
        reader may be waiting for room). A replay in between makes this a no-op."""
        if token != self._generation or not self._waiting:
            return False
        was_full = self.full
        at_ms, chunk = self._waiting.popleft()
        self._protected = max(0, self._protected - 1)
        self._sent.append((self._sent_bytes * 1000 // self._bytes_per_second, at_ms, chunk))
        self._sent_bytes += len(chunk)
        self.stats.chunks_sent += 1
        return was_full

    # -- sessions -----------------------------------------------------------------------------
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
                (at_ms, chunk) for start, at_ms, chunk in self._sent
                if start + chunk_ms > replay_from_ms
                and not any(low <= start and start + chunk_ms <= high for low, high in heard)
            ]
            unheard = unheard[-2 * self._capacity:]  # bounded: at most what the sent record holds
            self._waiting = deque([*unheard, *self._waiting])
            self._protected = len(unheard) + self._protected
            self._generation += 1
            self._evict()
            replayed = sum(len(c) for _, c in unheard) * 1000 // self._bytes_per_second
        self._sent.clear()
        self._sent_bytes = 0
        return replayed

