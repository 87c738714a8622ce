"""Provisional routes on the end-of-turn corpus (issue 33), replayed through the product's own
decisions: the on-device VAD's verdicts (benchmarks/end_of_turn.py) feed `detectors.turn_pause`,
whose signals feed the coordinator's core (`CoordinatorCore`) on a simulated clock, one core for
the whole corpus, its commands in order, as the daemon would hear them: its pause point
(`decisions.pause_point`) moves with the round trips it measures and its token account (and
budget) carries over from one command to the next. The model answers each route RTT + 5 ms later
with the command's own tool (a timer for "set a timer": a tool that changes something), the
transcript comes 0.5 s after the turn end, and the narrator's first audio RTT + 15 ms after it was
asked (the round trips benchmarks/voice_to_voice.py measured).

Per row: commands split (more than one turn at TURN_END_MS), routes sent provisionally, withdrawn
and held back by the budget, tools with side effects started while their route was provisional
or after it was withdrawn (must be 0), answers said per command (must be 1), and the extra tokens
as the core's own account has them: the withdrawn routes' and the narrator's for answers read
ahead for them, over the rest of the routing. Tokens are billed as the simulator bills them: a
route reads the tool definitions and instructions (4 characters a token) and 1 token per 100 ms of
audio, and writes 20; a narration reads its instructions and script and writes 1 token per 50 ms
of speech (at 150 words a minute) and its transcript. A withdrawn route's response and a dropped
read-ahead are billed whole (the server may have finished them before the cancel came).
"""

from __future__ import annotations

import heapq
import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.tool_schema_size import CHARS_PER_TOKEN, registry, size
from decisions.coordinator import (
    CoordinatorCore, CoordinatorTimings, DropNarration, NarrationDone, NarrationsFinished, PrepareNarration,
    ReadAheadBilled, RestartListener, RouteSent, SendRoute, SetPause, SpeechResumed, StartTools, ToolsFinished, TurnEnded, TurnPaused,
)
from decisions.cost import Provisional
from decisions.listener_core import (
    CommandConfirmed, ProvisionalBilled, RunTools, SessionEnd, SessionReady, UsageReported,
)
from decisions.narration import READ_VERBATIM, framed
from decisions.timeline import Timeline
from decisions.uplink import Uplink
from decisions.wake_gate import WakeGate
from detectors.turn_pause import TurnFollower, TurnSignal
from realtime_api.sessions import listener_session
from config.settings import Settings
from realtime_api.wire import Closed, FunctionCall, Usage

TOOL_OF = {"what time": "get_time", "list the": "list_files", "set a timer": "set_timer",
           "read the first two lines": "read_file_head", "ask the brain": "ask_brain"}
OUTPUT_TOKENS = 20
TRANSCRIPT_AFTER_S = 0.5  # after the turn end (the server's commit and a quick transcriber)
ANSWER = "It is five past three in the afternoon."  # every command's answer, as the narrator reads it
ROUTE_EXTRA_S, VOICE_EXTRA_S = 0.005, 0.015  # over the RTT: the route's call, the narrator's first audio


@dataclass
class Tally:
    commands: int = 0
    split: int = 0
    acted_early: int = 0  # side-effect tools started on a provisional or withdrawn route
    answers: list[int] = field(default_factory=list)
    waits_s: list[float] = field(default_factory=list)  # the answer's first audio after the turn end
    account: Provisional = Provisional()  # the core's own (decisions.pause_point)

    @property
    def sent(self) -> int:
        return self.account.sent

    @property
    def withdrawn(self) -> int:
        return self.account.withdrawn


def route_text_tokens() -> int:
    """What every route reads besides its audio: the tool definitions and the instructions."""
    with tempfile.TemporaryDirectory() as tmp:
        tools = size(registry(True, Path(tmp)))
    instructions = len(listener_session(Settings(), [])["instructions"])
    return (tools + instructions) // CHARS_PER_TOKEN


