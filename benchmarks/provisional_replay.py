"""Provisional routes on the end-of-turn corpus (issue 33), replayed through the product's own
decisions: the on-device VAD's verdicts (benchmarks/end_of_turn.py) feed `detectors.turn_pause`,
whose signals feed the coordinator's core (`CoordinatorCore`) on a simulated clock, with the
model answering each route RTT later with the command's own tool (a timer for "set a timer": a
tool that changes something) and its transcript 0.5 s after the turn end.

Per PROVISIONAL_MS: commands split (more than one turn at TURN_END_MS), routes sent provisionally
and withdrawn, tools with side effects started while their route was provisional or after it was
withdrawn (must be 0), answers said per command (must be 1), and the routing tokens the withdrawn
routes added (the simulator's estimate: the tool definitions and instructions at 4 characters a
token, 1 token per 100 ms of audio, 20 output tokens) over those of one route per command.
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
    CoordinatorCore, CoordinatorTimings, NarrationDone, NarrationsFinished, RouteSent, SendRoute, SpeechResumed,
    StartTools, ToolsFinished, TurnEnded, TurnPaused,
)
from decisions.listener_core import CommandConfirmed, RunTools, SessionReady
from decisions.timeline import Timeline
from decisions.uplink import Uplink
from decisions.wake_gate import WakeGate
from detectors.turn_pause import TurnFollower, TurnSignal
from realtime_api.sessions import listener_session
from config.settings import Settings
from realtime_api.wire import FunctionCall

TOOL_OF = {"what time": "get_time", "list the": "list_files", "set a timer": "set_timer",
           "read the first two lines": "read_file_head", "ask the brain": "ask_brain"}
OUTPUT_TOKENS = 20
TRANSCRIPT_AFTER_S = 0.5  # after the turn end (the server's commit and a quick transcriber)


@dataclass
class Tally:
    commands: int = 0
    split: int = 0
    sent: int = 0
    withdrawn: int = 0
    acted_early: int = 0  # side-effect tools started on a provisional or withdrawn route
    answers: list[int] = field(default_factory=list)
    route_tokens: int = 0  # every route's
    withdrawn_tokens: int = 0


def route_text_tokens() -> int:
    """What every route reads besides its audio: the tool definitions and the instructions."""
    with tempfile.TemporaryDirectory() as tmp:
        tools = size(registry(True, Path(tmp)))
    instructions = len(listener_session(Settings(), [])["instructions"])
    return (tools + instructions) // CHARS_PER_TOKEN


class Replay:
    """One command through the core, on a clock of its own (seconds of audio)."""

    def __init__(self, tool: str, read_only: frozenset[str], turn_end_s: float, rtt_s: float, text_tokens: int) -> None:
        self.now = 0.0
        self.tool, self.rtt_s, self.text_tokens = tool, rtt_s, text_tokens
        self.core = CoordinatorCore(CoordinatorTimings(chime=False, follow_up_s=0, turn_end_s=turn_end_s),
                                    WakeGate("computer", (), 8.0), Timeline(clock=lambda: self.now), Uplink(500, 48000),
                                    lambda: self.now, read_only_tools=read_only)
        self.read_only = read_only
        self.events: list[tuple[float, int, Callable[[], Any]]] = []
        self._seq = itertools.count()
        self.routes: dict[int, tuple[bool, int]] = {}  # route -> (provisional, tokens)
        self.withdrawn_routes: set[int] = set()
        self.acted_early = 0
        self.answers = 0
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
            self.core.handle(NarrationDone(request, "replayed"))
            self.core.handle(NarrationsFinished())

    def act(self, action: Any) -> None:
        match action:
            case SendRoute(route=route, audio=audio, provisional=provisional):
                self.routes[route] = (provisional, self.text_tokens + len(audio or b"") // 4800 + OUTPUT_TOKENS)
                self.feed(RouteSent(route, "item_1"))
                call = FunctionCall(f"call_{route}", self.tool, "{}", "fc")
                self.at(self.now + self.rtt_s, lambda: self.feed(RunTools("", (call,), 1)))
            case StartTools(route=route, calls=calls):
                command = self.core.provisional_command
                early = route in self.withdrawn_routes or (command is not None and command.route == route)
                self.acted_early += early and any(c.name not in self.read_only for c in calls)
                self.at(self.now + 0.005, lambda: self.feed(ToolsFinished(route, ("Done.",))))

    def signal(self, signal: TurnSignal, audio: bytes) -> None:
        match signal:
            case TurnSignal.PAUSED:
                self.feed(TurnPaused(audio))
            case TurnSignal.RESUMED:
                command = self.core.provisional_command
                if command is not None:
                    self.withdrawn_routes.add(command.route)
                self.feed(SpeechResumed())
            case TurnSignal.ENDED:
                self.feed(TurnEnded(audio))
                self.at(self.now + TRANSCRIPT_AFTER_S, lambda: self.feed(CommandConfirmed("item_1", "the command")))


def replay(flags: list[bool], wake_end_ms: float, head: str, pause_s: float | None, turn_end_s: float,
           read_only: frozenset[str], text_tokens: int, rtt_s: float, tally: Tally) -> None:
    """One clip's 20 ms VAD verdicts, from its wake phrase's end (the spotter's hit) on."""
    run = Replay(TOOL_OF[head], read_only, turn_end_s, rtt_s, text_tokens)
    start = int(wake_end_ms // 20)
    follower: TurnFollower | None = TurnFollower(start * 0.02, turn_end_s, pause_s)
    turns, chunks = 1, 0
    for index in range(start, len(flags)):
        now = (index + 1) * 0.02
        run.run_until(now)
        chunks += 1
        if follower is None:  # the turn ended: more speech is a second turn (a split command)
            turns += flags[index] and not flags[index - 1]
            continue
        signal = follower.feed(flags[index], now, 0.02)
        if signal is not None:
            run.signal(signal, bytes(chunks * 960))
        if signal in (TurnSignal.ENDED, TurnSignal.DROPPED):
            follower = None
    run.run_until(len(flags) * 0.02 + 5.0)
    tally.commands += 1
    tally.split += turns > 1
    tally.sent += sum(provisional for provisional, _ in run.routes.values())
    tally.withdrawn += len(run.withdrawn_routes)
    tally.acted_early += run.acted_early
    tally.answers.append(run.answers)
    tally.route_tokens += sum(tokens for _, tokens in run.routes.values())
    tally.withdrawn_tokens += sum(run.routes[r][1] for r in run.withdrawn_routes)
