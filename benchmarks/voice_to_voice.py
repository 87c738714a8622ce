"""Voice to voice (issue 20): from the end of a command to the first audio of its answer, against
the simulator behind a network, with the wake heard on the device (a scripted spotter) and the
command routed at its commit by its audio, next to routing after its transcript, in one run.

    .venv/bin/python -m benchmarks.voice_to_voice [--quick] [--trials N] [--chunk-ms MS]

(`python -m benchmarks.voice_loop` prints the same tables after its own.) `--routes provisional,device`
measures only those rows (issue 33: `provisional` routes at a pause of PROVISIONAL_MS inside the
turn and says the answer made ready at the device's turn end; its floor is TURN_END_MS itself). At RTT 50 and 150 ms,
with the input transcript arriving with the commit and 0.8 s after it: voice to voice (median and
worst), the floor (the configured turn-end silence + 2 RTT) and the excess over it, for a
read-only command ("what time is it"); and a table of each stage's offset from the end of speech
(decisions/stages.py, as history keeps them). The end of speech is when the microphone delivered
the command's last voiced chunk; the first audio, when the narrator's first audio reached the
speaker. `--chunk-ms`: the microphone's chunk size (the settings' by default; the command's
speech ends on a chunk boundary at 20 and 40 ms). Printed, never asserted (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from audio_io import BYTES_PER_SECOND, MemorySpeaker, PushMicrophone
from assembly.build import assistant
from concurrency.changes import wait_for
from config.settings import (
    AudioSettings, ConversationSettings, EndOfTurn, ListenerSettings, NarratorSettings, RealtimeSettings, Settings, UploadMode, UploadSettings,
)
from decisions.stages import STAGE_ORDER, Stage
from decisions.timeline import Timeline
from detectors.pipeline import UploadFilter
from reader_agent import SpareState
from realtime_sim import SimConfig, SimServer
from speech.local_voice import tone
from speech.synth import silence
from tests.support.scripted_wake import ScriptedWake, scripted_wake_filter

RTTS_MS = (50, 150)
TRANSCRIPTS = (("with the commit", 0), ("0.8 s after it", 800))
SPEECH = tone([190.0, 230.0, 210.0], 0.3)  # 0.9 s of "speech": the wake phrase and a short command
TURN_SILENCE_MS = 500  # the server's turn end (ListenerSettings.vad_silence_ms)
CHUNK_MS = AudioSettings().chunk_ms  # the microphone's chunk size (--chunk-ms)
DEVICE_TURN_END_MS = ListenerSettings().turn_end_ms  # the device's own (END_OF_TURN=device, the default)
PROVISIONAL_MS = ListenerSettings().provisional_ms  # a pause that routes provisionally (issue 33)
# How each row routes: provisionally at a pause and said at the device's end of turn, at the
# device's end of turn inline, at the server's commit by reference, or after the transcript
# (before issue 20).
ROUTES = (("provisional", f"at a {PROVISIONAL_MS} ms pause, provisionally; said at the device's turn end (issue 33)"),
          ("device", "at the device's end of turn, inline"), ("commit", "at the server's commit, by reference"),
          ("transcript", "after its transcript (before issue 20)"))


class SpeechClockMicrophone(PushMicrophone):
    """Notes when it delivered the last chunk with any sound in it (the end of speech)."""

    def __init__(self, chunk_ms: int = CHUNK_MS, read_ms: int | None = None) -> None:
        super().__init__(chunk_ms=chunk_ms, pace=1.0, read_ms=read_ms)
        self._chunk_s = chunk_ms / 1000
        self.last_voiced_at: float | None = None

    async def chunks(self):  # type: ignore[override]
        async for chunk in super().chunks():
            if any(chunk):  # when it ended in the room (a chunk read with a later one is handed on late)
                assert self.captured_at is not None
                late_s = asyncio.get_running_loop().time() - (self.captured_at + self._chunk_s)
                self.last_voiced_at = time.perf_counter() - late_s
            yield chunk


class FirstPlaySpeaker(MemorySpeaker):
    def __init__(self) -> None:
        super().__init__()
        self.plays: list[float] = []

    def play(self, pcm: bytes) -> None:
        self.plays.append(time.perf_counter())
        super().play(pcm)


@dataclass
class Cell:
    v2v_ms: list[float] = field(default_factory=list)
    stages: list[dict[str, float]] = field(default_factory=list)
    provisional: str = ""  # routes sent at a pause / withdrawn / held back by the token budget (issue 33)


def _sim_config(rtt_ms: float, **extra: object) -> SimConfig:
    """The simulator behind a network (RTT/2 each way, 1 RTT per handshake), answering at once."""
    return SimConfig(network_delay_s=rtt_ms / 2000, upgrade_delay_s=rtt_ms / 1000,
                     **{"audio_frame_delay_s": 0.0, "use_espeak": False, "realistic": False, "seed": 7, **extra})


def _settings(sim: SimServer, root: Path, silence_ms: int, route: str, chunk_ms: int = CHUNK_MS) -> Settings:
    """A warm narrator; tones for speech (the scripted wake hears them); no follow-up window."""
    (root / "workspace").mkdir(parents=True, exist_ok=True)
    base = Settings(
        realtime=RealtimeSettings(api_key="sk-benchmark-0123456789", base_url=sim.base_url),
        narrator=NarratorSettings(warm=True), upload=UploadSettings(mode=UploadMode.CONTINUOUS),
        conversation=ConversationSettings(follow_up_s=0), workspace_root=root / "workspace",
        state_dir=root / "state", tasks_config=None, audio=AudioSettings(chunk_ms=chunk_ms),
    )
    device = route in ("device", "provisional")
    return dataclasses.replace(base, listener=ListenerSettings(
        wake_phrase="computer", vad_silence_ms=silence_ms, route_at_commit=route != "transcript",
        end_of_turn=EndOfTurn.DEVICE if device else EndOfTurn.SERVER, turn_end_ms=DEVICE_TURN_END_MS,
        provisional_ms=PROVISIONAL_MS if route == "provisional" else 0))


@contextlib.asynccontextmanager
async def _running(sim: SimServer, root: Path, silence_ms: int, route: str, chunk_ms: int = CHUNK_MS,
                   read_ms: int | None = None, **changes: object
                   ) -> AsyncIterator[tuple[object, SpeechClockMicrophone, FirstPlaySpeaker, Timeline, ScriptedWake]]:
    """`changes`: settings to change (benchmarks/mcp_routing.py: its MCP servers). `read_ms`: the
    microphone read that much at a time (None: a chunk at a time)."""
    microphone, speaker, timeline, wake = SpeechClockMicrophone(chunk_ms, read_ms), FirstPlaySpeaker(), Timeline(), ScriptedWake()
    settings = dataclasses.replace(_settings(sim, root, silence_ms, route, chunk_ms), **changes)
    turn_end_s = DEVICE_TURN_END_MS / 1000 if route in ("device", "provisional") else None
    mic_filter = scripted_wake_filter(wake, turn_end_s=turn_end_s)
    if route == "provisional":
        mic_filter = UploadFilter(mic_filter.gate, wake, BYTES_PER_SECOND, turn_end_s, pause_s=PROVISIONAL_MS / 1000)  # type: ignore[arg-type]
    async with assistant(settings, microphone, speaker, timeline) as coordinator:
        coordinator.parts = dataclasses.replace(coordinator.parts, mic_filter=mic_filter)
        task = asyncio.create_task(coordinator.run(), name="voice to voice")
        try:
            await wait_for(timeline, lambda t: t.count("listening") >= 1, 30)
            yield coordinator, microphone, speaker, timeline, wake
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def measure_cell(rtt_ms: int, transcript_ms: int, route: str, trials: int, root: Path,
                       silence_ms: int = TURN_SILENCE_MS, chunk_ms: int = CHUNK_MS, read_ms: int | None = None) -> Cell:
    extra = dict(realistic=True, paraphrase_rate=0.0, transcription_delay_ms=(transcript_ms, transcript_ms)) \
        if transcript_ms else {}
    cell = Cell()
    async with SimServer(_sim_config(rtt_ms, **extra)) as sim:
        async with _running(sim, root, silence_ms, route, chunk_ms, read_ms) as (coordinator, microphone, speaker, timeline, wake):
            for _ in range(trials):
                running = (coordinator, microphone, speaker, timeline, wake)
                cell.v2v_ms.append(await one_command(sim, running, "Computer, what time is it", ("get_time", {})))
                cell.stages.append(dict(coordinator.core.stage_log[-1]))
                # Wait out the transcript of a route by audio, so the next command starts clean.
                await wait_for(timeline, lambda t: t.count("confirmed") + t.count("heard") > 0, 30)
            a = coordinator.core.pause_point.account
            cell.provisional = f"{a.sent} / {a.withdrawn} / {a.held_back}"
    return cell


async def one_command(sim: SimServer, running: tuple, transcript: str, call: tuple[str, dict], timeout: float = 30) -> float:
    """Say one command (woken on the device) that the listener routes to `call`: its voice to
    voice, in ms, once it is answered and a fresh listener session is ready."""
    coordinator, microphone, speaker, timeline, wake = running
    before = {k: timeline.count(k) for k in ("narrated", "listening")}
    # Commands come seconds apart: the narrator's spare is ready by then.
    await coordinator.parts.narrator.wait_spare(SpareState.READY, 30)
    await asyncio.sleep(0.2)
    sim.script.push_transcript(transcript)
    sim.script.push_tool_call(*call)
    wake.wake_next()
    plays = len(speaker.plays)
    microphone.feed(silence(600) + SPEECH + silence(1500))
    await wait_for(timeline, lambda t: t.count("narrated") > before["narrated"]
                   and t.count("listening") > before["listening"], timeout)
    await microphone.emitted()
    assert microphone.last_voiced_at is not None
    return (speaker.plays[plays] - microphone.last_voiced_at) * 1000


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def measure(quick: bool, trials: int, routes: tuple[str, ...] = tuple(r for r, _ in ROUTES),
                  chunk_ms: int = CHUNK_MS, read_ms: int | None = None) -> str:
    rtts = (50,) if quick else RTTS_MS
    read = f" read {read_ms} ms at a time" if read_ms else ""
    lines = [
        f"Voice to voice: end of speech -> first answer audio, read-only command (get_time), warm narrator, {chunk_ms} ms mic chunks{read},",
        f"turn end {TURN_SILENCE_MS} ms of silence (server VAD) or {DEVICE_TURN_END_MS} ms (the device's VAD), floor = that turn",
        f"end + 2 RTT (routed provisionally: the turn end alone); median and worst of {trials}:",
        "",
        "| RTT ms | transcript arrives | routed | voice to voice, median | worst | floor | median - floor | worst - floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    stage_rows: list[str] = []
    accounts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="voice-to-voice-") as folder:
        for rtt in rtts:
            for label, transcript_ms in TRANSCRIPTS:
                for route, how in ROUTES:
                    if route not in routes:
                        continue
                    cell = await measure_cell(rtt, transcript_ms, route, trials, Path(folder) / f"{rtt}-{transcript_ms}-{route}",
                                              chunk_ms=chunk_ms, read_ms=read_ms)
                    floor = ({"device": DEVICE_TURN_END_MS + 2 * rtt, "provisional": DEVICE_TURN_END_MS}.get(route)
                             or TURN_SILENCE_MS + 2 * rtt)
                    median, worst = _median(cell.v2v_ms), max(cell.v2v_ms)
                    lines.append(f"| {rtt} | {label} | {how} | {median:.0f} ms | {worst:.0f} ms | {floor} ms | "
                                 f"{median - floor:+.0f} ms | {worst - floor:+.0f} ms |")
                    offsets = [
                        f"{_median([s[stage.value] * 1000 for s in cell.stages if stage.value in s]):.0f}"
                        if any(stage.value in s for s in cell.stages) else "-"
                        for stage in STAGE_ORDER if stage is not Stage.END_OF_SPEECH
                    ]
                    stage_rows.append(f"| {rtt} | {label} | {route} | "
                                      + " | ".join(offsets) + " |")
                    if route == "provisional":
                        accounts.append(f"RTT {rtt}, transcript {label}: {cell.provisional}")
    names = [stage.value.replace("_", " ") for stage in STAGE_ORDER if stage is not Stage.END_OF_SPEECH]
    lines += [
        "",
        "Each stage, ms after the end of speech as the listener marks it (speech_stopped's arrival minus the",
        "turn-end silence), median (history and `handoff status` keep the same offsets):",
        "",
        "| RTT ms | transcript arrives | routed | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
        *stage_rows,
    ]
    if accounts:
        lines += ["", "Provisional routes sent / withdrawn / pauses held back by the token budget, per cell: "
                  + "; ".join(accounts)]
    return "\n".join(lines)


def quick_or_full(argv: list[str] | None, module: str, doc: str, run, trials: int, routes: bool = False,
                  chunk: bool = False) -> int:
    """The command line these voice benchmarks share: `--quick` (RTT 50 only, two trials) or
    `--trials N`; prints what `run(quick, trials)` measured. `routes`: `--routes a,b` too;
    `chunk`: `--chunk-ms MS` too."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="RTT 50 only, two trials")
    parser.add_argument("--trials", type=int, default=None, help=f"commands per cell (default {trials}; 2 with --quick)")
    if routes:
        parser.add_argument("--routes", default=",".join(r for r, _ in ROUTES), help="the rows to measure, comma-separated")
    if chunk:
        parser.add_argument("--chunk-ms", type=int, default=CHUNK_MS, help="the microphone's chunk size (default %(default)s)")
        parser.add_argument("--read-ms", type=int, default=None, help="the microphone read this much at a time (default: a chunk)")
    args = parser.parse_args(argv)
    chosen = {"routes": tuple(args.routes.split(","))} if routes else {}
    chosen |= {"chunk_ms": args.chunk_ms, "read_ms": args.read_ms} if chunk else {}
    print(asyncio.run(run(args.quick, args.trials or (2 if args.quick else trials), **chosen)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return quick_or_full(argv, "benchmarks.voice_to_voice", __doc__, measure, 7, routes=True, chunk=True)


if __name__ == "__main__":
    sys.exit(main())
