"""A second opinion on a wake: openWakeWord's model for the same phrase (`pyopen-wakeword`), heard
over a window around microWakeWord's candidate.

microWakeWord (`detectors.wake_model`) listens all the time at about 2 ms of CPU per second. When
its averaged probability passes a low candidate cutoff, openWakeWord starts: it first hears the
last `lookback_s` of audio (the phrase itself, which ended about when microWakeWord noticed it),
then every chunk until `window_s` after microWakeWord last scored above the candidate cutoff. The
wake counts when, within that window, openWakeWord scored above its threshold and microWakeWord
above `micro_cutoff`. A single
check at one moment (the rule this replaces) turned down clean commands run straight on after the
phrase ("hey jarvis, now read the first two lines" scored 0.23 there and 0.74 a little later):
openWakeWord's peak moves with what follows the phrase, a window catches it wherever it falls.
Two independently trained models rarely fire on the same sound-alike, and each catches voices the
other misses at its own strict cutoff (docs/PERFORMANCE.md, "Choosing the wake phrase").
openWakeWord costs about 30 times microWakeWord's CPU per second of audio, so it runs only while a
candidate's window is open, never on the stream. microWakeWord's best in the window must also
pass a cutoff of its own (lower than the one it uses alone): each model alone wakes on
sound-alikes the other refuses.

microWakeWord alone still wakes at its own cutoff, as it does without the second model: the
second model only adds wakes both agree on (openWakeWord scores some clean flite commands 0.45
that microWakeWord scores 0.99, "hey jarvis, list my tasks"). `STRICT` (WAKE_STRICT=true, issue
34's near misses) makes every wake need both: on a neural voice microWakeWord scores "hey chavez",
"hey jarvie", "hey jealous" and "a jar of peas" 0.97-1.00, and openWakeWord peaks on most of them
for a frame at most, while the phrase holds it above 0.8 for 4-8 frames; so the window wants
`frames` (2) of openWakeWord's frames above `threshold` (openWakeWord's own "patience").

`FusionCore` decides (synchronous, fed probabilities with their times, reports its deadline);
`OpenStream` is the model it asks about. numpy and TFLite load only when a stream is built.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from enum import Enum

PADDED_S = 3.0  # what openWakeWord hears at a start: about 2 s of warm-up before its first score
PADDED_SAMPLES = int(PADDED_S * 16000)
FRAME_SAMPLES = 1280  # openWakeWord's 80 ms step at 16 kHz


@dataclass(frozen=True)
class ConfirmSettings:
    # microWakeWord's averaged probability above which openWakeWord starts listening.
    candidate_cutoff: float = 0.1
    # microWakeWord's best in the window must pass this too ("hey chavez" said by an espeak-ng
    # voice scores 1.0 with openWakeWord and 0.69 with microWakeWord; real "hey jarvis" mostly 0.8+).
    micro_cutoff: float = 0.7
    # openWakeWord's probability above which a frame agrees (its documented default is 0.5), and
    # how many of its 80 ms frames in the window must (the phrase itself holds openWakeWord above
    # 0.8 for 4-8 frames; most sound-alikes that microWakeWord is sure of for 0-1: issue 34's near
    # misses, measured in docs/PERFORMANCE.md). 2 with `micro_alone` off: `STRICT` (WAKE_STRICT).
    threshold: float = 0.8
    frames: int = 1
    # microWakeWord above its own cutoff wakes alone, without openWakeWord (the closest sound-alikes
    # score 0.97-1.00 with microWakeWord, but so do synthetic voices openWakeWord barely hears, flite's
    # "hey jarvis, list my tasks" 0.45). False: every wake waits for openWakeWord's `frames`.
    micro_alone: bool = True
    # What openWakeWord hears first when a candidate opens: the phrase before the candidate.
    lookback_s: float = 2.0
    # How long it keeps listening after microWakeWord last passed the candidate cutoff.
    window_s: float = 1.0
    # openWakeWord scores 80 ms frames, and where their edges fall moves its score (one "hey travis"
    # scored 0.58 or 0.94 with the frames shifted by 40 ms): with more than one, it listens on
    # `phases` frame grids, shifted evenly, and agrees only when every one passed the threshold in
    # the window. Measured: two grids refuse a few near misses but lose more real wakes than the
    # micro cutoff does (docs/PERFORMANCE.md), so one.
    phases: int = 1
    # "hey, <pause> jarvis": microWakeWord scores the phrase split by a pause near 0 and never opens
    # a candidate; openWakeWord hears it. When the VAD heard a short run ("hey", at most
    # `pause_word_s`) and, after a pause of `pause_gap_s`, speech again, openWakeWord alone listens
    # (the look-back holds "hey" and the pause) for `pause_window_s` and wakes above
    # `pause_threshold`. None: no such rule.
    pause_threshold: float | None = 0.9  # with `frames` frames above it, as in a candidate's window
    pause_word_s: tuple[float, float] = (0.12, 0.6)
    pause_gap_s: tuple[float, float] = (0.15, 1.0)
    pause_window_s: float = 1.5
    # openWakeWord costs about 0.1-0.3 s of CPU per start (it hears 3 s at once), and microWakeWord
    # alone passes its own cutoff within a few frames of opening most candidates of real commands:
    # a candidate's start waits this long (issue 34, "What listening costs"), and (with
    # `micro_alone`) a wake microWakeWord makes alone meanwhile never starts it. When it starts, it hears the look-back
    # from where the candidate opened, padded as before, so it scores the same audio on the same
    # frame grid; only its verdict comes up to this much later. 0: at once, as before.
    start_after_s: float = 0.25
    # A third opinion before a wake is accepted (`detectors.wake_verify`): a logistic regression on
    # openWakeWord's embeddings of the last 2.3 s, trained offline against sound-alikes. False: none.
    verify: bool = False
    # With `verify`, microWakeWord's best in a window need only pass this (None: `micro_cutoff`): the
    # verifier judges what openWakeWord agreed to, and "jarvis, ..." alone scores under 0.3 with
    # microWakeWord, often above 0.8 with openWakeWord (issue 34, session 12: the name-alone rule).
    # 0.1 (the candidate cutoff: any window microWakeWord opened) was fixed before it was measured.
    verified_micro_cutoff: float | None = 0.1
    # With `verify`, the cutoffs the verifier's weights were trained on (`Weights.ask_threshold` etc., set by
    # `ModelSpotter.use_verifier`; issue 34, session 17: `benchmarks.wake_verifier_train.RELAXED`): openWakeWord
    # above `verified_threshold` (the pause rule above `verified_pause_threshold`), microWakeWord alone above
    # `verified_alone_cutoff`. None: as without `verify`.
    verified_threshold: float | None = None
    verified_pause_threshold: float | None = None
    verified_alone_cutoff: float | None = None
    # With `verify`: a wake microWakeWord made under this (at a laxer alone cutoff, `verified_alone_cutoff` 0.5,
    # it wakes before the phrase's end) that the verifier refused is asked about once more if microWakeWord
    # passes this within `REFUSED_S` (issue 34, session 23: at 0.51-0.63, 12 commands on four draws were refused
    # 150-250 ms before microWakeWord reached 0.99; asked again at the peak, session 22's grid weights scored them
    # lower still: no gain on draw 28, docs/PERFORMANCE.md). Session 24 at 0.9, on fresh draws 54-57: +0 to +3 commands
    # a draw with either grid verifier, and near misses +2 / 0 / 0 / 0 (r95), +1 / +2 / +1 / -1 (s22 grid): not on by
    # default (more near misses). None: one ask per `REFUSED_S`.
    reask_cutoff: float | None = None
    # With `verify`: a wake microWakeWord makes alone (above `verified_alone_cutoff`, 0.5 for the grid weights: before
    # the phrase's end) waits while microWakeWord still rises, at most this long after its first frame above the
    # cutoff, and is asked about at the first frame that does not rise (its peak, about the phrase's end; issue 34,
    # session 24: 12 commands on four draws were asked 150-250 ms before microWakeWord reached 0.99). Measured worse on
    # used draw 28 at 0.3 (the grid weights, trained on asks at the first frame, score the peak lower: the s22 grid 104 ->
    # 98 of 108, r95 101 -> 97; and openWakeWord starts during the hold: 1.2x the CPU). 0: at that first frame.
    verified_alone_hold_s: float = 0.0

    def as_verified(self) -> ConfirmSettings:
        """These settings with `verify`'s cutoffs in place of the plain ones (itself without `verify`)."""
        if not self.verify:
            return self
        threshold = self.threshold if self.verified_threshold is None else self.verified_threshold
        pause = self.pause_threshold if self.verified_pause_threshold is None else self.verified_pause_threshold
        return replace(self, threshold=threshold, pause_threshold=pause)


