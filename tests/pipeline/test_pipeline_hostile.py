"""A hostile or refusing server, and the races it shakes out (issue 23: defects 3, 4, 5, 18):
the daemon answers or refuses every command aloud and keeps running."""

from __future__ import annotations

import asyncio

from decisions.coordinator import NarrationKind
from decisions.listener_core import QuietChanged
from tests.support.pipeline_harness import narrated_scripts, running_pipeline


async def until(predicate) -> None:
    """Let the loop run until `predicate` holds (each step runs every ready task once)."""
    for _ in range(10_000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def test_a_narration_withdrawn_while_its_worker_waits_for_the_voice_is_no_crash(tmp_path, sim):
    """Defect 5: the narration worker saw a narration waiting, then waited for the voice (a chime
    or the working sound held it); meanwhile the narration could no longer start (a status
    message waits while someone speaks). It said nothing, yet reported `narrations_finished`,
    which the table refuses while the voice is quiet: the daemon died."""
    async with running_pipeline(tmp_path, sim) as p:
        c = p.coordinator
        async with c._reader_lock:  # a chime holds the voice
            c.core._queue("I can't reach OpenAI right now.", NarrationKind.STATUS)
            c.changes.notify()
            await until(lambda: bool(c._reader_lock._waiters))  # the worker waits for the voice
            c._feed(QuietChanged(False))  # someone starts talking: the status message must wait
        await until(lambda: not c._reader_lock.locked() and not c._reader_lock._waiters)
        c._feed(QuietChanged(True))  # they finished: now it is said
        await p.wait(lambda t: "I can't reach OpenAI right now." in narrated_scripts(p))
        await p.wait(lambda t: t.count("narrated") >= 1)
        assert not p.task.done()
        assert c.illegal_transitions == 0


async def test_an_event_the_table_refuses_is_logged_and_counted_never_the_end(tmp_path, sim, caplog):
    """Whatever the race, an illegal transition in the running daemon is a logged, counted bug."""
    from decisions.coordinator import NarrationsFinished

    async with running_pipeline(tmp_path, sim) as p:
        p.coordinator._feed(NarrationsFinished())  # nothing was being said: the table refuses it
        assert p.coordinator.illegal_transitions == 1
        assert "not allowed" in caplog.text
        await p.ask("Computer, what time is it")
        assert not p.task.done()
