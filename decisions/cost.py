"""What handoff spends at OpenAI, estimated from the usage the API reports, and the daily budget.

A pure meter: the shells tell it what happened (a response's token usage, a transcription's
length, audio uploaded, the brain's tokens), it prices each with the `PriceTable` and keeps
today's totals. "Today" is the local date of the injected clock: totals start again at local
midnight, never at a restart: what earlier runs spent today (`earlier`, from the cost-days file)
counts in today's totals and against the budget. Nothing here sleeps or does I/O;
`seconds_to_rollover()` says when the day changes (when a paused budget frees up).

Uploaded audio costs nothing by itself: the listener never makes a response of its audio (it
routes commands as text), so its audio is billed through transcription, which the server reports
per utterance. It is counted to show what left the machine.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from typing import Callable

# PriceTable is defined with the settings (config may not import decisions) and is the one table.
from config.settings import CostSettings, PriceTable
from realtime_api.wire import Usage

__all__ = ["CostMeter", "CostSummary", "DayTotals", "PriceTable", "Provisional", "RealtimeRole", "response_cost"]

PER_MILLION = 1_000_000
# The estimate divides by at least this much time, so the first command after a start is not
# projected over a whole day.
MIN_ESTIMATE_SPAN = timedelta(hours=1)


class RealtimeRole(enum.Enum):
    """Whose Realtime response it was."""

    LISTENER = "listener"  # routing a command to a tool
    NARRATOR = "narrator"  # reading a script aloud


def response_cost(prices: PriceTable, usage: Usage) -> float:
    """A Realtime response in USD. Cached tokens are part of the input counts, at the cached price."""
    fresh_text = max(0, usage.input_text_tokens - usage.cached_text_tokens)
    fresh_audio = max(0, usage.input_audio_tokens - usage.cached_audio_tokens)
    return (
        fresh_text * prices.realtime_text_in
        + fresh_audio * prices.realtime_audio_in
        + usage.cached_tokens * prices.realtime_cached_in
        + usage.output_text_tokens * prices.realtime_text_out
        + usage.output_audio_tokens * prices.realtime_audio_out
    ) / PER_MILLION


@dataclass(frozen=True)
class DayTotals:
    """One local day's spend in USD, and the audio that went up."""

    day: date
    listener_usd: float = 0.0
    narrator_usd: float = 0.0
    transcription_usd: float = 0.0
    brain_usd: float = 0.0
    uploaded_s: float = 0.0  # microphone audio sent
    transcribed_s: float = 0.0

    @property
    def spent_usd(self) -> float:
        return self.listener_usd + self.narrator_usd + self.transcription_usd + self.brain_usd

    def parts(self) -> dict[str, float]:
        """The spend by part, for the status file."""
        return {"listener": self.listener_usd, "narrator": self.narrator_usd,
                "transcription": self.transcription_usd, "brain": self.brain_usd}  # fmt: skip

    def plus(self, other: "DayTotals") -> "DayTotals":
        """Both added up (the same day)."""
        return DayTotals(self.day, **{name: getattr(self, name) + getattr(other, name) for name in _AMOUNTS})


_AMOUNTS = ("listener_usd", "narrator_usd", "transcription_usd", "brain_usd", "uploaded_s", "transcribed_s")