# Every wake needs both models, openWakeWord in two frames (WAKE_STRICT=true): half the near misses
# on the neural voice, but synthetic voices openWakeWord barely hears are lost (docs/PERFORMANCE.md).
STRICT = ConfirmSettings(frames=2, micro_alone=False)


class Fusion(Enum):
    """What the spotter does after `FusionCore` heard a score or the clock."""

    NOTHING = "nothing"
    HOLD = "hold"  # a candidate opened: keep its look-back, openWakeWord starts at `start_after_s` unless microWakeWord wakes first
    START = "start"  # start openWakeWord on the look-back (the held candidate's, else the last `lookback_s`), then feed it every chunk
    STOP = "stop"  # the window closed with no agreement: stop feeding openWakeWord
    WAKE = "wake"  # both models agree: a wake (openWakeWord stops too)


class FusionCore:
    """The two-model decision over one candidate window at a time; no audio, no models.

    `micro(p, t)` for each microWakeWord probability, `open(p, t)` for each openWakeWord one while
    listening, `tick(t)` as audio time passes; `deadline` is when an open window closes (None: no
    window). `peak_s`: when microWakeWord scored highest in the window (about the phrase's end)."""

    def __init__(self, settings: ConfirmSettings, alone_cutoff: float) -> None:
        """`alone_cutoff`: microWakeWord's own cutoff, above which it wakes without the second model."""
        self.settings = settings.as_verified()
        self.alone_cutoff = alone_cutoff if not settings.verify or settings.verified_alone_cutoff is None else settings.verified_alone_cutoff
        self.deadline: float | None = None
        self.peak_s = 0.0
        self._peak = 0.0
        self._open_frames = [0] * settings.phases  # openWakeWord's frames above its threshold in this window, per frame grid
        self.paused_from: float | None = None  # a pause window's "hey" began here (None: a candidate's window)
        self.start_at: float | None = None  # a held candidate: openWakeWord starts then (None: started, or no window)
        self._alone_hold_s = settings.verified_alone_hold_s if settings.verify else 0.0
        self._alone_since: float | None = None  # microWakeWord first passed `alone_cutoff` here and is held (`verified_alone_hold_s`)
        self._alone_best = (0.0, 0.0)  # its best (probability, at s) since

    @property
    def listening(self) -> bool:
        """openWakeWord is running (a window is open and its start is not held)."""
        return self.deadline is not None and self.start_at is None

    @property
    def peak(self) -> float:
        """microWakeWord's probability at `peak_s`."""
        return self._peak

    @property
    def holding(self) -> bool:
        return self.start_at is not None

    def reset(self) -> None:
        self.deadline = None
        self.paused_from = None
        self.start_at = None
        self._alone_since = None

    def pause(self, word_start: float, word_end: float, at_s: float) -> Fusion:
        """The VAD heard a word from `word_start` to `word_end`, then a pause, then speech again at
        `at_s`: "hey, <pause> jarvis" may be starting. openWakeWord alone listens if it fits."""
        settings = self.settings
        if settings.pause_threshold is None or self.deadline is not None:
            return Fusion.NOTHING
        if not (settings.pause_word_s[0] <= word_end - word_start <= settings.pause_word_s[1]
                and settings.pause_gap_s[0] <= at_s - word_end <= settings.pause_gap_s[1]):
            return Fusion.NOTHING
        self._open_frames = [0] * settings.phases
        self._peak, self.peak_s, self.paused_from = 0.0, at_s, word_start
        self.deadline = at_s + settings.pause_window_s
        return Fusion.START

    def micro(self, probability: float, at_s: float) -> Fusion:
        alone = self.settings.micro_alone and (probability > self.alone_cutoff or self._alone_since is not None)
        if alone and not self._held_alone(probability, at_s):  # microWakeWord alone, as without the second model
            self._peak, self.peak_s = self._alone_best if self._alone_since is not None else (probability, at_s)
            self.deadline, self.start_at, self._alone_since = None, None, None
            return Fusion.WAKE
        if probability <= self.settings.candidate_cutoff:
            return self.tick(at_s)
        self.paused_from = None  # microWakeWord heard something: the ordinary rule judges it
        started = self.deadline is None
        if started:
            self._open_frames = [0] * self.settings.phases
        if started or probability > self._peak:
            self._peak, self.peak_s = probability, at_s
        self.deadline = at_s + self.settings.window_s
        if started and self.settings.start_after_s > 0:
            self.start_at = at_s + self.settings.start_after_s
            return Fusion.HOLD
        if started:
            return Fusion.START
        return self._started(at_s) or self._agreed()

    def _held_alone(self, probability: float, at_s: float) -> bool:
        """microWakeWord alone passed its cutoff and is still rising within `verified_alone_hold_s`: its wake waits."""
        if self._alone_hold_s <= 0:
            return False
        if self._alone_since is None:
            self._alone_since, self._alone_best = at_s, (probability, at_s)
            return True
        if not probability:  # (microWakeWord's stream scores every third 10 ms frame and reports 0.0 between: not a fall)
            return at_s - self._alone_since < self._alone_hold_s
        rising = probability > self._alone_best[0]
        if rising:
            self._alone_best = (probability, at_s)
        return rising and at_s - self._alone_since < self._alone_hold_s

    def open(self, phase: int, probability: float, at_s: float) -> Fusion:
        """`phase`: which of openWakeWord's frame grids scored it."""
        if self.deadline is None:
            return Fusion.NOTHING
        if at_s > self.deadline:
            return self.tick(at_s)
        threshold = self.settings.threshold if self.paused_from is None else (self.settings.pause_threshold or 1.0)
        self._open_frames[phase] += probability > threshold
        return self._agreed()

    def _agreed(self) -> Fusion:
        """Both models, each at its own cutoff, somewhere in this window (not necessarily at once),
        openWakeWord in `frames` frames of it; in a pause window, openWakeWord alone (its frames
        above `pause_threshold`)."""
        agreed = min(self._open_frames) >= self.settings.frames
        if self.paused_from is not None:
            if agreed:
                self.deadline = None
                return Fusion.WAKE
            return Fusion.NOTHING
        if self._peak > self._micro_cutoff() and agreed:
            self.deadline = None
            return Fusion.WAKE
        return Fusion.NOTHING

    def _micro_cutoff(self) -> float:
        settings = self.settings
        if settings.verify and settings.verified_micro_cutoff is not None:
            return settings.verified_micro_cutoff
        return settings.micro_cutoff

    def tick(self, now: float) -> Fusion:
        if self.deadline is not None and now > self.deadline:
            self.deadline = self.paused_from = self.start_at = None
            return Fusion.STOP
        return self._started(now) or Fusion.NOTHING

    def _started(self, now: float) -> Fusion | None:
        """A held candidate whose time has come: START (once)."""
        if self.start_at is None or now < self.start_at:
            return None
        self.start_at = None
        return Fusion.START


