"""The coordinator's decision core, driven by events with no sockets and no event loop.

Every row of the transition table, every illegal pair, and the behaviours the shell relies on:
routing, the route watchdog, narration order and the restart that follows, connection
announcements, notices, recycling, replay, fatal errors and the end of a finite input."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from config.settings import FollowUp
from decisions.coordinator import (
    CommandTaken, OpenFollowUp, RouteWithdrawn, WorkingState,
    INITIAL, MACHINES, TRANSITIONS, AbandonRoute, AckNotices, AnnounceState, ChimeFinished, ChimeStarted,
    AudioHeard, ConfirmHeard, CoordinatorCore, CoordinatorTimings, Earcon, Event, EVENT_MACHINES, FetchNotices, InputEnded, ListenerState,
    Machines, NarrationDone, NarrationKind, NarrationsFinished, NoticeBatchFetched, NoticesPending, NoticeState, Phase,
    CutNarration, StopHeard,
    PlayChime, RestartListener, RouteNotSent, RouteSent, RouteState, SendRoute, StartTools, Stop, Tick, ToolsFinished, UtteranceRejected,
    VoiceState, CANNOT_CONNECT_MESSAGE, CONNECTION_LOST_MESSAGE, RECONNECTED_MESSAGE, ROUTING_FAILED_MESSAGE, STILL_WORKING_MESSAGE,
)
from decisions.errors import IllegalTransition
from decisions.listener_core import (
    CommandCommitted, CommandConfirmed, CommandRejected,
    CommandHeard, ConnectFailed, Fatal, Heard, QuietChanged, RoutingFailed, RunTools, SessionEnd, SessionReady, SpeakText,
)
from decisions.coordinator import PrepareTools, ToolDone, ToolStarted
from decisions.events import ToolOutcome
from decisions.timeline import Timeline
from decisions.uplink import UNTOLD_MS, Uplink, placed_in_stream
from decisions.wake_gate import Command, Ignore, WakeGate, WakeOnly
from realtime_api.wire import Closed, FunctionCall

# --- the table ----------------------------------------------------------------------------------


def _states_for(machine_state, event):
    """A full set of machine states in which `event` is legal except, possibly, for `machine_state`."""
    states = dict(INITIAL)
    for machine in EVENT_MACHINES[event]:
        states[machine] = next(s for (s, ev) in TRANSITIONS if ev is event and type(s) is machine)
    states[type(machine_state)] = machine_state
    return states


@pytest.mark.parametrize("row", list(TRANSITIONS.items()), ids=lambda r: f"{r[0][0].value}-{r[0][1].value}")
def test_every_row_of_the_table(row):
    (state, event), target = row
    machines = Machines(_states_for(state, event))
    machines.fire(event)
    assert machines[type(state)] is target


ILLEGAL = [
    (state, event)
    for machine in MACHINES
    for state in machine
    for event in Event
    if machine in EVENT_MACHINES[event] and (state, event) not in TRANSITIONS
]


@pytest.mark.parametrize("pair", ILLEGAL, ids=lambda p: f"{p[0].value}-{p[1].value}")
def test_every_illegal_pair_raises_and_moves_nothing(pair):
    state, event = pair
    states = _states_for(state, event)
    machines = Machines(states)
    with pytest.raises(IllegalTransition):
        machines.fire(event)
    assert machines.states == states


def test_every_event_moves_some_machine_and_every_state_is_reachable():
    assert all(EVENT_MACHINES[event] for event in Event)
    reachable = set(INITIAL.values()) | set(TRANSITIONS.values())
    assert reachable == {state for machine in MACHINES for state in machine}


# --- a core under test --------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# No follow-up window and no working sound unless a test asks: they have tests of their own.
TIMINGS = CoordinatorTimings(route_timeout_s=30, recycle_after_s=3300, healthy_after_s=30,
                             announce_after_failures=3, settle_quiet_s=1.5, chunk_ms=20, chime=True,
                             follow_up_s=0, working_after_s=1000, still_working_after_s=1000)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def core(clock):
    return CoordinatorCore(TIMINGS, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(500, 48000), clock)


def end(code=1006, *, by_us=False, expired=False, healthy=True, interrupted=None, replay_from_ms=None):
    return SessionEnd(Closed(code), by_us=by_us, expired=expired, healthy=healthy,
                      interrupted_command=interrupted, replay_from_ms=replay_from_ms)


def call(call_id="c1", name="get_time"):
    return FunctionCall(call_id=call_id, name=name, arguments="{}", item_id="i1")


def say_all(core):
    """Play the narration worker: say everything queued, report it, let go of the voice."""
    said, actions = [], []
    while (request := core.next_narration()) is not None:
        said.append(request)
        actions += core.handle(NarrationDone(request, "similarity 1.00, attempts 1"))
    actions += core.handle(NarrationsFinished())
    return said, actions


def routed(core, command="what time is it"):
    core.handle(SessionReady(1)) if not core.listener_up else None
    core.handle(Heard(f"computer, {command}", Command(command)))
    (send,) = core.handle(CommandHeard(command))
    assert isinstance(send, SendRoute) and send.command == command
    return send


# --- behaviour ----------------------------------------------------------------------------------


def test_a_command_cycle(core):
    assert core.phase is Phase.RESTARTING
    core.handle(SessionReady(1))
    assert core.phase is Phase.LISTENING
    send = routed(core)
    assert core.phase is Phase.ROUTING
    core.handle(RouteSent(send.route))
    (start,) = core.handle(RunTools("what time is it", (call(),), session=1))
    assert isinstance(start, StartTools) and start.route == send.route and start.session == 1
    core.handle(ToolsFinished(send.route, ("It's noon.",)))
    said, actions = say_all(core)
    assert [(r.script, r.kind) for r in said] == [("It's noon.", NarrationKind.ANSWER)]
    assert actions == [RestartListener("after a narration")]
    assert core.machines[ListenerState] is ListenerState.CLOSING and core.phase is Phase.RESTARTING
    core.handle(end(1000, by_us=True))
    core.handle(SessionReady(2))
    assert core.phase is Phase.LISTENING and core.idle(core._clock())


def test_commands_wait_in_order_one_at_a_time(core):
    first = routed(core, "one")
    assert core.handle(CommandHeard("two")) == []  # queued behind the first
    core.handle(RouteSent(first.route))
    core.handle(SpeakText("one", "The answer."))
    say_all(core)
    core.handle(end(1000, by_us=True))
    (second,) = core.handle(SessionReady(2))
    assert second == SendRoute(second.route, "two") and second.route != first.route


def test_a_call_runs_once_even_if_the_model_repeats_it(core):
    send = routed(core)
    core.handle(RouteSent(send.route))
    core.handle(RunTools("what time is it", (call("c1"),), session=1))
    core.handle(ToolsFinished(send.route, ("noon",)))
    say_all(core)
    core.handle(end(1000, by_us=True))
    core.handle(SessionReady(2))
    again = routed(core)
    core.handle(RouteSent(again.route))
    assert core.handle(RunTools("what time is it", (call("c1"),), session=2)) == []
    said, _ = say_all(core)
    assert [r.script for r in said] == [ROUTING_FAILED_MESSAGE]


def test_the_route_watchdog_reports_its_deadline_and_gives_up(core, clock):
    send = routed(core)
    assert core.next_deadline(clock.now) == clock.now + 30  # armed before the send completes
    clock.now += 0.5
    core.handle(RouteSent(send.route))
    assert core.next_deadline(clock.now) == clock.now + 29.5
    clock.now += 29.4
    assert core.handle(Tick()) == []
    clock.now += 0.1
    actions = core.handle(Tick())
    assert actions == [AbandonRoute(), RestartListener("the model did not answer a command")]
    assert core.machines[RouteState] is RouteState.IDLE
    said, _ = say_all(core)
    assert [r.script for r in said] == [ROUTING_FAILED_MESSAGE]


def test_a_response_faster_than_the_send_is_not_undone_by_it(core):
    send = routed(core)
    core.handle(RunTools("what time is it", (call(),), session=1))  # before RouteSent arrives
    assert core.handle(RouteSent(send.route)) == []
    assert core.machines[RouteState] is RouteState.RUNNING_TOOLS
    assert core.next_deadline(core._clock()) != core._clock() + 30  # no watchdog for a route already answered


def test_a_route_the_session_never_took_waits_for_the_next_session(core):
    send = routed(core)
    assert core.handle(RouteNotSent(send.route)) == []  # not again into a session that is gone
    assert not core.listener_up
    core.handle(end())
    (again,) = core.handle(SessionReady(2))
    assert again.command == send.command and again.route != send.route


def test_a_drop_mid_route_routes_the_command_again_and_announces_nothing(core):
    send = routed(core)
    core.handle(RouteSent(send.route))
    core.handle(end(interrupted=send.command))
    assert core.machines[RouteState] is RouteState.IDLE and not core.narration_waiting
    (again,) = core.handle(SessionReady(2))
    assert again.command == send.command
    assert core.handle(RouteSent(send.route)) == []  # the old route's late news changes nothing


def test_a_quiet_drop_of_a_healthy_session_is_announced_once_and_young_ones_are_not(core):
    core.handle(SessionReady(1))
    core.handle(end(healthy=False))
    assert not core.narration_waiting
    core.handle(SessionReady(2))
    core.handle(end(healthy=True))
    said, actions = say_all(core)
    assert [(r.script, r.kind) for r in said] == [(CONNECTION_LOST_MESSAGE, NarrationKind.STATUS)]
    assert actions == []  # a status message does not restart the listener


def test_expiry_and_our_own_closes_are_not_announced(core):
    core.handle(SessionReady(1))
    core.handle(end(1001, expired=True))
    core.handle(SessionReady(2))
    core.handle(RestartListener("x") and Tick())
    core.handle(end(1000, by_us=True))
    assert not core.narration_waiting


def test_trouble_is_announced_once_and_recovery_after_a_healthy_session(core, clock):
    for attempt in range(1, 6):
        core.handle(ConnectFailed(attempt, "refused"))
    said, _ = say_all(core)
    assert [r.script for r in said] == [CANNOT_CONNECT_MESSAGE]
    core.handle(SessionReady(1))
    assert core.next_deadline(clock.now) == clock.now + 30
    clock.now += 10
    core.handle(end(healthy=False))  # a flap: still in trouble, nothing said
    assert core.machines[AnnounceState] is AnnounceState.TROUBLE and not core.narration_waiting
    core.handle(SessionReady(2))
    clock.now += 30
    core.handle(Tick())
    said, _ = say_all(core)
    assert [r.script for r in said] == [RECONNECTED_MESSAGE]
    assert core.machines[AnnounceState] is AnnounceState.NOTHING_SAID


def test_answers_are_said_before_notices(core):
    core.handle(SessionReady(1))
    assert core.handle(NoticesPending()) == [FetchNotices()]  # idle: fetched at once
    core.handle(NoticeBatchFetched((7, 8), "The backup finished."))
    core.handle(ConnectFailed(3, "refused"))  # a status message queued after the notice
    said, actions = say_all(core)
    assert [r.kind for r in said] == [NarrationKind.STATUS, NarrationKind.NOTICE]
    assert AckNotices((7, 8)) in actions and RestartListener("after a narration") in actions
    assert core.notices_settled


def test_notices_wait_for_an_idle_moment_including_the_wake_window(core, clock):
    core.handle(SessionReady(1))
    assert isinstance(core.gate.classify("computer", clock.now), WakeOnly)  # the listener core asks the gate
    core.handle(Heard("computer", WakeOnly()))
    assert core.handle(NoticesPending()) == []  # a command may follow the wake word
    assert core.next_deadline(clock.now) == pytest.approx(clock.now + 8.0)
    core.handle(QuietChanged(False))
    clock.now += 8.5
    assert core.handle(Tick()) == []  # window over, but someone is talking
    assert core.handle(QuietChanged(True)) == [FetchNotices()]
    assert core.handle(NoticeBatchFetched((), "")) == []
    assert core.notices_settled


def test_the_wake_word_alone_plays_the_chime(core):
    core.handle(SessionReady(1))
    assert core.handle(Heard("computer", WakeOnly())) == [PlayChime(Earcon.WAKE)]
    assert core.handle(Heard("the cat sat", Ignore())) == [UtteranceRejected()]  # a wake window it opened closes
    core.handle(ChimeStarted())
    assert core.machines[VoiceState] is VoiceState.CHIME and not core.idle(core._clock())
    core.handle(ChimeFinished(Earcon.WAKE))
    assert core.timeline.count("chime") == 1


def test_a_session_is_recycled_at_a_quiet_moment_near_its_limit(core, clock):
    core.handle(SessionReady(1))
    assert core.next_deadline(clock.now) == clock.now + 3300
    core.handle(QuietChanged(False))
    clock.now += 3300
    assert core.handle(Tick()) == []  # not while someone talks
    assert core.next_deadline(clock.now) is None  # waits for a change, not a deadline
    assert core.handle(QuietChanged(True)) == [RestartListener("recycle before the session limit")]


def send_ten_chunks(core) -> None:
    """Ten 20 ms chunks, numbered 0..9, sent to session 1."""
    core.handle(SessionReady(1))
    for n in range(10):
        core.uplink.take(bytes([n]) * 960, session_ready=True)
        token = core.uplink.next_chunk().token
        core.uplink.sent(token)


def drain_replay(core) -> list[int]:
    """The first byte of each chunk the uplink sends next, in order."""
    replayed = []
    while (nxt := core.uplink.next_chunk()) is not None:
        replayed.append(nxt[1][0])
        core.uplink.sent(nxt[0])
    return replayed


def test_replay_puts_unheard_audio_first_in_line(core):
    send_ten_chunks(core)
    core.uplink.take(b"\xff" * 960, session_ready=True)
    core.handle(end(replay_from_ms=120))  # chunks starting at 120 ms and later: 6..9
    replayed = drain_replay(core)
    assert replayed == [6, 7, 8, 9, 0xFF]
    assert core.timeline.count("replaying") == 1


def test_a_replay_leaves_out_what_was_heard_already(core):
    send_ten_chunks(core)
    # 40..100 ms was never transcribed, 100..160 ms was (its transcript came first), the rest is new.
    core.handle(SessionEnd(closed=Closed(1006, ""), by_us=False, expired=False, healthy=True,
                           interrupted_command=None, replay_from_ms=40, heard_spans=((100, 160),)))
    assert drain_replay(core) == [2, 3, 4, 8, 9]


def test_a_fatal_error_stops_once_with_the_first_reason(core):
    core.handle(SessionReady(1))
    assert core.handle(Fatal("your key is invalid")) == [Stop(3, "your key is invalid")]
    assert core.handle(Fatal("the listener stopped")) == []
    assert core.fatal_message == "your key is invalid" and core.phase is Phase.STOPPING
    assert core.handle(CommandHeard("what time is it")) == []  # no command starts while stopping


def test_a_finished_input_settles_before_stopping(core, clock):
    core.handle(SessionReady(1))
    core.handle(InputEnded())
    assert core.next_deadline(clock.now) == clock.now + 1.5
    core.handle(QuietChanged(False))
    clock.now += 5
    assert core.handle(Tick()) == []
    core.handle(QuietChanged(True))
    clock.now += 1.5
    assert core.handle(Tick()) == [Stop(0, None)]


def test_a_finished_input_whose_audio_went_out_waits_for_the_session_to_confirm_it_heard_it(core, clock):
    core.handle(SessionReady(1))
    core.uplink.take(bytes(960), session_ready=True)
    core.uplink.sent(core.uplink.next_chunk()[0])  # one chunk went out; the server may not have it yet
    assert core.handle(InputEnded()) == [ConfirmHeard(1)]  # asked once
    clock.now += 60  # however long the server takes, quiet on our side is not the end
    assert core.handle(Tick()) == [] and core.next_deadline(clock.now) > clock.now + 60  # (only the recycle)
    core.handle(AudioHeard(None))  # that session went away: asked again of the next one
    core.handle(end(1000, by_us=True))
    assert ConfirmHeard(1) in core.handle(SessionReady(2))
    core.handle(AudioHeard(1))
    assert core.next_deadline(clock.now) == clock.now + 1.5
    clock.now += 1.5
    assert core.handle(Tick()) == [Stop(0, None)]


def test_routing_failures_and_text_answers_are_narrated(core):
    send = routed(core)
    core.handle(RouteSent(send.route))
    core.handle(RoutingFailed(send.command, "server error"))
    said, _ = say_all(core)
    assert [r.kind for r in said] == [NarrationKind.ERROR]
    core.handle(end(1000, by_us=True))
    core.handle(SessionReady(2))
    send = routed(core)
    core.handle(SpeakText(send.command, "It is noon."))
    said, _ = say_all(core)
    assert [(r.script, r.kind) for r in said] == [("It is noon.", NarrationKind.FALLBACK)]


def test_the_revision_moves_only_on_change(core):
    core.handle(SessionReady(1))
    revision = core.revision
    core.handle(Tick())
    assert core.revision == revision
    core.handle(CommandHeard("hello"))
    assert core.revision > revision


def test_illegal_event_order_is_a_bug(core):
    with pytest.raises(IllegalTransition):
        core.handle(ChimeFinished(Earcon.WAKE))  # no chime is playing


class RandomWalk:
    """Plays the shell and the server for the core, with seeded random orders of events."""

    def __init__(self, core, clock, rng):
        self.core, self.clock, self.rng = core, clock, rng
        self.sessions = itertools.count(1)
        self.call_ids = itertools.count(1)
        self.routes: dict[int, str] = {}  # sent to the listener, not answered yet
        self.tools: list[StartTools] = []
        self.started: list[str] = []
        self.answers = 0

    def feed(self, event):
        for action in self.core.handle(event):
            if isinstance(action, SendRoute):
                self.routes[action.route] = action.command
            elif isinstance(action, StartTools):
                self.tools.append(action)
                self.started += [c.call_id for c in action.calls]
            elif isinstance(action, AbandonRoute):
                self.routes.clear()

    def answer_a_route(self):
        route, command = self.routes.popitem()
        self.feed(RouteSent(route))
        outcome = self.rng.random()
        if outcome < 0.6:
            self.feed(RunTools(command, (call(f"c{next(self.call_ids)}"),), self.core.session))
        elif outcome < 0.8:
            self.feed(SpeakText(command, "text"))
        else:
            self.clock.now += 31  # the model never answers: the watchdog fires
            self.feed(Tick())

    def narrate(self):
        said, actions = [], []
        while (request := self.core.next_narration()) is not None:
            said.append(request)
            if self.rng.random() < 0.15:
                self.feed(StopHeard("computer stop"))  # cut: the worker lets go after this one
            self.feed(NarrationDone(request, "ok"))
        self.feed(NarrationsFinished())
        self.answers += sum(r.kind is not NarrationKind.STATUS for r in said)

    def drop(self):
        in_route = self.core.machines[RouteState] in (RouteState.SENDING, RouteState.AWAITING_RESPONSE)
        command = next(iter(self.routes.values())) if in_route and self.routes else None
        if command is not None:
            self.routes.clear()  # the listener hands the command back with the session's end
        self.feed(end(interrupted=command))

    def step(self, heard_so_far: int, max_commands: int) -> int:
        core, choice = self.core, self.rng.random()
        if choice < 0.2 and heard_so_far < max_commands:
            heard_so_far += 1
            self.feed(CommandHeard(f"command {heard_so_far}"))
        elif choice < 0.4 and self.routes:
            self.answer_a_route()
        elif choice < 0.5 and self.tools:
            start = self.tools.pop()
            self.feed(ToolsFinished(start.route, ("done",)))
        elif choice < 0.6 and core.narration_waiting:
            self.narrate()
        elif choice < 0.7 and core.listener_up:
            self.drop()
        elif choice < 0.8 and core.machines[ListenerState] is ListenerState.CLOSING:
            self.feed(end(1000, by_us=True))
        elif core.machines[ListenerState] is ListenerState.DOWN:
            self.feed(SessionReady(next(self.sessions)))
        return heard_so_far

    def drain(self):
        """Let everything under way finish, as a healthy server and shell would."""
        core = self.core
        for _ in range(1000):
            if self.routes:
                self.answer_a_route()
            elif self.tools:
                start = self.tools.pop()
                self.feed(ToolsFinished(start.route, ("done",)))
            elif core.narration_waiting:
                self.narrate()
            elif core.machines[ListenerState] is ListenerState.CLOSING:
                self.feed(end(1000, by_us=True))
            elif core.machines[ListenerState] is ListenerState.DOWN:
                self.feed(SessionReady(next(self.sessions)))
            else:
                return
        raise AssertionError("the core never settled")


@pytest.mark.parametrize("seed", range(30))
def test_random_event_orders_answer_every_command_once_and_never_run_a_call_twice(seed, clock):
    import random

    core = CoordinatorCore(TIMINGS, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(50, 48000), clock)
    walk = RandomWalk(core, clock, random.Random(seed))
    walk.feed(SessionReady(next(walk.sessions)))
    heard = 0
    for _ in range(300):
        heard = walk.step(heard, max_commands=15)
    walk.drain()
    assert len(walk.started) == len(set(walk.started))
    assert walk.answers == heard  # each command: exactly one answer, fallback or apology
    assert core.phase is Phase.LISTENING and core.idle(clock.now)


def test_a_rate_limit_is_explained_once_with_its_own_line(core):
    from decisions.coordinator import RATE_LIMITED_MESSAGE

    core.handle(ConnectFailed(1, "HTTP 429", rate_limited=True))
    core.handle(ConnectFailed(2, "HTTP 429", rate_limited=True))
    assert not core.narration_waiting  # a blip is not worth muting the mic for
    core.handle(ConnectFailed(3, "HTTP 429", rate_limited=True))
    core.handle(ConnectFailed(4, "refused"))
    said, _ = say_all(core)
    assert [r.script for r in said] == [RATE_LIMITED_MESSAGE]


def test_nothing_more_is_narrated_once_stopping(core):
    core.handle(SessionReady(1))
    core.handle(ConnectFailed(3, "refused"))  # a status message waits
    core.handle(Fatal("no credit"))
    assert core.narration_waiting and core.next_narration() is None


def test_a_connection_message_waits_for_a_speaker_to_finish(core, clock):
    """Issue 10, defect 8: an unprompted message must not start (and mute the mic) while the
    user is mid-sentence; it is said once they are done."""
    core.handle(ConnectFailed(3, "refused"))
    core.handle(SessionReady(1))  # trouble announced: "connected again" once healthy
    core.next_narration()
    core.handle(NarrationsFinished())
    core.handle(QuietChanged(False))  # someone starts talking
    clock.now += 30
    core.handle(Tick())
    assert not core.narration_waiting and core.next_narration() is None
    core.handle(QuietChanged(True))
    assert core.narration_waiting
    assert core.next_narration().script == RECONNECTED_MESSAGE


def test_replay_keeps_a_whole_utterance_when_the_buffer_is_full():
    """Issue 10, defect 8: with the buffer full of newer audio, the replayed utterance's start
    survives; the oldest audio that is not part of it goes instead."""
    uplink = Uplink(capacity_chunks=10, bytes_per_second=48000)
    uplink.new_session()
    for n in range(15):  # 300 ms sent; speech began at 100 ms
        uplink.take(bytes([n]) * 960, session_ready=True)
        uplink.sent(uplink.next_chunk()[0])
    for n in range(100, 120):  # the session is gone; 400 ms more arrive while reconnecting
        uplink.take(bytes([n]) * 960, session_ready=False)
    uplink.session_lost(replay_from_ms=100, chunk_ms=20)
    for n in range(200, 205):
        uplink.take(bytes([n]) * 960, session_ready=False)
    order = []
    while (nxt := uplink.next_chunk()) is not None:
        order.append(nxt[1][0])
        uplink.sent(nxt[0])
    assert order[:10] == list(range(5, 15))  # the utterance from its start, whole
    assert order[-5:] == list(range(200, 205))  # the newest audio kept too


@pytest.mark.parametrize("told_until_ms, replayed_ms", [(None, 0), (1000, UNTOLD_MS), (4000, 1000)])
def test_a_drop_replays_the_untold_end_of_what_was_sent(told_until_ms, replayed_ms):
    """A drop may take the server's last events with it (a speech_started): what was sent after
    the last utterance the session told of goes again, but at most its last UNTOLD_MS."""
    uplink = Uplink(capacity_chunks=500, bytes_per_second=48000)
    uplink.new_session()
    for n in range(250):  # 5 s sent
        uplink.take(bytes([n]) * 960, session_ready=True)
        uplink.sent(uplink.next_chunk()[0])
    assert uplink.session_lost(None, chunk_ms=20, untold_from_ms=told_until_ms) == replayed_ms
    first = uplink.next_chunk()
    assert (first is None) if replayed_ms == 0 else first[1][0] == 250 - replayed_ms // 20


def conversational(clock):
    timings = dataclasses.replace(TIMINGS, follow_up_s=6.0, working_after_s=1.0, still_working_after_s=8.0)
    return CoordinatorCore(timings, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(500, 48000), clock)


def test_an_answer_that_asks_nothing_takes_no_follow_up(clock):
    """Issue 19: "My computer is slow today", said to someone else after an answer, is overheard."""
    core = conversational(clock)
    send = routed(core)
    core.handle(RouteSent(send.route))
    core.handle(SpeakText(send.command, "It is noon."))
    _, actions = say_all(core)
    assert actions == [RestartListener("after a narration")]
    assert not core.gate.window_open
    assert isinstance(core.gate.classify("my computer is slow today", clock.now + 3), Ignore)


@pytest.mark.parametrize("mode, script, opens", [
    (FollowUp.INVITED, "It is noon. Shall I set a timer?", True),
    (FollowUp.INVITED, 'Which file, "notes" or "todo"?"', True),
    (FollowUp.INVITED, "Is it noon? It is.", False),
    (FollowUp.ALWAYS, "It is noon.", True),
    (FollowUp.NEVER, "Shall I set a timer?", False),
])
def test_the_follow_up_window_opens_when_invited(clock, mode, script, opens):
    core = CoordinatorCore(dataclasses.replace(TIMINGS, follow_up_s=6.0, follow_up=mode), WakeGate("computer", (), 8.0),
                           Timeline(clock=clock), Uplink(500, 48000), clock)
    send = routed(core)
    core.handle(RouteSent(send.route))
    core.handle(SpeakText(send.command, script))
    _, actions = say_all(core)
    follow = [OpenFollowUp(6.0), PlayChime(Earcon.FOLLOW_UP)] if opens else []
    assert actions == [*follow, RestartListener("after a narration")]
    assert core.gate.window_open is opens


def test_after_an_answer_a_follow_up_needs_no_wake_phrase_for_a_moment(clock):
    core = conversational(clock)
    send = routed(core)
    core.handle(RouteSent(send.route))
    core.handle(SpeakText(send.command, "It is noon. Anything else?"))
    _, actions = say_all(core)
    assert actions == [OpenFollowUp(6.0), PlayChime(Earcon.FOLLOW_UP), RestartListener("after a narration")]
    clock.now += 5.9
    assert isinstance(core.gate.classify("and what day is it", clock.now), Command)
    # Outside the window, the same words are overheard speech.
    core.gate.open_window(clock.now + 6.0)
    clock.now += 6.1
    assert isinstance(core.gate.classify("and what day is it", clock.now), Ignore)


def test_no_follow_up_window_after_a_notice(clock):
    core = conversational(clock)
    core.handle(SessionReady(1))
    core.handle(NoticesPending())
    core.handle(NoticeBatchFetched((1,), "The backup finished."))
    _, actions = say_all(core)
    assert actions == [AckNotices((1,)), RestartListener("after a narration")]
    assert isinstance(core.gate.classify("what a nice day", clock.now + 1), Ignore)


def test_a_late_answer_gets_the_working_sound_and_a_slow_tool_one_spoken_line(clock):
    core = conversational(clock)
    send = routed(core)
    core.handle(RouteSent(send.route))
    assert core.next_deadline(clock.now) == clock.now + 1.0
    assert not core.working_sound_on
    clock.now += 1.0
    core.handle(Tick())
    assert core.working_sound_on and core.timeline.count("working") == 1
    core.handle(RunTools(send.command, (call(),), session=1))
    assert core.next_deadline(clock.now) == clock.now + 8.0
    clock.now += 8.0
    core.handle(Tick())
    assert core.working_sound_on  # it plays on between the lines
    request = core.next_narration()
    assert (request.script, request.kind) == (STILL_WORKING_MESSAGE, NarrationKind.PROGRESS)
    assert not core.working_sound_on  # not under a narration
    core.handle(NarrationDone(request, "ok"))
    assert core.handle(NarrationsFinished()) == []  # no restart: the answer is still to come
    assert core.working_sound_on
    clock.now += 30
    core.handle(Tick())
    assert not core.narration_waiting  # said once only
    core.handle(ToolsFinished(send.route, ("Done.",)))
    said, _ = say_all(core)
    assert [r.script for r in said] == ["Done."] and not core.working_sound_on


def test_a_quick_answer_plays_no_working_sound(clock):
    core = conversational(clock)
    send = routed(core)
    core.handle(RouteSent(send.route))
    clock.now += 0.5
    core.handle(SpeakText(send.command, "Noon."))
    say_all(core)
    clock.now += 5
    core.handle(Tick())
    assert not core.working_sound_on and core.timeline.count("working") == 0


def test_the_documented_table_is_the_table():
    """docs/HANDOFF.md shows TRANSITIONS row for row: the doc cannot drift from the code."""
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "HANDOFF.md").read_text()
    rows = {line for line in doc.splitlines() if line.startswith("| ") and line.count("|") == 5}
    for (state, event), target in TRANSITIONS.items():
        assert f"| {type(state).__name__} | {state.value} | {event.value} | {target.value} |" in rows


def test_a_send_that_hangs_is_caught_by_the_watchdog(core, clock):
    routed(core)
    clock.now += 30
    assert core.handle(Tick()) == [AbandonRoute(), RestartListener("the model did not answer a command")]
    assert core.machines[RouteState] is RouteState.IDLE


def test_a_spent_budget_pauses_uploads_until_the_next_day_and_is_said_once(clock):
    from datetime import datetime, timedelta

    from config.settings import CostSettings
    from decisions.coordinator import BUDGET_REACHED_MESSAGE
    from decisions.cost import CostMeter
    from decisions.listener_core import UsageReported
    from realtime_api.wire import Usage

    wall = [datetime(2026, 11, 22, 23, 0)]
    meter = CostMeter(CostSettings(daily_budget_usd=0.001), clock=lambda: wall[0])
    core = CoordinatorCore(TIMINGS, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(500, 48000), clock,
                           cost=meter)
    core.handle(SessionReady(1))
    core.handle(UsageReported(Usage(input_text_tokens=1_000_000)))
    assert core.uploads_paused
    said, _ = say_all(core)
    assert [r.script for r in said] == [BUDGET_REACHED_MESSAGE]
    core.handle(UsageReported(Usage(input_text_tokens=1_000)))
    assert not core.narration_waiting  # said once
    clock.now += 1800
    wall[0] += timedelta(minutes=30)
    core.handle(Tick())
    assert core.uploads_paused  # still today
    clock.now += 1800
    wall[0] += timedelta(minutes=30)  # local midnight
    core.handle(Tick())
    assert not core.uploads_paused


# --- "computer, stop" while it talks ------------------------------------------------------------


def test_a_stop_cuts_an_answer_and_a_fresh_listener_takes_the_next_command_without_a_follow_up_window(clock):
    core = conversational(clock)
    send = routed(core)
    core.handle(RouteSent(send.route))
    core.handle(SpeakText(send.command, "A very long answer."))
    answer = core.next_narration()
    assert core.narrating and core.phase is Phase.NARRATING
    assert core.handle(StopHeard("computer stop")) == [CutNarration("computer stop")]
    assert core.machines[VoiceState] is VoiceState.CUT and core.phase is Phase.NARRATING and not core.narrating
    assert core.handle(StopHeard("computer stop")) == []  # heard again while cutting: cut once
    assert core.restart_owed and core.next_narration() is None  # the worker lets go of the voice
    core.handle(NarrationDone(answer, "stopped"))
    # No follow-up window and no earcon after a stop (the user asked for quiet), but a clean listener.
    assert core.handle(NarrationsFinished()) == [RestartListener("after a stop")]
    assert not core.gate.window_open_at(clock.now) and core.stops == 1
    assert core.timeline.count("stopped") == 1 and core.timeline.count("follow-up") == 0
    core.handle(end(1000, by_us=True))
    core.handle(SessionReady(2))
    routed(core, "what day is it")  # listening again: the next command is routed


def test_a_stop_while_nothing_is_said_is_ignored(core):
    core.handle(SessionReady(1))
    assert core.handle(StopHeard("computer stop")) == []
    assert core.machines[VoiceState] is VoiceState.QUIET and core.stops == 0
    core.handle(Heard("computer", WakeOnly()))
    core.handle(ChimeStarted())
    assert core.handle(StopHeard("computer cancel")) == []  # an earcon is not cut
    assert core.machines[VoiceState] is VoiceState.CHIME
    core.handle(ChimeFinished(Earcon.WAKE))
    assert core.timeline.count("stopped") == 0


def test_a_stop_keeps_a_queued_notice_for_later_and_it_waits_a_moment_after_the_stop(core, clock):
    core.handle(SessionReady(1))
    assert core.handle(NoticesPending()) == [FetchNotices()]
    send = routed(core)  # a command comes in while the batch is being fetched
    core.handle(NoticeBatchFetched((7,), "The backup finished."))
    core.handle(RouteSent(send.route))
    core.handle(SpeakText(send.command, "A long answer."))
    answer = core.next_narration()
    assert answer.kind is NarrationKind.FALLBACK
    assert core.handle(StopHeard("computer stop")) == [CutNarration("computer stop")]
    # The notice was not said: back to the queue, neither dropped nor acknowledged.
    assert core.machines[NoticeState] is NoticeState.PENDING and not core.narration_waiting
    actions = core.handle(NarrationDone(answer, "stopped")) + core.handle(NarrationsFinished())
    assert actions == [RestartListener("after a stop")]
    core.handle(end(1000, by_us=True))
    assert core.handle(SessionReady(2)) == []  # idle, but the user just asked for quiet
    assert core.next_deadline(clock.now) == pytest.approx(clock.now + TIMINGS.notices_after_stop_s)
    clock.now += TIMINGS.notices_after_stop_s
    assert core.handle(Tick()) == [FetchNotices()]  # fetched again, said, and only then acked
    core.handle(NoticeBatchFetched((7,), "The backup finished."))
    said, actions = say_all(core)
    assert [r.script for r in said] == ["The backup finished."] and AckNotices((7,)) in actions


def test_a_stop_cuts_a_notice_and_a_status_message(core, clock):
    core.handle(SessionReady(1))
    core.handle(NoticesPending())
    core.handle(NoticeBatchFetched((3,), "The backup finished."))
    notice = core.next_narration()
    assert core.handle(StopHeard("computer cancel")) == [CutNarration("computer cancel")]
    # Heard in part and dismissed: acknowledged like any notice said, never announced again.
    assert core.handle(NarrationDone(notice, "stopped")) == [AckNotices((3,))]
    assert core.handle(NarrationsFinished()) == [RestartListener("after a stop")]
    core.handle(end(1000, by_us=True))
    core.handle(SessionReady(2))
    core.handle(ConnectFailed(3, "refused"))  # "I can't reach OpenAI right now ..."
    status = core.next_narration()
    assert status.kind is NarrationKind.STATUS
    assert core.handle(StopHeard("computer stop")) == [CutNarration("computer stop")]
    core.handle(NarrationDone(status, "stopped"))
    assert core.handle(NarrationsFinished()) == [RestartListener("after a stop")]
    assert core.stops == 2 and core.phase is Phase.RESTARTING


def test_an_utterance_begun_after_the_mute_lifted_is_kept_at_a_handover_one_it_cut_is_not(core):
    core.handle(SessionReady(1))
    with core.mute.hold("narration"):
        core.handle(QuietChanged(False))  # begun while muted: its start was never uploaded
        assert not core.speech_began_unmuted
    assert not core.speech_began_unmuted  # still the same (cut) utterance
    core.handle(QuietChanged(True))
    core.handle(QuietChanged(False))  # begun after the mute lifted: whole
    assert core.speech_began_unmuted
    with core.mute.hold("chime"):  # a mute that comes while it is said cuts it
        assert not core.speech_began_unmuted
    assert not core.speech_began_unmuted
    core.handle(QuietChanged(True))
    assert not core.speech_began_unmuted  # nobody mid-utterance


# --- routing at the commit (issue 20) -------------------------------------------------------------


def by_audio(clock, read_only=frozenset({"get_time"})):
    core = CoordinatorCore(TIMINGS, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(500, 48000), clock,
                           read_only_tools=read_only)
    core.handle(SessionReady(1))
    send, taken = core.handle(CommandCommitted("item_1"))
    assert isinstance(taken, CommandTaken)  # the wake's window ends with this command
    assert send == SendRoute(1, "", item="item_1")
    core.handle(RouteSent(send.route))
    return core, send


def test_a_read_only_call_runs_before_the_transcript_and_the_transcript_routes_nothing_more(clock):
    core, send = by_audio(clock)
    (start,) = core.handle(RunTools("", (call(),), session=1))
    assert isinstance(start, StartTools)
    assert core.handle(CommandConfirmed("item_1", "what time is it")) == []  # not routed again
    assert core.handle(ToolsFinished(send.route, ("It is noon.",))) == []
    assert core.timeline.count("confirmed") == 1 and core.timeline.count("command") == 1


def test_a_call_that_acts_waits_for_the_transcript_and_runs_once(clock):
    core, send = by_audio(clock)
    # Held: nothing runs; what it may do first (tools.registry prepare) starts while its words come.
    assert core.handle(RunTools("", (call(name="set_timer"),), session=1)) == [PrepareTools((call(name="set_timer"),))]
    assert core.machines[RouteState] is RouteState.AWAITING_RESPONSE
    (start,) = core.handle(CommandConfirmed("item_1", "set a timer for ten minutes"))
    assert start == StartTools(send.route, "set a timer for ten minutes", (call(name="set_timer"),), 1)
    assert core.handle(CommandConfirmed("item_1", "set a timer for ten minutes")) == []  # never twice


@pytest.mark.parametrize("outcome", [RunTools("", (call(name="set_timer"),), session=1), SpeakText("", "Hello there."),
                                     RoutingFailed("", "no tool call")])
def test_a_false_local_wake_runs_nothing_and_says_nothing(clock, outcome):
    core, send = by_audio(clock)
    assert all(isinstance(action, PrepareTools) for action in core.handle(outcome))  # nothing runs
    core.handle(CommandRejected("item_1"))
    assert core.machines[RouteState] is RouteState.IDLE and core.machines[WorkingState] is WorkingState.IDLE
    assert core.next_narration() is None and core.timeline.count("withdrawn") == 1
    assert core.handle(CommandConfirmed("item_1", "set a timer")) == []  # a stale verdict changes nothing


def test_read_only_tools_of_a_false_wake_run_but_their_answer_is_not_said(clock):
    core, send = by_audio(clock)
    core.handle(RunTools("", (call(),), session=1))
    core.handle(CommandRejected("item_1"))
    core.handle(ToolsFinished(send.route, ("It is noon.",)))
    assert core.next_narration() is None and core.machines[RouteState] is RouteState.IDLE


def test_no_route_at_the_commit_while_another_command_is_routed(clock):
    core, _ = by_audio(clock)
    assert core.handle(CommandCommitted("item_2")) == []  # its transcript routes it, in turn


def test_a_route_by_audio_whose_transcript_came_first_is_withdrawn_and_routed_by_its_words(clock):
    core, send = by_audio(clock)
    core2 = core
    core2.handle(CommandHeard("what time is it"))  # queued by its words
    core2.machines.states[RouteState] = RouteState.SENDING  # (the send had not completed)
    actions = core2.handle(RouteWithdrawn(send.route))
    assert [a for a in actions if isinstance(a, SendRoute)] == [SendRoute(2, "what time is it")]


def test_pieces_are_placed_where_they_lie_in_the_microphone_stream():
    held, chunk = [b"a" * 960, b"b" * 960], b"c" * 960
    # The wake released two held chunks and sends this one: all three end where this one ends.
    assert placed_in_stream([*held, chunk], chunk, 9600) == [(7680, held[0]), (8640, held[1]), (9600, chunk)]
    # Only the held pre-roll went (this chunk is held in turn): it ends where this chunk begins.
    assert placed_in_stream(held, chunk, 9600) == [(7680, held[0]), (8640, held[1])]
    assert placed_in_stream([], chunk, 9600) == []


def test_replayed_audio_keeps_its_place_in_the_microphone_stream():
    uplink = Uplink(capacity_chunks=10, bytes_per_second=48000)
    uplink.new_session()
    for n in range(5):
        uplink.take(bytes([n]) * 960, session_ready=True, at_ms=3000 + 20 * n)
        uplink.sent(uplink.next_chunk().token)
    uplink.session_lost(replay_from_ms=40, chunk_ms=20)
    replayed = []
    while (nxt := uplink.next_chunk()) is not None:
        replayed.append(nxt.at_ms)
        uplink.sent(nxt.token)
    assert replayed == [3040, 3060, 3080]


# --- one verdict per command (issue 28, item 1) ----------------------------------------------------


def answered_by_audio(clock):
    """A read-only command routed by its audio, answered before its transcript came."""
    core, send = by_audio(clock)
    core.handle(RunTools("", (call(),), session=1))
    core.handle(ToolsFinished(send.route, ("It is noon.",)))
    return core


def test_an_answer_queued_but_not_begun_is_withdrawn_when_the_transcript_says_not_addressed(clock):
    core = answered_by_audio(clock)
    actions = core.handle(CommandRejected("item_1", "the weather is nice today"))
    assert UtteranceRejected() in actions
    assert core.next_narration() is None  # nothing of it is said
    assert core.timeline.count("withdrawn") == 1 and core.timeline.count("confirmed") == 0


def test_an_answer_begun_stands_and_its_transcript_is_what_it_answered_never_overheard(clock):
    core = answered_by_audio(clock)
    core_request = core.next_narration()
    assert core_request.script == "It is noon."  # begun before the transcript came
    actions = core.handle(CommandRejected("item_1", "Hey Travis, what time is it?"))
    assert not any(isinstance(a, UtteranceRejected) for a in actions)
    assert core.timeline.count("withdrawn") == 0 and core.timeline.count("ignored") == 0
    core.handle(NarrationDone(core_request, "similarity 1.00, attempts 1"))
    assert "Travis" not in " ".join(e.text for e in core.timeline.entries)  # its words are kept nowhere
    (closed,) = [e.event for e in core.timeline.entries if e.kind == "closed"]
    assert closed.command.kept and closed.command.words.startswith("(answered before its transcript")


# --- the command lifecycle (issue 29) -------------------------------------------------------------------


def test_a_command_answered_before_its_words_can_no_longer_be_withdrawn_by_the_table():
    from decisions.errors import IllegalTransition
    from decisions.lifecycle import CommandBook, Move, RouteMode, Step, Verdict

    book = CommandBook(strict=True)
    command = book.open(RouteMode.AUDIO, None)
    for move in (Move.ROUTE, Move.RUN, Move.ANSWER, Move.BEGIN):
        book.move(command, move)
    assert (command.step, command.verdict) == (Step.ANSWERING, Verdict.STANDS)
    assert not book.allows(command, Move.WITHDRAW)
    with pytest.raises(IllegalTransition):
        book.move(command, Move.WITHDRAW)
    lenient = CommandBook(strict=False)
    other = lenient.open(RouteMode.WORDS, "unlock the door")
    assert not lenient.move(other, Move.RUN)  # not routed yet: refused, logged and counted
    assert lenient.illegal == 1 and other.step is Step.QUEUED


def test_a_spoken_yes_is_asked_only_of_a_command_whose_words_are_known():
    from decisions.lifecycle import CommandBook, Move, RouteMode

    book = CommandBook(strict=False)
    unheard = book.open(RouteMode.AUDIO, None)
    book.move(unheard, Move.ROUTE)
    assert not book.allows(unheard, Move.ASK)


def test_every_command_closes_once_with_its_words_tools_and_what_was_said(clock):
    from decisions.events import CommandClosed

    core, send = by_audio(clock)
    core.handle(RunTools("", (call(),), session=1))
    core.handle(ToolStarted(1, "get_time", "{}"))
    core.handle(ToolDone(1, "get_time", ToolOutcome.OK, "noon"))
    core.handle(ToolsFinished(send.route, ("It is noon.",)))
    request = core.next_narration()
    core.handle(NarrationDone(request, "similarity 1.00, attempts 1"))
    assert not [e for e in core.timeline.entries if isinstance(e.event, CommandClosed)]  # its words are to come
    core.handle(CommandConfirmed("item_1", "what time is it"))
    (closed,) = [e.event for e in core.timeline.entries if isinstance(e.event, CommandClosed)]
    record = closed.command
    assert (record.words, record.tools, record.said, record.kept) == ("what time is it", ("get_time(...)",), "It is noon.", True)
    assert "last_audio" in dict(record.stages)


# --- a spoken yes before anything that cannot be undone (issue 30) ----------------------------------------


def asking(clock, reply_after_s=None):
    core = CoordinatorCore(TIMINGS, WakeGate("computer", (), 8.0), Timeline(clock=clock), Uplink(500, 48000), clock,
                           needs_yes_tools=frozenset({"unlock"}))
    send = routed(core, "unlock the front door")
    core.handle(RouteSent(send.route))
    assert core.handle(RunTools("unlock the front door", (call("u1", "unlock"),), session=1)) == []  # nothing runs
    said, _ = say_all(core)
    assert [r.script for r in said] == ["Just to be sure: shall I unlock the front door?"]
    core.handle(end(1000, by_us=True))
    core.handle(SessionReady(2))
    return core


@pytest.mark.parametrize(("reply", "runs"), [("yes", True), ("Yes, please.", True), ("no", False),
                                             ("what time is it", False), ("yes, no, wait", False)])
def test_a_tool_that_cannot_be_undone_runs_only_after_a_spoken_yes_and_once(clock, reply, runs):
    core = asking(clock)
    core.handle(Heard(reply, Command(reply, via_window=True)))
    actions = core.handle(CommandHeard(reply))
    started = [a for a in actions if isinstance(a, StartTools)]
    assert [c.name for a in started for c in a.calls] == (["unlock"] if runs else [])
    assert not [a for a in actions if isinstance(a, SendRoute)]  # the reply is no command of its own
    again = core.handle(CommandHeard("yes"))  # a second yes routes as a command: it runs nothing asked before
    assert not [a for a in again if isinstance(a, StartTools)]
    if not runs:
        said, _ = say_all(core)
        assert [r.script for r in said] == ["Okay, I won't."]


def test_silence_after_the_question_runs_nothing(clock):
    core = asking(clock)
    deadline = core.next_deadline(clock())
    assert deadline is not None
    clock.now = deadline + 0.1
    assert not [a for a in core.handle(Tick()) if isinstance(a, StartTools)]
    assert not [a for a in core.handle(CommandHeard("yes")) if isinstance(a, StartTools)]  # too late
    assert core.timeline.count("asking") == 2  # asked; no yes came


def test_the_documented_lifecycle_is_the_lifecycle():
    from pathlib import Path

    from decisions.lifecycle import LIFECYCLE

    doc = (Path(__file__).parents[2] / "docs" / "HANDOFF.md").read_text()
    rows = {line for line in doc.splitlines() if line.startswith("| ") and line.count("|") == 5}
    for (state, event), target in LIFECYCLE.rows.items():
        assert f"| {type(state).__name__} | {state.value} | {event.value} | {target.value} |" in rows


def test_a_new_command_that_needs_a_yes_while_a_question_waits_is_asked_and_the_old_one_runs_nothing(clock):
    """The user left "unlock the front door?" unanswered and said a new command that needs a yes
    inside that question's window: the old question is dropped (nothing ran) and the new one is
    asked; it was refused ("none can be asked now")."""
    from decisions.coordinator import CommandCommitted

    core = asking(clock)
    send, _taken = core.handle(CommandCommitted("item_2"))  # woken on the device: routed by its audio
    core.handle(RouteSent(send.route))
    core.handle(CommandConfirmed("item_2", "unlock the back door"))
    assert core.handle(RunTools("unlock the back door", (call("u2", "unlock"),), session=2)) == []
    assert "a new command came instead: nothing ran" in [e.text for e in core.timeline.entries]
    said, _ = say_all(core)
    assert [r.script for r in said] == ["Just to be sure: shall I unlock the back door?"]
    core.handle(Heard("yes", Command("yes", via_window=True)))
    started = [a for a in core.handle(CommandHeard("yes")) if isinstance(a, StartTools)]
    assert [(c.call_id, c.name) for a in started for c in a.calls] == [("u2", "unlock")]  # the new one, once
