"""On-device wake word from a model shipped in a package (microWakeWord, `pymicro-wakeword`).

The same shape as `detectors.keyword.KeywordSpotter` (`feed(chunk, end_time) -> KeywordHit |
None`, `reset()`), so `MicDetectors` and the upload gate take either. The models ("hey jarvis",
"okay nabu", "alexa", "hey mycroft") and their TFLite library are inside the wheel: nothing is
downloaded. About 5 ms of CPU per second of audio fed, and the pipeline feeds it only speech.

With `confirm` settings (the default for "hey jarvis" when WAKE_CUTOFF is empty), a second model
adds wakes: besides microWakeWord alone at its own cutoff, a wake where both agree at lower
cutoffs: microWakeWord's averaged probability passes a low candidate cutoff, and openWakeWord's
model for the same phrase (`detectors.wake_confirm`), hearing the phrase and the second after the
candidate, passes its threshold somewhere in that window. Without them, a hit is reported when microWakeWord's probability passes the cutoff (the
model's own, tuned by its authors, unless WAKE_CUTOFF sets one). After a hit, hits are not reported
again for `refractory_s` (the same phrase is still ringing in the model's window, and a wake is a wake).
The refractory runs on the clock `feed` is given and survives `reset()`, which the pipeline calls
at every speech onset.

numpy and TFLite load only when a spotter is built (`handoff status` and `handoff check` never do).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from config.wake_phrases import WakeModel
from decisions.upload_gate import KeywordHit
from detectors.audio import MODEL_RATE, SAMPLE_WIDTH, Resampler
from detectors.wake_confirm import ConfirmSettings, Fusion, FusionCore, OpenStream
from detectors.wake_verify import VERIFY_S, WakeVerifier, verifier_available

REFUSED_S = 1.0  # after the verifier refused a wake, the models' next wakes are not asked about for this long


@dataclass(frozen=True)
class PendingWake:
    """A wake waiting for the audio its verifier hears (`Weights.delay_s` after it)."""

    due: int  # the verifier's audio ends at this 16 kHz sample of the stream
    woke_s: float  # the clock at the wake (its refractory and a refusal's quiet run from here)
    start_s: float  # where the phrase began (the hit's `start_s`)
    # microWakeWord's probability `start_s` was timed from (None: from a pause's "hey"). A higher one
    # while the wake waits moves `start_s` there: a wake at a low alone cutoff (`verified_alone_cutoff`)
    # comes before the phrase's end, and the upload gate finds the utterance's onset from `start_s`.
    peak: float | None = None
    # Refused, it is asked about once more if microWakeWord passes `ConfirmSettings.reask_cutoff` soon after.
    reaskable: bool = False
    # microWakeWord passed `reask_cutoff` while it waited: the second ask's due sample and clock (else None).
    reask_due: int | None = None
    reask_s: float = 0.0


@dataclass(frozen=True)
class ModelSpotterSettings:
    model: WakeModel
    cutoff: float | None = None  # None: the model's own probability_cutoff (ignored with `confirm`)
    confirm: ConfirmSettings | None = None  # None: microWakeWord alone decides
    # With `confirm`: microWakeWord above this wakes without openWakeWord (None: the model's own
    # cutoff). The barge-in detector's is lower: its hits are judged by the preroll's check.
    alone_cutoff: float | None = None
    refractory_s: float = 3.0
    input_rate: int = 24000


@dataclass(frozen=True)
class Score:
    """The best the model scored on what it heard since the last `take_best()`."""

    probability: float
    at_s: float  # end time of the chunk that scored it


class ModelSpotter:
    """Feed pcm16 mono chunks with the clock time at each chunk's end; `feed` returns a hit or None."""

    def __init__(self, settings: ModelSpotterSettings) -> None:
        from pymicro_wakeword import MicroWakeWord, Model  # numpy + TFLite: only when used

        from detectors.micro_stream import MicroFeatures, MicroStream

        self.settings = settings
        self.phrase = settings.model.phrase
        self._model = MicroWakeWord.from_builtin(Model(settings.model.model))
        self._features = MicroFeatures()  # the wheel's frontend, each frame a list (issue 34)
        self._stream = MicroStream(self._model)  # the model's probabilities, cheaper (issue 34)
        self._confirm = settings.confirm
        if self._confirm is not None and self._confirm.verify and not verifier_available(settings.model.model):
            # No verifier ships for this phrase: nor does the lower cutoff that leans on one.
            self._confirm = replace(self._confirm, verify=False)
        self._alone = settings.alone_cutoff if settings.alone_cutoff is not None else self._model.probability_cutoff
        if self._confirm is not None:
            self.cutoff = self._confirm.candidate_cutoff
            self._fusion = FusionCore(self._confirm, self._alone)
            self._open = OpenStream(settings.model.model, self._confirm.phases)
        else:
            self.cutoff = settings.cutoff if settings.cutoff is not None else self._model.probability_cutoff
        # The third opinion, asked once per wake about to be accepted (`ConfirmSettings.verify`).
        self.verifier: WakeVerifier | None = None
        if self._confirm is not None and self._confirm.verify and verifier_available(settings.model.model):
            self.use_verifier(WakeVerifier(settings.model.model))
        self._recent = bytearray()  # the last `confirm.lookback_s` (+ `start_after_s`) of 16 kHz audio, for the second model
        self._recent_end = 0  # 16 kHz samples ever added to `_recent` (where its end lies in the stream)
        self._held_from: int | None = None  # a held candidate's look-back starts at this sample of the stream
        self._resample = Resampler(settings.input_rate)
        self._quiet_until = float("-inf")  # the refractory period after the last hit
        self._last_time = float("-inf")
        self._best: Score | None = None
        self._pending: PendingWake | None = None
        self._reask_until: float | None = None  # a refused wake may be asked about again until then (`reask_cutoff`)

    def use_verifier(self, verifier: WakeVerifier) -> None:
        """Ask `verifier` about each wake, the models waking at the cutoffs its weights were trained on
        (`Weights.ask_threshold` etc.: None, the plain ones)."""
        self.verifier = verifier
        weights = verifier.weights
        if self._confirm is not None and self._confirm.verify:
            asked = replace(self._confirm, verified_threshold=weights.ask_threshold,
                            verified_pause_threshold=weights.ask_pause_threshold, verified_alone_cutoff=weights.ask_alone_cutoff)
            self._fusion = FusionCore(asked, self._alone)

    @property
    def model_cutoff(self) -> float:
        """The cutoff the model ships with."""
        return float(self._model.probability_cutoff)

    @property
    def listening(self) -> bool:
        """A candidate's (or a pause's) window is open: what comes next may still make the wake
        (`MicDetectors` feeds it on after the speech while so)."""
        return self._confirm is not None and (self._fusion.deadline is not None or self._pending is not None)

    def reset(self) -> None:
        """What is fed next does not follow what came before (the refractory period still runs)."""
        self._model.reset()
        self._stream.reset()
        self._features.reset()
        self._resample.reset()
        self._recent.clear()
        self._held_from = None
        if self._pending is not None:  # a gap in the stream: the audio the verifier waits for never comes
            self._quiet_until, self._pending = self._pending.woke_s + REFUSED_S, None
        self._reask_until = None
        if self._confirm is not None:
            self._fusion.reset()

    def feed(self, chunk: bytes, end_time: float) -> KeywordHit | None:
        """`end_time`: the clock time (seconds) at the end of `chunk`."""
        if end_time < self._last_time:  # a new clock (another recording): the old refractory means nothing
            self._quiet_until = float("-inf")
        self._last_time = end_time
        hit = None
        pcm16k = self._resample(chunk)
        for features in self._features.process_streaming(pcm16k):
            probability = self._stream.probability(features)
            if probability is None:
                continue
            if self._best is None or probability > self._best.probability:
                self._best = Score(probability, end_time)
            if self._confirm is None:
                if probability > self.cutoff and end_time >= self._quiet_until and hit is None:
                    hit = self._hit(end_time - self.settings.model.spoken_s, end_time)
            elif end_time >= self._quiet_until:
                hit = self._fused(self._fusion.micro(probability, end_time), end_time) or hit
            elif self._reask_until is not None and probability > (self._confirm.reask_cutoff or 1.0):
                hit = self._reasked(probability, end_time) or hit
            elif self._pending is not None and self._pending.peak is not None and probability > self._pending.peak:
                self._pending = replace(self._pending, peak=probability, start_s=end_time - self.settings.model.spoken_s)
                if self._pending.reaskable and self._pending.reask_due is None and probability > (self._confirm.reask_cutoff or 1.0):
                    due = self._recent_end + int(self._delay_s * MODEL_RATE)  # (as a wake made now would be asked)
                    self._pending = replace(self._pending, reask_due=due, reask_s=end_time)
        if self._confirm is not None:
            hit = self._confirmed(pcm16k, end_time) or hit
        return hit

    def pause_heard(self, word_start: float, word_end: float, now: float) -> KeywordHit | None:
        """The VAD heard a short word, a pause and speech again at `now` ("hey, <pause> jarvis"?):
        with the second model, it listens alone for a while (`ConfirmSettings.pause_threshold`)."""
        if self._confirm is None or now < self._quiet_until:
            return None
        return self._fused(self._fusion.pause(word_start, word_end, now), now)

    def _confirmed(self, pcm16k: bytes, end_time: float) -> KeywordHit | None:
        """Keep the last `lookback_s` (and `start_after_s`) of audio; while a candidate's window is
        open, openWakeWord hears each chunk (a window that started on this chunk heard the look-back
        before it, or, held, everything from its look-back's start to this chunk's end)."""
        assert self._confirm is not None
        listening = self._fusion.listening
        self._recent += pcm16k
        self._recent_end += len(pcm16k) // SAMPLE_WIDTH
        keep_s = max(self._confirm.lookback_s + self._confirm.start_after_s, VERIFY_S + self._delay_s) + 0.1
        del self._recent[: max(0, len(self._recent) - int(keep_s * MODEL_RATE) * SAMPLE_WIDTH)]
        if self._pending is not None:
            return self._verified(end_time) if self._recent_end >= self._pending.due else None
        if self._fusion.holding:  # started now (its look-back includes this chunk), or not yet
            return self._fused(self._fusion.tick(end_time), end_time)
        if not listening:
            return None
        hit = None
        for phase, probability in self._open.feed(pcm16k):
            hit = hit or self._fused(self._fusion.open(phase, probability, end_time), end_time)
        return hit or self._fused(self._fusion.tick(end_time), end_time)

    def _fused(self, action: Fusion, end_time: float) -> KeywordHit | None:
        if action in (Fusion.STOP, Fusion.WAKE):
            self._held_from = None
        if action is Fusion.HOLD:  # its look-back is the last `lookback_s` before this chunk
            self._held_from = self._recent_end - int(self._confirm.lookback_s * MODEL_RATE) if self._confirm else None
        elif action is Fusion.START:  # openWakeWord hears the phrase that made the candidate
            for phase, probability in self._open.start(*self._look_back()):
                if self._fusion.open(phase, probability, end_time) is Fusion.WAKE:
                    return self._wake(end_time)
        elif action is Fusion.WAKE:
            return self._wake(end_time)
        return None

    def _look_back(self) -> tuple[bytes, int]:
        """What openWakeWord hears at its start, and how many samples of it come before the
        candidate (padded in front as if it started then, so its frames fall where they would)."""
        assert self._confirm is not None
        lookback = int(self._confirm.lookback_s * MODEL_RATE)
        held_from, self._held_from = self._held_from, None
        if held_from is None:  # started at once (a pause window): the last `lookback_s`
            recent = bytes(self._recent[-lookback * SAMPLE_WIDTH:])
            return recent, len(recent) // SAMPLE_WIDTH
        samples = self._recent_end - max(held_from, self._recent_end - len(self._recent) // SAMPLE_WIDTH)
        recent = bytes(self._recent[-samples * SAMPLE_WIDTH:]) if samples else b""
        return recent, max(0, len(recent) // SAMPLE_WIDTH - (self._recent_end - held_from - lookback))

    def _wake(self, end_time: float) -> KeywordHit | None:
        # Timed from microWakeWord's peak (near the phrase's end, as a one-model hit is), not from
        # the agreement, so the upload starts where the phrase began; after a pause, from "hey".
        paused_from = self._fusion.paused_from
        start_s = paused_from if paused_from is not None else self._fusion.peak_s - self.settings.model.spoken_s
        self._fusion.reset()
        if self.verifier is None:
            return self._hit(start_s, end_time)
        reask = self._confirm.reask_cutoff if self._confirm is not None else None
        reaskable = paused_from is None and reask is not None and self._fusion.peak <= reask
        return self._ask(end_time, start_s, None if paused_from is not None else self._fusion.peak, reaskable)

    def _ask(self, end_time: float, start_s: float, peak: float | None, reaskable: bool) -> KeywordHit | None:
        assert self.verifier is not None
        self._pending = PendingWake(self._recent_end + int(self._delay_s * MODEL_RATE), end_time, start_s, peak, reaskable)
        self._quiet_until = float("inf")  # no other wake while this one waits
        self._reask_until = None
        return self._verified(end_time) if self._delay_s <= 0 else None

    @property
    def _delay_s(self) -> float:
        """How long after a wake the verifier's audio ends (its weights were trained on audio read that
        long after the wake); 0 without a verifier."""
        return self.verifier.delay_s if self.verifier is not None else 0.0

    def _reasked(self, probability: float, end_time: float) -> KeywordHit | None:
        """A refused wake's second ask: microWakeWord passed `reask_cutoff` within `REFUSED_S` of it
        (the first came before the phrase's end); the verifier hears the audio up to this wake. (When it
        passed while the first wake waited for its audio, `_verified` asks again at once.)"""
        if self._reask_until is None or end_time > self._reask_until:
            self._reask_until = None
            return None
        return self._ask(end_time, end_time - self.settings.model.spoken_s, probability, reaskable=False)

    def _verified(self, end_time: float) -> KeywordHit | None:
        """The pending wake, asked of the verifier on the audio ending at its due sample."""
        assert self._pending is not None and self.verifier is not None
        pending, self._pending = self._pending, None
        end = len(self._recent) - (self._recent_end - pending.due) * SAMPLE_WIDTH
        # the last VERIFY_S, and with early weights the one ending at the wake
        heard = int(VERIFY_S * MODEL_RATE) + int(self._delay_s * MODEL_RATE)
        if not self.verifier.accepts(bytes(self._recent[max(0, end - heard * SAMPLE_WIDTH) : end])):
            self._quiet_until = pending.woke_s + REFUSED_S  # the same phrase would ask again in every frame
            self._reask_until = self._quiet_until if pending.reaskable else None
            if pending.reask_due is not None:  # microWakeWord passed `reask_cutoff` while it waited: ask from there
                self._pending, self._quiet_until, self._reask_until = PendingWake(
                    pending.reask_due, pending.reask_s, pending.start_s, pending.peak), float("inf"), None
                return self._verified(end_time) if self._recent_end >= pending.reask_due else None
            return None
        self._quiet_until = pending.woke_s + self.settings.refractory_s
        return KeywordHit(self.phrase, start_s=pending.start_s, detected_s=end_time)

    def refused(self) -> None:
        """The hit just reported was not taken (the barge-in listener's check found it the
        narration's own words): its refractory ends, so that a phrase said right after it is heard
        (a user's "hey jarvis" inside the 3 s after the narration's own was lost, issue 32)."""
        if self._pending is None:
            self._quiet_until = float("-inf")

    def _hit(self, start_s: float, end_time: float) -> KeywordHit:
        self._quiet_until = end_time + self.settings.refractory_s
        return KeywordHit(self.phrase, start_s=start_s, detected_s=end_time)

    def take_best(self) -> Score | None:
        """The highest probability since the last call (for `handoff wake-test`), and forget it."""
        best, self._best = self._best, None
        return best