def narration_usage(script: str = ANSWER) -> Usage:
    """One narration as the simulator bills it (realtime_sim/response_run.py)."""
    speech_ms = len(script.split()) / 150 * 60_000
    return Usage(input_text_tokens=(len(READ_VERBATIM) + len(framed(script))) // CHARS_PER_TOKEN,
                 output_audio_tokens=int(speech_ms / 50), output_text_tokens=len(script) // CHARS_PER_TOKEN + 1)


class Replay:
    """Commands one after another through one core, on a clock of its own (seconds of audio).
    `pause_s`: PROVISIONAL_MS (None: off); `adaptive`: the point follows the measured round trips
    (else it stays at `pause_s`); `budget`: PROVISIONAL_TOKEN_BUDGET (None: unbounded)."""

    def __init__(self, read_only: frozenset[str], turn_end_s: float, rtt_s: float, text_tokens: int,
                 pause_s: float | None, adaptive: bool = False, budget: float | None = None) -> None:
        self.now = 0.0
        self.rtt_s, self.text_tokens, self.read_only, self.adaptive = rtt_s, text_tokens, read_only, adaptive
        timings = CoordinatorTimings(chime=False, follow_up_s=0, turn_end_s=turn_end_s, provisional_s=pause_s or 0.0,
                                     provisional_budget=budget)
        self.core = CoordinatorCore(timings, WakeGate("computer", (), 8.0), Timeline(clock=lambda: self.now),
                                    Uplink(500, 48000), lambda: self.now, read_only_tools=read_only)
        self.turn_end_s = turn_end_s
        self.pause_s = self.core.pause_point.pause_s  # what the upload filter is built with; SetPause moves it
        self.events: list[tuple[float, int, Callable[[], Any]]] = []
        self._seq = itertools.count()
        self.tool = ""
        self.item = ""
        self.provisional_usage: dict[int, Usage] = {}  # provisional routes billed, not withdrawn (yet)
        self.withdrawn_routes: set[int] = set()
        self.acted_early = 0
        self.answers = 0
        self.sessions = 1
        self.prepared_at: dict[int, float] = {}  # answers read ahead, by command
        self.turn_ended_at = 0.0
        self.waits_s: list[float] = []
        self.core.handle(SessionReady(1))

    def at(self, when: float, what: Callable[[], Any]) -> None:
        heapq.heappush(self.events, (when, next(self._seq), what))

    def run_until(self, until: float) -> None:
        while self.events and self.events[0][0] <= until:
            when, _, what = heapq.heappop(self.events)
            self.now = max(self.now, when)
            what()
        self.now = max(self.now, until)

    def feed(self, event: Any) -> None:
        for action in self.core.handle(event):
            self.act(action)
        while (request := self.core.next_narration()) is not None:
            self.answers += 1
            voice_s = self.rtt_s + VOICE_EXTRA_S
            prepared_at = self.prepared_at.pop(request.command.id, None) if request.command is not None else None
            first = self.now + voice_s if prepared_at is None else max(self.now, prepared_at + voice_s)
            self.waits_s.append(first - self.turn_ended_at)
            ready = voice_s if self.adaptive else None
            for action in [*self.core.handle(NarrationDone(request, "replayed", ready_after_s=ready)),
                           *self.core.handle(NarrationsFinished())]:
                self.act(action)

    def act(self, action: Any) -> None:
        match action:
            case SendRoute(route=route, audio=audio, provisional=provisional):
                usage = Usage(input_text_tokens=self.text_tokens, input_audio_tokens=len(audio or b"") // 4800,
                              output_text_tokens=OUTPUT_TOKENS)
                self.feed(RouteSent(route, self.item))
                call = FunctionCall(f"call_{route}", self.tool, "{}", "fc")
                self.at(self.now + self.rtt_s + ROUTE_EXTRA_S, lambda: self.answered(route, provisional, usage, call))
            case StartTools(route=route, calls=calls):
                command = self.core.provisional_command
                early = route in self.withdrawn_routes or (command is not None and command.route == route)
                self.acted_early += early and any(c.name not in self.read_only for c in calls)
                self.at(self.now + 0.005, lambda: self.feed(ToolsFinished(route, (ANSWER,))))
            case DropNarration():  # read ahead (PrepareNarration came first): billed whole, as bought nothing
                self.feed(ReadAheadBilled(narration_usage()))
            case SetPause(seconds=seconds):
                self.pause_s = seconds
            case RestartListener():  # a fresh session after each answer (ready long before the next command)
                self.sessions += 1
                end = SessionEnd(Closed(1000), by_us=True, expired=False, healthy=True, interrupted_command=None,
                                 replay_from_ms=None)
                self.at(self.now + 0.05, lambda: self.feed(end))
                self.at(self.now + 0.1, lambda: self.feed(SessionReady(self.sessions)))
            case PrepareNarration(command_id=command_id):  # read ahead from now
                self.prepared_at[command_id] = self.now

    def answered(self, route: int, provisional: bool, usage: Usage, call: FunctionCall) -> None:
        """The route's response is done (as listener_core reports it: its usage, and a provisional
        route's as such, withdrawn or not yet), and its call comes."""
        self.feed(UsageReported(usage))
        if provisional and route in self.withdrawn_routes:
            self.feed(ProvisionalBilled(usage, sent=True, withdrawn=True))
        elif provisional:
            self.provisional_usage[route] = usage
            self.feed(ProvisionalBilled(usage, sent=True, withdrawn=False))
        self.feed(RunTools("", (call,), 1))

    def signal(self, signal: TurnSignal, audio: bytes) -> None:
        match signal:
            case TurnSignal.PAUSED:
                self.feed(TurnPaused(audio))
            case TurnSignal.RESUMED:
                command = self.core.provisional_command
                if command is not None:
                    self.withdrawn_routes.add(command.route)
                    if (usage := self.provisional_usage.pop(command.route, None)) is not None:
                        self.feed(ProvisionalBilled(usage, sent=False, withdrawn=True))
                self.feed(SpeechResumed())
            case TurnSignal.ENDED:
                self.turn_ended_at = self.now
                self.feed(TurnEnded(audio))
                item = self.item
                self.at(self.now + TRANSCRIPT_AFTER_S, lambda: self.feed(CommandConfirmed(item, "the command")))

    def command(self, flags: list[bool], wake_end_ms: float, head: str, tally: Tally, chunk_ms: int = 20) -> None:
        """One clip's VAD verdicts (one per `chunk_ms` chunk), from its wake phrase's end (the
        spotter's hit) on, a second after the last command's answer."""
        self.run_until(self.now + 5.0)
        began = round(self.now + 1.0, 2)  # (a whole number of chunks)
        self.tool, self.item = TOOL_OF[head], f"item_{tally.commands + 1}"
        answers, acted, waits = self.answers, self.acted_early, len(self.waits_s)
        step = chunk_ms / 1000
        start = int(wake_end_ms // chunk_ms)
        follower: TurnFollower | None = TurnFollower(began + start * step, self.turn_end_s, self.pause_s)
        turns, chunks = 1, 0
        for index in range(start, len(flags)):
            now = began + (index + 1) * step
            self.run_until(now)
            chunks += 1
            if follower is None:  # the turn ended: more speech is a second turn (a split command)
                turns += flags[index] and not flags[index - 1]
                continue
            signal = follower.feed(flags[index], now, step)
            if signal is not None:
                self.signal(signal, bytes(chunks * chunk_ms * 48))  # 24 kHz pcm16
            if signal in (TurnSignal.ENDED, TurnSignal.DROPPED):
                follower = None
        self.run_until(began + len(flags) * step + 5.0)
        tally.commands += 1
        tally.split += turns > 1
        tally.acted_early += self.acted_early - acted
        tally.answers.append(self.answers - answers)
        tally.waits_s += self.waits_s[waits:]
        tally.account = self.core.pause_point.account


def replay(flags: list[bool], wake_end_ms: float, head: str, pause_s: float | None, turn_end_s: float,
           read_only: frozenset[str], text_tokens: int, rtt_s: float, tally: Tally) -> None:
    """One command alone, through a core of its own."""
    Replay(read_only, turn_end_s, rtt_s, text_tokens, pause_s).command(flags, wake_end_ms, head, tally)
