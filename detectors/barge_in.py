"""Barge-in: the wake phrase and a new command said while the assistant talks.

"Hey jarvis, stop" cuts the narration (the stop phrase, `detectors.stop_phrase`). "Hey jarvis,
what time is it" said over a narration must cut it too, and the command must then be routed as
any woken command is. Pure parts, fed the echo-cancelled microphone (`audio_io.echo_cancel`):

- `BargeInDetector` is a `StopDetector`: the stop phrase detector and the wake model side by side.
  The stop phrase gives its hit; the wake phrase alone gives a hit with `command=True`, at once
  (the narration goes quiet while the user is still talking, which is what lets the command be
  heard). The coordinator cuts the narration on either, as it does for "stop".
- `CommandHold` is the mic reader's memory of what it heard while the narrator talked. After a
  `command` hit it holds the microphone from `preroll_s` before the wake phrase on, until
  `decide_s` of audio passed after the phrase with no stop word (then everything held goes down
  the ordinary upload path, wake phrase included, as if it had been heard with the mic open: the
  chunk the wake phrase ended in carries it (`Held.woke_s`), so the upload gate opens on the wake
  the barge-in detector heard rather than waiting for its own wake model to hear it again in the
  cancelled audio, and the turn is routed) or a stop phrase came (the user said "hey jarvis,
  stop": nothing is uploaded).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Protocol

import numpy as np

from audio_io import BYTES_PER_SECOND, SAMPLE_RATE
from audio_io.format import audioop
from detectors.audio import SAMPLE_WIDTH, Resampler
from decisions.upload_gate import KeywordHit
from detectors.pipeline import WakeSpotter
from detectors.stop_phrase import StopPhraseDetector, _Spotter
from detectors.stop_word import EchoGatedStopFeed, StopDetector, StopHit, StopListener


class BargeInDetector:
    """The stop phrase, and the wake phrase alone (a command follows): one `StopDetector`.

    `search_wakes`: the stop phrase's own pocketsphinx search for the wake phrase (which it runs
    anyway, for "<wake phrase> <stop word>") makes a `command` hit too when the wake model heard
    nothing in that chunk (`StopSettings.barge_in_search_wakes`): a second way a barge-in wakes,
    for voices the model misses (PERFORMANCE.md, "Barge-in: the stop phrase's search as a second
    wake")."""

    def __init__(self, stop: StopDetector, wake: WakeSpotter, wake_phrase: str, search_wakes: bool = False) -> None:
        self.stop = stop
        self.wake = wake
        self.wake_phrase = wake_phrase
        self.search_wakes = search_wakes
        self.search_woke = 0  # hits the search's wake made (the model silent): for the benchmarks' accounts

    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        hit = self.stop.feed(chunk, at)
        woke = self.wake.feed(chunk, at)
        spotted = getattr(self.stop, "wake_spotted", None) if self.search_wakes else None
        if hit is None and woke is None and spotted is not None:
            start_s, end_s = spotted
            self.search_woke += 1
            return StopHit(phrase=self.wake_phrase, end_s=at, detected_s=at, start_s=start_s, wake_end_s=min(end_s, at),
                           command=True)
        return self.combine(hit, woke, at)

    def combine(self, hit: StopHit | None, woke: KeywordHit | None, at: float) -> StopHit | None:
        """The stop phrase's hit first; else the wake model's, as a `command` hit."""
        if hit is not None:
            return hit
        if woke is not None:
            if isinstance(self.stop, StopPhraseDetector):  # "stop" after the model's wake is the stop phrase too
                self.stop.wake_heard(woke.start_s, woke.detected_s, at)
            return StopHit(phrase=self.wake_phrase, end_s=at, detected_s=at, start_s=woke.start_s, command=True)
        return None

    def reset(self) -> None:
        self.stop.reset()
        self.wake.reset()

    def refused(self) -> None:
        """The last hit was vetoed (`PrerollStopListener`): the wake model may wake again at once."""
        refused = getattr(self.wake, "refused", None)  # (`ModelSpotter`'s; pocketsphinx has no refractory)
        if refused is not None:
            refused()


@dataclass(frozen=True)
class AfterWakeSettings:
    threshold: float = 1e-30  # the stop words' keyphrase threshold (the stop phrase's: 1e-20)
    voice_rms: int = 300  # a chunk this loud is speech (about -40 dBFS; the narration is silent by now)
    after_s: float = 0.25  # speech after the stop word: more than this, and it was a command
    settle_s: float = 0.4  # a stop word spotted this recently may yet be followed by more: wait
    # ... or a stop word spotted after the wake phrase began, and no more speech than this after
    # the hit that began the hold (the wake phrase heard, or the stop phrase): one word. The
    # searches fire early in "stop" (on its "s"), so what follows the last spot can be the word's
    # own end (0.32 s of it in the benchmark's -6 dB trials); a command went on 0.5 s and more
    # after its hit, or 0.36 s with its only spot in the narration's residue before the phrase
    # (PERFORMANCE.md, "Barge-in: the hold's check counts from the hit", issue 32, session 18)
    after_hit_s: float = 0.4
    # True: "after the wake phrase began" read as at or after the hit that began the hold. The
    # searches also fire inside "jarvis", and a fast "hey jarvis, what time is it" (flite slt 200 wpm,
    # 0.36 s of speech after the hit) is dropped on such a spot 20 ms before the hit; but as often a
    # slow "hey jarvis, stop" (flite awb 150) has its only spot there too (0.12-0.16 s before the
    # hit, "stop" itself unspotted), and counted from the hit it went up as a command. Measured, not
    # switched on (PERFORMANCE.md, "Barge-in: whose losses are the wake model's").
    in_phrase_from_hit: bool = False
    # A hold is dropped as "stop" only when the stop phrase's own search (1e-20) heard the wake
    # phrase and a stop word; the check's lenient spots (1e-30) alone release it. A released "hey
    # jarvis, stop" is dismissed by the router (decisions.dismissal: nothing runs or is said, the
    # narration was cut at the hit), where a dropped command is lost: "hey jarvis", a 2 s pause,
    # then the command over the narration went up 17-24 times in 30 against 4-11 (fresh rooms;
    # PERFORMANCE.md, "Barge-in: a released stop is dismissed", issue 32, session 23).
    stop_needs_phrase: bool = True
    # A hold its rule would drop as "stop" with no speech after its hit yet waits this long after the
    # hit for a command after a pause ("hey jarvis", a breath, "what time is it"): the stop phrase's
    # search fires on "hey jarvis" and the silence after it (the narration is cut at the hit), at the
    # hit itself with nothing voiced after it, in 12 of 13 2 s-pause commands the rule dropped (PERFORMANCE.md,
    # "Barge-in: a pause after the wake phrase", session 24). The narration was cut at the hit, so waiting
    # costs nothing heard; speech that comes is judged once `after_hit_s` of it was heard (or it ended).
    # 0: decide at `HoldSettings.decide_s` as before.
    pause_wait_s: float = 3.0


class StopAfterWake:
    """Was what followed the wake phrase a stop word alone? Feed it what the hold keeps
    (`start`, then `feed` per chunk); `said_stop` says. Its pocketsphinx searches (about 0.3 s
    of CPU each to build) are built at the first `start`, then reused. Sync, no I/O after that."""

    def __init__(self, stop_words: tuple[str, ...], settings: AfterWakeSettings = AfterWakeSettings(),
                 input_rate: int = 24000, delay_frames: int = 2) -> None:
        self.stop_words = stop_words
        self.settings = settings
        self._delay_frames = delay_frames
        self._spotters: list[_Spotter] | None = None
        self._resample = Resampler(input_rate)
        self._chunk_rate = input_rate * SAMPLE_WIDTH
        self._voiced_after_s = 0.0  # speech since the last stop word spotted
        self._since_spot_s = 0.0  # audio since then
        self._hit_s = 0.0  # the hit that began the hold (the hold's clock)
        self._phrase_start_s = 0.0  # where its wake phrase began
        self._voiced_after_hit_s = 0.0  # speech since the hit
        self._phrase_heard = False  # the stop phrase's own search heard it (`heard_stop(by_phrase=True)`)
        self._spoke_s: float | None = None  # where the first speech after the hit began (None: none yet)
        self.spots: list[float] = []  # where stop words were heard since `start`

    @classmethod
    def for_detector(cls, detector: object, settings: AfterWakeSettings = AfterWakeSettings()) -> "StopAfterWake | None":
        """The check for a barge-in detector's stop words (None for any other detector: no barge-in)."""
        stop = getattr(detector, "stop", None) if isinstance(detector, BargeInDetector) else None
        if not isinstance(stop, StopPhraseDetector):
            return None
        return cls(stop.stop_words, settings, input_rate=stop.settings.input_rate, delay_frames=stop.settings.kws_delay_frames)

    @property
    def said_stop(self) -> bool:
        return self.says_stop(self.settings)

    def says_stop(self, settings: AfterWakeSettings) -> bool:
        """Whether what this hold heard is a "stop" by the rule of `settings` (this check's own, or
        another's the benchmarks ask about: the speech counted, `voice_rms`, stays this check's)."""
        if not self.spots or settings.stop_needs_phrase and not self._phrase_heard:
            return False
        after_phrase = [t >= self._hit_s - 1e-6 if settings.in_phrase_from_hit else t > self._phrase_start_s for t in self.spots]
        return self._voiced_after_s <= settings.after_s or any(after_phrase) and self._voiced_after_hit_s <= settings.after_hit_s

    @property
    def settled(self) -> bool:
        """Nothing spotted, or long enough ago to know whether more followed."""
        return not self.spots or self._since_spot_s >= self.settings.settle_s

    def waits(self, end_s: float) -> bool:
        """Whether a hold the rule would drop as "stop" should wait at `end_s` for what may follow a
        pause (`AfterWakeSettings.pause_wait_s`): nothing said after the hit yet, or speech that began
        after it and has not yet run `after_hit_s` (nor stopped: `settle_s` past that)."""
        wait = self.settings.pause_wait_s
        if wait <= 0 or not self.said_stop:
            return False
        if self._spoke_s is None:
            return end_s < self._hit_s + wait
        return self._voiced_after_hit_s <= self.settings.after_hit_s and end_s < self._spoke_s + self.settings.after_hit_s + self.settings.settle_s

    def start(self, hit_s: float, phrase_start_s: float) -> None:
        """A hold begins, on a hit at `hit_s` whose wake phrase began at `phrase_start_s`; what it
        kept from before is fed next."""
        if self._spotters is None:
            self._spotters = [_Spotter(word, self.settings.threshold, self._delay_frames) for word in self.stop_words]
        for spotter in self._spotters:
            spotter.reset()
        self._resample.reset()
        self._voiced_after_s = self._since_spot_s = self._voiced_after_hit_s = 0.0
        self._hit_s, self._phrase_start_s = hit_s, phrase_start_s
        self._phrase_heard = False
        self._spoke_s = None
        self.spots = []

    def heard_stop(self, at_s: float, by_phrase: bool = False) -> None:
        """A stop word was heard at `at_s`: by this check's searches, or by the stop phrase's own
        (`by_phrase`: the wake phrase and a stop word, at the stop phrase's strict threshold)."""
        self._voiced_after_s, self._since_spot_s = 0.0, 0.0
        self._phrase_heard = self._phrase_heard or by_phrase
        self.spots.append(at_s)

    def feed(self, chunk: bytes, end_s: float) -> None:
        """The next chunk the hold keeps, ending at `end_s`."""
        if self._spotters is None:
            return
        pcm16k = self._resample(chunk)
        spotted = [spotter.feed(pcm16k) is not None for spotter in self._spotters]
        seconds = len(chunk) / self._chunk_rate
        voiced = audioop.rms(chunk, SAMPLE_WIDTH) >= self.settings.voice_rms
        if voiced and end_s > self._hit_s:
            self._voiced_after_hit_s += seconds
            if self._spoke_s is None:
                self._spoke_s = end_s - seconds
        if any(spotted):
            self.heard_stop(end_s)
        elif self.spots:
            self._since_spot_s += seconds
            if voiced:
                self._voiced_after_s += seconds


@dataclass(frozen=True)
class HoldSettings:
    preroll_s: float = 0.5  # held from this long before the wake phrase began
    decide_s: float = 1.5  # after the phrase: no stop word by then, it is a command
    keep_s: float = 4.0  # what is remembered while the narrator talks


@dataclass(frozen=True)
class Held:
    offset: int  # where the chunk lies in the microphone's stream (bytes)
    chunk: bytes
    end_s: float  # its end on the stop listener's clock
    released: bool = False  # let through after a barge-in's hold: the user's, though said over the narrator
    # The wake phrase that began the hold ended in this chunk and was this long (s): the upload path
    # takes it as its own wake (`UploadFilter.feed`). Its wake model, a quiet room's, missed it in
    # the cancelled audio in some released commands; the barge-in detector heard it, and the
    # margins and what was played judged it
    # (PERFORMANCE.md, "Barge-in: a released barge-in carries its wake").
    woke_s: float | None = None


class CommandHold:
    """Per chunk: `take(piece)` returns what the upload path gets now (the piece itself, nothing
    while a barge-in is being decided, or everything held once it is a command). Pure."""

    def __init__(self, settings: HoldSettings = HoldSettings(), check: StopAfterWake | None = None) -> None:
        self.settings = settings
        self.check = check  # decides, at the hold's end, whether the user said "stop" after all
        self._recent: deque[Held] = deque()
        self._held: list[Held] | None = None  # a barge-in being decided
        self._wake = (0.0, 0.0)  # where the wake phrase of the hit that began it began and ended
        self._decide_at = 0.0
        self.released = 0  # barge-in commands passed on
        self.dropped = 0  # barge-ins that were "stop" after all

    @property
    def holding(self) -> bool:
        return self._held is not None

    def remember(self, piece: Held) -> None:
        """A chunk heard while the narrator talked (echo-cancelled)."""
        self._recent.append(piece)
        while self._recent and piece.end_s - self._recent[0].end_s > self.settings.keep_s:
            self._recent.popleft()

    def hit(self, hit: StopHit) -> None:
        """The detector's hit: a wake alone starts a hold; a stop phrase ends one (dropped). With
        a `check`, a stop phrase too starts a hold (or joins one) and the check decides at its
        end: the stop phrase's search also fires on the "what" of "hey jarvis, what time is it"."""
        if self._held is None and (hit.command or self.check is not None):
            start = (hit.start_s if hit.start_s is not None else hit.end_s) - self.settings.preroll_s
            self._held = [h for h in self._recent if h.end_s > start]
            wake_end = hit.wake_end_s if hit.wake_end_s is not None else hit.end_s
            self._wake = (min(start + self.settings.preroll_s, wake_end), wake_end)
            self._decide_at = hit.end_s + self.settings.decide_s
            if self.check is not None:
                self.check.start(hit.end_s, start + self.settings.preroll_s)
                for held in self._held:
                    self.check.feed(held.chunk, held.end_s)
        if not hit.command and self.check is not None:
            self.check.heard_stop(hit.end_s, by_phrase=True)
        elif not hit.command and self._held is not None:
            self._held = None
            self.dropped += 1
        self._recent.clear()

    def take(self, piece: Held, muted: bool) -> list[Held]:
        """What the upload path gets now for `piece` (the chunk just read, after the echo gate)."""
        if self._held is None:
            return [piece]
        # The chunk the hit was heard in is remembered (cancelled) before the hit, and so already held.
        if not self._held or self._held[-1].offset < piece.offset:
            self._held.append(piece)
            if self.check is not None:
                self.check.feed(piece.chunk, piece.end_s)
        if piece.end_s < self._decide_at or muted or (self.check is not None and (not self.check.settled or self.check.waits(piece.end_s))):
            return []
        held, self._held = self._held, None
        if self.check is not None and self.check.said_stop:  # "hey jarvis, stop", the phrase missed
            self.dropped += 1
            return []
        self.released += 1
        # Every hit that begins a hold heard the wake phrase (the wake model's, or the stop phrase's,
        # which is the wake phrase and a stop word): the chunk it ended in says so.
        began, ended = self._wake
        woke = next((i for i, h in enumerate(held) if h.end_s >= ended - 1e-6), len(held) - 1)
        return [replace(h, released=True, woke_s=ended - began if i == woke else None) for i, h in enumerate(held)]

    def clear(self) -> None:
        self._recent.clear()


@dataclass(frozen=True)
class PrerollSettings:
    preroll_s: float = 1.0  # once a voice opens the feed, the detector first hears this much before it
    # Voiced chunks the gate passed, of the last `window`, that open the feed (the shipped feed's
    # 3 of 5 found less of the user; 2 of 5 with nothing after it woke on the echo 6 times an hour)
    onset: int = 2
    window: int = 5
    hangover_s: float = 1.0  # the feed stays open this long after each such chunk
    # A hit stands only when, from where its phrase began to now, the canceller's output had at
    # least `min_voiced` chunks of `voice_rms`, and over those the echo gate in front (the raw
    # microphone against what was played) found the microphone on average at least
    # `min_margin_db` louder than the echo it expected (each chunk's margin clipped to
    # `margin_clip_db`): a voice adds to the echo, a canceller that lost the room (the echo path
    # changed) does not (PERFORMANCE.md, "Barge-in: the preroll's check on each hit").
    min_voiced: int = 15
    min_margin_db: float = 1.0
    margin_clip_db: tuple[float, float] = (-20.0, 40.0)
    voice_rms: int = 300
    span_s: float = 1.0  # a hit that does not say where its phrase began: this long before its end
    # ... and it stands only when what was played explains less than `max_explained` of the raw
    # microphone over its phrase (`explained`, over `explained_window_s` windows: 0-1). The
    # margins test a level against the path the gate learnt, and right after the path changed to a
    # louder one the narration's own "hey jarvis" beat them at 0.93 explained; the user's phrases
    # at 0 dB of echo were explained 0.19-0.68
    # (PERFORMANCE.md, "Barge-in: what was played explains"). A phrase across the path's change is
    # explained less (two paths, not one): the margins catch those. 1: off.
    max_explained: float = 0.8
    explained_window_s: float = 1024 / SAMPLE_RATE  # about 43 ms: longer windows explained the user more
    explained_lead_s: float = 0.2  # the echo comes this much after what was lined up with it, at most
    # ... and only when what was played explains less than `max_residue_explained` of the
    # canceller's output over its phrase. Right after the echo path changed, the canceller leaks the
    # narration: what was played through the filter's misfit to the new path, one filter even across
    # the change (before it the residue is small), where the raw microphone needs two and passed the
    # check above. pocketsphinx's search heard "hey jarvis" in that leak (and the wake model once):
    # 0.43-0.67 explained; a user's hits at 0 dB 0.01-0.19, the voice being all a canceller leaves of it
    # (PERFORMANCE.md, "Barge-in: the canceller's leak explained", issue 32, session 24). 1: off.
    max_residue_explained: float = 0.3


class PrerollStopListener(StopListener):
    """The stop listener for the echo canceller's output (issue 32, sessions 12-13). The gate behind
    the canceller passes a chunk only when it beats the residual echo by 12 dB, which keeps the
    narrator's own words from the detectors, but at 0 dB of echo it also dropped about two thirds
    of the user's voiced chunks, the "hey" among them, and the detectors hear a phrase with holes
    (docs/PERFORMANCE.md, "Barge-in: where the trials are lost, and a preroll"). So the gate still
    decides *when* the detectors listen (a voice it passed: `onset` of the last `window` chunks),
    but once it opens, they hear the canceller's output from `preroll_s` before, and on for
    `hangover_s` after each voiced chunk it passed: the whole phrase, not the pieces that beat the
    residue. `margin` (the echo gate's `margin_db` for the raw microphone, read once per chunk)
    judges each hit: right after the room's echo path changed, the canceller leaves more echo than
    the gate behind it expects, its passes open the feed, and the detectors then heard the
    narration's own "hey jarvis" (and "..., stop"); over those hits the microphone held no more than
    the echo the gate in front expected, over the user's more (see `PrerollSettings`). Without
    `margin` no hit is judged. `echo` (the raw microphone chunk and what was played lined up with
    it, the canceller's `far`) judges a hit the margins passed once more: the narration's own words
    are what was played, through a room, and a linear filter of it explains nearly all the
    microphone over them (`explained`), whatever the path's gain; a user's voice is not. Then what
    was played against the canceller's own output (`max_residue_explained`): across and after a
    change of the echo path, what it leaks is the narration through one filter, its misfit. Pure;
    one call per chunk."""

    def __init__(self, detector: StopDetector, settings: PrerollSettings = PrerollSettings(),
                 margin: Callable[[], float] | None = None, echo: Callable[[], tuple[bytes, bytes]] | None = None) -> None:
        self._gate_feed = EchoGatedStopFeed(hangover_s=settings.hangover_s, onset=settings.onset, window=settings.window)
        super().__init__(detector, self._gate_feed)
        self.settings = settings
        self.preroll_s = settings.preroll_s
        self._margin = margin
        self._recent: deque[tuple[bytes, float]] = deque()  # the last `preroll_s` of chunks, with their end
        self._judged: deque[tuple[float, bool, float]] = deque()  # (end, voiced, clipped margin), the last few seconds
        self._echo = echo
        # (end, raw microphone, played lined up, the canceller's output), as long
        self._heard: deque[tuple[float, bytes, bytes, bytes]] = deque()
        self._primed = False  # the detector heard the preroll since its last reset
        self.primings = 0  # times the feed opened on a voice (each replays the preroll)
        self.vetoed = 0  # hits the microphone's margins over the echo did not bear out
        self.explained_vetoed = 0  # hits that what was played explained (`max_explained`)
        self.residue_vetoed = 0  # hits whose canceller's output what was played explained (`max_residue_explained`)

    def hear(self, raw: bytes, passed: bool, narrating: bool) -> StopHit | None:
        end = self.clock + len(raw) / BYTES_PER_SECOND
        self._recent.append((raw, end))
        while end - self._recent[0][1] >= self.preroll_s:
            self._recent.popleft()
        if self._margin is not None:
            low, high = self.settings.margin_clip_db
            self._judged.append((end, audioop.rms(raw, SAMPLE_WIDTH) >= self.settings.voice_rms,
                                 min(max(self._margin(), low), high)))
            while end - self._judged[0][0] > _JUDGED_S:
                self._judged.popleft()
        if self._echo is not None:
            mic, far = self._echo()
            self._heard.append((end, mic, far or bytes(len(mic)), raw))
            while end - self._heard[0][0] > _JUDGED_S:
                self._heard.popleft()
        hit = super().hear(raw, passed, narrating)
        if not self._fed:  # a gap (or no narration): the detector starts afresh
            self._primed = False
            return self._judge(hit)
        if not self._primed and self._gate_feed.open_at(end):
            self._primed = True
            self.primings += 1
            self.detector.reset()  # it hears the preroll, this chunk included, from the start
            for chunk, at in self._recent:
                hit = self.detector.feed(chunk, at) or hit
        return self._judge(hit)

    def _judge(self, hit: StopHit | None) -> StopHit | None:
        """The hit, unless the microphone over its phrase held no more than the narration's echo."""
        if hit is None or self._margin is None:
            return hit
        start = hit.start_s if hit.start_s is not None else hit.end_s - self.settings.span_s
        # (chunks that end more than half a chunk after the phrase began)
        margins = [m for end, voiced, m in self._judged if voiced and end > start + 0.01]
        if len(margins) < self.settings.min_voiced or sum(margins) / len(margins) < self.settings.min_margin_db:
            self.vetoed += 1
            self._refused()
            return None
        if self._echo is not None and self.settings.max_explained < 1 and self._explained(start) >= self.settings.max_explained:
            self.explained_vetoed += 1
            self._refused()
            return None
        if (self._echo is not None and self.settings.max_residue_explained < 1
                and self._explained(start, residue=True) >= self.settings.max_residue_explained):
            self.residue_vetoed += 1
            self._refused()
            return None
        return hit

    def _refused(self) -> None:
        """A vetoed hit leaves the wake model no refractory: the narration's own "hey jarvis"
        vetoed just before the user's phrase otherwise kept it deaf to the user's for 3 s
        (PERFORMANCE.md, "Barge-in: where -12 dB's trials are lost; a vetoed hit leaves the wake model awake")."""
        refused = getattr(self.detector, "refused", None)
        if refused is not None:
            refused()

    def _explained(self, start: float, residue: bool = False) -> float:
        """How much of the raw microphone from `start` on (`residue`: of the canceller's output)
        what was played explains (`explained`)."""
        lead = round(self.settings.explained_lead_s * SAMPLE_RATE)
        first = start - self.settings.explained_lead_s
        mic = b"".join(c if residue else m for end, m, _, c in self._heard if end > start + 0.01)
        played = b"".join(f for end, _, f, _ in self._heard if end > first + 0.01)
        mic_samples = np.frombuffer(mic, dtype=np.int16).astype(np.float64)
        played_samples = np.frombuffer(played, dtype=np.int16).astype(np.float64)
        played_samples = np.concatenate([np.zeros(max(0, len(mic_samples) + lead - len(played_samples))), played_samples])
        return explained(played_samples[-(len(mic_samples) + lead):], mic_samples, lead,
                         round(self.settings.explained_window_s * SAMPLE_RATE))


def explained(played: np.ndarray, mic: np.ndarray, lead: int, frame: int = 1024) -> float:
    """How much of `mic`'s power over 100-4000 Hz a linear filter of `played` explains, 0-1: their
    coherence per frequency, weighted by the microphone's spectrum, over `frame`-sample windows
    overlapping by three quarters (a room's reverberation longer than a window explains less).
    `played` starts `lead` samples before `mic`: the echo comes up to that much
    after it, at the lag where the two correlate best. 0 when either is too short or silent."""
    size = 1 << (len(played) + len(mic)).bit_length()
    correlation = np.fft.irfft(np.conj(np.fft.rfft(mic, size)) * np.fft.rfft(played, size), size)[:lead + 1]
    lag = int(np.argmax(np.abs(correlation)))  # `played[lag:]` lines up with `mic`
    window = np.hanning(frame)
    frequencies = np.fft.rfftfreq(frame, 1 / SAMPLE_RATE)
    band = (frequencies >= 100) & (frequencies <= 4000)
    played_power = np.zeros(int(band.sum()))
    mic_power = np.zeros(int(band.sum()))
    cross = np.zeros(int(band.sum()), dtype=complex)
    for at in range(0, min(len(mic), len(played) - lag) - frame + 1, frame // 4):
        p = np.fft.rfft(window * played[lag + at:lag + at + frame])[band]
        m = np.fft.rfft(window * mic[at:at + frame])[band]
        played_power += np.abs(p) ** 2
        mic_power += np.abs(m) ** 2
        cross += np.conj(p) * m
    if mic_power.sum() <= 0 or played_power.sum() <= 0:
        return 0.0
    return float((np.abs(cross) ** 2 / np.maximum(played_power, 1e-9)).sum() / mic_power.sum())


class Margined(Protocol):
    margin_db: float  # an echo gate (`audio_io.echo.EchoSuppressor`): how much the last chunk beat the echo expected


def stop_listener(detector: StopDetector, canceller: object | None, gate: Margined | None,
                  echo: Callable[[], tuple[bytes, bytes]] | None = None) -> StopListener:
    """The stop listener for a room: with a canceller (and the echo gate in front), the preroll
    whose hits the gate's margins judge, and `echo` (the raw microphone and what was played lined
    up with it) once more (`PrerollStopListener`); else the gated feed (a preroll there would be
    the narrator's raw echo)."""
    if canceller is None or gate is None:
        return StopListener(detector)
    return PrerollStopListener(detector, margin=lambda: gate.margin_db, echo=echo)


_JUDGED_S = 4.0  # the margins kept: longer than a phrase with its stop word
