"""What `handoff wake-test` measures: whether the wake the assistant runs hears each try of a recording.

Synthetic voices are a floor; the user's own voice and microphone are the truth. A recording (or
the takes the command asks for) is fed once, whole, from its start, through the very `UploadFilter`
the assistant builds from the user's settings (VAD, the spotter only on speech, the two-model rule
or microWakeWord alone, the wake-position rule of the upload gate), as a live microphone would feed
it: the VAD hears the room before each try, as it does live (issue 34: far speech that a VAD
started fresh at each try calls silence, a VAD that has heard the room finds). The tries are the
stretches that filter's own VAD called speech, joined across pauses under `TRY_GAP_S`, so "hey
jarvis ... <pause> ... what time is it" is one try, as it is one command; a try is heard when the
filter accepted a wake from `LEAD_S` before its speech to `TAIL_S` after it (an upload would have
started). `benchmarks/wake_choice.py` judges its clips with the same `TryJudge.tries`
(`heard_in`), so both report the same figures on the same recording.

    judge = TryJudge(upload_filter)                          # assembly.build.upload_filter(settings)
    tries = judge.tries(pcm)                                 # pcm16 mono 24 kHz
    takes = [Take(t.start_s, t.heard, t.score, is_phrase=True) for t in tries]
    report = WakeReport(tuple(takes), rule=judge.rule())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from detectors.audio import SAMPLE_WIDTH
from detectors.wake_model import ModelSpotter

if TYPE_CHECKING:
    from detectors.pipeline import UploadFilter

RATE = 24000
LEAD_S = 1.0  # a wake this long before a try's first speech is its own: the gate's pre-roll (0.5 s), and far speech the VAD finds late
TAIL_S = 1.5  # and this long after its last speech: the hangover, and the second model's window after the phrase
TRY_GAP_S = 1.5  # silence that ends a try: a pause inside "phrase ... command" is shorter
MIN_SPEECH_S = 0.2  # a click or a cough is not a try (unless the filter woke on it)
NOT_HEARD = 0.1  # microWakeWord's best under this on every phrase: the model did not hear the phrase at all
SUGGEST_MIN = 0.5  # never suggest a cutoff under this (below it, sound-alikes wake it: PERFORMANCE.md)


@dataclass(frozen=True)
class Try:
    start_s: float  # its first chunk of speech
    end_s: float  # the end of its last
    heard: bool  # the filter accepted a wake in it (an upload would have started)
    score: float | None  # microWakeWord's best on it (None: the spotter is pocketsphinx, no score)


def heard_in(judge: TryJudge, pcm: bytes) -> bool:
    """A recording of one command (a benchmark's clip): heard when any of its tries is, as
    `handoff wake-test` would report it (any wake the filter accepted belongs to a try)."""
    return any(t.heard for t in judge.tries(pcm))


def tries_of(speech: list[bool], wakes: list[int], scores: list[float] | None, chunk_s: float) -> list[Try]:
    """The tries in a recording from the filter's verdict on each chunk: `speech` (the VAD's),
    `wakes` (indexes of the chunks a wake was accepted at), `scores` (microWakeWord's best per
    chunk, or None). Runs of speech joined across gaps under TRY_GAP_S; a run with less than
    MIN_SPEECH_S of speech is no try unless a wake falls in it; each wake goes to the try whose
    span (LEAD_S before to TAIL_S after) holds it, else to the nearest (a try of its own if none)."""
    runs: list[list[float]] = []  # [start, end, seconds of speech]
    for index, is_speech in enumerate(speech):
        if not is_speech:
            continue
        start, end = index * chunk_s, (index + 1) * chunk_s
        if runs and start - runs[-1][1] < TRY_GAP_S:
            runs[-1][1] = end
            runs[-1][2] += chunk_s
        else:
            runs.append([start, end, chunk_s])
    woke_at = [(index + 1) * chunk_s for index in wakes]

    def holds(run: list[float], at: float) -> bool:
        return run[0] - LEAD_S <= at <= run[1] + TAIL_S

    spans = [r for r in runs if r[2] >= MIN_SPEECH_S or any(holds(r, w) for w in woke_at)]
    heard = [False] * len(spans)
    for at in woke_at:
        owners = [i for i, r in enumerate(spans) if holds(r, at)]
        if not owners and spans:
            owners = [min(range(len(spans)), key=lambda i: min(abs(spans[i][0] - at), abs(spans[i][1] - at)))]
        if not owners:
            spans.append([at, at, 0.0])
            heard.append(False)
            owners = [len(spans) - 1]
        heard[owners[0]] = True
    found = []
    for (start, end, _), was_heard in zip(spans, heard):
        score = None
        if scores is not None:
            first, last = max(0, int((start - LEAD_S) / chunk_s)), min(len(scores), int((end + TAIL_S) / chunk_s))
            score = max(scores[first:last], default=0.0)
        found.append(Try(start, end, was_heard, score))
    return sorted(found, key=lambda t: t.start_s)


@dataclass(frozen=True)
class Judged:
    heard: bool  # the filter accepted a wake in this try (an upload would have started)
    score: float | None  # microWakeWord's best on it (None: the spotter is pocketsphinx, no score)


class TryJudge:
    """Feeds a recording (`tries`) or one take (call) through the assistant's own upload filter,
    from a restart, in the microphone's chunks (`chunk_ms`: the settings' AUDIO chunk size)."""

    def __init__(self, upload: UploadFilter, chunk_ms: int = 20) -> None:
        if upload.detectors is None or upload.detectors.spotter is None:
            raise ValueError("the upload filter has no wake spotter (upload mode wake_word builds one)")
        self.upload = upload
        self.spotter = upload.detectors.spotter
        self.chunk_bytes = RATE * SAMPLE_WIDTH * chunk_ms // 1000

    def tries(self, pcm: bytes) -> list[Try]:
        """The tries of a recording, judged as the assistant would hear it live: the whole of it
        fed once through the filter, from a restart, in the microphone's chunks (`tries_of`). A
        try is a command of its own: once it is over (TRY_GAP_S of silence), the wake's command
        window is closed, as the listener's verdict on it would close it (`UploadFilter.rejected`)."""
        self.upload.restart()
        take_best = getattr(self.spotter, "take_best", None)
        if take_best is not None:
            take_best()
        speech, wakes, scores = [], [], []
        step = self.chunk_bytes
        chunk_s = step / (RATE * SAMPLE_WIDTH)
        silent_s = 0.0
        for index in range(len(pcm) // step):
            self.upload.feed(pcm[index * step : (index + 1) * step])
            speech.append(self.upload.speech)
            silent_s = 0.0 if self.upload.speech else silent_s + chunk_s
            if TRY_GAP_S <= silent_s < TRY_GAP_S + chunk_s:
                self.upload.rejected()  # the try is over: the next is another command, with a wake of its own
            if self.upload.take_wake() is not None:
                wakes.append(index)
            if take_best is not None:
                best = take_best()
                scores.append(best.probability if best is not None else 0.0)
        return tries_of(speech, wakes, scores if take_best is not None else None, chunk_s)

    def __call__(self, pcm: bytes) -> Judged:
        self.upload.restart()
        take_best = getattr(self.spotter, "take_best", None)
        if take_best is not None:
            take_best()
        heard = False
        step = self.chunk_bytes
        for index in range(len(pcm) // step):
            self.upload.feed(pcm[index * step : (index + 1) * step])
            heard = self.upload.take_wake() is not None or heard
        best = take_best() if take_best is not None else None
        return Judged(heard, (best.probability if best is not None else 0.0) if take_best is not None else None)

    def rule(self) -> Rule:
        if not isinstance(self.spotter, ModelSpotter):
            return Rule("pocketsphinx's keyphrase search", alone_cutoff=None, two_stage=False)
        confirm = self.spotter.settings.confirm
        cutoff = self.spotter.model_cutoff if confirm is not None else self.spotter.cutoff
        if confirm is None:
            describe = f"microWakeWord alone above {cutoff:g}"
        else:
            agree = (f"openWakeWord above {confirm.threshold:g} in {confirm.frames} of its frames" if confirm.frames > 1
                     else "openWakeWord agreeing")
            describe = (f"microWakeWord above {cutoff:g}, or above {confirm.micro_cutoff:g} with {agree}"
                        if confirm.micro_alone else f"microWakeWord above {confirm.micro_cutoff:g} and {agree}")
        if confirm is not None and self.spotter.verifier is not None:  # WAKE_VERIFY (issue 34, session 12)
            describe += f"; with openWakeWord agreeing, microWakeWord above {confirm.verified_micro_cutoff or confirm.micro_cutoff:g} is enough, and the wake verifier accepts each wake"
            weights = self.spotter.verifier.weights
            asked = {"openWakeWord above": weights.ask_threshold, "microWakeWord alone above": weights.ask_alone_cutoff,
                     "the pause rule above": weights.ask_pause_threshold}
            if any(v is not None for v in asked.values()):  # (weights trained on a laxer spotter's wakes, session 17)
                describe += " (the models waking at " + ", ".join(f"{k} {v:g}" for k, v in asked.items() if v is not None) + ")"
        return Rule(describe, alone_cutoff=cutoff, two_stage=confirm is not None,
                    model_cutoff=self.spotter.model_cutoff)


@dataclass(frozen=True)
class Rule:
    """The wake rule in use, for the report."""

    describe: str
    alone_cutoff: float | None  # microWakeWord's cutoff when it decides alone (None: no model)
    two_stage: bool  # openWakeWord confirms lower candidates: a WAKE_CUTOFF would switch that off
    model_cutoff: float | None = None


@dataclass(frozen=True)
class Take:
    start_s: float
    heard: bool
    score: float | None  # microWakeWord's best (None: no model)
    is_phrase: bool  # the wake phrase (True) or a sentence that is not it


@dataclass(frozen=True)
class WakeReport:
    takes: tuple[Take, ...]
    rule: Rule

    @property
    def phrases(self) -> list[Take]:
        return [t for t in self.takes if t.is_phrase]

    @property
    def others(self) -> list[Take]:
        return [t for t in self.takes if not t.is_phrase]

    @property
    def heard(self) -> int:
        return sum(t.heard for t in self.phrases)

    @property
    def false_wakes(self) -> int:
        return sum(t.heard for t in self.others)

    def phrase_unheard(self) -> bool:
        """The model scored every phrase try as nothing: not a cutoff's business (another phrase
        said, the wrong file, or a microphone that hears nothing)."""
        scores = [t.score for t in self.phrases if t.score is not None]
        return bool(scores) and len(scores) == len(self.phrases) and max(scores) < NOT_HEARD

    def suggested_cutoff(self) -> float | None:
        """Only where a cutoff is the whole rule (WAKE_CUTOFF set: microWakeWord alone): the highest
        cutoff at which every phrase try scored above and no other try did, never under
        SUGGEST_MIN nor above the model's own; None when none does, or when the rule in use is
        the two-model one (a WAKE_CUTOFF would switch its second model off)."""
        if self.rule.two_stage or self.rule.alone_cutoff is None or not self.phrases or self.phrase_unheard():
            return None
        lowest = min(t.score or 0.0 for t in self.phrases)
        highest_other = max((t.score or 0.0 for t in self.others), default=0.0)
        if lowest <= highest_other:
            return None
        middle = (lowest + highest_other) / 2 if self.others else lowest * 0.9  # a margin on both sides
        cutoff = min(self.rule.model_cutoff or 1.0, int(middle * 100) / 100)
        return cutoff if cutoff >= SUGGEST_MIN else None

    def lines(self, phrase: str) -> list[str]:
        out = []
        for number, take in enumerate(self.takes, 1):
            what = f'"{phrase}"' if take.is_phrase else "not the phrase"
            verdict = ("heard" if take.heard else "not heard") if take.is_phrase else ("FALSE WAKE" if take.heard else "ignored")
            score = f" score {take.score:.3f}" if take.score is not None else ""
            out.append(f"  {number:>2}. at {take.start_s:6.1f} s  {what:<16}{score}  {verdict}")
        out.append(f"wake rule in use: {self.rule.describe}")
        if self.phrases:
            out.append(f"heard {self.heard} of {len(self.phrases)} wake phrases")
        if self.others:
            out.append(f"false wakes: {self.false_wakes} of {len(self.others)} utterances that were not the phrase")
        out.extend(self._advice(phrase))
        return out

    def _advice(self, phrase: str) -> list[str]:
        untested = "" if self.others else " No sentence that is not the phrase was scored, so false wakes are untested."
        if not self.phrases:
            return []
        if self.phrase_unheard():
            best = max(t.score or 0.0 for t in self.phrases)
            return [f'the phrase was not heard: the "{phrase}" model scored no try above {best:.3f}; is the recording '
                    f'of "{phrase}" said aloud (check --wake-phrase and the file), and loud enough?']
        if self.heard == len(self.phrases) and self.false_wakes == 0:
            clean = " with no false wake" if self.others else ""
            return [f"the wake in use caught every phrase{clean}: nothing to change.{untested}"]
        suggestion = self.suggested_cutoff()
        if suggestion is not None and suggestion != self.rule.alone_cutoff:
            clean = " with no false wake" if self.others else ""
            return [f"WAKE_CUTOFF={suggestion:g} would have scored all {len(self.phrases)} above it{clean} "
                    f"(set it in .env; lower hears more, and wakes falsely more).{untested}"]
        if self.rule.two_stage:
            return ["no setting that keeps the two-model wake would hear more (a WAKE_CUTOFF switches its second "
                    "model off): say the two words together, facing the microphone, or move it closer."]
        if self.rule.alone_cutoff is None:
            return []
        return ["no cutoff catches every phrase with no false wake (or one low enough would wake on sound-alikes): "
                "say the phrase more clearly, move the microphone closer, or choose another phrase."]
