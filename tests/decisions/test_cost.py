"""The cost meter with a hand-held local clock: prices, today's totals, midnight, the estimate, the budget."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from decisions.cost import CostMeter, DayTotals, PriceTable, RealtimeRole, response_cost
from config.settings import CostSettings
from realtime_api.wire import Usage


class Clock:
    """Local wall-clock time that moves only when a test says so."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def meter(at: datetime, budget: float | None = None, prices: PriceTable = PriceTable()) -> tuple[CostMeter, Clock]:
    clock = Clock(at)
    return CostMeter(CostSettings(prices, budget), clock), clock


def test_a_response_is_priced_per_kind_of_token_with_cached_input_at_the_cached_price():
    # The spoken turn recorded from the live API: 96 text tokens in (64 of them cached), 26 audio
    # in, 28 text and 69 audio out.
    usage = Usage(input_text_tokens=96, input_audio_tokens=26, cached_text_tokens=64, output_text_tokens=28, output_audio_tokens=69)
    expected = (32 * 4.00 + 26 * 32.00 + 64 * 0.40 + 28 * 16.00 + 69 * 64.00) / 1e6
    assert response_cost(PriceTable(), usage) == pytest.approx(expected)
    assert response_cost(PriceTable(), Usage(input_audio_tokens=10, cached_audio_tokens=10)) == pytest.approx(10 * 0.40 / 1e6)
    doubled = PriceTable(**{name: 2 * value for name, value in vars(PriceTable()).items()})
    assert response_cost(doubled, usage) == pytest.approx(2 * expected)  # every price is the table's


def test_each_report_is_priced_and_counted_under_its_part():
    m, _ = meter(datetime(2026, 11, 22, 9, 0))
    assert m.response_usage(RealtimeRole.LISTENER, Usage(input_text_tokens=1_000_000)) == pytest.approx(4.00)
    assert m.response_usage(RealtimeRole.NARRATOR, Usage(output_audio_tokens=1_000_000)) == pytest.approx(64.00)
    assert m.transcription(90.0) == pytest.approx(1.5 * 0.003)
    assert m.brain_usage(1_000_000, 1_000_000) == pytest.approx(1.75 + 14.00)
    m.uploaded(120.0)
    today = m.today()
    assert today == DayTotals(date(2026, 11, 22), listener_usd=pytest.approx(4.0), narrator_usd=pytest.approx(64.0),
                              transcription_usd=pytest.approx(0.0045), brain_usd=pytest.approx(15.75),
                              uploaded_s=120.0, transcribed_s=90.0)
    assert today.spent_usd == pytest.approx(4.0 + 64.0 + 0.0045 + 15.75)  # uploading itself is not priced


def test_totals_start_again_at_local_midnight_and_a_reached_budget_frees_up():
    m, clock = meter(datetime(2026, 11, 22, 23, 59, 30), budget=1.00)
    assert m.seconds_to_rollover() == 30
    m.brain_usage(0, 50_000)  # $0.70
    assert not m.over_budget
    m.brain_usage(0, 30_000)  # $0.42: $1.12 today
    assert m.over_budget and m.summary().over_budget
    clock.advance(seconds=29)
    assert m.over_budget
    clock.advance(seconds=2)  # 00:00:01, the next day
    assert not m.over_budget
    assert m.today() == DayTotals(date(2026, 11, 23))
    assert m.seconds_to_rollover() == 24 * 3600 - 1


def test_no_budget_is_never_reached():
    m, _ = meter(datetime(2026, 11, 22, 12, 0))
    m.response_usage(RealtimeRole.NARRATOR, Usage(output_audio_tokens=10_000_000))
    assert not m.over_budget and m.summary().budget_usd is None


def test_the_estimate_is_the_rate_since_the_start_over_at_least_an_hour():
    m, clock = meter(datetime(2026, 11, 22, 10, 0))
    clock.advance(minutes=5)
    m.brain_usage(0, 50_000)  # $0.70
    assert m.estimate_per_day() == pytest.approx(0.70 * 24)  # five minutes count as an hour
    clock.advance(hours=5, minutes=55)
    assert m.estimate_per_day() == pytest.approx(0.70 * 4)  # six hours: a quarter of a day
    clock.advance(hours=18)  # the next day: today is empty, the rate still counts yesterday
    assert m.today().spent_usd == 0 and m.estimate_per_day() == pytest.approx(0.70)


def test_an_aware_clock_rolls_over_at_its_own_midnight():
    m, _ = meter(datetime(2026, 11, 22, 22, 0, tzinfo=timezone(timedelta(hours=-5))))
    assert m.seconds_to_rollover() == 2 * 3600


def test_the_summary_line_shows_amounts_and_the_budget_and_nothing_else():
    m, _ = meter(datetime(2026, 11, 22, 8, 0), budget=2.00)
    m.response_usage(RealtimeRole.LISTENER, Usage(input_text_tokens=500))
    m.transcription(30.0)
    m.uploaded(45.0)
    m.brain_usage(100_000, 20_000)
    line = m.summary().line()
    assert line.startswith("today $0.4585 (listener $0.0020, narrator $0.0000, transcription $0.0015, brain $0.4550)")
    assert "0.8 min of audio sent, 0.5 min transcribed" in line
    assert line.endswith("about $11.00 a day at this rate; daily budget $2.00 23 % used")
    m.brain_usage(0, 200_000)
    assert m.summary().line().endswith("daily budget $2.00 reached")
    unbudgeted, _ = meter(datetime(2026, 11, 22, 8, 0))
    assert unbudgeted.summary().line().endswith("a day at this rate")


def test_what_earlier_runs_spent_today_counts_until_midnight():
    # Issue 28, item 2: a restart started today's cost, and the budget, from zero.
    clock = Clock(datetime(2026, 11, 24, 23, 0, tzinfo=timezone.utc))
    spends = []
    earlier = DayTotals(date(2026, 11, 24), narrator_usd=0.03, brain_usd=0.017)
    cost = CostMeter(CostSettings(PriceTable(), 0.05), clock, earlier=earlier, on_spend=lambda: spends.append(1))
    assert cost.today().spent_usd == pytest.approx(0.047) and not cost.over_budget
    cost.brain_usage(1_000_000, 0)  # $1.75
    assert cost.over_budget and cost.today().brain_usd == pytest.approx(1.767)
    assert cost.own_today().spent_usd == pytest.approx(1.75)  # what this run records: earlier runs recorded theirs
    assert spends == [1]
    cost.uploaded(3.0)
    assert spends == [1]  # counted, not spent
    clock.advance(hours=2)  # the next day
    assert cost.today().spent_usd == 0 and not cost.over_budget
    stale = CostMeter(CostSettings(PriceTable(), 0.05), clock, earlier=earlier)  # a record of yesterday
    assert stale.today().spent_usd == 0