@dataclass(frozen=True)
class Provisional:
    """Routes sent at a pause inside a command before its turn was over (issue 33), since the start:
    how many, how many the user talked past (withdrawn: routed again whole), and their tokens
    (those of the withdrawn ones bought nothing, nor did the narrator's of an answer read ahead for
    one and dropped), next to every listener response's tokens; and the pauses not routed early
    because that would have taken the extra share over its budget (decisions.pause_point)."""

    sent: int = 0
    withdrawn: int = 0
    tokens: int = 0
    withdrawn_tokens: int = 0
    routing_tokens: int = 0  # every listener response's, provisional ones included
    read_ahead_tokens: int = 0  # the narrator's, for answers read ahead then dropped
    held_back: int = 0  # pauses routed only at their turn end: the budget was spent
    budget: float | None = None  # the extra share allowed (PROVISIONAL_TOKEN_BUDGET); None: unbounded

    @property
    def extra_tokens(self) -> int:
        return self.withdrawn_tokens + self.read_ahead_tokens

    @property
    def extra_share(self) -> float:
        """The tokens that bought nothing over the rest of the routing's: what routing early adds."""
        useful = self.routing_tokens - self.withdrawn_tokens
        return self.extra_tokens / useful if useful > 0 else 0.0

    def routed(self, usage: Usage) -> Provisional:
        """A listener response finished (every route's, provisional or not)."""
        return replace(self, routing_tokens=self.routing_tokens + _tokens(usage))

    def billed(self, usage: Usage, sent: bool, withdrawn: bool) -> Provisional:
        """A provisional route's tokens (listener_core.ProvisionalBilled)."""
        tokens = _tokens(usage)
        return replace(self, tokens=self.tokens + tokens * sent, withdrawn_tokens=self.withdrawn_tokens + tokens * withdrawn)

    def read_ahead_dropped(self, usage: Usage) -> Provisional:
        """What the narrator used for an answer read ahead for a route then withdrawn."""
        return replace(self, read_ahead_tokens=self.read_ahead_tokens + _tokens(usage))


@dataclass(frozen=True)
class CostSummary:
    """Today's spend, the rate and the budget, for the log and `status`."""

    today: DayTotals
    estimate_per_day_usd: float
    budget_usd: float | None
    over_budget: bool
    provisional: Provisional = Provisional()

    def line(self) -> str:
        """One log line (no transcripts, no secrets: only amounts and durations)."""
        t = self.today
        line = (
            f"today {_usd(t.spent_usd)} (listener {_usd(t.listener_usd)}, narrator {_usd(t.narrator_usd)}, "
            f"transcription {_usd(t.transcription_usd)}, brain {_usd(t.brain_usd)}); "
            f"{t.uploaded_s / 60:.1f} min of audio sent, {t.transcribed_s / 60:.1f} min transcribed; "
            f"about {_usd(self.estimate_per_day_usd)} a day at this rate"
        )
        p = self.provisional
        if p.sent:
            line += (f"; {p.sent} provisional routes, {p.withdrawn} withdrawn ({p.extra_tokens} tokens, "
                     f"{100 * p.extra_share:.0f} % more routing)")
            line += f", {p.held_back} held back by the {100 * p.budget:g} % budget" if p.held_back and p.budget is not None else ""
        if self.budget_usd is None:
            return line
        state = "reached" if self.over_budget else f"{100 * t.spent_usd / self.budget_usd:.0f} % used"
        return f"{line}; daily budget {_usd(self.budget_usd)} {state}"


