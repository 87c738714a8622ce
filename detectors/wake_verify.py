"""A third opinion on a wake about to be accepted: a logistic regression on openWakeWord's speech
embeddings of the phrase (openWakeWord's own "custom verifier" idea), trained offline.

microWakeWord and openWakeWord both score some sound-alikes of "hey jarvis" ("hey chavez", "hey
jarvie") as high as the phrase (issue 34's near misses). Both models end in a classifier over a
general speech embedding; this one is trained on what they confuse: the 96-value embeddings
openWakeWord computes for every 80 ms of audio (its `embedding_model`, shipped in pyopen-wakeword),
over the 16 frames (about 2 s of sound) its own model looks at, taken where the two models woke.
It runs once per wake, never per chunk: `ModelSpotter` hands it the last `VERIFY_S` of audio
before the wake (about 0.1-0.2 s of CPU), and the wake is dropped when the score is under the
threshold stored with the weights. Weights with a `delay_s` (session 16, none shipped) hear the
`VERIFY_S` ending that long after the wake, and may carry `early` weights for the window ending at it,
or `blend` weights for windows ending at other delays, averaged with their own (session 21).

The weights are a small `.npz` (standardisation, coefficients, intercept, threshold) made by
`benchmarks/wake_verifier_train.py` from voices and sound-alikes disjoint from the benchmark's
(docs/PERFORMANCE.md, "Near misses: a third opinion"); numpy only, no learning library at runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np  # numpy loads only when a verifier is built

VERIFY_S = 2.3  # the audio before a wake the verifier hears (openWakeWord's 16 frames need about 2 s)
WINDOWS = 16  # openWakeWord's frames per window (its "hey jarvis" model's input)
POSITIONS = 4  # the last windows scored (80 ms apart); the best one counts
# Padded in front with silence to this many samples: the frame grid of `wake_confirm.OpenStream`'s
# 3 s start (48,000 samples less a whole number of 80 ms frames), with just the embeddings the
# windows need (20 of 19); the same figures as 3 s, for three quarters of the CPU.
PADDED_SAMPLES = 3 * 16000 - 8 * 1280
FRAME_SAMPLES = 1280  # openWakeWord's embedding step (80 ms): windows ending whole frames apart share one read
# openWakeWord's embeddings are not level-invariant (log mel energies): a command from across the room
# (peaks at -42 dBFS) reads unlike the same words near. Weights trained with a lift hear the audio
# raised so its loudest sample is at `lift_peak_dbfs`, by at most MAX_LIFT (the VAD's quiet path's 32x).
MAX_LIFT = 32.0
WEIGHTS_DIR = Path(__file__).parent / "verifiers"


@dataclass(frozen=True)
class Weights:
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float
    lift_peak_dbfs: float | None = None  # quiet audio raised to this peak before it is read (None: as heard)
    # The threshold tied to the level (issue 34): audio whose loudest sample is under `quiet_peak_dbfs`
    # (a command from across the room) is judged against `quiet_threshold` instead (None: one threshold).
    quiet_peak_dbfs: float | None = None
    quiet_threshold: float | None = None
    # Session 16: the audio heard ends this long after the wake (the name's last sound and what follows
    # it: "jarvis" against "jarvie", "jarvis, ..." against "jarvis was"); the wake is reported that much later.
    delay_s: float = 0.0
    # With a delay: weights read at the wake itself (no delay), whose own threshold accepts a wake the late
    # window refused (session 16: the late window hears TV talk after the name; the wake's own is sure of it).
    early: Weights | None = None
    # Session 21: weights for windows ending at other delays (each its own `delay_s`), whose scores are averaged
    # with this one's (the name's end read at three moments; a pause or the TV's talk after it moves one, not all).
    blend: tuple[Weights, ...] = ()
    # Session 21: with `early` weights, they are asked only when the audio after the wake peaks at least this many dB
    # under the `VERIFY_S` before it ("hey jarvis ... <pause> <command>": the late windows hold the pause). None: always.
    early_after_quiet_db: float | None = None
    # Session 17: the cutoffs of the spotter whose wakes these weights were trained on (`ConfirmSettings.verified_*`:
    # openWakeWord's, the pause rule's, microWakeWord's alone); None: the plain ones.
    ask_threshold: float | None = None
    ask_pause_threshold: float | None = None
    ask_alone_cutoff: float | None = None

    @classmethod
    def load(cls, path: Path) -> Weights:
        import numpy as np

        with np.load(path) as data:
            return cls._from({k: data[k] for k in data.files})

    @classmethod
    def _from(cls, data: dict[str, Any], prefix: str = "") -> Weights:
        optional = {k: float(data[prefix + k]) for k in OPTIONAL if prefix + k in data}
        early = cls._from(data, "early_") if not prefix and "early_mean" in data else None
        blend = tuple(cls._from(data, f"blend{i}_") for i in range(BLEND_MAX) if not prefix and f"blend{i}_mean" in data)
        return cls(data[prefix + "mean"], data[prefix + "scale"], data[prefix + "coef"], float(data[prefix + "intercept"]),
                   float(data[prefix + "threshold"]), **optional, early=early, blend=blend)

    def save(self, path: Path) -> None:
        import numpy as np

        blended = {k: v for i, w in enumerate(self.blend) for k, v in w._arrays(f"blend{i}_").items()}
        np.savez_compressed(path, **self._arrays(), **(self.early._arrays("early_") if self.early is not None else {}), **blended)

    @property
    def longest_delay_s(self) -> float:
        """How long after the wake the last window read ends (its own or a blended one's)."""
        return max((self.delay_s, *(w.delay_s for w in self.blend)))

    def _arrays(self, prefix: str = "") -> dict[str, Any]:
        import numpy as np

        arrays: dict[str, Any] = {"mean": self.mean, "scale": self.scale, "coef": self.coef, "intercept": np.float64(self.intercept),
                  "threshold": np.float64(self.threshold)}
        arrays.update({k: np.float64(getattr(self, k)) for k in OPTIONAL if getattr(self, k) is not None})  # (files without them: as heard, one threshold, no delay)
        return {prefix + k: v for k, v in arrays.items()}

    def threshold_at(self, peak_dbfs: float) -> float:
        """The score a wake whose audio peaks at `peak_dbfs` needs."""
        if self.quiet_peak_dbfs is not None and self.quiet_threshold is not None and peak_dbfs < self.quiet_peak_dbfs:
            return self.quiet_threshold
        return self.threshold

    def threshold_for(self, pcm16k: bytes) -> float:
        """The score the wake heard in `pcm16k` needs (its level read only when it matters)."""
        return self.threshold if self.quiet_peak_dbfs is None else self.threshold_at(peak_dbfs(pcm16k))

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """The probability of the phrase for each row of features."""
        import numpy as np

        z: np.ndarray = ((np.asarray(rows) - self.mean) / self.scale) @ self.coef + self.intercept
        return np.asarray(1.0 / (1.0 + np.exp(-z)))


BLEND_MAX = 8  # blended windows a file may hold
OPTIONAL = ("lift_peak_dbfs", "quiet_peak_dbfs", "quiet_threshold", "delay_s", "ask_threshold", "ask_pause_threshold", "ask_alone_cutoff",
            "early_after_quiet_db")  # what older weights files lack


def _bytes(seconds: float) -> int:
    """The length of `seconds` of 16 kHz pcm16."""
    return _samples(seconds) * 2


def _samples(seconds: float) -> int:
    return int(seconds * 16000)


def _sharing(members: tuple[Weights, ...]) -> list[list[Weights]]:
    """`members` grouped by one embedding pass: windows ending a whole number of 80 ms frames apart, read alike."""
    groups: list[list[Weights]] = []
    for w in members:
        for group in groups:
            if group[0].lift_peak_dbfs == w.lift_peak_dbfs and (_samples(group[0].delay_s) - _samples(w.delay_s)) % FRAME_SAMPLES == 0:
                group.append(w)
                break
        else:
            groups.append([w])
    return groups


def _best(embeddings: np.ndarray, weights: Weights) -> float:
    """The best of the last `POSITIONS` windows' scores of `embeddings` (0: too few of them)."""
    if len(embeddings) < WINDOWS + POSITIONS - 1:
        return 0.0
    return float(weights.scores(windows(embeddings)).max())


def weights_path(model: str) -> Path:
    return WEIGHTS_DIR / f"{model}.npz"


def peak_dbfs(pcm16k: bytes) -> float:
    """The loudest sample of `pcm16k`, dBFS (-inf: silence)."""
    import math

    import numpy as np

    peak = _peak(np.frombuffer(pcm16k, dtype=np.int16))
    return 20 * math.log10(peak / 32767) if peak else float("-inf")


def _peak(samples: np.ndarray) -> int:
    """The loudest sample's magnitude (0: none)."""
    import numpy as np

    return int(np.abs(samples.astype(np.int32)).max()) if len(samples) else 0


def lifted(pcm16k: bytes, peak_dbfs: float) -> bytes:
    """`pcm16k` raised so its loudest sample is at `peak_dbfs` (at most `MAX_LIFT` times); louder audio as it is."""
    import numpy as np

    samples = np.frombuffer(pcm16k, dtype=np.int16)
    peak = _peak(samples)
    target = 32767 * 10 ** (peak_dbfs / 20)
    if peak == 0 or peak >= target:
        return pcm16k
    gain = min(MAX_LIFT, target / peak)
    raised: bytes = np.clip(np.rint(samples * gain), -32768, 32767).astype(np.int16).tobytes()
    return raised


def windows(embeddings: np.ndarray) -> np.ndarray:
    """The last `POSITIONS` windows of `WINDOWS` embeddings, each flattened to one row."""
    import numpy as np

    emb = np.asarray(embeddings, dtype=np.float32)
    last = len(emb)
    return np.stack([emb[end - WINDOWS : end].reshape(-1) for end in range(last - POSITIONS + 1, last + 1)])


class EmbeddingReader:
    """openWakeWord's embeddings of a piece of 16 kHz pcm16, from a fresh start padded in front."""

    def __init__(self) -> None:
        from pyopen_wakeword import OpenWakeWordFeatures  # numpy + TFLite: only when used

        self._features = OpenWakeWordFeatures.from_builtin()

    def __call__(self, pcm16k: bytes, extra_frames: int = 0) -> np.ndarray:
        """`extra_frames`: `pcm16k` is that many 80 ms frames longer than `VERIFY_S`, and is read on the grid a
        `VERIFY_S` ending where it ends would be (the last embeddings the same)."""
        import numpy as np

        self._features.reset()
        self._features.new_audio_samples = max(0, PADDED_SAMPLES + extra_frames * FRAME_SAMPLES - len(pcm16k) // 2)
        found = [e[0, 0] for e in self._features.process_streaming(pcm16k)] if pcm16k else []
        return np.concatenate(found) if found else np.zeros((0, 96), dtype=np.float32)


class WakeVerifier:
    """`accepts(pcm16k)`: the last `VERIFY_S` before a wake says the phrase (the best of the last
    `POSITIONS` windows scores at least the threshold)."""

    def __init__(self, model: str, weights: Weights | None = None) -> None:
        self.weights = weights or Weights.load(weights_path(model))
        self._read = EmbeddingReader()
        self.last_score: float | None = None

    @property
    def delay_s(self) -> float:
        """How long after a wake the audio it hears ends (its weights were trained so; blended ones may read later)."""
        return self.weights.longest_delay_s

    def score(self, pcm16k: bytes, weights: Weights | None = None) -> float:
        weights = weights or self.weights
        lift = weights.lift_peak_dbfs
        return _best(self._read(pcm16k if lift is None else lifted(pcm16k, lift)), weights)

    def _scores(self, pcm16k: bytes) -> list[float]:
        """Each window's score (its own weights', then each blended one's): windows ending whole 80 ms frames apart
        are read in one pass (session 22: openWakeWord's embeddings on one grid, the pass a blend's cost)."""
        members = (self.weights, *self.weights.blend)
        scores: dict[int, float] = {}
        for group in _sharing(members):
            if len(group) == 1:
                [w] = group
                window = self._ending_at(pcm16k, w.delay_s)
                scores[id(w)] = self.score(window) if w is self.weights else self.score(window, w)
                continue
            last = max(_samples(w.delay_s) for w in group)
            extra = (last - min(_samples(w.delay_s) for w in group)) // FRAME_SAMPLES
            end = len(pcm16k) // 2 - _samples(self.delay_s) + last
            piece = pcm16k[max(0, end - _samples(VERIFY_S) - extra * FRAME_SAMPLES) * 2 : end * 2]
            lift = group[0].lift_peak_dbfs
            embeddings = self._read(piece if lift is None else lifted(piece, lift), extra)
            for w in group:
                back = (last - _samples(w.delay_s)) // FRAME_SAMPLES
                scores[id(w)] = _best(embeddings[: len(embeddings) - back], w)
        return [scores[id(w)] for w in members]

    def accepts(self, pcm16k: bytes) -> bool:
        """`pcm16k`: the `VERIFY_S` + `delay_s` ending `delay_s` after the wake (its last `VERIFY_S` is
        scored; with `blend` weights, each also scores the `VERIFY_S` ending its own delay after the wake and the
        mean is judged; with `early` weights, a refusal is asked again of the `VERIFY_S` ending at the wake)."""
        heard = self._ending_at(pcm16k, self.weights.delay_s)
        scores = self._scores(pcm16k)  # with blended weights, the mean is judged at the level of this weights' own window
        self.last_score = sum(scores) / len(scores)
        if self.last_score >= self.weights.threshold_for(heard):
            return True
        early = self.weights.early
        if early is None:
            return False
        at_wake = self._ending_at(pcm16k, 0.0)
        quiet_db = self.weights.early_after_quiet_db
        if quiet_db is not None and peak_dbfs(at_wake) - peak_dbfs(self._after_wake(pcm16k)) < quiet_db:
            return False  # speech goes on after the name: the late windows judged it
        return self.score(at_wake, early) >= early.threshold

    def _after_wake(self, pcm16k: bytes) -> bytes:
        """The audio of `pcm16k` (which ends `self.delay_s` after the wake) after the wake: whether speech goes on."""
        return pcm16k[len(pcm16k) - _bytes(self.delay_s):]

    def _ending_at(self, pcm16k: bytes, delay_s: float) -> bytes:
        """The `VERIFY_S` of `pcm16k` (which ends `self.delay_s` after the wake) ending `delay_s` after the wake."""
        return pcm16k[: max(0, len(pcm16k) - _bytes(self.delay_s) + _bytes(delay_s))][-_bytes(VERIFY_S):]


def verifier_available(model: str) -> bool:
    return weights_path(model).exists()
