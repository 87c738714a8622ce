"""The page's in-memory feed, its snapshot and its stored days, without a daemon (issue 22)."""

from __future__ import annotations

import datetime
import json
import stat
import subprocess
import sys
from pathlib import Path

import dataclasses

from decisions.events import (
    CommandClosed, CommandRouted, CommandWithdrawn, FatalError, ListenerLost, ListenerReady, LossCause, NarrationKind, Narrated,
    NarrationStarted, Note, StagesMeasured, ToolFinished, ToolOutcome, ToolRan,
)
from decisions.lifecycle import CommandRecord, RouteMode, Step, Verdict
from decisions.timeline import Timeline, TimelineKind
from service.health import ListenerHealth
from service.history import HistoryEntry, HistoryKind, Outcome
from service.notify import SystemdNotifier
from service.runtime import ServiceRuntime, StatusFiles
from web.cost_days import CostDays
from web.feed import WebFeed
from web.metrics import render
from web.snapshot import Now, latency_by_hour, now_state

REPO = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fed(tmp_path: Path, keep_overheard: bool = False) -> tuple[Timeline, ServiceRuntime, WebFeed, Clock]:
    """A timeline, the runtime's history tracker and the feed, wired as `handoff run` wires them."""
    clock = Clock()
    timeline = Timeline(clock=clock)
    files = StatusFiles(tmp_path / "status.json", history=None, keep_overheard=keep_overheard)
    runtime = ServiceRuntime(timeline, SystemdNotifier(), ListenerHealth(60.0), None, files)
    timeline.on_add.append(runtime._observe)  # as `async with runtime` does
    feed = WebFeed(current_command=lambda: runtime.current_command)
    timeline.on_add.append(feed.observe)
    runtime.on_history.append(feed.history_done)
    return timeline, runtime, feed, clock


def record(heard: str, step: Step = Step.ROUTED, said: str = "", tools: tuple[str, ...] = ()) -> CommandRecord:
    return CommandRecord(1, RouteMode.WORDS, heard, step, Verdict.ADDRESSED, tools, (), said)


def command(timeline: Timeline, clock: Clock, heard: str = "what time is it") -> None:
    """The events a core emits for one command answered by get_time (decisions.coordinator)."""
    said = "It is a quarter past ten."
    for event, step in (
        (Note(TimelineKind.HEARD, f"computer, {heard}"), 0.0), (CommandRouted(record(heard)), 0.05),
        (ToolRan(1, "get_time", "{}"), 0.4), (ToolFinished(1, "get_time", ToolOutcome.OK, "10:15"), 0.05),
        (NarrationStarted(NarrationKind.ANSWER, said), 0.1),
        (Narrated(NarrationKind.ANSWER, said, "similarity 1.00, attempts 1"), 2.0),
        (CommandClosed(record(heard, Step.SAID, said, ("get_time({})",))), 0.0),
    ):  # fmt: skip
        clock.now += step
        timeline.emit(event)


def test_overheard_speech_never_reaches_the_page_even_when_the_history_keeps_it(tmp_path: Path) -> None:
    timeline, _, feed, clock = fed(tmp_path, keep_overheard=True)
    timeline.add(TimelineKind.IGNORED, "my bank password is hunter2")
    command(timeline, clock)
    text = json.dumps([vars(view.entry) | {"results": view.results} for view in feed.commands], default=str)
    assert "hunter2" not in text and "hunter2" not in repr(list(feed.events))
    assert [view.entry.heard for view in feed.commands] == ["what time is it"]


def test_a_command_s_stages_seen_on_the_timeline_and_counted_once(tmp_path: Path) -> None:
    timeline, _, feed, clock = fed(tmp_path)
    command(timeline, clock)
    (view,) = feed.commands
    assert view.done and view.results == ["get_time ok: 10:15"]
    # No end of speech on the timeline: the transcript is the origin; first audio is not seen there.
    assert view.stages() == {"transcript": 0.0, "route_sent": 0.05, "call_received": 0.45, "tool_done": 0.5, "last_audio": 2.6}
    assert feed.stage_seconds["last_audio"].count == 1
    assert feed.counts["commands", "answered"] == 1 and feed.counts["tool_runs", "get_time", "ok"] == 1
    assert b'handoff_commands_total{outcome="answered"} 1.0' in render(feed, lambda: None)