def confirm_available() -> bool:
    """pyopen-wakeword is installed (it has no armv7l wheel: there microWakeWord decides alone)."""
    return importlib.util.find_spec("pyopen_wakeword") is not None


class OpenStream:
    """openWakeWord's model for one phrase on `phases` frame grids, fed 16 kHz pcm16: `start(recent)`
    then `feed(chunk)`, each returning the (phase, probability) pairs it scored."""

    def __init__(self, model: str, phases: int = 1) -> None:
        from pyopen_wakeword import Model, OpenWakeWord, OpenWakeWordFeatures  # numpy + TFLite: only when used

        self._grids = [(OpenWakeWordFeatures.from_builtin(), OpenWakeWord.from_builtin(Model(model))) for _ in range(phases)]

    def start(self, recent: bytes, lead: int | None = None) -> list[tuple[int, float]]:
        """`lead`: the samples of `recent` that count as its look-back for the padding (the rest
        came after it: a held start); None: all of it."""
        # A fresh start: what came before the candidate's look-back is not its business. The model
        # needs about 2 s of features before its first score, so the look-back is padded in front
        # with silence to `PADDED_S` (reset() pads 8 s, three times the cost; pyopen-wakeword 1.1.0,
        # pinned); each grid's padding is shifted by its share of a frame.
        lead = len(recent) // 2 if lead is None else lead
        for phase, (features, model) in enumerate(self._grids):
            features.reset()
            shift = phase * FRAME_SAMPLES // len(self._grids)
            features.new_audio_samples = max(0, PADDED_SAMPLES - lead) + shift
            model.reset()
        return self.feed(recent)

    def feed(self, pcm16k: bytes) -> list[tuple[int, float]]:
        if not pcm16k:  # (an empty chunk would overwrite the features' whole buffer)
            return []
        return [(phase, p) for phase, (features, model) in enumerate(self._grids)
                for embeddings in features.process_streaming(pcm16k) for p in model.process_streaming(embeddings)]
