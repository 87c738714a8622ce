"""Ending the turn sooner without cutting commands (issue 20): on a spoken corpus with pauses
inside the commands, which end-of-turn method and setting splits none and ends soonest.

    .venv/bin/python -m benchmarks.end_of_turn [--quick] [--chunk-ms MS]

Corpus: five commands after the wake phrase, in four espeak-ng voices (en-us, en-us+f3, en-us+m3,
en), with a pause of 0, 200, 300 or 400 ms after the wake phrase or in the middle of the command
(digital silence: the hardest case for a silence-based end of turn), 0.5 s of silence before and
2 s after. Methods, each on the same audio:

- the server's `server_vad` at `silence_duration_ms` 200..700 (the simulator's energy VAD, timed
  in audio as the server's is);
- `semantic_vad` at each eagerness, as the simulator models it (a silence per eagerness; the real
  model's judgement of a finished sentence is not modelled, so this row is a stand-in);
- the device's own VAD (detectors/vad.py: webrtcvad then Silero, in the microphone's chunks: the
  settings' 20 ms, or `--chunk-ms`; the smart-turn and provisional rows use the same) ending the turn
  after `TURN_END_MS` 200..500 of silence (END_OF_TURN=device);
- an end-of-utterance model on the device: pipecat's smart-turn v3.2 (the ONNX model and the
  numpy feature code inside the pipecat-ai wheel, run with onnxruntime), consulted as pipecat
  consults it: once, after S ms of the device VAD's silence, on the turn's audio so far (from
  500 ms before its first speech, the last 8 s at most); a probability of a finished turn at or
  over the threshold ends the turn then (plus the model's own CPU time), under it the turn ends
  at the fallback silence. Measured only where onnxruntime and pipecat-ai are installed (they are
  not the product's dependencies):
      .venv/bin/pip install onnxruntime==1.32.0 flatbuffers==25.12.19 protobuf==7.36.2
      .venv/bin/pip install --no-deps pipecat-ai==1.14.0

For each: commands split (more than one turn), and the end of turn after the true end of speech
(median, ms). Then provisional routes (issue 33, `benchmarks/provisional_replay.py`): per
PROVISIONAL_MS, the same VAD verdicts through the pause signal and the coordinator's core: routes
withdrawn, tools with side effects run on one (must be 0), answers per command, the extra routing
tokens. Voice to voice at RTT 50 follows from it: the server's turn end reaches the client
1 RTT after the speech's end (the audio goes up, the event comes down), then the route and the
narrator take 1 RTT each; the device's own end of turn needs no trip: only the route and the
narrator (`benchmarks/voice_to_voice.py` measures both end to end).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from array import array
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from types import ModuleType

import numpy as np

try:
    import onnxruntime
except ImportError:  # only this benchmark uses it: the rows are left out, with how to install it
    onnxruntime = None

from benchmarks.provisional_replay import OUTPUT_TOKENS, Replay, Tally, narration_usage, route_text_tokens
from benchmarks.tool_schema_size import registry
from config.settings import AudioSettings
from detectors.audio import MODEL_RATE, Resampler
from detectors.vad import SileroVad
from realtime_sim.session_config import _SEMANTIC_SILENCE_MS
from realtime_sim.vad import EnergyVad, SpeechStarted, SpeechStopped, VadSettings
from speech.synth import SpeechSynthesizer

WAKE = "computer"
COMMANDS = (
    ("what time", "is it"),
    ("list the", "files"),
    ("set a timer", "for ten minutes"),
    ("read the first two lines", "of notes"),
    ("ask the brain", "why the sky is blue"),
)
VOICES = ("en-us", "en-us+f3", "en-us+m3", "en")
PAUSES_MS = (0, 200, 300, 400)
SERVER_MS = (200, 300, 400, 450, 500, 600, 700)
DEVICE_MS = (200, 300, 400, 420, 440, 450, 460, 500)
MODEL_SILENCE_MS = (100, 200, 300)
MODEL_THRESHOLDS = (0.5, 0.7, 0.9, 0.95, 0.98, 0.99)  # pipecat's is 0.5
MODEL_FALLBACK_MS = 460  # the device's turn end that splits none of the corpus
PRE_SPEECH_MS = 500  # pipecat's: the audio before the first speech the model also hears
MODEL_SECONDS = 8  # the model's window
SMART_TURN_DIR = "pipecat/audio/turn/smart_turn/"
RTT_MS = 50
CLIENT_MS = 25  # the client's and the simulator's own time in a command, measured by voice_to_voice
BYTES_PER_MS = 48
CHUNK_MS = AudioSettings().chunk_ms  # the microphone's chunk size (--chunk-ms)


def _silence(ms: int) -> bytes:
    return bytes(ms * BYTES_PER_MS)


def _trim(pcm: bytes, floor: int = 300) -> bytes:
    """Without espeak's quiet lead-in and tail (under about -40 dBFS): the pauses are what we add."""
    samples = array("h")
    samples.frombytes(pcm)
    loud = [i for i, v in enumerate(samples) if abs(v) >= floor]
    return samples[loud[0]:loud[-1] + 1].tobytes() if loud else b""