def test_the_history_s_own_stage_times_win(tmp_path: Path) -> None:
    timeline, runtime, feed, clock = fed(tmp_path)
    timeline.emit(CommandRouted(record("what time is it")))
    assert runtime.current_command is not None
    stages = {"end_of_speech": 0.0, "commit": 0.1, "first_audio": 1.2, "last_audio": 3.0}
    timeline.emit(NarrationStarted(NarrationKind.ANSWER, "It is ten."))
    timeline.emit(StagesMeasured(1, stages))
    timeline.emit(Narrated(NarrationKind.ANSWER, "It is ten.", "similarity 1.00, attempts 1"))
    timeline.emit(CommandClosed(dataclasses.replace(record("what time is it", Step.SAID, "It is ten."),
                                                    stages=tuple(stages.items()))))
    assert feed.commands[-1].stages()["first_audio"] == 1.2
    assert [seconds for _, seconds in feed.latencies] == [1.2]


def test_connection_events_and_their_spoken_lines(tmp_path: Path) -> None:
    timeline, _, feed, _ = fed(tmp_path)
    timeline.emit(ListenerReady(1))
    assert not feed.listener_trouble
    timeline.emit(ListenerLost(LossCause.DROPPED, 1006))
    assert feed.listener_trouble
    timeline.emit(NarrationStarted(NarrationKind.STATUS, "I lost the connection; reconnecting."))
    timeline.emit(Narrated(NarrationKind.STATUS, "I lost the connection; reconnecting.", "similarity 1.00, attempts 1"))
    timeline.emit(ListenerLost(LossCause.EXPIRED))
    timeline.emit(FatalError("the API key was refused"))
    assert [(str(e.kind), e.text) for e in feed.events] == [
        ("error", "listener connection dropped (code 1006); reconnecting"), ("said", "I lost the connection; reconnecting."),
        ("reconnect", "listener session expired; reconnecting"), ("fatal", "the API key was refused"),
    ]  # fmt: skip
    assert feed.counts["reconnects", "dropped"] == feed.counts["reconnects", "expired"] == 1


def test_the_state_in_the_page_s_words() -> None:
    assert now_state("narrating", True, "quiet", False) == Now.NARRATING
    assert now_state("routing", True, "quiet", True) == Now.WORKING
    assert now_state("routing", True, "quiet", False) == Now.ROUTING
    assert now_state("listening", True, "sending", False) == Now.HEARING
    assert now_state("restarting", False, "quiet", False, trouble=True) == Now.RECONNECTING
    assert now_state("restarting", False, "quiet", False, trouble=False) == Now.LISTENING  # the handover after an answer


def test_latency_per_hour_p50_and_p95() -> None:
    now = 10 * 3600 + 1800.0
    latencies = [(now - 60, s) for s in (1.0, 2.0, 3.0, 4.0, 10.0)] + [(now - 3 * 3600, 0.5), (now - 30 * 3600, 9.0)]
    rows = latency_by_hour(latencies, now)
    assert len(rows) == 24 and rows[-1] == {"hour": 10 * 3600, "count": 5, "p50": 3.0, "p95": 10.0}
    assert rows[-4]["p50"] == 0.5 and sum(r["count"] for r in rows) == 6  # the one 30 h ago is out


def test_cost_days_add_up_runs_and_forget_old_days(tmp_path: Path) -> None:
    path = tmp_path / "cost-days.json"
    today = datetime.date(2026, 11, 24)
    first = CostDays(path, "run-1")
    first.record(today - datetime.timedelta(days=40), {"brain": 9.0})
    first.record(today, {"listener": 0.01, "narrator": 0.02})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second = CostDays(path, "run-2")  # a restart the same day
    second.record(today, {"narrator": 0.03})
    third = CostDays(path, "run-3")
    assert third.earlier(today) == {"listener": 0.01, "narrator": 0.05, "transcription": 0.0, "brain": 0.0}
    assert second.earlier(today) == {"listener": 0.01, "narrator": 0.02, "transcription": 0.0, "brain": 0.0}  # not its own
    days = third.last_days(today, 14, {"listener": 0.01, "narrator": 0.05, "brain": 0.5})  # the meter's today: all runs
    assert len(days) == 14 and days[-1]["day"] == "2026-11-24"
    assert days[-1]["parts"] == {"listener": 0.01, "narrator": 0.05, "transcription": 0.0, "brain": 0.5}
    assert third.last_days(today, 2, None)[-1]["total"] == 0.06  # as recorded
    assert "2026-10-15" not in json.loads(path.read_text())["days"]