class CostMeter:
    """Prices what the shells report and keeps today's totals (local date of `clock`).

    `clock` returns the local wall-clock time (`datetime.now` in the daemon; tests pass a hand-held
    one). Each priced report returns its own cost in USD, for a log line if wanted.
    """

    def __init__(self, settings: CostSettings, clock: Callable[[], datetime], earlier: DayTotals | None = None,
                 on_spend: Callable[[], None] | None = None) -> None:  # fmt: skip
        """`earlier`: what earlier runs spent (on its day: counted only while that day lasts).
        `on_spend`: called after each report that cost something (the shell saves the day)."""
        self.prices = settings.prices
        self.budget_usd = settings.daily_budget_usd
        self._clock = clock
        self._started = clock()
        self._today = DayTotals(self._started.date())  # this run's own
        self._earlier = earlier
        self._on_spend = on_spend
        self._total_usd = 0.0  # since the start, for the estimate
        self._provisional = Provisional()

    # --- reports ---------------------------------------------------------------------------------

    def response_usage(self, role: RealtimeRole, usage: Usage) -> float:
        """A Realtime response finished (`ResponseDone.usage`)."""
        cost = response_cost(self.prices, usage)
        if role is RealtimeRole.LISTENER:
            self._provisional = self._provisional.routed(usage)
            self._add(cost, listener_usd=cost)
        else:
            self._add(cost, narrator_usd=cost)
        return cost

    def provisional_sent(self) -> None:
        """A route was sent at a pause inside a command (priced with every listener response)."""
        self._provisional = replace(self._provisional, sent=self._provisional.sent + 1)

    def provisional_withdrawn(self) -> None:
        """The user went on after that pause: the route was withdrawn."""
        self._provisional = replace(self._provisional, withdrawn=self._provisional.withdrawn + 1)

    def provisional_billed(self, usage: Usage, sent: bool, withdrawn: bool) -> None:
        """A provisional route's tokens (listener_core.ProvisionalBilled): `sent` once its response
        was done, `withdrawn` once it is known to have bought nothing."""
        self._provisional = self._provisional.billed(usage, sent, withdrawn)

    def provisional_read_ahead(self, usage: Usage) -> None:
        """The narrator's tokens for an answer read ahead for a withdrawn route (priced with the
        narrator's responses: counted here as bought nothing)."""
        self._provisional = self._provisional.read_ahead_dropped(usage)

    def provisional_held_back(self) -> None:
        """A pause not routed early: the extra share was at its budget."""
        self._provisional = replace(self._provisional, held_back=self._provisional.held_back + 1)

    def provisional_budget(self, budget: float | None) -> None:
        """The extra share provisional routes may add (shown with them)."""
        self._provisional = replace(self._provisional, budget=budget)

    def transcription(self, seconds: float) -> float:
        """An utterance transcribed (`TranscriptCompleted.usage.audio_seconds`)."""
        cost = seconds / 60 * self.prices.transcription_per_minute
        self._add(cost, transcription_usd=cost, transcribed_s=seconds)
        return cost

    def uploaded(self, seconds: float) -> None:
        """Microphone audio sent to the listener (counted, not priced: see the module's note)."""
        self._add(0.0, uploaded_s=seconds)

    def brain_usage(self, input_tokens: int, output_tokens: int) -> float:
        """One brain answer (`Brain(..., on_usage=meter.brain_usage)`)."""
        cost = (input_tokens * self.prices.brain_text_in + output_tokens * self.prices.brain_text_out) / PER_MILLION
        self._add(cost, brain_usd=cost)
        return cost

    # --- questions -------------------------------------------------------------------------------

    def today(self) -> DayTotals:
        """Today's totals, earlier runs' included; a new local date starts them again."""
        own = self.own_today()
        return own.plus(self._earlier) if self._earlier is not None and self._earlier.day == own.day else own

    def own_today(self) -> DayTotals:
        """What this run spent today (what it records for the day: earlier runs recorded theirs)."""
        day = self._clock().date()
        if day != self._today.day:
            self._today = DayTotals(day)
        return self._today

    @property
    def over_budget(self) -> bool:
        """Today's spend has reached the daily budget (never, without one)."""
        return self.budget_usd is not None and self.today().spent_usd >= self.budget_usd

    def estimate_per_day(self) -> float:
        """USD a whole day costs at the rate seen since the meter started (over at least an hour)."""
        span = max(self._clock() - self._started, MIN_ESTIMATE_SPAN)
        return self._total_usd * (timedelta(days=1) / span)

    def seconds_to_rollover(self) -> float:
        """Until local midnight, when today's totals (and a reached budget) start again."""
        now = self._clock()
        midnight = datetime.combine(now.date() + timedelta(days=1), time(), tzinfo=now.tzinfo)
        return (midnight - now).total_seconds()

    def summary(self) -> CostSummary:
        return CostSummary(self.today(), self.estimate_per_day(), self.budget_usd, self.over_budget, self._provisional)

    def _add(self, cost: float, **amounts: float) -> None:
        today = self.own_today()
        self._today = replace(today, **{name: getattr(today, name) + value for name, value in amounts.items()})
        self._total_usd += cost
        if cost > 0 and self._on_spend is not None:
            self._on_spend()


def _tokens(usage: Usage) -> int:
    return usage.input_text_tokens + usage.input_audio_tokens + usage.output_text_tokens + usage.output_audio_tokens


def _usd(amount: float) -> str:
    # Cents hide a day of transcription; four places show it.
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"
