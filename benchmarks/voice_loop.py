"""The voice loop's latency and losses over a simulated network, warm paths against cold.

    .venv/bin/python -m benchmarks.voice_loop [--quick] [--narrations N]

The simulator delays every WebSocket frame by RTT/2 each way and each handshake by one RTT
(`SimConfig.network_delay_s`, `upgrade_delay_s`); its model answers at once (synthetic voice),
so what is measured is the client's own waiting. Prints, each next to the same figure with
`NARRATOR_WARM=false`, measured in the same run:

1. tool result ready -> first narrator audio at the speaker, at RTT 0, 50 and 150 ms (median and
   max over the narrations), as a multiple of RTT;
2. WebSocket connections opened per command, and how many of them the user waited for (a
   narrator that connected after the result was ready; a listener opened after the answer's
   mute ended, while nobody listened);
3. speech lost by a command that starts 0/50/150/300/600 ms after the narration's audio ended
   (real-time microphone and speaker, production settings: whatever the coordinator does now);
4. `handoff run --input-wav F --fast` with 60 spoken commands back to back (espeak-ng): commands
   routed, and utterances committed whole;
5. the same on a loaded machine, next to the quiet figure: with two CPU hogs running beside it
   (busy processes this benchmark starts and stops), and with a server that runs 1 s behind the
   client (every frame delayed 1 s each way: what a starved simulator or server does to the client).

Figures are printed, never asserted (the machine is shared). Times are ratios or multiples of the
RTT; absolute times only at RTT 0.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from audio_io import MemorySpeaker, PushMicrophone
from assembly.build import assistant
from audio_io import open_audio
from concurrency.changes import Changes, wait_for
from config.settings import (
    AudioSettings, ConversationSettings, ListenerSettings, NarratorSettings, RealtimeSettings, Settings, UploadMode,
    UploadSettings,
)
from decisions.timeline import Timeline
from reader_agent import Narrator, SpareState
from realtime_api.link import make_client
from realtime_sim import SimConfig, SimServer
from speech.local_voice import tone
from speech.synth import SpeechSynthesizer, silence
from benchmarks import voice_to_voice

RTTS_MS = (0, 50, 150)
OFFSETS_MS = (0, 50, 150, 300, 600)
SCRIPT = "It's five past three in the afternoon."
COMMAND = "Computer, what time is it"
# The probe: 0.6 s of "speech", then silence long enough for the VAD to end it.
PROBE = tone([190.0, 230.0, 210.0], 0.2) + silence(900)
_QUICK_SIM = dict(audio_frame_delay_s=0.0, use_espeak=False, realistic=False, seed=7)


def sim_config(rtt_ms: float, **extra: Any) -> SimConfig:
    return SimConfig(network_delay_s=rtt_ms / 2000, upgrade_delay_s=rtt_ms / 1000, **{**_QUICK_SIM, **extra})


def settings_for(sim: SimServer, root: Path, warm: bool, **audio: Any) -> Settings:
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    return Settings(
        realtime=RealtimeSettings(api_key="sk-benchmark-0123456789", base_url=sim.base_url),
        listener=ListenerSettings(wake_phrase="computer"),  # what COMMAND says
        narrator=NarratorSettings(warm=warm),
        audio=AudioSettings(**audio),
        # The probes are tones (the simulator's VAD hears them; the on-device VAD would not call
        # them speech), and a probe after an answer must stay overheard (no follow-up window).
        upload=UploadSettings(mode=UploadMode.CONTINUOUS),
        conversation=ConversationSettings(follow_up_s=0),
        workspace_root=workspace,
        state_dir=root / "state",
        tasks_config=None,
    )


def mode(warm: bool) -> str:
    return "warm" if warm else "cold (NARRATOR_WARM=false)"


# --------------------------------------------------------------------------- 1. result -> audio


class FirstAudioSpeaker(MemorySpeaker):
    """Notes when the first audio of a narration reached it."""

    def __init__(self) -> None:
        super().__init__()
        self.first_at: float | None = None

    def play(self, pcm: bytes) -> None:
        if self.first_at is None:
            self.first_at = time.perf_counter()
        super().play(pcm)


def _server_time(sim: SimServer) -> float:
    """How long the simulator itself took in the last narration: from handling its
    `response.create` to sending the first audio (network delay excluded)."""
    used = [c for c in sim.connections if any(e["type"] == "response.create" for e in c.received)][-1]
    created = next(at for at, e in zip(used.received_at, used.received) if e["type"] == "response.create")
    first = next(at for at, e in zip(used.sent_at, used.sent) if e["type"] == "response.output_audio.delta")
    return first - sim.config.network_delay_s - created


async def result_to_audio(rtt_ms: float, warm: bool, narrations: int, root: Path) -> list[tuple[float, float]]:
    """Per narration: seconds from 'the script is ready' to its first audio at the speaker, and
    of those, the seconds the client waited (the simulator's own time to first audio taken off)."""
    async with SimServer(sim_config(rtt_ms)) as sim:
        client = make_client(settings_for(sim, root, warm).realtime)
        try:
            async with Narrator(settings_for(sim, root, warm), client) as narrator:
                waits = []
                for _ in range(narrations):
                    if warm:  # answers come seconds apart: the replacement is ready by then
                        await narrator.wait_spare(SpareState.READY, 30)
                    speaker = FirstAudioSpeaker()
                    await speaker.start()
                    ready = time.perf_counter()
                    result = await narrator.narrate(SCRIPT, speaker)
                    if not result.ok or speaker.first_at is None:
                        raise RuntimeError(f"a benchmark narration failed: {result.error}")
                    total = speaker.first_at - ready
                    waits.append((total, total - _server_time(sim)))
                return waits
        finally:
            await client.close()


# --------------------------------------------------------------------------- 2 + 3. the loop


class WatchedSpeaker(MemorySpeaker):
    """A real-time speaker that tells when the coordinator starts waiting for playback to end,
    and when that end is (perf_counter time)."""

    def __init__(self) -> None:
        super().__init__(pace=1.0)
        self.changes = Changes()
        self.ends: list[float] = []

    async def drained(self) -> None:
        remaining = self._timeline.end - self.audio_time()
        if remaining > 0:
            self.ends.append(time.perf_counter() + remaining)
            self.changes.notify()
        await super().drained()


@dataclass
class LoopRun:
    lost_ms: dict[int, list[float]] = field(default_factory=dict)


def _nonzero_samples(pcm: bytes) -> int:
    samples = array("h")
    samples.frombytes(pcm)
    return sum(1 for s in samples if s)


PROBE_SAMPLES = _nonzero_samples(PROBE)


def _appended_nonzero(sim: SimServer, since: float) -> int:
    total = 0
    for connection in sim.connections:
        for at, event in zip(connection.received_at, connection.received):
            if at >= since and event["type"] == "input_audio_buffer.append":
                total += _nonzero_samples(base64.b64decode(event["audio"]))
    return total


def _critical_connections(sim: SimServer, narrator: Narrator, mutes: list[tuple[str, float, float]]) -> int:
    """Connections the user waited for: narrator cold starts, and the listener sessions the
    microphone switched to after an answer that were opened only after its mute ended (nobody
    listened until they were configured). A session opened then for a later command (the warm
    one, while that command's tool runs) is not waited for."""
    ends = [end for holder, _start, end in mutes if holder == "narration"]
    first_audio = {}
    for c in sim.connections:
        if c.role == "listener":
            appends = [at for at, e in zip(c.received_at, c.received) if e["type"] == "input_audio_buffer.append"]
            if appends:
                first_audio[c.id] = (appends[0], c.opened_at)
    late = 0
    for end in ends:
        after = sorted(v for v in first_audio.values() if v[0] >= end)  # the session the mic went to next
        if after and after[0][1] >= end:
            late += 1
    return narrator.cold_starts + late


@contextlib.asynccontextmanager
async def running_assistant(sim: SimServer, root: Path, warm: bool) -> AsyncIterator[tuple[Any, PushMicrophone, WatchedSpeaker, Timeline]]:
    microphone = PushMicrophone(chunk_ms=20, pace=1.0)
    speaker = WatchedSpeaker()
    timeline = Timeline()
    async with assistant(settings_for(sim, root, warm), microphone, speaker, timeline) as coordinator:
        task = asyncio.create_task(coordinator.run(), name="benchmark coordinator")
        try:
            await wait_for(timeline, lambda t: t.count("listening") >= 1, 30)
            yield coordinator, microphone, speaker, timeline
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def voice_loop(warm: bool, offsets: tuple[int, ...], trials: int, root: Path) -> LoopRun:
    run = LoopRun()
    async with SimServer(sim_config(0)) as sim:
        async with running_assistant(sim, root, warm) as (coordinator, microphone, speaker, timeline):
            for offset in offsets:
                for _ in range(trials):
                    heard = timeline.count("heard") + timeline.count("ignored")
                    listening = timeline.count("listening")
                    ends = len(speaker.ends)
                    sim.script.push_transcript(COMMAND)
                    microphone.feed(PROBE)
                    await speaker.changes.wait_until(lambda: len(speaker.ends) > ends, 30)
                    sim.script.push_transcript("and that was the news")  # the probe: overheard, ignored
                    await asyncio.sleep(max(0.0, speaker.ends[-1] + offset / 1000 - time.perf_counter()))
                    fed = time.monotonic()
                    microphone.feed(PROBE)
                    await wait_for(timeline, lambda t: t.count("listening") > listening, 30)
                    try:  # a probe cut to nothing is never committed, so it may never be heard
                        await wait_for(timeline, lambda t: t.count("heard") + t.count("ignored") >= heard + 2, 5)
                    except TimeoutError:
                        pass
                    await microphone.emitted()
                    got = _appended_nonzero(sim, fed)
                    run.lost_ms.setdefault(offset, []).append(max(0, PROBE_SAMPLES - got) / 24)
    return run


# --------------------------------------------------------------------------- 4. --fast WAV


@dataclass
class FastRun:
    routed: int
    committed: int
    whole: int
    connections: int
    critical: int
    seconds: float = 0.0  # the run, from the assistant's start to its exit


async def spoken_commands(count: int) -> tuple[bytes, float]:
    """`count` commands, back to back with 0.8 s between them, in five voices; and the shortest."""
    voices = ("en-us", "en-us+f3", "en-us+m3", "en-us+f5", "en")
    clips = []
    for voice in voices:
        synth = SpeechSynthesizer(voice=voice, words_per_minute=170)
        try:
            clips.append(await synth.synthesize(COMMAND))
        finally:
            synth.close()
    pcm = b"".join(clips[i % len(clips)] + silence(800) for i in range(count))
    return pcm, min(len(c) for c in clips) / 48


@contextlib.contextmanager
def cpu_hogs(count: int):
    """`count` processes that only burn CPU, for as long as the block runs."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


async def fast_wav(warm: bool, count: int, root: Path, server_late_s: float = 0.0) -> FastRun:
    pcm, shortest_ms = await spoken_commands(count)
    root.mkdir(parents=True, exist_ok=True)
    wav = root / "commands.wav"
    with wave.open(str(wav), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(24000)
        writer.writeframes(pcm)
    config = dataclasses.replace(sim_config(0), fallback_transcript=COMMAND, network_delay_s=server_late_s)
    async with SimServer(config) as sim:
        settings = settings_for(sim, root, warm, input_wav=wav, output_wav=root / "out.wav", realtime_wav_input=False)
        if server_late_s:
            settings = dataclasses.replace(settings, realtime=dataclasses.replace(settings.realtime, connect_timeout_s=30.0))
        microphone, speaker = open_audio(settings.audio)  # as `handoff run` does
        started = time.perf_counter()
        async with assistant(settings, microphone, speaker) as coordinator:
            await coordinator.run()
            seconds = time.perf_counter() - started
            critical = _critical_connections(sim, coordinator.parts.narrator, list(coordinator.core.mute.history))
    segments = committed_segments(sim)
    whole = sum(length >= 0.85 * shortest_ms for length in segments)
    return FastRun(routed_commands(sim), len(segments), whole, len(sim.connections), critical, seconds)


def routed_commands(sim: SimServer) -> int:
    """Tool results the assistant returned: one per command routed."""
    return sum(
        1 for c in sim.connections for e in c.received
        if e["type"] == "conversation.item.create" and e["item"]["type"] == "function_call_output"
    )  # fmt: skip


def committed_segments(sim: SimServer) -> list[int]:
    """The length (ms) of every speech segment the simulator's VAD ended, in every session."""
    lengths = []
    for connection in sim.connections:
        start = None
        for event in connection.sent:
            if event["type"] == "input_audio_buffer.speech_started":
                start = event["audio_start_ms"]
            elif event["type"] == "input_audio_buffer.speech_stopped" and start is not None:
                lengths.append(event["audio_end_ms"] - start)
                start = None
    return lengths


# --------------------------------------------------------------------------- the report


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


async def measure(quick: bool, narrations: int) -> str:
    """Every table of this benchmark (a test runs each section on its own, side by side)."""
    parts = [await latency_section(quick, narrations), await lost_section(quick), await fast_section(quick)]
    return "\n".join(parts)


async def latency_section(quick: bool, narrations: int) -> str:
    rtts = (0, 50) if quick else RTTS_MS
    lines = [
        "Tool result ready -> first narrator audio at the speaker:",
        "",
        f"(over {narrations} narrations; 'waiting' leaves out the simulator's own time from",
        "`response.create` to its first audio, measured per narration from its timestamps)",
        "",
        "| RTT ms | narrator | all, median | waiting, median | waiting, max | waiting, median x RTT | waiting, max x RTT | warm / cold (waiting, median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="voice-loop-") as folder:
        root = Path(folder)
        for rtt in rtts:
            medians = {}
            for warm in (True, False):
                measured = await result_to_audio(rtt, warm, narrations, root / f"latency-{rtt}-{warm}")
                total = statistics.median(t for t, _ in measured)
                waiting = [w for _, w in measured]
                median, worst = statistics.median(waiting), max(waiting)
                medians[warm] = median
                times = f"{median / (rtt / 1000):.2f} | {worst / (rtt / 1000):.2f}" if rtt else "- | -"
                ratio = _ratio(medians[True], median) if not warm else ""
                lines.append(
                    f"| {rtt} | {mode(warm)} | {total * 1000:.1f} ms | {median * 1000:.1f} ms | {worst * 1000:.1f} ms | "
                    f"{times} | {ratio} |"
                )
    return "\n".join(lines)


async def lost_section(quick: bool) -> str:
    offsets = (0,) if quick else OFFSETS_MS
    trials = 1 if quick else 3
    lines = [
        "",
        "Speech lost by a command that starts after the answer's audio ended (real-time microphone",
        f"and speaker, production settings; median of {trials}):",
        "",
        "| narrator | " + " | ".join(f"+{o} ms" for o in offsets) + " |",
        "|---|" + "---|" * len(offsets),
    ]
    with tempfile.TemporaryDirectory(prefix="voice-loop-") as folder:
        for warm in (True, False):
            run = await voice_loop(warm, offsets, trials, Path(folder) / f"loop-{warm}")
            lost = " | ".join(f"{statistics.median(run.lost_ms[o]):.0f} ms" for o in offsets)
            lines.append(f"| {mode(warm)} | {lost} |")
    return "\n".join(lines)


async def fast_section(quick: bool) -> str:
    commands = 3 if quick else 60
    late_commands = 1 if quick else 10
    lines = [
        "",
        f"`handoff run --input-wav F --fast`, {commands} spoken commands back to back: commands routed,",
        "utterances committed (whole: at least 85 % of the shortest command), WebSocket connections",
        "per routed command and those the user waited for (a narrator connected after the result",
        "was ready; a listener opened after the answer's mute ended):",
        "",
        "| narrator | routed | segments committed | committed whole | connections / command | waited for / command |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="voice-loop-") as folder:
        root = Path(folder)
        runs = {warm: await fast_wav(warm, commands, root / f"fast-{warm}") for warm in (True, False)}
        for warm, fast in runs.items():
            per = max(1, fast.routed)
            lines.append(
                f"| {mode(warm)} | {fast.routed} of {commands} | {fast.committed} | {fast.whole} | "
                f"{fast.connections / per:.2f} | {fast.critical / per:.2f} |"
            )
        quiet = runs[True]
        lines += [
            "",
            f"The same `--fast` run (warm narrator) on a loaded machine, next to the quiet one: {commands}",
            f"commands with two CPU hogs beside it; {late_commands} with the server 1 s behind (frames",
            "delayed both ways). A busy machine may cost time, never commands:",
            "",
            "| machine | routed | committed whole | time x quiet |",
            "|---|---|---|---|",
            f"| quiet | {quiet.routed} of {commands} | {quiet.whole} | 1.00 |",
        ]
        with cpu_hogs(2):
            loaded = await fast_wav(True, commands, root / "fast-hogs")
        lines.append(f"| two CPU hogs | {loaded.routed} of {commands} | {loaded.whole} | {_ratio(loaded.seconds, quiet.seconds)} |")
        late = await fast_wav(True, late_commands, root / "fast-late", server_late_s=1.0)
        lines.append(f"| server 1 s behind | {late.routed} of {late_commands} | {late.whole} | "
                     f"{_ratio(late.seconds / late_commands, quiet.seconds / commands)} per command |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.voice_loop", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few narrations and commands (a test runs this)")
    parser.add_argument("--narrations", type=int, default=None, help="narrations per RTT and mode (default 12; 2 with --quick)")
    args = parser.parse_args(argv)
    narrations = args.narrations or (2 if args.quick else 12)
    print(asyncio.run(measure(args.quick, narrations)))
    print()  # then voice to voice (issue 20), its own module
    print(asyncio.run(voice_to_voice.measure(args.quick, 2 if args.quick else 7)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