def test_status_and_web_url_do_not_load_aiohttp_or_prometheus_client() -> None:
    probe = ("import sys, commands.status, commands.web_url; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'prometheus_client', 'web.server')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_history_entry_said_unasked_is_an_event_not_a_command(tmp_path: Path) -> None:
    _, _, feed, _ = fed(tmp_path)
    feed.history_done(HistoryEntry(1.0, HistoryKind.NOTICE, said="The backup finished.", outcome=Outcome.SAID))
    assert not feed.commands and feed.events[-1].text == "The backup finished."


def test_a_crashed_tool_is_counted_and_a_notice_is_not_the_command_s_last_audio(tmp_path: Path) -> None:
    timeline, _, feed, clock = fed(tmp_path)
    timeline.emit(CommandRouted(record("read my notes")))
    timeline.emit(ToolRan(1, "read_file_head", "{}"))
    timeline.emit(ToolFinished(1, "read_file_head", ToolOutcome.CRASHED, "KeyError"))
    # said meanwhile: not this command's answer
    timeline.emit(Narrated(NarrationKind.NOTICE, "The backup finished.", "similarity 1.00, attempts 1"))
    assert feed.counts["tool_runs", "read_file_head", "crashed"] == 1
    assert "last_audio" not in feed.commands[-1].stages() and not feed.commands[-1].done


async def test_spending_is_saved_as_it_goes_even_while_the_saver_rests(tmp_path: Path, monkeypatch) -> None:
    # Issue 28, item 2: what a run spends survives it (a crash loses seconds of it at most).
    from concurrency.changes import Changes
    from web import cost_days

    monkeypatch.setattr(cost_days, "SAVE_EVERY_S", 0.05)
    today = datetime.date(2026, 11, 24)
    parts = {"brain": 0.0}
    spent, recorded = Changes(), Changes()
    days = CostDays(tmp_path / "cost-days.json", "run-1")
    writes: list[float] = []
    record = days.record

    def recording(day: datetime.date, saved: dict[str, float]) -> None:
        record(day, saved)
        writes.append(saved["brain"])
        recorded.notify()

    monkeypatch.setattr(days, "record", recording)
    async with cost_days.saving(days, lambda: (today, dict(parts)), spent):
        parts["brain"] = 0.1
        spent.notify()
        await recorded.wait_until(lambda: writes == [0.1], timeout=5)
        parts["brain"] = 0.2  # while it rests after that write: said once, not again
        spent.notify()
        await recorded.wait_until(lambda: writes == [0.1, 0.2], timeout=5)
    assert writes == [0.1, 0.2, 0.2]  # and once more at the end
    assert CostDays(tmp_path / "cost-days.json", "run-2").earlier(today)["brain"] == 0.2


def test_a_withdrawn_command_leaves_no_row_in_progress(tmp_path: Path) -> None:
    # Issue 28, item 4: a route by audio that its transcript withdrew stayed a yellow row for ever.
    timeline, _, feed, _ = fed(tmp_path)
    unheard = CommandRecord(7, RouteMode.AUDIO, None, Step.ROUTED, Verdict.UNHEARD)
    timeline.emit(CommandRouted(unheard))
    assert len(feed.commands) == 1 and not feed.commands[0].done
    withdrawn = dataclasses.replace(unheard, step=Step.WITHDRAWN, verdict=Verdict.WITHDRAWN)
    timeline.emit(CommandWithdrawn(withdrawn, "not addressed after all"))
    timeline.emit(CommandClosed(withdrawn))
    assert not feed.commands


def test_metrics_show_todays_cost_without_float_noise(tmp_path: Path) -> None:
    from decisions.cost import CostMeter
    from config.settings import CostSettings

    _, _, feed, _ = fed(tmp_path)
    import datetime as dt
    meter = CostMeter(CostSettings(), clock=lambda: dt.datetime(2026, 11, 25, 12, 0))
    for _ in range(3):
        meter.transcription(0.1)
    text = render(feed, meter.summary).decode()
    line = next(l for l in text.splitlines() if l.startswith('handoff_cost_today_usd{part="transcription"}'))
    assert len(line.rsplit(" ", 1)[1]) <= 12, line


def test_metrics_tool_labels_are_bounded_whatever_names_a_model_makes_up(tmp_path: Path) -> None:
    """Issue 27: 10,000 unknown tool names from a model made 10,002 series on /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    from web.metrics import MAX_LABEL_VALUES

    timeline, _runtime, feed, _clock = fed(tmp_path)
    timeline.emit(ToolFinished(1, "get_time", ToolOutcome.OK, "10:15"))
    for n in range(10_000):
        timeline.emit(ToolFinished(1, f"invented_{n}", ToolOutcome.FAILED, "no such tool"))
    families = {f.name: f for f in text_string_to_metric_families(render(feed, lambda: None).decode())}
    runs = [s for s in families["handoff_tool_runs"].samples if s.name == "handoff_tool_runs_total"]
    assert len(runs) <= MAX_LABEL_VALUES * 2, len(runs)
    assert sum(s.value for s in runs) == 10_001  # nothing lost: the rest counted as "other"
    assert any(s.labels["tool"] == "other" for s in runs)
