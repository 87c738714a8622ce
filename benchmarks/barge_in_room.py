"""The room every barge-in benchmark plays (issue 32): the narration, its echo path, the user's voices.

`benchmarks/barge_in.py` describes the room (a reverberant path 20-120 ms late that changes six
seconds in, the echo at 0, -6 and -12 dB against the user's voice, flite and festival voices saying
the phrases nine seconds in, a -60 dBFS floor). Its parts live here so that `barge_in.py`,
`barge_in_hour.py`, `barge_in_stages.py`, `barge_in_lost.py`, `barge_in_spotters.py` and
`echo_cancel_cost.py` build the same narration (`narration`) and the same stop phrase
(`STOP_SETTINGS`) from one place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.barge_in_alone import woken_alone
from benchmarks.corpus import Corpus
from detectors.stop_phrase import StopPhraseSettings

RATE = 24000
CHUNK = 480  # samples: 20 ms
BPS = RATE * 2
PHRASE = "hey jarvis"
NARRATOR = "en-us+f3"
NARRATION = (
    "Here is what I found. The backup finished at half past eleven and copied five gigabytes. "
    "If you want me to stop, say hey jarvis, stop, or cancel. Jarvis is my name. "
    "Your next meeting is at three, with the design team, in the small room on the second floor. "
    "The weather tomorrow looks dry and mild, with a light wind from the west, and rain by the evening. "
    "To cancel the timer, say cancel the timer. Hey jarvis is how you wake me. Stop the music, I said, and it stopped."
)
USERS = ("flite:slt", "flite:rms", "flite:awb", "flite:kal16", "festival:cmu_us_slt_arctic_hts")
SPEEDS = (150, 175, 200)
STOP_TEXT = "hey jarvis, stop"
COMMAND_TEXT = "hey jarvis, what time is it"
LEVELS_DB = (0.0, -6.0, -12.0)
USER_RMS = 2000.0  # the user's active level at the microphone (about -24 dBFS)
LEAD_S, SWITCH_S, TAIL_S = 9.0, 6.0, 3.0  # the user speaks 9 s into the narration, 3 s after its path changed
FLOOR_RMS = 33.0


def pcm(x: np.ndarray) -> bytes:
    return np.clip(np.round(x), -32768, 32767).astype(np.int16).tobytes()


def samples(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.int16).astype(np.float64)


def active_rms(x: np.ndarray) -> float:
    frames = x[: len(x) // CHUNK * CHUNK].reshape(-1, CHUNK)
    r = np.sqrt((frames**2).mean(axis=1))
    loud = r > max(r.max() * 0.05, 1.0)
    return float(np.sqrt((frames[loud] ** 2).mean())) if loud.any() else 1.0


def room_ir(rng: np.random.Generator, delay_s: float) -> np.ndarray:
    rt60 = rng.uniform(0.25, 0.45)
    n = int(RATE * 0.5)
    t = np.arange(n) / RATE
    # The diffuse tail 0 to -8 dB under the direct sound (a desk speaker near the microphone)
    tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60) * rng.uniform(0.012, 0.03)
    tail[0] = 1.0
    h = np.concatenate([np.zeros(int(RATE * delay_s)), tail])
    return h / np.sqrt((h**2).sum())


def two_paths(rng: np.random.Generator) -> tuple[tuple[float, float], tuple[np.ndarray, np.ndarray]]:
    """The room's echo path before and after the switch: their direct sound's delays, and the paths."""
    first = rng.uniform(0.02, 0.12)
    before = room_ir(rng, first)
    second = rng.uniform(0.02, 0.12)
    return (first, second), (before, room_ir(rng, second))


def convolve(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    n = len(x) + len(h) - 1
    size = 1 << (n - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(x, size) * np.fft.rfft(h, size), size)[: len(x)]


@dataclass
class Scene:
    narration: np.ndarray  # what the speaker would play, the whole trial
    irs: tuple[np.ndarray, np.ndarray]  # the echo path before and after the switch
    echo_gain: float
    user: np.ndarray  # the user's voice at the microphone, the whole trial (zeros where silent)
    word_end_s: float  # where the user's last word ends
    noise: np.ndarray
    delays: tuple[float, float] = (0.0, 0.0)  # the direct sound's delay before and after the switch

    def woken_alone(self) -> bool:  # the user's voice alone wakes the barge-in wake model (no echo)
        return woken_alone(self.user + self.noise, LEAD_S, self.word_end_s, RATE, CHUNK)

    def delay_at(self, at: float) -> float:
        return self.delays[0] if at < SWITCH_S else self.delays[1]

    def echo(self, played: np.ndarray) -> np.ndarray:
        switch = int(SWITCH_S * RATE)
        a = played.copy()
        a[switch:] = 0
        b = played.copy()
        b[:switch] = 0
        return (convolve(a, self.irs[0]) + convolve(b, self.irs[1])) * self.echo_gain


def build_scenes(corpus: Corpus, text: str, level_db: float, count: int, narration: np.ndarray, seed: int) -> list[Scene]:
    rng = np.random.default_rng(seed)
    scenes = []
    for k in range(count):
        voice, speed = USERS[k % len(USERS)], SPEEDS[(k // len(USERS)) % len(SPEEDS)]
        said = samples(corpus.speech(text, voice, speed))
        said *= USER_RMS / active_rms(said)
        length = int((LEAD_S + TAIL_S) * RATE) + len(said)
        start = int(rng.uniform(0, max(1, len(narration) - length)))
        narr = np.zeros(length)
        piece = narration[start:start + length]
        narr[:len(piece)] = piece
        user = np.zeros(length)
        onset = int(LEAD_S * RATE)
        user[onset:onset + len(said)] = said
        delays, irs = two_paths(rng)
        echo_level = active_rms(convolve(narr, irs[0]))
        gain = USER_RMS * 10 ** (level_db / 20) / echo_level
        noise = rng.standard_normal(length) * FLOOR_RMS
        scenes.append(Scene(narr, irs, gain, user, (onset + len(said)) / RATE, noise, delays))
    return scenes


STOP_SETTINGS = StopPhraseSettings(wake_phrase=PHRASE, stop_words=("stop", "cancel"))  # the assistant's stop phrase


def narration(corpus: Corpus, voice: str = NARRATOR) -> np.ndarray:
    """What the speaker is given, the whole narration three times over with half a second between
    (its echo's level is each room's). `voice`: another narrator (espeak-ng's "hey jarvis" is never
    spotted by pocketsphinx's search for it, even as played; flite's is)."""
    speech = samples(corpus.speech(NARRATION, voice, 165))
    speech = np.concatenate([speech, np.zeros(RATE // 2)] * 3)
    return speech * (6000 / active_rms(speech))