@dataclass(frozen=True)
class Clip:
    pcm: bytes
    speech_end_ms: float  # where the last word ends
    pause_ms: int
    after_wake: bool  # the pause is between the wake phrase and the command (else inside the command)
    pause_at_ms: float  # where the pause begins
    wake_end_ms: float = 0.0  # where the wake phrase ends (the on-device spotter's hit)
    head: str = ""  # the command's first words (benchmarks/provisional_replay.py: its tool)


async def corpus(quick: bool) -> list[Clip]:
    clips = []
    for voice in VOICES[:2] if quick else VOICES:
        synth = SpeechSynthesizer(voice=voice, words_per_minute=170)
        try:
            wake = _trim(await synth.synthesize(WAKE))
            for head, tail in COMMANDS[:2] if quick else COMMANDS:
                first, second = _trim(await synth.synthesize(head)), _trim(await synth.synthesize(tail))
                whole = _trim(await synth.synthesize(f"{head} {tail}"))
                for pause in PAUSES_MS:
                    for after_wake, before, body in ((True, wake, (wake, _silence(pause), whole)),
                                                     (False, wake + _silence(120) + first,
                                                      (wake, _silence(120), first, _silence(pause), second))):
                        speech = b"".join(body)
                        clips.append(Clip(_silence(500) + speech + _silence(2000), 500 + len(speech) / BYTES_PER_MS,
                                          pause, after_wake, 500 + len(before) / BYTES_PER_MS,
                                          500 + len(wake) / BYTES_PER_MS, head))
        finally:
            synth.close()
    return clips


def server_turns(clip: Clip, silence_ms: int) -> tuple[int, float]:
    """(turns, end of the last turn after the end of speech, ms) with the energy VAD at `silence_ms`."""
    vad = EnergyVad(VadSettings(silence_duration_ms=silence_ms))
    events = vad.feed(clip.pcm)
    starts = sum(isinstance(e, SpeechStarted) for e in events)
    stops = [e.audio_end_ms for e in events if isinstance(e, SpeechStopped)]
    return starts, (stops[-1] - clip.speech_end_ms) if stops else float("nan")


def device_speech(clip: Clip, chunk_ms: int = CHUNK_MS) -> list[bool]:
    vad, chunk = SileroVad(), chunk_ms * BYTES_PER_MS
    return [vad.feed(clip.pcm[i:i + chunk]).is_speech for i in range(0, len(clip.pcm) - chunk + 1, chunk)]


def device_turns(flags: list[bool], clip: Clip, turn_end_ms: int, chunk_ms: int = CHUNK_MS) -> tuple[int, float]:
    """(turns, end of the last turn after the end of speech, ms): a turn ends `turn_end_ms` after
    the last speech chunk, as detectors.pipeline.UploadFilter ends one."""
    turns, last, in_turn, end = 0, None, False, float("nan")
    for index, speech in enumerate(flags):
        now = (index + 1) * chunk_ms
        if speech:
            if not in_turn:
                turns, in_turn = turns + 1, True
            last = now
        elif in_turn and last is not None and now - last >= turn_end_ms:
            in_turn, end = False, now - clip.speech_end_ms
    return turns, end


