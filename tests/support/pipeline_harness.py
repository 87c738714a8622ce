"""Runs the whole assistant against the simulator, with an in-memory microphone and speaker.

Utterances are short voiced tones (the simulator's VAD only needs energy; what they "say" comes
from its transcript queue), paced a few times faster than real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from audio_io import MemorySpeaker, PushMicrophone
from assembly.build import assistant
from concurrency.changes import wait_for
from decisions.timeline import Timeline
from handoff import Coordinator
from realtime_api.fatal import ErrorKind, classify
from speech.local_voice import tone
from realtime_sim import SimServer
from config.settings import (
    BrainSettings,
    ConversationSettings,
    CostSettings,
    ListenerSettings,
    NarratorSettings,
    RealtimeSettings,
    ReconnectSettings,
    Settings,
    StopSettings,
    UploadMode,
    UploadSettings,
)

# 0.6 s of "speech", then enough silence for the VAD to end the utterance.
UTTERANCE = tone([190.0, 230.0, 210.0], 0.2) + bytes(2 * 24000 * 400 // 1000)
MIC_PACE = 4.0  # audio time runs four times faster than the wall clock
# How long a wait for the timeline may take before the test fails: a bound on a hang, not a
# speed target (a green run never waits it out). 20 s failed a dozen tests on a machine loaded
# ten times over (session 17); the test's own timeout (pyproject, 120 s) is the last word.
WAIT_S = 45.0


def fast_settings(
    base_url: str,
    workspace: Path,
    state_dir: Path,
    tasks_config: Path | None = None,
    connect_timeout_s: float = 5.0,
    healthy_after_s: float = 0.5,
    upload_mode: UploadMode = UploadMode.CONTINUOUS,
    conversation: ConversationSettings = ConversationSettings(),
    cost: CostSettings = CostSettings(),
    narrator_warm: bool = False,
    stop_while_talking: bool = False,
    mcp_config: Path | None = None,
    mcp_routing: str = "auto",
    **listener: object,
) -> Settings:
    """Millisecond timeouts. The narrator starts cold unless `narrator_warm`: most tests script
    what the *first* connection meets, and a warm narrator would race the listener for it."""
    return Settings(
        realtime=RealtimeSettings(api_key="sk-test-key-0123456789", base_url=base_url, connect_timeout_s=connect_timeout_s),
        listener=dataclasses.replace(ListenerSettings(vad_silence_ms=300, wake_phrase="computer"), **listener),
        narrator=NarratorSettings(response_timeout_s=10.0, warm=narrator_warm),
        # (1 s: scripted brain delays of 0.2-0.4 s timed out beside two CPU hogs at 0.5 s)
        brain=BrainSettings(timeout_s=1.0, retry_budget_s=3.0, backoff_initial_s=0.01, backoff_max_s=0.02),
        reconnect=ReconnectSettings(initial_s=0.01, max_s=0.05, jitter_s=0.01, healthy_after_s=healthy_after_s),
        # The tests speak in tones (the simulator's VAD hears energy); the on-device VAD would
        # rightly call a tone no speech. tests/pipeline/test_pipeline_upload.py speaks words.
        upload=UploadSettings(mode=upload_mode),
        conversation=conversation,
        cost=cost,
        # The acoustic stop detector (pocketsphinx) only where a test asks for it: it costs CPU
        # during every narration.
        stop=StopSettings(enabled=stop_while_talking),
        workspace_root=workspace,
        state_dir=state_dir,
        tasks_config=tasks_config,
        mcp_config=mcp_config,
        mcp_routing=mcp_routing,
    )


def narrated_scripts(p: "Pipeline") -> list[str]:
    """Every script the narrator was given, in order."""
    return [e.text for e in p.timeline.entries if e.kind == "narrating"]


@dataclass
class Pipeline:
    sim: SimServer
    coordinator: Coordinator
    microphone: PushMicrophone
    speaker: MemorySpeaker
    timeline: Timeline
    settings: Settings
    task: asyncio.Task = field(repr=False)

    def say(self, transcript: str, audio: bytes = UTTERANCE) -> None:
        """Speak: the VAD hears `audio`, the transcript says what it was."""
        self.sim.script.push_transcript(transcript)
        self.microphone.feed(audio)

    async def wait(self, predicate, timeout: float = WAIT_S) -> None:
        """Await a state of the timeline; on a timeout, the error carries the timeline's last lines
        (a CI run beside CPU hogs keeps no log, and the failure must tell its own story)."""
        try:
            await wait_for(self.timeline, predicate, timeout)
        except TimeoutError:
            story = "\n".join(f"  {e.at:.3f} {e.kind}: {e.text}" for e in list(self.timeline.entries)[-40:])
            raise TimeoutError(f"the timeline after {timeout} s:\n{story}") from None

    async def answered(self, before: dict[str, int], timeout: float = WAIT_S) -> None:
        """Narrated, and a fresh listener session is ready again."""
        await self.wait(
            lambda t: t.count("narrated") > before["narrated"] and t.count("listening") > before["listening"], timeout
        )

    async def ask(self, transcript: str, timeout: float = WAIT_S) -> dict[str, int]:
        """Say `transcript` and wait until it is answered; returns the counts from before."""
        before = self.counts()
        self.say(transcript)
        await self.answered(before, timeout)
        return before

    def counts(self) -> dict[str, int]:
        return {k: self.timeline.count(k) for k in ("narrated", "listening", "tool", "ignored", "wake", "command", "heard", "error")}

    def listener_connections(self):
        return [c for c in self.sim.connections if c.role == "listener"]

    def narrator_connections(self):
        return [c for c in self.sim.connections if c.role == "narrator"]


def narrated_similarity(line: str) -> float:
    """The similarity in a `narrated` timeline line: "answer (similarity 0.95, attempts 1)"."""
    found = re.search(r"similarity (\d\.\d\d)", line)
    assert found, line
    return float(found.group(1))


# Error events the simulator may send in a healthy run: those the tests inject on purpose.
INJECTED_ERRORS = frozenset(
    {"server_error", "session_expired", "insufficient_quota", "credit_balance_exhausted", "invalid_api_key", "model_not_found"}
)  # by type or code


def unexpected_errors(sim: SimServer) -> list[dict]:
    """Errors the simulator reported that no test asked for: a client bug (say, a result sent
    to the wrong session) shows up here even when the user-facing story looks fine. A narrator's
    `response.cancel` ("computer, stop") racing the response's own end is no bug."""
    return [
        event["error"]
        for connection in sim.connections
        for event in connection.sent_of("error")
        if not {event["error"].get("type"), event["error"].get("code")} & INJECTED_ERRORS
        # (nor the listener's cancel of a route whose transcript said it was not addressed)
        and not (connection.role in ("narrator", "listener") and event["error"].get("code") == "response_cancel_not_active")
        and classify(message=event["error"].get("message")).kind is not ErrorKind.SESSION_EXPIRED  # code-less expiry
    ]


