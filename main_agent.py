"""The listener: one always-on Realtime session that hears everything and only routes.

`ListenerCore` (decisions.listener_core) decides for one session: fed parsed server events, it
returns actions (events to send, commands heard, tool calls to run). `Listener` is the async shell:
it owns the connection loop (connect, configure, receive, reconnect) and applies the actions.
The listener never speaks: its session is text-only and every command must end in a tool call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Literal

from openai import AsyncOpenAI

from config.settings import Settings
from decisions.listener_core import (
    Action, ConnectFailed, Fatal, ListenerCore, ListenerEvent, QuietChanged, Send, SessionEnd, SessionReady,
)
from decisions.listener_session import Current, ListenerSessions, Move, Standby
from decisions.wake_gate import WakeGate
from realtime_api import wire
from realtime_api.fatal import fatal_message
from realtime_api.link import CLOSE_NO_FRAME, HandshakeFailed, RealtimeLink, Refusal, open_configured, reconnect_policy
from realtime_api.sessions import listener_session
from realtime_api.wire import ClientEvents

log = logging.getLogger("handoff.listener")


class Listener:
    """The async shell: keeps one configured listener session alive forever."""

    def __init__(
        self,
        settings: Settings,
        client: AsyncOpenAI,
        tools: list[dict[str, Any]],
        on_event: Callable[[ListenerEvent], None],
        gate: WakeGate | None = None,
        clock: Callable[[], float] = time.monotonic,
        refusal: Refusal | None = None,
    ) -> None:
        self._settings = settings
        self._refusal = refusal or Refusal()  # shared with the narrator: one refusal stops every attempt
        self._client = client
        self._session = listener_session(settings, tools)
        self._report = on_event  # sync: the coordinator only records what happened
        self._clock = clock
        self.gate = gate or WakeGate(
            settings.listener.wake_phrase, settings.listener.wake_aliases, settings.listener.wake_window_s
        )
        self._link: RealtimeLink | None = None
        self._core: ListenerCore | None = None
        # Where the current session and the next one are (decisions.listener_session's table):
        # a closing session takes no more audio; a warming standby is awaited, not opened twice.
        self.sessions = ListenerSessions()
        # The next session, opened and configured while the narrator speaks (`warm_up`), so a
        # restart after a narration costs no connect and no session.update.
        self._standby: RealtimeLink | None = None
        self._warmed: asyncio.Event | None = None  # set when the warm-up under way has ended
        self._quiet = True  # as last reported
        self._session_started = 0.0
        self._carried_wake: float | None = None  # a woken utterance the last session handed over (its phrase s)
        self.sessions_opened = 0
        # Set by `restart`: the current session is handed over (the run loop opens the next one
        # at once while the old one, retired, serves on in its own task until what it heard is
        # transcribed). Sessions serve in tasks of this group, owned by `run`.
        self._handover: asyncio.Event | None = None
        self._tg: asyncio.TaskGroup | None = None
        # Retired sessions still open, waiting for their transcripts: each closes at the latest
        # when its deadline task (`retire_wait_s`) runs out.
        self._retiring: dict[int, asyncio.Task[None]] = {}  # by id(link)
        # `heard_all_sent` calls waiting for their session's session.updated, oldest first.
        self._syncs: list[tuple[RealtimeLink, asyncio.Future[bool]]] = []

    # -- state the coordinator reads -------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._link is not None and self._core is not None and self.sessions.takes_audio

    @property
    def illegal_moves(self) -> int:
        """Moves the sessions' table refused (bugs: logged, counted, nothing moved)."""
        return self.sessions.illegal

    @property
    def quiet(self) -> bool:
        return self._core is not None and self._core.quiet

    @property
    def session_age_s(self) -> float:
        return self._clock() - self._session_started if self.ready else 0.0

    # -- commands from the coordinator ------------------------------------------------------------
    async def send_audio(self, pcm: bytes, at_ms: int | None = None) -> bool:
        """`at_ms`: where the chunk lies in the microphone's stream (named in the append's id)."""
        link = self._link
        return link is not None and self.ready and await link.send(ClientEvents.append_audio(pcm, at_ms))

    async def heard_all_sent(self) -> bool:
        """Whether the current session has taken in every chunk of audio sent to it so far (and
        sent the VAD events that audio caused): a session.update that changes nothing, answered by
        session.updated once the server got to it (a session's events are handled in order; the
        audio appends have no acknowledgement of their own). False when the session went away
        first. How a finished file knows the server has heard all of it, however late it runs."""
        link = self._link
        if link is None or not self.ready:
            return False
        answered: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._syncs.append((link, answered))
        if not await link.send(ClientEvents.session_update({})):
            self._end_syncs(link)
            return False
        return await answered

    def _end_syncs(self, link: RealtimeLink, first_only: bool = False, result: bool = False) -> None:
        for waiting_link, answered in list(self._syncs):
            if waiting_link is link:
                self._syncs.remove((waiting_link, answered))
                if not answered.done():
                    answered.set_result(result)
                if first_only:
                    return

    async def route(self, command: str) -> bool:
        """Route a command in the current session; False when there is none (caller keeps it)."""
        if self._core is None or self._link is None:
            return False
        await self._apply(self._core.route(command, self._session["tools"]), self._link)
        return True

    async def route_audio(self, item_id: str) -> bool | None:
        """Route a committed utterance by its audio (the wake was heard on the device). True: sent;
        None: its transcript came first (routed by its words instead); False: no session."""
        if self._core is None or self._link is None:
            return False
        actions = self._core.route_audio(item_id, self._session["tools"])
        if actions is None:
            return None
        await self._apply(actions, self._link)
        return True

    async def route_inline(self, pcm: bytes, provisional: bool = False) -> str | Literal[False] | None:
        """Route the woken utterance in progress with its audio inline (the device heard its end,
        or a pause that may be it: `provisional`). Its item id: sent; None: no such utterance
        known here (its commit routes it); False: no session."""
        if self._core is None or self._link is None:
            return False
        actions = self._core.route_inline(pcm, self._session["tools"], provisional)
        if actions is None:
            return None
        await self._apply(actions, self._link)
        return self._core.routed_item or None

    async def withdraw_provisional(self) -> None:
        """The user went on after the pause a provisional route was sent at: withdraw it."""
        if self._core is not None and self._link is not None:
            await self._apply(self._core.withdraw_provisional(), self._link)

    def local_wake(self, phrase_s: float) -> None:
        """The device heard the wake phrase: the next utterance the session hears begins with it."""
        if self._core is not None and self.sessions.current is not Current.CLOSING:
            self._core.local_wake(phrase_s)

    async def send_tool_output(self, call: wire.FunctionCall, output: str, session: int) -> None:
        """Return a result to the session whose model asked for it (a later session never saw
        the call). The listener makes no further response: the narrator speaks the result. The
        call came from an out-of-band response, so it is in no conversation to anchor the output
        after: the output is appended (once per call)."""
        if self._link is not None and session == self.sessions_opened:
            await self._link.send(ClientEvents.function_output(call.call_id, output, None))

    def abandon_route(self) -> None:
        if self._core is not None:
            self._core.abandon_route()

    async def restart(self, reason: str, keep_in_progress: bool = False) -> None:
        """Hand over to a fresh session: the microphone goes to the next session at once (the
        warm one, if ready), the utterance in progress goes there whole (replayed from its
        start), and this session, retired, stays open only until what it heard is transcribed
        (a transcript completes after its commit: closing now would lose it). The utterance in
        progress is dropped unless `keep_in_progress` (see ListenerCore.retire)."""
        link, core, handover = self._link, self._core, self._handover
        if link is None or core is None or handover is None or not self.sessions.allows(Move.RETIRE):
            return
        self.sessions.fire(Move.RETIRE)  # at once, so no audio goes to a session on its way out
        log.info("restarting the listener session: %s", reason)
        started = self._session_started
        replay_from_ms, command, actions = core.retire(keep_in_progress)
        self._carried_wake = core.carried_wake  # its replay opens the next session: woken, as it was here
        await self._apply(actions, link)
        # It may have closed meanwhile (its task then let go of it, and a next session may be
        # open already: that one is left alone); its end is reported here all the same.
        serving = self._link is link
        if serving:
            self._link = None
            self._core = None
            self.sessions.fire(Move.HAND_OVER)
        self._report(SessionEnd(
            closed=wire.Closed(1000, "handed over"), by_us=True, expired=False,
            healthy=self._clock() - started >= self._settings.reconnect.healthy_after_s,
            interrupted_command=command, replay_from_ms=replay_from_ms, heard_spans=core.heard_after(replay_from_ms),
        ))
        handover.set()
        if not serving:
            return  # closed already
        if core.settled:
            await link.close()  # nothing left to hear from it
        elif self._tg is not None:
            self._retiring[id(link)] = self._tg.create_task(self._close_retired(link), name="retired listener deadline")

    @property
    def retiring(self) -> int:
        """Retired sessions still open, waiting for their transcripts."""
        return len(self._retiring)

    async def _close_retired(self, link: RealtimeLink) -> None:
        await asyncio.sleep(self._settings.listener.retire_wait_s)
        log.warning("a retired listener session did not transcribe what it heard within %g s; closing it",
                    self._settings.listener.retire_wait_s)
        await link.close()

    async def warm_up(self) -> None:
        """Open and configure the next session now (the caller owns this task), so the restart
        that follows a narration switches to it at once. A failure here only costs the warm
        start: the run loop opens a session the usual way (with its backoff)."""
        if not self.sessions.allows(Move.WARM):
            return
        self.sessions.fire(Move.WARM)
        warmed = self._warmed = asyncio.Event()
        standby: RealtimeLink | None = None
        try:
            standby = await open_configured(self._client, self._settings, "listener", self._session, self._refusal)
        except HandshakeFailed as failure:
            log.warning("could not open the next listener session ahead of time (%s); it opens when needed", failure)
        finally:
            self._standby = standby
            self.sessions.fire(Move.WARMED if standby is not None else Move.WARM_FAILED)
            warmed.set()

    # -- the loop ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Keep a configured session open, forever. Returns only on a fatal error."""
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                while True:
                    # A fresh policy per healthy session: the backoff starts again from its first step.
                    try:
                        await reconnect_policy(self._settings, self._connect_failed)(self._one_session)
                    except HandshakeFailed as failure:  # only fatal ones get here; others are retried
                        self._report(Fatal(str(failure)))
                        raise _ListenerStopped() from None
        except* _ListenerStopped:
            pass  # a fatal error, already reported
        finally:
            self._tg = None
            standby, self._standby = self._standby, None
            if standby is not None:
                self.sessions.fire(Move.DISCARD)
                await standby.close()

    async def _one_session(self) -> None:
        """One session, from open to end. Raises HandshakeFailed (retried with backoff) when it
        cannot be opened, or when it dies unexpectedly before it was healthy, so a server that
        drops every new session is not hammered."""
        if self.sessions.standby is Standby.WARMING and self._warmed is not None:
            await self._warmed.wait()  # the next session is on its way: never slower than opening another
        link, self._standby = self._standby, None
        if link is not None:
            self.sessions.fire(Move.TAKE)
        else:
            link = await open_configured(self._client, self._settings, "listener", self._session, self._refusal)
        self.sessions_opened += 1
        core = self._core = ListenerCore(gate=self.gate, clock=self._clock, session=self.sessions_opened,
                                         turn_silence_s=self._settings.listener.vad_silence_ms / 1000)
        if self._carried_wake is not None:
            core.local_wake(self._carried_wake)
            self._carried_wake = None
        self._session_started = self._clock()
        self._link = link
        self.sessions.fire(Move.OPEN)
        self._quiet = True
        handover = self._handover = asyncio.Event()
        assert self._tg is not None
        serving = self._tg.create_task(self._serve(link, core), name=f"listener session {self.sessions_opened}")
        self._report(SessionReady(self.sessions_opened))
        handed_over = asyncio.ensure_future(handover.wait())
        try:
            await asyncio.wait((serving, handed_over), return_when=asyncio.FIRST_COMPLETED)
        finally:
            handed_over.cancel()
        if not serving.done():
            return  # handed over: the next session opens now; this one serves on, retired
        end = serving.result()
        if end is not None and end.failure:
            raise HandshakeFailed(f"the listener session ended after {self._clock() - self._session_started:.1f} s "
                                  f"(code {end.closed.code})")

    async def _serve(self, link: RealtimeLink, core: ListenerCore) -> SessionEnd | None:
        """Feed one session's events to its core until it closes; a retired session closes once
        everything it heard is transcribed (or `retire_wait_s` after the handover). Returns how
        the session ended (None once retired: its end was reported at the handover)."""
        end: SessionEnd | None = None
        try:
            async for event in link.events():
                if isinstance(event, wire.Closed):
                    if event.verdict.fatal and not link.closed_by_us:  # refused, named only in the close
                        log.error("the listener session was refused: %s", event.verdict.detail)
                        await self._apply([Fatal(fatal_message(event.verdict))], link)
                        raise _ListenerStopped()
                    if not core.retired:
                        end = self._session_end(link, core, event)
                        self._link = None
                        self.sessions.fire(Move.END)
                        self._report(end)
                    elif not core.settled:
                        log.warning("a retired listener session closed before transcribing %d utterance(s)",
                                    len(core.unheard_starts))
                    break
                if isinstance(event, wire.SessionUpdated):
                    self._end_syncs(link, first_only=True, result=True)
                if await self._apply(core.feed(event), link):
                    raise _ListenerStopped()
                if core.settled:
                    break  # retired, and all it heard is transcribed
                if not core.retired and core.quiet is not self._quiet:
                    self._quiet = core.quiet
                    self._report(QuietChanged(core.quiet))
        finally:
            self._end_syncs(link)
            if self._link is link:
                self._link = None
                self._core = None
                self.sessions.fire(Move.END)
            deadline = self._retiring.pop(id(link), None)
            if deadline is not None:
                deadline.cancel()
            await link.close()
        return end

    def _session_end(self, link: RealtimeLink, core: ListenerCore, closed: wire.Closed) -> SessionEnd:
        lived = self._clock() - self._session_started
        return SessionEnd(
            closed=closed,
            by_us=link.closed_by_us,
            expired=core.expired,
            healthy=lived >= self._settings.reconnect.healthy_after_s,
            # A command cut off before its response came back was not run: routed again next session.
            interrupted_command=core.in_flight,
            replay_from_ms=(replay := core.replay_from_ms(include_unfinished=not link.closed_by_us)),
            heard_spans=core.heard_after(replay),
            untold_from_ms=core.last_end_ms if closed.code == CLOSE_NO_FRAME and not link.closed_by_us else None,
        )

    def _connect_failed(self, error: HandshakeFailed, attempt: int) -> None:
        self._report(ConnectFailed(attempt, str(error), rate_limited=error.rate_limited))

    async def _apply(self, actions: list[Action], link: RealtimeLink | None) -> bool:
        """Carry out the core's actions: events go to the server (the session's own link), the
        rest to the coordinator as they are. Returns True when the listener must stop (fatal)."""
        for action in actions:
            match action:
                case Send(event=event):
                    if link is not None:
                        await link.send(event)
                case Fatal(message=message):
                    self._refusal.refuse(message)  # no other connection is attempted (warm-ups included)
                    self._report(action)
                    return True
                case _:
                    self._report(action)
        return False


class _ListenerStopped(Exception):
    """A fatal error inside a session: the listener stops (the coordinator was told why)."""
