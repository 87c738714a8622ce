"""Listening's code as it was in session 20 (the baseline `--baseline session20` of
`benchmarks.listener_upload_pipeline`, measured in the same run): microWakeWord's features from the
wheel's `MicroWakeWordFeatures` (an ndarray made and reshaped per 10 ms frame) and `MicroStream`
rounding through `np.round`."""

# The old method, copied as it was (the name prefixed), patched onto today's class.

from __future__ import annotations

import contextlib
import ctypes
import statistics
from typing import Iterator
from unittest import mock

import numpy as np

from detectors.micro_stream import MicroStream


def stream_probability(self: MicroStream, features: np.ndarray) -> float | None:
    model = self._model
    if not model.interpreter or not model.model:
        return None
    if self._features is None:
        width = features.shape[-1]
        self._features = np.empty((1, self._stride, width), dtype=np.float64)
        self._scaled = np.empty_like(self._features)
        self._quantized = np.empty(self._features.shape, dtype=model.input_dtype)
        self._in_pointer = self._quantized.ctypes.data_as(ctypes.c_void_p)
    self._features[0, self._count] = features[0, 0]
    self._count += 1
    if self._count < self._stride:
        return 0.0
    self._count = 0
    scaled, quantized = self._scaled, self._quantized
    assert scaled is not None and quantized is not None  # (made with `_features` above)
    np.divide(self._features, model.input_scale, out=scaled)
    np.add(scaled, model.input_zero_point, out=scaled)
    np.round(scaled, out=scaled)
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


@contextlib.contextmanager
def as_in_session20() -> Iterator[None]:
    """Session 20's microWakeWord features (the wheel's generator) and `MicroStream.probability` patched in."""
    from pymicro_wakeword import MicroWakeWordFeatures

    import detectors.micro_stream as micro_stream

    with mock.patch.object(micro_stream, "MicroFeatures", MicroWakeWordFeatures), \
            mock.patch.object(MicroStream, "probability", stream_probability):
        yield