@contextlib.asynccontextmanager
async def running_pipeline(
    tmp_path: Path,
    sim: SimServer,
    speaker_pace: float = 0.0,
    tasks_toml: str | None = None,
    speaker: MemorySpeaker | None = None,
    connect_timeout_s: float = 5.0,
    healthy_after_s: float = 0.5,
    upload_mode: UploadMode = UploadMode.CONTINUOUS,
    conversation: ConversationSettings = ConversationSettings(),
    cost: CostSettings = CostSettings(),
    mic_pace: float = MIC_PACE,
    narrator_warm: bool = False,
    microphone: PushMicrophone | None = None,
    stop_detector: object | None = None,
    acoustic_stop: bool = False,
    hostile: bool = False,  # the server sends mistyped frames: errors about the ids they name are expected
    mic_filter: object | None = None,
    mcp_config: Path | None = None,
    mcp_routing: str = "auto",
    **listener: object,
) -> AsyncIterator[Pipeline]:
    """`mic_filter`: the upload filter to use instead of the one the settings build (a scripted
    on-device wake, tests/support/scripted_wake.py)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("first line\nsecond line\nthird line\n")
    tasks_config = None
    if tasks_toml is not None:
        tasks_config = tmp_path / "tasks.toml"
        tasks_config.write_text(tasks_toml)
    settings = fast_settings(
        sim.base_url, workspace.resolve(), tmp_path / "state", tasks_config, connect_timeout_s, healthy_after_s, upload_mode,
        conversation, cost, narrator_warm=narrator_warm, stop_while_talking=stop_detector is not None or acoustic_stop,
        mcp_config=mcp_config, mcp_routing=mcp_routing, **listener
    )
    timeline = Timeline()
    microphone = microphone or PushMicrophone(chunk_ms=20, pace=mic_pace)
    speaker = speaker or MemorySpeaker(pace=speaker_pace)
    async with assistant(settings, microphone, speaker, timeline, stop_detector=stop_detector) as coordinator:  # type: ignore[arg-type]
        if mic_filter is not None:
            coordinator.parts = dataclasses.replace(coordinator.parts, mic_filter=mic_filter)
        task = asyncio.create_task(coordinator.run(), name="coordinator under test")
        pipeline = Pipeline(sim, coordinator, microphone, speaker, timeline, settings, task)
        try:
            await pipeline.wait(
                lambda t: t.count("listening") >= 1 or any(e.text.startswith("fatal:") for e in t.entries), 20
            )
            yield pipeline
            assert hostile or not unexpected_errors(sim), unexpected_errors(sim)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