class SmartTurn:
    """pipecat's smart-turn v3.2 as pipecat's LocalSmartTurnAnalyzerV3 runs it (one thread, whisper
    log-mel features, 8 s left-padded with silence), without importing pipecat itself (its package
    needs loguru and two dozen others): the model file and the feature module are read from the
    installed wheel."""

    def __init__(self, features: ModuleType, model_path: str) -> None:
        options = onnxruntime.SessionOptions()
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.inter_op_num_threads = options.intra_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(model_path, sess_options=options)
        self._features = features
        self._seen: dict[tuple[int, int, int], tuple[float, float]] = {}
        self.cpu_ms: list[float] = []

    @classmethod
    def load(cls) -> SmartTurn | None:
        if onnxruntime is None:
            return None
        try:
            wheel = distribution("pipecat-ai")
        except PackageNotFoundError:
            return None
        spec = importlib.util.spec_from_file_location(
            "smart_turn_features", wheel.locate_file(SMART_TURN_DIR + "_whisper_features.py"))
        features = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(features)
        return cls(features, str(wheel.locate_file(SMART_TURN_DIR + "data/smart-turn-v3.2-cpu.onnx")))

    def __call__(self, clip_index: int, clip: Clip, start_ms: int, now_ms: int) -> tuple[float, float]:
        """(probability that the turn is finished, CPU ms of this decision) on clip[start_ms:now_ms]."""
        key = (clip_index, start_ms, now_ms)
        if key not in self._seen:
            began = time.process_time()
            pcm16k = Resampler(BYTES_PER_MS * 1000 // 2)(clip.pcm[start_ms * BYTES_PER_MS:now_ms * BYTES_PER_MS])
            audio = np.frombuffer(pcm16k, dtype=np.int16)[-MODEL_SECONDS * MODEL_RATE:].astype(np.float32) / 32768.0
            audio = np.pad(audio, (MODEL_SECONDS * MODEL_RATE - len(audio), 0))
            features = self._features.compute_whisper_log_mel_features(audio, do_normalize=True)[None]
            probability = float(self._session.run(None, {"input_features": features})[0][0].item())
            self.cpu_ms.append((time.process_time() - began) * 1000)
            self._seen[key] = (probability, self.cpu_ms[-1])
        return self._seen[key]


def model_turns(flags: list[bool], clip_index: int, clip: Clip, model: SmartTurn, silence_ms: int,
                threshold: float, probabilities: list[tuple[str, float]], chunk_ms: int = CHUNK_MS) -> tuple[int, float]:
    """(turns, end of the last turn after the end of speech, ms): the device VAD's turn, the model
    consulted once per pause after `silence_ms`, the fallback silence when it says unfinished.
    Appends (where, probability) of each consultation to `probabilities`."""
    turns, last, start, in_turn, asked, end = 0, 0, 0, False, False, float("nan")
    for index, speech in enumerate(flags):
        now = (index + 1) * chunk_ms
        if speech:
            if not in_turn:
                turns, in_turn, start = turns + 1, True, now - chunk_ms
            last, asked = now, False
            continue
        if not in_turn:
            continue
        if not asked and now - last >= silence_ms:
            asked = True
            probability, cpu_ms = model(clip_index, clip, max(0, start - PRE_SPEECH_MS), now)
            where = ("end" if now >= clip.speech_end_ms else "gap" if clip.pause_ms < silence_ms
                     or abs(last - clip.pause_at_ms) > 120 else "wake" if clip.after_wake else "inside")
            probabilities.append((where, probability))
            if probability >= threshold:
                in_turn, end = False, now + cpu_ms - clip.speech_end_ms
                continue
        if now - last >= MODEL_FALLBACK_MS:
            in_turn, end = False, now - clip.speech_end_ms
    return turns, end


def _row(name: str, setting: str, results: list[tuple[int, float]], clips: list[Clip], trips: int) -> str:
    split = sum(1 for turns, _ in results if turns > 1)
    by_pause = " / ".join(str(sum(1 for (turns, _), c in zip(results, clips) if turns > 1 and c.pause_ms == pause))
                          for pause in PAUSES_MS)
    delays = [delay for _, delay in results if delay == delay]
    median = statistics.median(delays) if delays else float("nan")
    v2v = median + trips * RTT_MS + CLIENT_MS
    return (f"| {name} | {setting} | {split} of {len(clips)} ({by_pause}) | {median:.0f} ms | {v2v:.0f} ms | "
            f"{'yes' if split == 0 and v2v <= 450 else 'no'} |")


PROVISIONAL_MS = (120, 140, 160, 200, 250, 300, 320, 340, 360)
SHIPPED_MS, BUDGET = 120, 0.15  # PROVISIONAL_MS and PROVISIONAL_TOKEN_BUDGET's defaults
TURN_END_MS = 460
# The rows after the fixed ones are the assistant as shipped: the point moves by the round trips
# the core measures (a route's call back RTT + 5 ms after it left, the narrator's first audio
# RTT + 15 ms after it was asked, as benchmarks/voice_to_voice.py measured them on this machine),
# with and without the token budget, at RTT 50 and 150.
ADAPTIVE_RTT_MS = (50, 150)


def provisional_rows(flags: list[list[bool]], clips: list[Clip], chunk_ms: int = CHUNK_MS) -> list[str]:
    read_only = frozenset(registry(True, Path(tempfile.mkdtemp(prefix="eot-"))).read_only_names())
    text_tokens = route_text_tokens()
    narration = narration_usage()
    lines = [
        "", f"Provisional routes (issue 33) at TURN_END_MS {TURN_END_MS}, the {len(clips)} commands in order through one "
        f"coordinator core; tokens per route: {text_tokens} of tool definitions and instructions, 1 per 100 ms of audio, "
        f"{OUTPUT_TOKENS} out; per answer read ahead: {narration.input_text_tokens} in, "
        f"{narration.output_audio_tokens + narration.output_text_tokens} out; extra = the withdrawn routes' tokens "
        "and the read-aheads dropped with them over the rest of the routing:", "",
        "| PROVISIONAL_MS | RTT ms | token budget | commands split | routed provisionally | withdrawn (at the pause inside / "
        "after the wake / a shorter pause the voice's quiet edges lengthen) | pauses held back by the budget | routes "
        "that stood (not routed again) | the answer's first audio after the turn end, median / mean | side-effect tools run on a provisional or withdrawn route | answers per command | "
        "extra tokens: routes + read-aheads = total |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows: list[tuple[int | None, int, bool, float | None]] = [(None, RTT_MS, False, None)]
    rows += [(ms, RTT_MS, False, None) for ms in PROVISIONAL_MS]
    rows += [(SHIPPED_MS, rtt, True, budget) for rtt in ADAPTIVE_RTT_MS for budget in (None, BUDGET)]
    for pause_ms, rtt_ms, adaptive, budget in rows:
        tally, by_place = Tally(), {"inside": 0, "wake": 0, "gap": 0}
        run = Replay(read_only, TURN_END_MS / 1000, rtt_ms / 1000, text_tokens, pause_ms and pause_ms / 1000,
                     adaptive, budget)
        for f, c in zip(flags, clips):
            before, point_ms = tally.withdrawn, (run.pause_s or 0) * 1000
            run.command(f, c.wake_end_ms, c.head, tally, chunk_ms)
            if tally.withdrawn > before:
                by_place["gap" if c.pause_ms < point_ms else "wake" if c.after_wake else "inside"] += tally.withdrawn - before
        a = tally.account
        useful = a.routing_tokens - a.withdrawn_tokens
        answers = sorted(set(tally.answers))
        label = (f"{pause_ms}, then moved by the round trips (ended at {round((run.pause_s or 0) * 1000)})" if adaptive
                 else pause_ms or "off (routed at the turn end)")
        lines.append(f"| {label} | {rtt_ms} | {'-' if budget is None else f'{100 * budget:g} %'} | {tally.split} of "
                     f"{tally.commands} | {a.sent} | {a.withdrawn} ({by_place['inside']} / {by_place['wake']} / "
                     f"{by_place['gap']}) | {a.held_back} | {a.sent - a.withdrawn} | "
                     f"{1000 * statistics.median(tally.waits_s):.0f} / {1000 * statistics.mean(tally.waits_s):.0f} ms | {tally.acted_early} | "
                     f"{' or '.join(map(str, answers))} | {100 * a.withdrawn_tokens / useful:.1f} % + "
                     f"{100 * a.read_ahead_tokens / useful:.1f} % = {100 * a.extra_share:.1f} % |")
    return lines


async def measure(quick: bool, chunk_ms: int = CHUNK_MS) -> str:
    clips = await corpus(quick)
    lines = [
        f"Microphone chunks of {chunk_ms} ms (the device VAD's, smart-turn's and the provisional rows' verdicts).",
        f"End of turn on {len(clips)} commands (pauses of {', '.join(map(str, PAUSES_MS))} ms after the wake phrase or",
        "inside the command): commands split, end of turn after the end of speech (median), and voice to",
        f"voice at RTT {RTT_MS} ms that follows (server: + 3 RTT; device: + 2 RTT; + {CLIENT_MS} ms of client and",
        "simulator time):",
        "",
        "| method | setting | commands split (at pause " + " / ".join(map(str, PAUSES_MS)) + " ms) | end of turn after speech | voice to voice at RTT 50 | no split and <= 450 ms |",
        "|---|---|---|---|---|---|",
    ]
    for silence_ms in SERVER_MS:
        lines.append(_row("server_vad", f"silence_duration_ms {silence_ms}",
                          [server_turns(c, silence_ms) for c in clips], clips, 3))
    for eagerness in ("high", "auto", "low"):
        silence_ms = _SEMANTIC_SILENCE_MS[eagerness]
        lines.append(_row("semantic_vad (simulated)", f"eagerness {eagerness} (~{silence_ms} ms)",
                          [server_turns(c, silence_ms) for c in clips], clips, 3))
    began = time.process_time()
    flags = [device_speech(c, chunk_ms) for c in clips]
    vad_ms = (time.process_time() - began) * 1000 / sum(map(len, flags))
    for turn_end_ms in DEVICE_MS:
        lines.append(_row("device VAD (END_OF_TURN=device)", f"TURN_END_MS {turn_end_ms}",
                          [device_turns(f, c, turn_end_ms, chunk_ms) for f, c in zip(flags, clips)], clips, 2))
    lines += provisional_rows(flags, clips, chunk_ms)
    model = SmartTurn.load()
    if model is None:
        lines += ["", "smart-turn rows left out: onnxruntime or pipecat-ai is not installed (see this module's doc)."]
        return "\n".join(lines)
    notes = []
    for silence_ms in MODEL_SILENCE_MS:
        probabilities: list[tuple[str, float]] = []
        for threshold in MODEL_THRESHOLDS:
            lines.append(_row("device VAD + smart-turn v3.2", f"after {silence_ms} ms, finished at >= {threshold}, "
                              f"else {MODEL_FALLBACK_MS} ms",
                              [model_turns(f, i, c, model, silence_ms, threshold,
                                           probabilities if threshold == MODEL_THRESHOLDS[0] else [], chunk_ms)
                               for i, (f, c) in enumerate(zip(flags, clips))], clips, 2))
        said = {where: sorted(p for w, p in probabilities if w == where) for where in ("wake", "inside", "gap", "end")}
        notes.append(f"- after {silence_ms} ms: " + "; ".join(
            f"{label} {len(said[where])} consultations, median {statistics.median(said[where]):.2f}, "
            f"highest {max(said[where]):.2f}, {sum(p >= 0.5 for p in said[where])} at >= 0.5, "
            f"{sum(p >= 0.9 for p in said[where])} at >= 0.9"
            for label, where in (("in the pause after the wake phrase", "wake"),
                                 ("in the pause inside the command", "inside"),
                                 ("in a shorter gap between words", "gap"), ("after the command's end", "end"))
            if said[where]))
    cpu = sorted(model.cpu_ms)
    lines += ["", f"The model's probability of a finished turn (the consultations at threshold {MODEL_THRESHOLDS[0]}):", *notes,
              "", f"CPU per decision: the device VAD {vad_ms:.2f} ms per {chunk_ms} ms chunk; smart-turn "
              f"{statistics.median(cpu):.0f} ms per consultation (median, 95th percentile {cpu[int(len(cpu) * 0.95)]:.0f} ms, "
              f"{len(cpu)} consultations, one thread)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.end_of_turn", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two voices, two commands")
    parser.add_argument("--chunk-ms", type=int, default=CHUNK_MS, help="the microphone's chunk size (default %(default)s)")
    args = parser.parse_args(argv)
    print(asyncio.run(measure(args.quick, args.chunk_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
