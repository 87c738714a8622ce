"""microWakeWord's streaming probability, as the wheel computes it, at a fraction of its cost.

`pymicro_wakeword.MicroWakeWord.process_streaming_prob` is most of the wake model's CPU in a
talking room (issue 34): per call it concatenates the stride's features, builds two ctypes
pointers (`ndarray.ctypes`), allocates the output, and averages the last scores with
`statistics.mean`, which sums them as exact fractions. `MicroStream` runs the same model through
the same TFLite calls with its buffers and pointers made once, dequantizes through a table of the
output's 256 values, and averages in floats. Every probability is the wheel's to the last bit
(`tests/detectors/test_micro_stream.py` runs both on the same audio):

- quantizing is the wheel's float64 expression (divide, add, round half to even, cast), into fixed buffers;
- the table holds the wheel's float32 expression for each quantized output;
- the mean: the scores are float32 values `k * output_scale` for |k| <= 255, so each is a multiple
  of one power of two and five of them sum exactly in a float (34 bits of the 53); the one
  rounding left, the division, is the one `statistics.mean` makes. `__init__` checks the table
  sums exactly (else it keeps `statistics.mean`).

It reads the wheel's public attributes (`lib`, `interpreter`, the tensors, their quantization,
`stride`, `sliding_window_size`; constraints.txt pins the wheel) and, as the wheel does, finds
the interpreter anew after `reset()` (the wheel reloads the model to clear its state).

`MicroFeatures` is the wheel's `MicroWakeWordFeatures` (the same frontend on the same 10 ms frames)
handing on each frame's features as the frontend's own list: the wheel made an ndarray of each and
reshaped it, only for `MicroStream` to copy the values into its buffer (issue 34, session 21; the
same values: a float64 array of Python floats either way, `tests/detectors/test_micro_stream.py`).
"""

from __future__ import annotations

import ctypes
import statistics
from collections import deque
from fractions import Fraction
from typing import Any, Iterator, Sequence

import numpy as np

_FRAME_BYTES = 160 * 2  # the frontend's step: 10 ms of 16 kHz pcm16 (the wheel's BYTES_PER_CHUNK)


class MicroFeatures:
    """`MicroWakeWordFeatures.process_streaming` as the wheel computes it, each frame's features a list."""

    def __init__(self) -> None:
        from pymicro_features import MicroFrontend  # (the wheel's own dependency)

        self._frontend = MicroFrontend()
        self._buffer = b""  # 16 kHz audio the frontend has not read yet

    def process_streaming(self, pcm16k: bytes) -> Iterator[list[float]]:
        """The features of each whole frame in what came so far (16 kHz pcm16 mono), in order."""
        buffer = self._buffer + pcm16k if self._buffer else pcm16k
        index, end, process = 0, len(buffer), self._frontend.process_samples
        while index + _FRAME_BYTES <= end:
            result = process(buffer[index:index + _FRAME_BYTES])
            index += result.samples_read * 2
            if result.features:  # (else not yet a whole window)
                yield result.features
        self._buffer = buffer[index:]

    def reset(self) -> None:
        self._frontend.reset()
        self._buffer = b""


class MicroStream:
    """`probability(features)` for each feature frame of `MicroFeatures` (a list) or of
    `MicroWakeWordFeatures` (its (1, 1, width) array): what `model.process_streaming_prob` would
    return (0.0 until the stride and the window are full)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._window: deque[float] = deque(maxlen=model.sliding_window_size)
        self._stride = model.stride
        self._count = 0  # feature frames in `_features` (the wheel strides, it does not roll)
        self._features: np.ndarray | None = None  # (1, stride, width) float64, made at the first frame
        self._scaled: np.ndarray | None = None
        self._quantized: np.ndarray | None = None
        self._in_pointer: ctypes.c_void_p | None = None
        out_dtype = np.dtype(model.output_dtype)
        self._output = np.empty(1, dtype=out_dtype)
        self._out_pointer = self._output.ctypes.data_as(ctypes.c_void_p)
        self._out_bytes = self._output.nbytes
        # The wheel's dequantization, `(out.astype(float32) - zero_point) * scale`, for every output.
        every = np.arange(np.iinfo(out_dtype).min, np.iinfo(out_dtype).max + 1).astype(out_dtype)
        values = ((every.astype(np.float32) - model.output_zero_point) * model.output_scale).tolist()
        self._dequantized = {int(q): v for q, v in zip(every.tolist(), values)}
        self._float_mean = _sums_exactly(values, self._window.maxlen or 1)

    def reset(self) -> None:
        """With the model's own `reset()` (which reloads its interpreter)."""
        self._window.clear()
        self._count = 0

    def probability(self, features: Sequence[float] | np.ndarray) -> float | None:
        model = self._model
        if not model.interpreter or not model.model:
            return None
        if self._features is None:
            width = np.shape(features)[-1]
            self._features = np.empty((1, self._stride, width), dtype=np.float64)
            self._scaled = np.empty_like(self._features)
            self._quantized = np.empty(self._features.shape, dtype=model.input_dtype)
            self._in_pointer = self._quantized.ctypes.data_as(ctypes.c_void_p)
        self._features[0, self._count] = features  # (an array's leading ones are dropped)
        self._count += 1
        if self._count < self._stride:
            return 0.0
        self._count = 0
        scaled, quantized = self._scaled, self._quantized
        assert scaled is not None and quantized is not None  # (made with `_features` above)
        np.divide(self._features, model.input_scale, out=scaled)
        np.add(scaled, model.input_zero_point, out=scaled)
        np.rint(scaled, out=scaled)  # (what `np.round` runs at 0 decimals, without its Python wrappers)
        np.copyto(quantized, scaled, casting="unsafe")  # the wheel's astype
        lib = model.lib
        lib.TfLiteTensorCopyFromBuffer(model.input_tensor, self._in_pointer, quantized.nbytes)
        lib.TfLiteInterpreterInvoke(model.interpreter)
        lib.TfLiteTensorCopyToBuffer(model.output_tensor, self._out_pointer, self._out_bytes)
        window = self._window
        window.append(self._dequantized[int(self._output[0])])
        if len(window) < window.maxlen:  # type: ignore[operator]
            return 0.0
        return sum(window) / len(window) if self._float_mean else statistics.mean(window)


def _sums_exactly(values: list[float], count: int) -> bool:
    """Whether any `count` of `values` (repeats allowed) sum exactly in floats: every value a
    multiple of the smallest one's last bit, and `count` times the largest within 53 bits."""
    nonzero = [abs(v) for v in values if v]
    if not nonzero:
        return True
    quantum = max(Fraction(v).denominator for v in nonzero)  # (powers of two: each value a multiple of 1/quantum)
    return all((Fraction(v) * quantum).denominator == 1 for v in nonzero) and count * max(nonzero) * quantum < 2 ** 53
