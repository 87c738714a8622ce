"""The whole assistant in each upload mode: commands routed, what went up, and handoff's CPU.

Where benchmarks/listener_upload.py measures the detectors and the gate alone, this runs the
assistant as `handoff run` builds it (assembly.build.assistant) against the simulator, with a
PushMicrophone fed the corpus's addressed utterances (espeak-ng, benchmarks/corpus.py) in
CONTINUOUS and SPEECH_ONLY modes: the same utterances, the same scripted transcripts, in one run.
Each utterance is followed by a few seconds of a quiet room (a microphone's hiss under all of it)
and is answered before the next one starts.

The simulator runs in a child process, so this process's CPU time (time.process_time) is
handoff's: the detectors, the uplink's base64 and WebSocket frames, routing and narration.

Printed per mode: commands routed; base64 KB per minute of microphone audio; input_audio_buffer.append
frames sent (up to 200 ms each: chunks back to back go together); handoff's CPU in % of one core (process time / wall time over the run;
at --pace 1 the wall clock is the audio's); each also as a ratio to CONTINUOUS.

Figures are printed, never asserted. Run: .venv/bin/python -m benchmarks.listener_upload_pipeline [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import multiprocessing
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, AsyncIterator, NamedTuple

from audio_io import MemorySpeaker, PushMicrophone, QuietReads
from benchmarks.corpus import (
    DEFAULT_CACHE, NOISE_FLOOR_RMS, RATE, WIDTH, Clip, Corpus, Noise, UtteranceSpec, audioop, scale_to_rms, standard,
)
from benchmarks.listener_upload import MIC_HISS_RMS
from benchmarks.spawned import spawned
from benchmarks import listening_baselines as baselines
from benchmarks.listening_baselines import BASELINES, FRESH_PROCESS_BASELINES
from assembly.build import assistant
from concurrency.changes import wait_for
from config.settings import UploadMode
from decisions.timeline import Timeline
from realtime_sim import SimConfig, SimServer
from tests.support.pipeline_harness import fast_settings

MODES = (UploadMode.CONTINUOUS, UploadMode.SPEECH_ONLY)
PART_BREAK = " ... "  # how the corpus joins the parts of an utterance said with a pause
ANSWER_TIMEOUT_S = 20.0  # after an utterance has been played: long enough for any answer to come


# --- the simulator, out of this process --------------------------------------------------------


def _serve_sim(conn: Connection) -> None:
    asyncio.run(_sim_main(conn))


async def _sim_main(conn: Connection) -> None:
    sim = SimServer(SimConfig(seed=12))
    conn.send(await sim.start())
    loop = asyncio.get_running_loop()
    try:
        while (request := await loop.run_in_executor(None, conn.recv)) is not None:
            method, args = request
            conn.send(_SIM_CALLS[method](sim, *args))
    finally:
        await sim.stop()


def _push(sim: SimServer, transcripts: list[str], tool_calls: int) -> None:
    for text in transcripts:
        sim.script.push_transcript(text)
    for _ in range(tool_calls):
        sim.script.push_tool_call("get_time", {})


def _drain(sim: SimServer) -> int:
    """Drops what an utterance left unused (a segment never heard): it must not speak for the next one."""
    left = 0
    while sim.script.take_transcript() is not None or sim.script.take_tool_call() is not None:
        left += 1
    return left


def _uploaded_audio(sim: SimServer) -> tuple[int, float]:
    """(append frames, seconds of audio they carried) the listener sessions received."""
    appends = [e for c in sim.connections if c.role == "listener" for e in c.received
               if e["type"] == "input_audio_buffer.append"]
    return len(appends), sum(len(base64.b64decode(e["audio"])) for e in appends) / (RATE * WIDTH)


def _uploaded(sim: SimServer) -> tuple[int, int]:
    """(append frames, base64 characters) the listener sessions received."""
    appends = [e for c in sim.connections if c.role == "listener" for e in c.received
               if e["type"] == "input_audio_buffer.append"]
    return len(appends), sum(len(e["audio"]) for e in appends)


_SIM_CALLS = {"push": _push, "drain": _drain, "uploaded": _uploaded, "uploaded_audio": _uploaded_audio}


class SimProcess:
    """The simulator in a child process; `call` runs one of _SIM_CALLS there and returns its answer."""

    def __enter__(self) -> "SimProcess":
        with contextlib.ExitStack() as stack:
            self._conn = stack.enter_context(spawned(_serve_sim, stop=None, name="simulator"))
            self.base_url: str = self._conn.recv()  # (a child that dies first: EOFError, and it is reaped)
            self._stack = stack.pop_all()
        return self

    def call(self, method: str, *args: Any) -> Any:
        self._conn.send((method, args))
        return self._conn.recv()

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()


# --- one mode ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModeResult:
    mode: UploadMode
    utterances: int
    routed: frozenset[int]  # indexes of the utterances routed to a tool (the wake gate passed them)
    answered: frozenset[int]  # ... and answered (narrated, and the listener back)
    appends: int
    wire_bytes: int  # base64, as input_audio_buffer.append carries it
    audio_s: float  # microphone audio over the run (the mic runs on while answers are awaited)
    cpu_s: float
    wall_s: float

    @property
    def kb_per_min(self) -> float:
        return self.wire_bytes / 1000 / (self.audio_s / 60)

    @property
    def cpu_percent(self) -> float:
        return 100 * self.cpu_s / self.wall_s


def room_stream(clip: Clip, quiet_s: float, hiss: bytes) -> bytes:
    """The utterance, then a quiet room, with the microphone's hiss under both."""
    pcm = clip.pcm + bytes(int(quiet_s * RATE) * WIDTH)
    return audioop.add(pcm, (hiss * (len(pcm) // len(hiss) + 1))[: len(pcm)], WIDTH)


async def run_mode(mode: UploadMode, clips: list[Clip], streams: list[bytes], pace: float, folder: Path) -> ModeResult:
    (folder / "workspace").mkdir(parents=True)
    with SimProcess() as sim:
        settings = fast_settings(sim.base_url, (folder / "workspace").resolve(), folder / "state", upload_mode=mode)
        timeline = Timeline()
        microphone = PushMicrophone(chunk_ms=settings.audio.chunk_ms, pace=pace)
        async with assistant(settings, microphone, MemorySpeaker(), timeline) as coordinator:
            task = asyncio.create_task(coordinator.run(), name="handoff under benchmark")
            try:
                await wait_for(timeline, lambda t: t.count("listening") >= 1, 60)
                cpu, wall = time.process_time(), time.perf_counter()
                routed, answered = set(), set()
                for index, (clip, stream) in enumerate(zip(clips, streams)):
                    sim.call("push", clip.text.split(PART_BREAK), 1)
                    before = {kind: timeline.count(kind) for kind in ("command", "narrated", "listening")}
                    microphone.feed(stream)
                    await microphone.emitted()
                    with contextlib.suppress(TimeoutError):  # not heard: counted as not answered
                        await wait_for(timeline, lambda t: all(t.count(k) > n for k, n in before.items()), ANSWER_TIMEOUT_S)
                        answered.add(index)
                    if timeline.count("command") > before["command"]:
                        routed.add(index)
                    sim.call("drain")
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        appends, wire_bytes = sim.call("uploaded")
    return ModeResult(mode, len(clips), frozenset(routed), frozenset(answered), appends, wire_bytes, wall * pace, cpu, wall)


# --- what listening costs (issue 34) ----------------------------------------------------------


LISTEN_COMMANDS = ("hey jarvis, what time is it", "hey jarvis, list the files", "hey jarvis, tell me a joke")


def talking_room(corpus: Corpus, seconds: float, hiss: bytes) -> tuple[bytes, list[tuple[int, str]]]:
    """`seconds` of a room where people talk about a third of the time (everyday sentences, every
    voice family), with three "hey jarvis" commands spread over it: (pcm, [(byte offset, text)])."""
    from benchmarks.corpus import ordinary_specs

    chatter = corpus.clips(ordinary_specs(40))
    commands = [corpus.utterance(UtteranceSpec((text,), "flite:slt", 165, True)) for text in LISTEN_COMMANDS]
    pcm, placed, i = bytearray(), [], 0
    total = int(seconds * RATE) * WIDTH
    every = total // (len(commands) + 1)
    while len(pcm) < total:
        if len(placed) < len(commands) and len(pcm) >= every * (len(placed) + 1):
            placed.append((len(pcm), commands[len(placed)].text))
            pcm += commands[len(placed) - 1].pcm + bytes(6 * RATE * WIDTH)  # room for the answer
            continue
        clip = chatter[i % len(chatter)]
        i += 1
        pcm += clip.pcm + bytes(int(clip.seconds * 1.2 * RATE) * WIDTH)  # a third of the time talk (clips carry 1.3 s of silence)
    pcm = bytes(pcm[:total])
    return audioop.add(pcm, (hiss * (len(pcm) // len(hiss) + 1))[: len(pcm)], WIDTH), placed


class Listening(NamedTuple):
    cpu: float  # handoff's CPU, % of a core
    narrated: int  # commands answered
    frames: int  # append frames the listener sessions received
    audio_s: float  # seconds of audio they carried (what was muted or buffered depends on timing)
    cancelled: int = 0  # microphone chunks the echo canceller ran on (its cost, free of the machine's load)
    lags: dict[str, list[float]] | None = None  # when the microphone's chunks reached the assistant (`HandOnLag`)


class HandOnLag:
    """How long after its capture ended each chunk was handed on (loop time), in ms: a chunk with a
    sound in it (RMS at or over `AudioSettings.quiet_rms`), the first such chunk after a second of
    quiet (an onset: a wake phrase's or a command's first sound), and the quiet ones. Each chunk
    is only noted while the room plays (the RMS afterwards: the CPU measured stays handoff's)."""

    def __init__(self, microphone: PushMicrophone, chunk_s: float, rms: int) -> None:
        self._seen: list[tuple[float, float | None, bytes]] = []
        self._chunk_s, self._rms = chunk_s, rms
        chunks, seen = microphone.chunks, self._seen

        async def timed() -> AsyncIterator[bytes]:
            time = asyncio.get_running_loop().time
            async for chunk in chunks():
                seen.append((time(), microphone.captured_at, chunk))
                yield chunk

        microphone.chunks = timed  # type: ignore[method-assign]

    def lags(self) -> dict[str, list[float]]:
        """{"loud": [...], "onsets": [...], "quiet": [...]}, ms."""
        out: dict[str, list[float]] = {"loud": [], "onsets": [], "quiet": []}
        quiet_s = 0.0
        for handed_on, captured_at, chunk in self._seen:
            lag = 1000 * (handed_on - (captured_at or handed_on) - self._chunk_s)
            if audioop.rms(chunk, WIDTH) < self._rms:
                out["quiet"].append(lag)
                quiet_s += self._chunk_s
                continue
            out["loud"].append(lag)
            if quiet_s >= 1.0:
                out["onsets"].append(lag)
            quiet_s = 0.0
        return out

    @staticmethod
    def summary(lags: list[float]) -> str:
        return f"{statistics.median(lags):.0f} / {max(lags):.0f}" if lags else "-"


# What issue 34 asks of the whole assistant, % of a core (printed beside each row).
TARGETS = {"silent": 1.0, "talking": 2.0}


async def listening_cost(pcm: bytes, commands: int, chunk_ms: int, folder: Path, strict: bool = False,
                         read_ms: int | None = None) -> Listening:
    """handoff's CPU (% of a core) while the room is played at real speed in wake_word mode, how
    many commands were answered, and what went up. `strict`: WAKE_STRICT=true. `read_ms`: the microphone is read
    that much at a time, in chunks of `chunk_ms` (None: a chunk at a time)."""
    (folder / "workspace").mkdir(parents=True)
    with SimProcess() as sim:
        settings = fast_settings(sim.base_url, (folder / "workspace").resolve(), folder / "state",
                                 upload_mode=UploadMode.ON_DEVICE_WAKE, wake_phrase="hey jarvis")
        settings = dataclasses.replace(settings, audio=dataclasses.replace(settings.audio, chunk_ms=chunk_ms, read_ms=read_ms or chunk_ms),
                                       upload=dataclasses.replace(settings.upload, wake_strict=strict))
        for text in LISTEN_COMMANDS[:commands]:
            sim.call("push", [text], 1)
        timeline = Timeline()
        microphone = baselines.MICROPHONE(chunk_ms=chunk_ms, pace=1.0, read_ms=read_ms, quiet=QuietReads.of(settings.audio))
        lag = HandOnLag(microphone, chunk_ms / 1000, settings.audio.quiet_rms)
        async with assistant(settings, microphone, MemorySpeaker(), timeline) as coordinator:
            task = asyncio.create_task(coordinator.run(), name="handoff under benchmark")
            try:
                await wait_for(timeline, lambda t: t.count("listening") >= 1, 60)
                cpu, wall = time.process_time(), time.perf_counter()
                microphone.feed(pcm)
                await microphone.emitted()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            cancelled = coordinator.canceller.frames if coordinator.canceller is not None else 0
        frames, audio_s = sim.call("uploaded_audio")
    return Listening(100 * cpu / wall, timeline.count("narrated"), frames, audio_s, cancelled, lag.lags())


def _cost_in_child(conn: Connection, pcm: bytes, commands: int, chunk_ms: int, folder: str, read_ms: int | None) -> None:
    conn.send(asyncio.run(listening_cost(pcm, commands, chunk_ms, Path(folder), read_ms=read_ms)))


def cost_in_fresh_process(pcm: bytes, commands: int, chunk_ms: int, folder: Path, read_ms: int | None,
                          environment: dict[str, str]) -> Listening:
    """`listening_cost` in a new interpreter whose environment has `environment` added."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        child = context.Process(target=_cost_in_child, args=(send, pcm, commands, chunk_ms, str(folder), read_ms))
        child.start()
        send.close()  # the child's alone: a child that dies unheard ends the read below (EOFError), see spawned
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        return receive.recv()
    finally:
        child.join()


def chunk_sizes(spec: str) -> tuple[tuple[int, int | None], ...]:
    """`--chunks`: "20,40,20/40" -> ((20, None), (40, None), (20, 40)): chunk ms, read ms."""
    sizes = []
    for item in spec.split(","):
        chunk, _, read = item.partition("/")
        sizes.append((int(chunk), int(read) if read else None))
    return tuple(sizes)


def listening_table(corpus: Corpus, seconds: float, hiss: bytes, chunks: tuple[tuple[int, int | None], ...] = ((20, None), (40, None)),
                    strict: bool = False, baseline: str = "issue34", floor: bytes = b"", also: str | None = None) -> list[str]:
    """`strict`: also now with WAKE_STRICT=true (two more columns). `baseline`: a key of BASELINES.
    `chunks`: (chunk ms, read ms or None) per row. `floor`: also a silent room of this noise (looped).
    `also`: a second key of BASELINES, measured between the baseline and now (two more columns)."""
    fresh = FRESH_PROCESS_BASELINES.get(baseline)
    label_before, before_detectors = (fresh[0], contextlib.nullcontext) if fresh else BASELINES[baseline]
    silent = _looped(hiss, seconds)
    talking, placed = talking_room(corpus, seconds, hiss)
    rooms = [("silent (a microphone's hiss)", silent, 0)] + ([("silent (a -60 dBFS pink floor)", _looped(floor, seconds), 0)] if floor else [])
    extra = (" WAKE_STRICT=true | ratio | narrated |" if strict else "") + (f" {BASELINES[also][0]} | ratio of now to it |" if also else "")
    lines = [f"| room | microphone chunk | target | handoff CPU % of a core, {label_before} | now | ratio "
             f"| answers narrated (before / now) | append frames (before / now) | audio uploaded, s (before / now) "
             f"| chunks the canceller ran on (before / now) | hand-on lag ms, median / max: chunks with a sound (before; now) "
             f"| onsets after 1 s of quiet (before; now) | quiet chunks (before; now) |" + extra,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if strict else "") + ("---|---|" if also else "")]
    with tempfile.TemporaryDirectory(prefix="handoff-listen-") as tmp:
        for number, (room, pcm, commands) in enumerate(rooms + [(f"talking a third of the time, {len(placed)} commands", talking, len(placed))]):
            for chunk_ms, read_ms in chunks:
                name = f"{chunk_ms}-{read_ms}-{number}"
                if fresh:
                    old = cost_in_fresh_process(pcm, commands, chunk_ms, Path(tmp) / f"b{name}", read_ms, fresh[1])
                    new = cost_in_fresh_process(pcm, commands, chunk_ms, Path(tmp) / name, read_ms, {})
                else:
                    with before_detectors():
                        old = asyncio.run(listening_cost(pcm, commands, chunk_ms, Path(tmp) / f"b{name}", read_ms=read_ms))
                    if also:
                        with BASELINES[also][1]():
                            second = asyncio.run(listening_cost(pcm, commands, chunk_ms, Path(tmp) / f"a{name}", read_ms=read_ms))
                    new = asyncio.run(listening_cost(pcm, commands, chunk_ms, Path(tmp) / name, read_ms=read_ms))
                label = f"{chunk_ms} ms" + (f", read {read_ms} ms at a time" if read_ms else "")
                target = TARGETS["talking" if commands else "silent"]
                line = (f"| {room}, {seconds:g} s | {label} | <= {target:.2f} | {old.cpu:.2f} | {new.cpu:.2f} | {new.cpu / old.cpu:.2f} "
                        f"| {old.narrated} / {new.narrated} | {old.frames} / {new.frames} "
                        f"| {old.audio_s:.2f} / {new.audio_s:.2f} | {old.cancelled} / {new.cancelled} |")
                if old.lags is not None and new.lags is not None:
                    line += "".join(f" {HandOnLag.summary(old.lags[kind])}; {HandOnLag.summary(new.lags[kind])} |"
                                    for kind in ("loud", "onsets", "quiet"))
                if strict:
                    strict_run = asyncio.run(listening_cost(pcm, commands, chunk_ms, Path(tmp) / f"s{name}", True, read_ms))
                    line += f" {strict_run.cpu:.2f} | {strict_run.cpu / old.cpu:.2f} | {strict_run.narrated} |"
                if also and not fresh:
                    line += f" {second.cpu:.2f} | {new.cpu / second.cpu:.2f} |"
                lines.append(line)
    return lines


def _looped(noise: bytes, seconds: float) -> bytes:
    return (noise * (int(seconds * RATE * WIDTH) // len(noise) + 1))[: int(seconds * RATE) * WIDTH]


# --- the run -----------------------------------------------------------------------------------


def table(results: list[ModeResult]) -> list[str]:
    base = results[0]
    lines = [
        "| mode | commands routed | answered | KB/min (base64) | ratio | frames sent | ratio | handoff CPU % of a core | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.mode.value} | {len(r.routed)}/{r.utterances} | {len(r.answered)}/{r.utterances} "
            f"| {r.kb_per_min:.1f} | {r.kb_per_min / base.kb_per_min:.3f} | {r.appends} | {r.appends / base.appends:.3f} "
            f"| {r.cpu_percent:.1f} | {r.cpu_percent / base.cpu_percent:.2f} |"
        )
    return lines


async def measure(clips: list[Clip], streams: list[bytes], pace: float) -> list[ModeResult]:
    with tempfile.TemporaryDirectory(prefix="handoff-bench-") as tmp:
        return [await run_mode(mode, clips, streams, pace, Path(tmp) / mode.value) for mode in MODES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="six utterances at four times real speed (a smoke test)")
    parser.add_argument("--pace", type=float, default=None, help="microphone speed, 1 = real time (default 1, quick 4)")
    parser.add_argument("--quiet", type=float, default=None, help="seconds of quiet room after each utterance (default 4, quick 2)")
    parser.add_argument("--utterances", type=int, default=None, help="use the first N (default all 48, quick 6)")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--listening", type=float, default=0, metavar="S",
                        help="only what listening costs in wake_word mode: S seconds of a silent and of a talking room, "
                             "each microphone chunk of --chunks, the detectors before issue 34's cuts and now")
    parser.add_argument("--chunks", default="20,40", help="microphone chunks in ms for --listening (default 20,40); "
                        "20/40: 20 ms chunks read 40 ms at a time")
    parser.add_argument("--strict", action="store_true", help="--listening: also with WAKE_STRICT=true, in the same run")
    parser.add_argument("--floor", action="store_true", help="--listening: also a silent room of a -60 dBFS pink floor (where the quiet path works)")
    parser.add_argument("--baseline", choices=sorted(BASELINES | FRESH_PROCESS_BASELINES), default="issue34",
                        help="--listening: the detectors measured beside today's (default issue34: before issue 34's cuts)")
    parser.add_argument("--also", choices=sorted(BASELINES), default=None,
                        help="--listening: a second baseline in the same run (say session17 beside --baseline session16)")
    args = parser.parse_args(argv)
    if args.listening:
        corpus = Corpus(args.cache)
        hiss = scale_to_rms(corpus.noise(Noise.FAN, 30.0, seed=1), MIC_HISS_RMS)
        chunks = chunk_sizes(args.chunks)
        floor = scale_to_rms(corpus.noise(Noise.FAN, 120.0, seed=7), NOISE_FLOOR_RMS) if args.floor else b""
        print("\n".join(listening_table(corpus, args.listening, hiss, chunks, args.strict, args.baseline, floor, args.also)))
        return 0
    pace = args.pace or (4.0 if args.quick else 1.0)
    quiet_s = args.quiet if args.quiet is not None else (2.0 if args.quick else 4.0)
    corpus = Corpus(args.cache)
    clips = standard(corpus, small=args.quick)[0][: args.utterances]
    hiss = scale_to_rms(corpus.noise(Noise.FAN, 30.0, seed=1), MIC_HISS_RMS)
    streams = [room_stream(clip, quiet_s, hiss) for clip in clips]
    results = asyncio.run(measure(clips, streams, pace))

    speech_s = sum(c.seconds for c in clips)
    print(f"The whole assistant against the simulator: {len(clips)} addressed utterances ({speech_s:.0f} s), each "
          f"followed by {quiet_s:g} s of a quiet room, microphone at {pace:g}x real time; ratios are to continuous")
    print("\n".join(table(results)))
    missed = sorted(results[0].routed - results[1].routed)
    print(f"routed in continuous but not in speech_only: {[clips[i].text for i in missed] or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
