"""A deterministic speech corpus for the on-device detectors, made with espeak-ng, flite, festival and sox.

Every clip is pcm16 mono 24 kHz (what the microphone uplink carries) with labels: addressed or
not, where the first word starts (the wake-word onset, which the upload must include), the text,
and the spans that hold speech (for per-frame VAD accuracy). Room noise (a pink-noise "fan", a
50/100 Hz mains "hum", and "babble" of several espeak voices) is mixed in at a chosen SNR.

Nothing large is kept in the repository: audio is generated on first use and cached in a folder
the caller gives (tests: pytest's tmp_path_factory; benchmarks: `.cache/corpus`, git-ignored).
Generation is deterministic (fixed texts, voices, speeds and seeds; `sox -R`), so a cache entry is
named by a hash of what made it. Writers go through a temporary file and `os.replace`, so two
processes filling the same cache at once never see a half-written file.

Run `python -m benchmarks.corpus [DIR]` to build it and print a summary.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import wave
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

with warnings.catch_warnings():
    # Deprecated in 3.11-3.12, gone in 3.13 where the audioop-lts package provides the same module.
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

RATE = 24000
WIDTH = 2
FRAME_S = 0.02  # the uplink's chunk: 20 ms
FRAME_BYTES = int(RATE * FRAME_S) * WIDTH  # 960
DEFAULT_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "corpus"
# Bump when the way clips are made changes, so old cache entries are not reused.
GENERATOR_VERSION = 1

VOICES = ("en-us", "en-us+f3", "en-us+m3", "en-us+f5", "en")


class Family(Enum):
    """Synthetic voices disagree wildly about what a wake-word model hears (the same model found 2 %
    on espeak-ng and 71-100 % on flite), so every figure is reported per family."""

    ESPEAK = "espeak-ng"
    FLITE = "flite"  # Debian package flite
    FESTIVAL = "festival"  # Debian packages festival festvox-us-slt-hts


# A voice is a string: an espeak-ng voice ("en-us+f3"), "flite:<voice>" or "festival:<voice>".
FAMILY_VOICES: dict[Family, tuple[str, ...]] = {
    Family.ESPEAK: ("en-us", "en-gb", "en-us+f3", "en-us+m7", "en-us+f5", "en-gb+m3"),
    Family.FLITE: ("flite:slt", "flite:rms", "flite:awb", "flite:kal16"),
    Family.FESTIVAL: ("festival:cmu_us_slt_arctic_hts",),
}
WAKE_SPEEDS = (130, 150, 170, 200)  # words per minute


class Effect(Enum):
    """What a room and a microphone do to a voice (sox), applied to the voice alone, before noise."""

    NONE = "none"
    TEMPO = "tempo"  # 8 % faster, pitch kept
    PITCH = "pitch"  # two semitones lower
    REVERB = "reverb"  # a small, lively room
    PHONE = "phone"  # a band-limited microphone: 300-3400 Hz


EFFECT_ARGS: dict[Effect, tuple[str, ...]] = {
    Effect.NONE: (),
    Effect.TEMPO: ("tempo", "-s", "1.08"),
    Effect.PITCH: ("pitch", "-200"),
    Effect.REVERB: ("reverb", "40", "50", "60"),
    Effect.PHONE: ("sinc", "300-3400"),
}
NOISE_FLOOR_RMS = 33  # -60 dBFS: under every "clean" clip, since exact digital silence inflates misses


def family_of(voice: str) -> Family:
    engine = voice.split(":", 1)[0] if ":" in voice else Family.ESPEAK.value
    return Family.ESPEAK if engine == Family.ESPEAK.value else Family(engine)
SPEEDS = (135, 160, 185)  # words per minute: slow, espeak's default, brisk

WAKE_VARIANTS = ("computer", "hey computer", "ok computer", "computer,")
COMMANDS = (
    "what time is it",
    "ask the brain why the sky is blue",
    "list the files",
    "read me the first file",
    "set a timer for ten minutes",
    "what is the weather like",
    "tell me a joke",
    "stop",
)
# Not addressed: sound-alikes, the wake word inside a sentence, and plain chatter.
NEAR_MISSES = (
    "my computer is slow today",
    "the commuter train was late again",
    "this computation takes forever",
    "I need to compute the total",
    "I bought a new computer yesterday",
    "she studies computer science",
    "what a complete disaster",
    "pass me the pewter jug",
    "the commute was long this morning",
    "compute her score first",
    "did you see the game last night",
    "let's have lunch at noon",
    "the weather is nice today",
    "put the kettle on please",
)
BABBLE_LINES = (
    "so I told him the meeting was moved to thursday afternoon",
    "we should really repaint the kitchen before the summer",
    "the kids are at their grandmother's place this weekend",
    "honestly the film was better than the book for once",
    "can you believe the price of coffee these days",
    "they are opening a new bakery down the street",
)
SPEECH_RMS_FLOOR = 300  # about -40 dBFS: below this a 10 ms window of espeak output is silence


class Noise(Enum):
    FAN = "fan"  # pink noise, like a fan or air conditioning
    HUM = "hum"  # mains hum, 50 Hz and its harmonic
    BABBLE = "babble"  # several voices talking far away


@dataclass(frozen=True)
class Clip:
    name: str
    pcm: bytes  # pcm16 mono 24 kHz
    addressed: bool
    text: str
    wake_onset_s: float | None  # where the first word starts (addressed clips); the upload must include it
    speech_spans: tuple[tuple[float, float], ...] = field(default=())  # (start, end) seconds of speech
    voice: str = ""

    @property
    def seconds(self) -> float:
        return len(self.pcm) / WIDTH / RATE

    def speech_frames(self) -> list[bool]:
        """Per 20 ms frame: does it overlap speech? (labels from the clean audio)"""
        count = len(self.pcm) // FRAME_BYTES
        labels = [False] * count
        for start, end in self.speech_spans:
            for i in range(int(start / FRAME_S), min(count, math.ceil(end / FRAME_S))):
                labels[i] = True
        return labels


@dataclass(frozen=True)
class UtteranceSpec:
    parts: tuple[str, ...]  # spoken separately with `pause_s` between them (a command after a pause)
    voice: str
    speed: int
    addressed: bool
    pause_s: float = 0.0
    effect: Effect = Effect.NONE

    @property
    def text(self) -> str:
        return " ... ".join(self.parts)


class Corpus:
    """Generates and caches clips under `cache_dir`; safe to share between processes."""

    def __init__(self, cache_dir: Path, workers: int = 2) -> None:
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._workers = workers
        for tool in ("espeak-ng", "sox"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is missing: apt-get install -y espeak-ng sox (scripts/setup.sh does)")

    # ------------------------------------------------------------------ building blocks

    def speech(self, text: str, voice: str, speed: int, effect: Effect = Effect.NONE) -> bytes:
        """A reading of `text` by `voice` (espeak-ng, "flite:<voice>" or "festival:<voice>") at
        about `speed` words per minute through `effect`, trimmed of leading and trailing silence,
        pcm16 24 kHz."""
        key = _key("speech", text, voice, speed) if effect is Effect.NONE else _key("speech", text, voice, speed, effect.value)
        path = self.cache_dir / f"speech-{key}.wav"
        if not path.exists():
            self._make_speech(text, voice, speed, effect, path)
        return _trim(_read_wav(path))

    def _make_speech(self, text: str, voice: str, speed: int, effect: Effect, path: Path) -> None:
        family = family_of(voice)
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as tmp:
            # espeak-ng wants a runtime dir; a private one keeps it from creating one under /tmp.
            env = {**os.environ, "XDG_RUNTIME_DIR": tmp}
            raw = Path(tmp) / "raw.wav"
            out = Path(tmp) / "out.wav"
            tempo: tuple[str, ...] = ()
            if family is Family.ESPEAK:
                command = ["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(raw), text]
            else:
                # flite and festival speak at about 165 words a minute; sox's tempo sets the pace.
                name = voice.split(":", 1)[1]
                if family is Family.FLITE:
                    command = ["flite", "-voice", name, "-t", text, "-o", str(raw)]
                else:
                    (Path(tmp) / "text.txt").write_text(text + "\n")
                    command = ["text2wave", "-eval", f"(voice_{name})", str(Path(tmp) / "text.txt"), "-o", str(raw)]
                if speed != 165:
                    tempo = ("tempo", "-s", f"{speed / 165:.3f}")
            _need(command[0])
            subprocess.run(command, check=True, env=env, capture_output=True, timeout=60)
            # -R: repeatable output; -t wavpcm: a plain header Python's wave module reads.
            subprocess.run(
                ["sox", "-R", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer",
                 "-t", "wavpcm", str(out), *tempo, *EFFECT_ARGS[effect]],
                check=True, env=env, capture_output=True, timeout=60,
            )
            os.replace(out, path)

    def noise(self, kind: Noise, seconds: float, seed: int = 0) -> bytes:
        """`seconds` of room noise at a working level (normalised later by `mix`)."""
        key = _key("noise", kind.value, round(seconds, 3), seed)
        path = self.cache_dir / f"noise-{key}.wav"
        if path.exists():
            return _read_wav(path)
        if kind is Noise.FAN:
            pcm = self._sox_pink(seconds, seed)
        elif kind is Noise.HUM:
            pcm = _hum(seconds)
        else:
            pcm = self._babble(seconds, seed)
        _write_wav_atomic(path, pcm)
        return pcm

    def _sox_pink(self, seconds: float, seed: int) -> bytes:
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as tmp:
            out = Path(tmp) / "pink.wav"
            # sox's -R seeds its generator the same way every run; the seed picks a different stretch.
            skip = seed * 0.37
            subprocess.run(
                ["sox", "-R", "-n", "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer",
                 "-t", "wavpcm", str(out), "synth", f"{seconds + skip:.3f}", "pinknoise", "vol", "0.3",
                 "trim", f"{skip:.3f}"],
                check=True, capture_output=True, timeout=60,
            )
            return _read_wav(out)

    def _babble(self, seconds: float, seed: int) -> bytes:
        """Four far-away voices talking over each other, each line looped to fill `seconds`."""
        rng = random.Random(seed)
        total = int(seconds * RATE) * WIDTH
        specs = [(BABBLE_LINES[(seed + i) % len(BABBLE_LINES)], VOICES[i % len(VOICES)], 150 + 10 * i)
                 for i in range(4)]
        voices = self._many_speech(specs)
        mixed = bytes(total)
        for pcm in voices:
            offset = rng.randrange(0, len(pcm) // WIDTH) * WIDTH
            loop = (pcm + bytes(int(0.3 * RATE) * WIDTH))
            stream = (loop * (total // len(loop) + 2))[offset : offset + total]
            mixed = audioop.add(mixed, audioop.mul(stream, WIDTH, 0.35), WIDTH)
        return mixed

    def _many_speech(self, specs: list[tuple]) -> list[bytes]:
        with ThreadPoolExecutor(max_workers=self._workers) as pool:
            return list(pool.map(lambda s: self.speech(*s), specs))

    # ------------------------------------------------------------------ clips

    def utterance(self, spec: UtteranceSpec, lead_s: float = 0.5, tail_s: float = 0.8) -> Clip:
        """One utterance between silences, labelled."""
        parts = self._many_speech([(p, spec.voice, spec.speed, spec.effect) for p in spec.parts])
        return self._assemble(spec, parts, lead_s, tail_s)

    def _assemble(self, spec: UtteranceSpec, parts: list[bytes], lead_s: float, tail_s: float) -> Clip:
        pcm = _silence(lead_s)
        spans = []
        for index, part in enumerate(parts):
            if index:
                pcm += _silence(spec.pause_s)
            start = len(pcm) / WIDTH / RATE
            spans.extend((start + a, start + b) for a, b in _speech_spans(part))
            pcm += part
        pcm += _silence(tail_s)
        made_by = (spec.text, spec.voice, spec.speed, spec.pause_s) + ((spec.effect.value,) if spec.effect is not Effect.NONE else ())
        name = f"{'addr' if spec.addressed else 'not'}-{_key(*made_by)}"
        return Clip(
            name=name, pcm=pcm, addressed=spec.addressed, text=spec.text,
            wake_onset_s=spans[0][0] if spec.addressed and spans else None, speech_spans=tuple(spans),
            voice=spec.voice,
        )

    def clips(self, specs: list[UtteranceSpec]) -> list[Clip]:
        """Many utterances, their speech generated in parallel (espeak-ng and sox are subprocesses)."""
        unique = sorted({(p, s.voice, s.speed, s.effect) for s in specs for p in s.parts}, key=repr)
        made = dict(zip(unique, self._many_speech(unique)))
        return [self._assemble(s, [made[(p, s.voice, s.speed, s.effect)] for p in s.parts], 0.5, 0.8) for s in specs]


# ---------------------------------------------------------------------- the standard sets


def addressed_specs(count: int = 48) -> list[UtteranceSpec]:
    """Wake phrase variants x commands x voices x speeds; every fourth has a pause before the command."""
    specs = []
    for i in range(count):
        wake = WAKE_VARIANTS[i % len(WAKE_VARIANTS)]
        command = COMMANDS[(i * 3) % len(COMMANDS)]
        voice = VOICES[i % len(VOICES)]
        speed = SPEEDS[(i // len(VOICES)) % len(SPEEDS)]
        if i % 4 == 3:
            specs.append(UtteranceSpec((wake.rstrip(","), command), voice, speed, True, pause_s=0.9 + 0.1 * (i % 3)))
        else:
            specs.append(UtteranceSpec((f"{wake} {command}",), voice, speed, True))
    return specs


def not_addressed_specs(count: int = 42) -> list[UtteranceSpec]:
    return [
        UtteranceSpec((NEAR_MISSES[i % len(NEAR_MISSES)],), VOICES[(i + 2) % len(VOICES)],
                      SPEEDS[(i // len(NEAR_MISSES)) % len(SPEEDS)], False)
        for i in range(count)
    ]


def chatter_specs(count: int = 24) -> list[UtteranceSpec]:
    """Everyday talk with no sound-alike of the wake word: what a room overhears most of the time."""
    lines = BABBLE_LINES + NEAR_MISSES[10:]
    return [
        UtteranceSpec((lines[i % len(lines)],), VOICES[(i + 1) % len(VOICES)], SPEEDS[(i // len(lines)) % len(SPEEDS)], False)
        for i in range(count)
    ]


def standard(corpus: Corpus, small: bool = False) -> tuple[list[Clip], list[Clip]]:
    """(addressed, not addressed): 48 and 42 clips, or a handful of each when `small` (for tests)."""
    addressed = addressed_specs(6 if small else 48)
    others = not_addressed_specs(6 if small else 42)
    clips = corpus.clips(addressed + others)
    return clips[: len(addressed)], clips[len(addressed) :]


# ---------------------------------------------------------------------- wake-phrase sets (issue 19)

# Ordinary sentences: what a room says that is not addressed to the assistant.
ORDINARY = BABBLE_LINES + NEAR_MISSES[10:] + (
    "I think the train leaves at half past seven",
    "have you fed the cat yet",
    "my sister is coming over on sunday",
    "we are out of milk again",
    "turn left at the next traffic light",
    "the report is due at the end of the week",
    "I can't find my keys anywhere",
    "that restaurant was far too expensive",
    "she said she would call back later",
    "the garden needs watering tonight",
)
# Sound-alikes for each candidate phrase: what its model must not take for it.
NEAR_MISS_LINES: dict[str, tuple[str, ...]] = {
    "hey jarvis": ("hey chavez", "hey service", "hey marvin", "a jar of peas", "hey travis", "hey jarvie",
                   "they carved us", "hey harvest", "jarvis was late", "hey jasmine"),
    "okay nabu": ("okay, nah boo", "okay, nabob", "okay now", "oh kay, no boo", "okay, bamboo",
                  "ok, maybe", "okay, nah, you", "okay, kanga", "a canoe", "okay, taboo"),
    "alexa": ("alexander", "a lexus", "alexis", "electra", "elect a", "a legs up",
              "alex said", "lexicon", "unless a", "a left hand"),
    "hey mycroft": ("hey microsoft", "my craft", "hey my crop", "hey minecraft", "hey, my aircraft",
                    "mike roft", "hey micro", "hey my cough", "my croft", "hey might", ),
    # A phrase with no shipped model (pocketsphinx spots it; the transcript decides): issue 34's reports.
    "computer": ("the commuter train is late again", "compute her score please", "computers are everywhere now",
                 "a computed total", "come pewter", "comfort her", "compete her", "the composer",
                 "commute or not", "calm peter"),
}
WAKE_COMMANDS = (
    "what time is it",
    "set a timer for ten minutes",
    "read me the first file",
    "ask the brain why the sky is blue",
    "list the files",
    "what is the weather like",
    "tell me a joke",
)


def _family_voice(i: int) -> str:
    """The i-th voice, families taking turns so each gets a third of any set."""
    families = list(FAMILY_VOICES)
    voices = FAMILY_VOICES[families[i % len(families)]]
    return voices[(i // len(families)) % len(voices)]


def _voice_speed(i: int) -> tuple[str, int]:
    """The i-th voice (as `_family_voice`) and a speed that varies within each voice: each voice's
    turns go through every speed (speed taken as `(i // 3) % 4` gave each flite voice one speed only)."""
    families = list(FAMILY_VOICES)
    turn = i // len(families) // len(FAMILY_VOICES[families[i % len(families)]])  # this voice's how-manyth
    return _family_voice(i), WAKE_SPEEDS[turn % len(WAKE_SPEEDS)]


def wake_specs(phrase: str, count: int = 100) -> list[UtteranceSpec]:
    """`count` addressed utterances for `phrase`: the phrase then a command, or (every third of each
    family's) the phrase, a pause, the command; voices of every family in turn, speeds 130-200, sox
    effects. The pause is decided by the index within the family: `i % 3` (the family's own turn)
    gave every festival clip the pause and no flite or espeak-ng clip one."""
    effects = list(Effect)
    specs = []
    for i in range(count):
        voice, speed = _voice_speed(i)
        effect = effects[(i // 2) % len(effects)]
        command = WAKE_COMMANDS[i % len(WAKE_COMMANDS)]
        if (i // len(FAMILY_VOICES)) % 3 == 2:
            specs.append(UtteranceSpec((phrase, command), voice, speed, True, pause_s=0.8 + 0.1 * (i % 4), effect=effect))
        else:
            specs.append(UtteranceSpec((f"{phrase}, {command}",), voice, speed, True, effect=effect))
    return specs


def ordinary_specs(count: int = 100) -> list[UtteranceSpec]:
    effects = list(Effect)
    return [UtteranceSpec((ORDINARY[i % len(ORDINARY)],), _family_voice(i + 1), WAKE_SPEEDS[i % len(WAKE_SPEEDS)], False,
                          effect=effects[(i // 3) % len(effects)])
            for i in range(count)]


def near_miss_specs(phrase: str, count: int = 100) -> list[UtteranceSpec]:
    lines, effects = NEAR_MISS_LINES[phrase], list(Effect)
    return [UtteranceSpec((lines[i % len(lines)],), *_voice_speed(i), False,
                          effect=effects[(i // 2) % len(effects)])
            for i in range(count)]


def with_floor(pcm: bytes, noise: bytes) -> bytes:
    """`pcm` over a -60 dBFS floor of `noise` (looped): a real microphone is never digitally silent."""
    return audioop.add(pcm, scale_to_rms(_fit(noise, len(pcm)), NOISE_FLOOR_RMS), WIDTH)


def babble_stream(corpus: Corpus, seconds: float, chunk_s: float = 1.0, seed: int = 0):
    """`seconds` of a room with talk in it, made as it is read (an hour is never held in memory):
    alternately a few minutes of "TV" (one voice after another, no pauses, through the sox effects)
    and of babble (four of the ordinary sentences at once, each voice its own stream). Yields pcm16
    24 kHz pieces of `chunk_s`. No wake phrase is in it."""
    rng = random.Random(seed)
    texts = [(t, _family_voice(i), WAKE_SPEEDS[i % len(WAKE_SPEEDS)], list(Effect)[i % len(Effect)])
             for i, t in enumerate(ORDINARY * 3)]
    lines = corpus._many_speech(texts)
    piece = int(chunk_s * RATE) * WIDTH
    total = int(seconds * RATE) * WIDTH
    streams = [bytearray() for _ in range(4)]
    made = 0
    while made < total:
        tv = (made // (int(180 * RATE) * WIDTH)) % 2 == 0  # three minutes each
        voices = 1 if tv else 4
        for stream in streams[:voices]:
            while len(stream) < piece:
                stream += lines[rng.randrange(len(lines))] + _silence(rng.uniform(0.05, 0.25 if tv else 0.6))
        out = bytes(piece)
        for stream in streams[:voices]:
            out = audioop.add(out, audioop.mul(bytes(stream[:piece]), WIDTH, 1.0 if tv else 0.5), WIDTH)
            del stream[:piece]
        made += piece
        yield out


# ---------------------------------------------------------------------- mixing


def mix(speech: bytes, noise: bytes, snr_db: float, speech_level: int | None = None) -> bytes:
    """`speech` plus `noise` scaled so that speech power / noise power = `snr_db`.

    Speech power is measured over its voiced part only (silence would flatter the SNR), or
    given as `speech_level` (an RMS) so a long stream mixes at one level throughout.
    """
    level = speech_level if speech_level is not None else active_rms(speech)
    noise = _fit(noise, len(speech))
    gain = level / max(1, audioop.rms(noise, WIDTH)) / (10 ** (snr_db / 20))
    return audioop.add(speech, audioop.mul(noise, WIDTH, gain), WIDTH)


def scale_to_rms(noise: bytes, target_rms: float) -> bytes:
    return audioop.mul(noise, WIDTH, target_rms / max(1, audioop.rms(noise, WIDTH)))


def active_rms(pcm: bytes) -> int:
    window = int(RATE * 0.01) * WIDTH
    loud = [pcm[i : i + window] for i in range(0, len(pcm) - window + 1, window)
            if audioop.rms(pcm[i : i + window], WIDTH) >= SPEECH_RMS_FLOOR]
    return audioop.rms(b"".join(loud), WIDTH) if loud else 0


def _fit(noise: bytes, length: int) -> bytes:
    if len(noise) >= length:
        return noise[:length]
    return (noise * (length // max(1, len(noise)) + 1))[:length]


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        package = {"text2wave": "festival festvox-us-slt-hts"}.get(tool, tool)
        raise RuntimeError(f"{tool} is missing: apt-get install -y {package} (scripts/setup.sh --dev does)")


def _silence(seconds: float) -> bytes:
    return bytes(int(seconds * RATE) * WIDTH)


def _hum(seconds: float) -> bytes:
    count = int(seconds * RATE)
    samples = (
        int(6000 * math.sin(2 * math.pi * 50 * n / RATE) + 3000 * math.sin(2 * math.pi * 100 * n / RATE)
            + 800 * math.sin(2 * math.pi * 150 * n / RATE))
        for n in range(count)
    )
    return struct.pack(f"<{count}h", *samples)


def _speech_spans(pcm: bytes) -> list[tuple[float, float]]:
    """Voiced stretches (10 ms windows above the floor), gaps under 150 ms bridged."""
    window = int(RATE * 0.01) * WIDTH
    spans: list[list[float]] = []
    for i in range(0, len(pcm) - window + 1, window):
        if audioop.rms(pcm[i : i + window], WIDTH) < SPEECH_RMS_FLOOR:
            continue
        t = i / WIDTH / RATE
        if spans and t - spans[-1][1] < 0.15:
            spans[-1][1] = t + 0.01
        else:
            spans.append([t, t + 0.01])
    return [(a, b) for a, b in spans]


def _trim(pcm: bytes) -> bytes:
    spans = _speech_spans(pcm)
    if not spans:
        return pcm
    start = int(spans[0][0] * RATE) * WIDTH
    end = int(spans[-1][1] * RATE) * WIDTH
    return pcm[start:end]


def _key(*parts: object) -> str:
    return hashlib.sha1(repr((GENERATOR_VERSION, *parts)).encode()).hexdigest()[:16]


def _read_wav(path: Path) -> bytes:
    with wave.open(str(path), "rb") as r:
        if (r.getframerate(), r.getnchannels(), r.getsampwidth()) != (RATE, 1, WIDTH):
            raise ValueError(f"{path}: not pcm16 mono {RATE} Hz")
        return r.readframes(r.getnframes())


def _write_wav_atomic(path: Path, pcm: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    with wave.open(tmp, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(WIDTH)
        w.setframerate(RATE)
        w.writeframes(pcm)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", nargs="?", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    corpus = Corpus(args.cache)
    addressed, others = standard(corpus)
    seconds = sum(c.seconds for c in addressed + others)
    print(f"{len(addressed)} addressed, {len(others)} not addressed, {seconds:.0f} s of audio in {args.cache}")
    for kind in Noise:
        corpus.noise(kind, 30.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
