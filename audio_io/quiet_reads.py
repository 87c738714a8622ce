"""A silent room's reads handed on two at a time (issue 34: a silent room's CPU is half the event
loop's wake-ups, one per read of the microphone).

A read under `rms` (a microphone's own hiss), once the room has been that quiet for `after_s`,
waits for the next read, up to `reads` reads together; a read at or over it goes at once, with
what was held before it. So any sound is handed on when it would have been (the wake phrase, a
command, far speech over the hiss), nothing is dropped or reordered, every chunk keeps its capture
time, and only silence a second after the last sound lags, by up to `reads - 1` reads (the
decisions taken on it: a command window's or a follow-up's end, up to that much later).

While no one is woken and nothing plays (`unhurried`, issue 34: a talking room's wake-ups), any
read may wait, a sound's too, up to `unhurried_reads` together: what hears it then (the VAD, the
wake spotter, the gate's pre-roll) decides on audio time, the same, up to `unhurried_reads - 1`
reads later; the wake's upload starts that much later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from audio_io.format import SAMPLE_WIDTH, audioop

if TYPE_CHECKING:
    from config.settings import AudioSettings


class QuietReads:
    """Decides, read by read, whether a read may wait for the next one. Pure; not thread-safe (one
    reader: the device's callback thread or the paced microphone's coroutine)."""

    def __init__(self, rms: int, after_s: float, reads: int, unhurried_reads: int | None = None) -> None:
        """`unhurried_reads`: how many reads may go together while `unhurried` (None: `reads`)."""
        self._rms = rms
        self._after_s = after_s
        self._reads = reads
        self._unhurried_reads = reads if unhurried_reads is None else unhurried_reads
        self._quiet_s = 0.0  # audio under `rms` since the last read over it
        self._held = 0  # reads held since the last one handed on
        # Asked at each read: whether nothing that hears the room is in a hurry (set by the assistant:
        # no one woken, no narration), so that a sound may wait too (None: never). Called from the
        # device's callback thread too: it only reads the loop's state (a read's verdict may be one late).
        self.unhurried: Callable[[], bool] | None = None

    @classmethod
    def of(cls, audio: "AudioSettings") -> "QuietReads | None":
        """As the settings ask (None: every read handed on at once)."""
        read_ms = max(audio.chunk_ms, audio.read_ms)
        reads, unhurried = audio.quiet_read_ms // read_ms, audio.unhurried_read_ms // read_ms
        return cls(audio.quiet_rms, audio.quiet_after_s, reads, unhurried) if max(reads, unhurried) > 1 else None

    def hold(self, pcm: bytes | bytearray, seconds: float, chunks: int = 1) -> bool:
        """Whether this read (`seconds` long; its 16-bit samples `pcm`, mono or stereo, judged in
        `chunks` equal parts: a sound in any of them goes at once) may wait for the next; when False
        the caller hands it on now, after every read held before it."""
        step = max(4, len(pcm) // chunks // 4 * 4)  # (whole frames, mono or stereo)
        sound = any(audioop.rms(pcm[i:i + step], SAMPLE_WIDTH) >= self._rms for i in range(0, len(pcm), step))
        # The quiet starts over at a read over `rms` as a whole: a chunk of the hiss a little over it
        # (a fan's: 8 of 1,500 chunks at -69 dBFS) goes at once, but is no sound to decide on after.
        if sound and audioop.rms(pcm, SAMPLE_WIDTH) >= self._rms:
            self._quiet_s, waits = 0.0, False
        else:
            waits = not sound and self._quiet_s + 1e-9 >= self._after_s
            self._quiet_s += seconds
        unhurried = self.unhurried is not None and self.unhurried()
        if (waits or unhurried) and self._held + 1 < (self._unhurried_reads if unhurried else self._reads):
            self._held += 1
            return True
        self._held = 0
        return False
