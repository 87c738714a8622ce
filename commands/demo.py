"""`handoff demo`: the whole assistant, offline, against the built-in simulator.

Scripted utterances go into an in-memory microphone, chatter not addressed to the assistant
included. What is said to it starts with the default wake phrase in flite's voice, which the
shipped wake-word model really hears on this machine (upload mode wake_word: the chatter, in
espeak-ng's voices, never leaves it); without flite the demo says so and runs in speech_only mode,
where the chatter is uploaded and the transcript gate ignores it. The simulator "hears" what is
sent through its VAD and takes its words from its transcript queue. Everything the narrator says goes to a WAV file, and a
readable timeline tells the story.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from audio_io import BYTES_PER_SECOND, PushMicrophone, WavFileSpeaker
from assembly.build import assistant
from commands.checks import output_file_problem
from concurrency.changes import wait_for
from decisions.events import NarrationKind, Narrated, NarrationStarted
from decisions.timeline import Timeline, TimelineEntry
from speech.local_voice import flite_available, flite_speech, synthesize
from config.logging_setup import configure_logging
from config.wake_phrases import DEFAULT_PHRASE
from realtime_sim import SimServer
from config.settings import (
    BrainSettings, ConversationSettings, ListenerSettings, LogLevel, NarratorSettings, RealtimeSettings, Settings,
    UploadMode, UploadSettings,
)

log = logging.getLogger("handoff.demo")

DEFAULT_OUTPUT = Path("handoff-demo.wav")
STEP_TIMEOUT_S = 60.0  # a safety net: each step waits for what the assistant does, not for a time


@dataclass(frozen=True)
class Utterance:
    text: str
    expect: str  # the timeline kind that shows it was handled: ignored | wake | answer
    voice: str = "en-us"
    pause_s: float = 0.0  # quiet before it is said (chatter after an answer waits out the follow-up window)
    notices: int = 0  # expect="notice": how many notices have been said by the end of this step


FOLLOW_UP_S = 3.0  # the demo's follow-up window (6 s by default), so its pauses stay short


DEMO_SCRIPT = (
    Utterance("I think we should paint the kitchen blue.", "ignored", "en-us+f3"),
    Utterance("Hey Jarvis, what time is it?", "answer"),
    Utterance("Did you feed the cat this morning?", "ignored", "en-us+m3", pause_s=FOLLOW_UP_S + 0.5),
    Utterance("Hey Jarvis.", "wake"),
    Utterance("List the files.", "answer"),
    Utterance("Hey Jarvis, read the first two lines of notes.txt", "answer"),
    Utterance("Hey Jarvis, ask the brain why the sky is blue.", "answer"),
    Utterance("Hey Jarvis, start the backup task.", "answer"),
    Utterance("I wonder what's for dinner.", "ignored", "en-us+f5", pause_s=FOLLOW_UP_S + 0.5),
    Utterance("", "notice", notices=1),  # nothing said: wait for the backup to announce itself
    Utterance("Hey Jarvis, list my tasks.", "answer"),
    Utterance("Hey Jarvis, set a timer for two seconds.", "answer"),
    Utterance("", "notice", notices=2),  # "Your two-second timer is done."
    Utterance("Hey Jarvis, echo the demo is complete.", "answer"),
)

# A background task for the demo: archives the demo workspace, slowly enough to be "background".
DEMO_TASKS = """
[tasks.backup]
description = "Archive the workspace folder"
spoken = "the backup"
argv = ["sh", "-c", "sleep 3; tar -cf ../backup.tar . && echo the archive is ready"]
cwd = "workspace"
timeout_s = 60
"""

BRAIN_ANSWER = (
    "The sky looks **blue** because the air scatters short blue wavelengths of sunlight much more "
    "than red ones, so blue light reaches your eyes from every direction."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-wav", type=Path, default=None, help=f"where the narration goes (default {DEFAULT_OUTPUT})")
    parser.add_argument("--log-level", default=None, help="show log lines at this level too (default: timeline only)")
    parser.add_argument("--step-timeout", type=float, default=STEP_TIMEOUT_S, metavar="SECONDS",
                        help=f"give up when one step is not dealt with in this long (default {STEP_TIMEOUT_S:g})")


def print_entry(entry: TimelineEntry) -> None:
    print(f"{entry.at:6.1f}s  {entry.kind:<11} {entry.text}", flush=True)


def demo_workspace(root: Path) -> Path:
    (root / "photos").mkdir()
    (root / "notes.txt").write_text("Call the plumber on Monday.\nBuy a birthday card for Sam.\nBack up the laptop.\n")
    (root / "shopping-list.txt").write_text("eggs\nbread\ncoffee\n")
    return root


def addressed(utterance: Utterance) -> bool:
    return utterance.expect in ("wake", "answer")


async def speech_for(utterance: Utterance, wake_model: bool) -> bytes:
    # What is said to the assistant: flite (the wake model hears it). Chatter: espeak-ng speech, or
    # without it a synthetic voice that still drives the simulator's VAD. Then silence, so the VAD
    # hears the utterance end.
    if wake_model and addressed(utterance):
        said = await flite_speech(utterance.text)
    else:
        said = await synthesize(utterance.text, voice=utterance.voice)
    return said + bytes(BYTES_PER_SECOND * 700 // 1000)


class StepTimedOut(Exception):
    """A step of the demo was not dealt with in time; the message says which."""


async def play_demo(output_wav: Path, printer: Callable[[TimelineEntry], None] = print_entry,
                    step_timeout_s: float = STEP_TIMEOUT_S) -> int:
    with tempfile.TemporaryDirectory(prefix="handoff-demo-") as tmp:
        tmp_path = Path(tmp)
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        demo_workspace(workspace.resolve())
        tasks_config = tmp_path / "tasks.toml"
        tasks_config.write_text(DEMO_TASKS)
        wake_model = flite_available()
        if not wake_model:
            print("flite is not installed (apt-get install flite; ./run installs it), so the demo's voice cannot wake "
                  "the on-device model: running in speech_only mode, where every sentence is uploaded.\n")
        sim = SimServer()
        base_url = await sim.start()
        settings = Settings(
            realtime=RealtimeSettings(api_key="sk-offline-demo", base_url=base_url),
            listener=ListenerSettings(wake_phrase=DEFAULT_PHRASE),
            # flite's voice wakes the two models; the verifier (WAKE_VERIFY, on by default) is trained to
            # judge people's voices and refuses as many of flite's as it hears, so the demo runs without it.
            upload=UploadSettings(mode=UploadMode.ON_DEVICE_WAKE if wake_model else UploadMode.SPEECH_ONLY, wake_verify=False),
            narrator=NarratorSettings(),
            conversation=ConversationSettings(follow_up_s=FOLLOW_UP_S),
            brain=BrainSettings(timeout_s=5.0, retry_budget_s=10.0),
            workspace_root=workspace.resolve(),
            state_dir=tmp_path / "state",
            tasks_config=tasks_config,
        )
        sim.script.push_brain_answer(BRAIN_ANSWER)
        timeline = Timeline(printer=printer)
        microphone = PushMicrophone(chunk_ms=settings.audio.chunk_ms, pace=1.0)
        speaker = WavFileSpeaker(output_wav)
        print(f"simulator on {base_url}; the narration goes to {output_wav}\n")
        timed_out: BaseException | None = None
        kept_home = 0  # chatter the wake model kept on the machine (it never reaches the timeline)
        try:
            async with assistant(settings, microphone, speaker, timeline) as coordinator:
                async with asyncio.TaskGroup() as tg:
                    running = tg.create_task(coordinator.run())
                    await step(wait_for(timeline, lambda t: t.count("listening") >= 1, timeout=step_timeout_s),
                               "the assistant did not start listening", step_timeout_s)
                    for utterance in DEMO_SCRIPT:
                        await step(say(utterance, sim, microphone, timeline, wake_model, step_timeout_s),
                                   f"the assistant did not deal with {utterance.text or 'a notice'!r}", step_timeout_s)
                        kept_home += wake_model and bool(utterance.text) and not addressed(utterance)
                    running.cancel()
        except* StepTimedOut as group:  # raised inside the TaskGroup: it comes wrapped in a group
            timed_out = group.exceptions[0]
        finally:
            await sim.stop()
    if timed_out is not None:
        print(f"handoff demo: {timed_out}", file=sys.stderr)
        return 1
    ignored = timeline.count("ignored") + kept_home
    uploaded = ignored - kept_home  # (speech_only mode: the transcript told them apart)
    where = "none of them left this machine" if not uploaded else f"{uploaded} uploaded, and ignored by their transcript"
    print(f"\ndone: {timeline.count('command')} commands handled, {ignored} sentences not addressed to it overheard "
          f"({where}); narration written to {output_wav}")
    return 0


async def step(waiting: Awaitable[None], what: str, timeout_s: float) -> None:
    try:
        await waiting
    except TimeoutError:
        raise StepTimedOut(f"{what} within {timeout_s:g} s; run with --log-level INFO to see why.") from None


async def say(utterance: Utterance, sim: SimServer, microphone: PushMicrophone, timeline: Timeline,
              wake_model: bool, timeout_s: float = STEP_TIMEOUT_S) -> None:
    """Speak one utterance into the microphone and wait until the assistant has dealt with it."""
    if utterance.pause_s:
        await asyncio.sleep(utterance.pause_s)  # a person pausing: the demo's script, not a wait for state
    before = {kind: timeline.count(kind) for kind in ("ignored", "wake", "narrated", "listening", "notice", "heard")}
    if wake_model and utterance.text and not addressed(utterance):
        # Overheard: the wake model hears no wake phrase, so nothing of it leaves the machine (the
        # simulator never hears it, and no transcript is queued for it).
        microphone.feed(await speech_for(utterance, wake_model))
        await microphone.emitted()
        print(f"{'':7}  {'overheard':<11} {len(utterance.text.split())} words said in the room: not uploaded, "
              "no wake phrase was heard on this machine", flush=True)
        return
    if utterance.text:
        sim.script.push_transcript(utterance.text)
        microphone.feed(await speech_for(utterance, wake_model))

    def handled(t: Timeline) -> bool:
        if utterance.expect == "notice":  # it may already have come, during an earlier pause
            entries = list(t.entries)
            said = [i for i, e in enumerate(entries)
                    if isinstance(e.event, Narrated) and e.event.narration is NarrationKind.NOTICE]
            # Said, and a fresh listener session is ready after it.
            return len(said) >= utterance.notices and any(
                e.kind == "listening" for e in entries[said[utterance.notices - 1] + 1:]
            )
        if utterance.expect == "answer":
            # Narrated, and a fresh listener session is ready for the next command; its words
            # came (a command routed by its audio is answered before them), and what was said is
            # shown once they did: the demo does not end with a command that shows neither.
            entries = list(t.entries)
            early = [i for i, e in enumerate(entries) if isinstance(e.event, NarrationStarted) and e.event.private]
            return (
                t.count("narrated") > before["narrated"]
                and t.count("listening") > before["listening"]
                and t.count("heard") > before["heard"]
                and (not early or any(e.kind == "said" for e in entries[early[-1] + 1:]))
            )
        return t.count(utterance.expect) > before[utterance.expect]

    await wait_for(timeline, handled, timeout=timeout_s)


def run(args: argparse.Namespace) -> int:
    level = (getattr(args, "log_level", None) or "WARNING").upper()
    if level not in LogLevel.__members__:
        print(f"handoff demo: --log-level {level} is not one of {', '.join(LogLevel)}.", file=sys.stderr)
        return 2
    output = getattr(args, "output_wav", None) or DEFAULT_OUTPUT
    problem = output_file_problem(output, "--output-wav")
    if problem:
        print(f"handoff demo: {problem}", file=sys.stderr)
        return 2
    step_timeout = getattr(args, "step_timeout", STEP_TIMEOUT_S)
    if not step_timeout > 0:
        print(f"handoff demo: --step-timeout must be a positive number of seconds, not {step_timeout:g}.", file=sys.stderr)
        return 2
    configure_logging(level)
    return asyncio.run(play_demo(output, step_timeout_s=step_timeout))
