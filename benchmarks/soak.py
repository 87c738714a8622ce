"""A simulated week: the whole assistant, in one process, against the simulator, with faults.

    .venv/bin/python -m benchmarks.soak [--commands 10000] [--expiries 168] [--seed N] [--quick]

The clock is compressed, not faked: the code under test takes its timeouts, backoffs and session
caps from settings (`compressed_settings`: milliseconds where production has seconds), the
microphone runs many times faster than real time and the speaker plays without pacing. Seeded
random faults of every kind the simulator injects strike connections (drops, 1011, expiry,
401-free handshake failures 429/500, server errors, failed responses, stalls, malformed frames),
transcripts arrive late, the brain answers 429 or too slowly, background tasks finish while
commands are being answered, and `--expiries` listener sessions expire on schedule.

Every figure is counted from events as they happen (an observer on the timeline, the asyncio
exception handler), never from the bounded timeline. Prints one table:

- commands answered or given a spoken error (goal 100 %), duplicate tool runs (0), overlapping
  voices (0), notices lost or doubled (0), crashes (0);
- RSS, open fds and asyncio tasks at the start, the middle and the end (flat);
- wall time and commands a second.

`--quick` (120 commands) is the small run `tests/benchmarks/test_soak.py` asserts the goal figures on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from audio_io import CountingSpeaker, PushMicrophone
from assembly.build import assistant
from concurrency.changes import Changes
from config.settings import (
    BrainSettings, ConversationSettings, ListenerSettings, NarratorSettings, RealtimeSettings, ReconnectSettings,
    Settings, UploadMode, UploadSettings,
)
from decisions.events import ListenerLost, LossCause, Narrated, ToolRan
from decisions.timeline import Timeline, TimelineEntry, TimelineKind
from realtime_sim import Fault, SimConfig, SimServer
from speech.local_voice import tone

COMMAND = "Computer, what time is it"
BRAIN_COMMAND = "Computer, ask the brain why the sky is blue"
TASK_COMMAND = "Computer, start the backup task"
# 0.6 s of "speech", then enough silence (at the compressed VAD's 300 ms) to end the utterance.
UTTERANCE = tone([190.0, 230.0, 210.0], 0.2) + bytes(2 * 24000 * 400 // 1000)
TASKS_TOML = """
[tasks.backup]
description = "Copy the documents"
spoken = "the backup"
argv = ["sh", "-c", "sleep 0.05; echo copied 3 files"]
cwd = "."
timeout_s = 30
"""
ANSWER_KINDS = ("answer", "fallback", "error")  # a narrated answer, the model's text, or a spoken apology
COMMAND_TIMEOUT_S = 30.0  # wall time a command may take before it counts as unanswered


@dataclass(frozen=True)
class SoakPlan:
    commands: int = 10_000
    expiries: int = 168
    seed: int = 1
    fault_rate: float = 0.3  # share of new connections that get one random fault
    brain_share: float = 0.1  # commands that ask the brain (with its own faults)
    task_share: float = 0.05  # commands that start a background task (a notice follows)
    mic_pace: float = 20.0  # audio time over wall time at the microphone


QUICK = SoakPlan(commands=120, expiries=4)


def compressed_settings(base_url: str, root: Path) -> Settings:
    """Production settings with every wait scaled down (seconds -> milliseconds)."""
    workspace = root / "workspace"
    workspace.mkdir(exist_ok=True)
    tasks = root / "tasks.toml"
    tasks.write_text(TASKS_TOML)
    return Settings(
        realtime=RealtimeSettings(api_key="sk-test-key-0123456789", base_url=base_url, connect_timeout_s=2.0),
        listener=ListenerSettings(vad_silence_ms=300, route_timeout_s=3.0, wake_window_s=0.5, recycle_after_s=60.0,
                                  retire_wait_s=0.3, wake_phrase="computer"),
        narrator=NarratorSettings(response_timeout_s=3.0, warm=True, warm_max_age_s=60.0),
        brain=BrainSettings(timeout_s=0.1, retry_budget_s=0.4, backoff_initial_s=0.005, backoff_max_s=0.01),
        reconnect=ReconnectSettings(initial_s=0.005, max_s=0.03, jitter_s=0.005, healthy_after_s=0.3),
        conversation=ConversationSettings(follow_up_s=0.3, working_sound_after_s=0.05, still_working_after_s=0.4),
        upload=UploadSettings(mode=UploadMode.CONTINUOUS),  # tones: the on-device VAD would call them no speech
        workspace_root=workspace.resolve(),
        state_dir=root / "state",
        tasks_config=tasks,
    )


def sim_config(plan: SoakPlan) -> SimConfig:
    return SimConfig(
        seed=plan.seed,
        fault_rate=plan.fault_rate,
        random_fault_delay_s=0.05,
        fallback_transcript=COMMAND,  # a segment replayed after a drop says a command again, as speech would
        audio_chunk_ms=1000,
        audio_frame_delay_s=0.0,
        use_espeak=False,
        synthetic_ms_per_char=5.0,
        record_events=False,
        realistic=True,
        transcription_delay_ms=(5, 60),  # slow transcripts: completed after other events
        shutdown_timeout_s=1.0,
    )


# --------------------------------------------------------------------------- counting


@dataclass
class Counts:
    """Everything the table reports, counted from events as they happen."""

    answers: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    tools: int = 0
    tasks_started: int = 0
    notices_said: int = 0  # task outcomes in the notices queued to be said
    notices_heard: int = 0  # ... and in those narrated
    _saying: int = 0  # task outcomes in the notice being said
    narrating: int = 0  # narrations under way (more than one at once is an overlap)
    overlaps: int = 0
    heard: int = 0  # commands the listener heard
    unprompted: int = 0  # notices and connection messages said (nobody asked for them)
    expiries: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    def observe(self, entry: TimelineEntry) -> None:
        match entry.kind:
            case TimelineKind.NARRATING:
                self.narrating += 1
                if self.narrating > 1:
                    self.overlaps += 1
            case TimelineKind.NARRATED:
                self.narrating -= 1
                assert isinstance(entry.event, Narrated)
                kind = entry.event.narration.value
                self.by_kind[kind] += 1
                if kind == "notice":
                    self.notices_heard += self._saying
                    self._saying = 0
                if kind in ("notice", "status"):
                    self.unprompted += 1
                if kind in ANSWER_KINDS:
                    self.answers += 1
            case TimelineKind.HEARD:
                self.heard += 1
            case TimelineKind.TOOL:
                self.tools += 1
                if isinstance(entry.event, ToolRan) and entry.event.name == "start_task":
                    self.tasks_started += 1
            case TimelineKind.NOTICE:
                self._saying = len(re.findall(r"\bbackup (?:finished|failed|was)", entry.text))
                self.notices_said += self._saying
            case TimelineKind.RESTARTING if isinstance(entry.event, ListenerLost) and entry.event.cause is LossCause.EXPIRED:
                self.expiries += 1
            case TimelineKind.ERROR:
                self.errors[re.sub(r"\d+", "N", entry.text)[:70]] += 1


@dataclass(frozen=True)
class Sample:
    commands: int
    rss_kb: int
    fds: int
    tasks: int


def sample(commands: int) -> Sample:
    with open("/proc/self/statm") as statm:
        rss_pages = int(statm.read().split()[1])
    return Sample(commands, rss_pages * os.sysconf("SC_PAGE_SIZE") // 1024, len(os.listdir("/proc/self/fd")),
                  len(asyncio.all_tasks()))


@dataclass
class SoakReport:
    plan: SoakPlan
    commands: int = 0
    answered: int = 0
    unanswered: int = 0
    answered_twice: int = 0
    duplicate_tools: int = 0
    tasks_started: int = 0
    notices_said: int = 0
    overlaps: int = 0
    crashes: list[str] = field(default_factory=list)
    expiries: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    brain_faults: Counter[str] = field(default_factory=Counter)
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    narrated: Counter[str] = field(default_factory=Counter)
    repeated: int = 0  # commands said again after an unprompted message talked over them
    notice_waits_timed_out: int = 0  # the user waited 10 s for a task's notice in vain
    latencies: list[float] = field(default_factory=list)  # wall seconds from speaking to the answer
    memory_growth: list[str] = field(default_factory=list)  # --trace-memory: the lines that grew most

    @property
    def notices_lost(self) -> int:
        return max(0, self.tasks_started - self.notices_said)

    @property
    def notices_doubled(self) -> int:
        return max(0, self.notices_said - self.tasks_started)

    @property
    def goals_met(self) -> bool:
        return (self.answered == self.commands and not self.answered_twice and not self.duplicate_tools
                and not self.overlaps and not self.notice_waits_timed_out and not self.notices_lost and not self.notices_doubled and not self.crashes
                and self.expiries >= self.plan.expiries)

    def latency_line(self) -> str:
        if not self.latencies:
            return "-"
        ordered = sorted(self.latencies)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return f"{statistics.median(ordered) * 1000:.0f} / {p99 * 1000:.0f} / {ordered[-1] * 1000:.0f} ms"

    def table(self) -> str:
        pct = 100.0 * self.answered / self.commands if self.commands else 0.0
        rows = [
            ("commands answered or given a spoken error", f"{self.answered} of {self.commands} ({pct:.2f} %)", "100 %"),
            ("answered more than once", str(self.answered_twice), "0"),
            ("said again: a notice or connection message started as the user spoke", str(self.repeated), "-"),
            ("duplicate tool runs", str(self.duplicate_tools), "0"),
            ("overlapping voices", str(self.overlaps), "0"),
            ("notices lost / doubled", f"{self.notices_lost} / {self.notices_doubled} (of {self.tasks_started} tasks; "
             f"{self.notice_waits_timed_out} waited for in vain)", "0 / 0"),
            ("crashes", str(len(self.crashes)), "0"),
            ("listener sessions expired", f"{self.expiries}", f">= {self.plan.expiries}"),
            ("wall time from speaking to the answer, median / 99th percentile / max", self.latency_line(), "-"),
            ("wall time", f"{self.wall_s:.0f} s ({self.commands / self.wall_s if self.wall_s else 0:.2f} commands/s)", "< 1800 s for 10,000"),
        ]
        lines = ["| figure | measured | goal |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
        lines += ["", "| at command | RSS | open fds | asyncio tasks |", "|---|---|---|---|"]
        lines += [f"| {s.commands} | {s.rss_kb / 1024:.1f} MB | {s.fds} | {s.tasks} |" for s in self.samples]
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        brain = ", ".join(f"{k} {v}" for k, v in sorted(self.brain_faults.items()))
        lines += ["", f"faults struck: {faults or 'none'}", f"brain faults: {brain or 'none'}",
                  "narrated: " + ", ".join(f"{k} {v}" for k, v in sorted(self.narrated.items()))]
        return "\n".join(lines)


# --------------------------------------------------------------------------- the run


async def run_soak(plan: SoakPlan, root: Path, progress: bool = False) -> SoakReport:
    rng = random.Random(plan.seed)
    report = SoakReport(plan)
    counts = Counts()
    changes = Changes()
    loop = asyncio.get_running_loop()
    previous_handler = loop.get_exception_handler()

    def on_loop_error(_loop: asyncio.AbstractEventLoop, context: dict) -> None:
        report.crashes.append(str(context.get("exception") or context.get("message")))
        changes.notify()

    loop.set_exception_handler(on_loop_error)
    sim = SimServer(sim_config(plan))
    await sim.start()
    settings = compressed_settings(sim.base_url, root)
    timeline = Timeline(keep=50)
    timeline.on_add.append(counts.observe)
    timeline.on_add.append(lambda _entry: changes.notify())
    microphone = PushMicrophone(chunk_ms=20, pace=plan.mic_pace)
    # Paced as the microphone is: "narrated" comes once the answer has been heard, as from a real
    # speaker (unpaced, the next command was spoken over the answer's echo and gated as echo).
    speaker = CountingSpeaker(pace=plan.mic_pace)
    expire_every = max(1, plan.commands // plan.expiries) if plan.expiries else 0
    started = time.monotonic()
    halfway: tracemalloc.Snapshot | None = None
    try:
        async with assistant(settings, microphone, speaker, timeline) as coordinator, contextlib.AsyncExitStack() as stack:
            task = asyncio.create_task(coordinator.run(), name="assistant under soak")
            task.add_done_callback(lambda _t: changes.notify())
            stack.callback(task.cancel)  # whatever ends the run (before the assistant is closed)
            await changes.wait_until(lambda: timeline.count(TimelineKind.LISTENING) >= 1 or task.done(), 20)
            report.samples.append(sample(0))
            for n in range(plan.commands):
                if task.done():
                    report.crashes.append(stopped(coordinator, task))
                    break
                if expire_every and n % expire_every == expire_every // 2:
                    kind = "session_expired" if n % (2 * expire_every) else "session_expired_no_code"
                    sim.script.push_fault(Fault(kind, target="listener", after_sent="session.updated"))
                text = COMMAND
                draw = rng.random()
                if draw < plan.brain_share:
                    text = BRAIN_COMMAND
                    trouble = rng.random()
                    if trouble < 0.3:
                        sim.script.push_brain_error(429)
                        report.brain_faults["429 then answer"] += 1
                    elif trouble < 0.45:
                        for _ in range(8):  # every attempt slower than the timeout: a spoken apology
                            sim.script.push_brain_delay(0.3)
                        report.brain_faults["timeouts"] += 1
                elif draw < plan.brain_share + plan.task_share:
                    text = TASK_COMMAND
                # The user waits for the news of a task they started before speaking again: the
                # notice's mute would drop their words (a command spoken at 20x is over in 50 ms).
                try:
                    await changes.wait_until(lambda: counts.notices_heard >= counts.tasks_started or task.done(), 10)
                except TimeoutError:
                    report.notice_waits_timed_out += 1
                tools = counts.tools
                sim.script.push_transcript(text)
                microphone.feed(UTTERANCE)
                asked = time.monotonic()
                try:
                    async with asyncio.timeout(COMMAND_TIMEOUT_S):
                        await answer_or_repeat(counts, changes, task, microphone, report)
                except TimeoutError:
                    report.unanswered += 1
                    if progress:
                        print(f"  command {n} ({text!r}) not answered in {COMMAND_TIMEOUT_S:g} s; the timeline's end:",
                              *(f"    {e.at:9.3f} {e.kind.value}: {e.text[:150]}" for e in timeline.entries),
                              sep="\n", file=sys.stderr, flush=True)
                        print("    " + diagnosis(coordinator), file=sys.stderr, flush=True)
                report.latencies.append(time.monotonic() - asked)
                report.commands += 1
                report.duplicate_tools += max(0, counts.tools - tools - 1)
                if n + 1 == plan.commands // 2:
                    report.samples.append(sample(n + 1))
                    if tracemalloc.is_tracing():
                        halfway = tracemalloc.take_snapshot()
                if progress and (n + 1) % 100 == 0:
                    rate = (n + 1) / (time.monotonic() - started)
                    now = sample(n + 1)
                    print(f"  {n + 1} commands, {rate:.2f}/s, answers {counts.answers}, RSS {now.rss_kb / 1024:.1f} MB, "
                          f"fds {now.fds}, tasks {now.tasks}", file=sys.stderr, flush=True)
            # Let the last notices and answers land, then count.
            with contextlib.suppress(TimeoutError):
                await changes.wait_until(
                    lambda: counts.notices_heard >= counts.tasks_started and counts.narrating == 0
                    and coordinator.phase.value == "listening", 10)
            report.samples.append(sample(report.commands))
            if tracemalloc.is_tracing() and halfway is not None:
                growth = tracemalloc.take_snapshot().compare_to(halfway, "lineno")
                report.memory_growth = [str(stat) for stat in growth[:15]]
            if task.done() and not report.crashes:
                report.crashes.append(stopped(coordinator, task))
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    finally:
        report.wall_s = time.monotonic() - started
        await sim.stop()
        report.faults = sim.faults_struck
        loop.set_exception_handler(previous_handler)
    report.answered = min(counts.answers, report.commands)
    report.answered_twice = max(0, counts.answers - report.commands)
    report.tasks_started = counts.tasks_started
    report.notices_said = counts.notices_heard
    report.overlaps = counts.overlaps
    report.expiries = counts.expiries
    report.narrated = counts.by_kind
    return report


def stopped(coordinator, task: asyncio.Task) -> str:
    """Why the assistant stopped on its own (a crash, for the soak)."""
    if task.cancelled():
        return "the assistant was cancelled"
    why = coordinator.fatal_message or task.exception() or f"exit code {task.result()}"
    return f"the assistant stopped: {why!r}"


async def answer_or_repeat(counts: Counts, changes: Changes, task: asyncio.Task, microphone: PushMicrophone,
                           report: SoakReport) -> None:
    """Wait for the command's answer. A notice or a connection message that starts just as the
    user speaks (before the server has heard the speech begin) mutes the microphone over their
    words, which at 20x are over in 50 ms: when one was said and the command was still not
    heard a second later, the user says it again, as a person would. Counted, not hidden."""
    answers, heard, unprompted = counts.answers, counts.heard, counts.unprompted
    while True:
        await changes.wait_until(
            lambda: counts.answers > answers or task.done() or (counts.unprompted > unprompted and counts.heard == heard))
        if counts.answers > answers or task.done():
            return
        unprompted = counts.unprompted
        try:
            await changes.wait_until(lambda: counts.heard > heard or counts.answers > answers, 1.0)
        except TimeoutError:
            report.repeated += 1
            microphone.feed(UTTERANCE)  # its transcript is still queued: no segment took it


def diagnosis(coordinator) -> str:
    """The coordinator's state, for a command that got no answer (private fields: a debugging aid)."""
    core = coordinator.core
    listener = coordinator.listener._core
    lc = (f"speaking={listener.speaking} awaiting={listener.awaiting_transcripts} unheard={listener.unheard_starts} "
          f"in_flight={listener.in_flight!r}") if listener is not None else "no listener core"
    notices = coordinator.parts.notices
    return (f"machines: {dict((k.__name__, v.value) for k, v in core.machines.states.items())}; quiet={core._listener_quiet} "
            f"pending={list(core._pending)} narrations={len(core._narrations)} idle={core.idle(core._clock())}; "
            f"listener: {lc}; uplink: {core.uplink.stats}, waiting={not core.uplink.empty}; "
            f"a notice waiting: {notices.next_batch() is not None if notices else '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=10_000)
    parser.add_argument("--expiries", type=int, default=168)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK.commands} commands, {QUICK.expiries} expiries (the test's run)")
    parser.add_argument("--trace-memory", action="store_true",
                        help="trace allocations (slow) and print what grew between the middle and the end")
    args = parser.parse_args(argv)
    if args.trace_memory:
        tracemalloc.start(4)
    logging.getLogger().addHandler(logging.NullHandler())  # the product's warnings are the faults we inject
    plan = dataclasses.replace(QUICK, seed=args.seed) if args.quick else SoakPlan(args.commands, args.expiries, args.seed)
    with tempfile.TemporaryDirectory(prefix="handoff-soak-") as root:
        report = asyncio.run(run_soak(plan, Path(root), progress=not args.quick))
    print(f"simulated week: {plan.commands} commands, {plan.expiries} expiries, seed {plan.seed}, fault rate {plan.fault_rate}")
    print(report.table())
    if report.memory_growth:
        print("grew most between the middle and the end:", *report.memory_growth, sep="\n  ")
    if report.crashes:
        print("crashes:", *report.crashes[:10], sep="\n  ")
    return 0 if report.goals_met else 1


if __name__ == "__main__":
    sys.exit(main())
