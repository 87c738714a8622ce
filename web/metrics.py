"""/metrics in the Prometheus text format, built from the feed's plain counters at scrape time
(a collector, not live prometheus_client metrics: the daemon's events never touch this library).

Counters count since this run started; the cost and uploaded audio are today's (the meter starts
again at local midnight), so they are gauges.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from decisions.cost import CostSummary
from web.feed import STAGE_BUCKETS, WebFeed

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_LABEL_VALUES = 32  # per label (a tool's name comes from a model: 10,000 made 10,000 series); the rest: "other"
OTHER = "other"

# feed counter key -> (metric name, help, label names)
_COUNTERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "commands": ("handoff_commands", "Commands finished, by how they ended (as `handoff history` lists them).", ("outcome",)),
    "tool_runs": ("handoff_tool_runs", "Tool runs, by tool and outcome.", ("tool", "outcome")),
    "narrations": ("handoff_narrations", "Narrations read, by kind (answer, notice, status, error, ...).", ("kind",)),
    "reconnects": ("handoff_reconnects", "Listener sessions lost and replaced, by cause (expired, recycled, dropped).", ("cause",)),
    "listener_sessions": ("handoff_listener_sessions", "Listener sessions that became ready.", ()),
    "connection_failures": ("handoff_connection_failures", "Listener connection attempts that failed.", ()),
    "errors": ("handoff_errors", "Errors on the timeline, by severity (error, fatal).", ("severity",)),
    "tasks": ("handoff_tasks_finished", "Background tasks finished, by status.", ("status",)),
}


class FeedCollector:
    def __init__(self, feed: WebFeed, cost: Callable[[], CostSummary | None]) -> None:
        self._feed = feed
        self._cost = cost

    def collect(self) -> Iterator[Metric]:
        counts = self._feed.counts
        for key, (name, help_text, labels) in _COUNTERS.items():
            family = CounterMetricFamily(name, help_text, labels=list(labels))
            rows = _bounded([(k[1:], n) for k, n in counts.items() if k[0] == key])
            if not labels:
                family.add_metric([], sum(n for _, n in rows))
            for values, n in sorted(rows):
                if labels:
                    family.add_metric(list(values), n)
            yield family
        stages = HistogramMetricFamily("handoff_stage_seconds", "When each stage of a command came, seconds after the end of speech.",
                                       labels=["stage"])  # fmt: skip
        for stage, histogram in sorted(self._feed.stage_seconds.items()):
            cumulative, buckets = 0, []
            for bound, n in zip((*map(str, STAGE_BUCKETS), "+Inf"), histogram.buckets):
                cumulative += n
                buckets.append((bound, cumulative))
            stages.add_metric([stage], buckets, histogram.total)
        yield stages
        summary = self._cost()
        if summary is not None:
            cost = GaugeMetricFamily("handoff_cost_today_usd", "Today's estimated spend, by part.", labels=["part"])
            for part, usd in summary.today.parts().items():
                cost.add_metric([part], round(usd, 6))  # (float sums: 0.00030000000000000003)
            yield cost
            p = summary.provisional
            routes = CounterMetricFamily("handoff_provisional_routes", "Routes sent at a pause inside a command before "
                                         "its turn was over, by outcome (sent, withdrawn: the user went on).",
                                         labels=["outcome"])  # fmt: skip
            routes.add_metric(["sent"], p.sent)
            routes.add_metric(["withdrawn"], p.withdrawn)
            routes.add_metric(["held_back"], p.held_back)  # a pause routed at its turn end: the budget was spent
            yield routes
            tokens = CounterMetricFamily("handoff_provisional_route_tokens", "Tokens of those routes (withdrawn: "
                                         "they bought nothing), of all routing, and the narrator's for answers read "
                                         "ahead for withdrawn routes.", labels=["outcome"])  # fmt: skip
            tokens.add_metric(["sent"], p.tokens)
            tokens.add_metric(["withdrawn"], p.withdrawn_tokens)
            tokens.add_metric(["all_routing"], p.routing_tokens)
            tokens.add_metric(["read_ahead_dropped"], p.read_ahead_tokens)  # the narrator's, for answers dropped
            yield tokens
            share = GaugeMetricFamily("handoff_provisional_extra_share", "What the withdrawn routes and the answers "
                                      "read ahead for them added to the routing's tokens (spent), and its bound "
                                      "(budget: PROVISIONAL_TOKEN_BUDGET).", labels=["of"])  # fmt: skip
            share.add_metric(["spent"], round(p.extra_share, 6))
            if p.budget is not None:
                share.add_metric(["budget"], p.budget)
            yield share
            uploaded = GaugeMetricFamily("handoff_uploaded_audio_today_seconds", "Microphone audio sent today.")
            uploaded.add_metric([], summary.today.uploaded_s)
            yield uploaded
            if summary.budget_usd is not None:
                budget = GaugeMetricFamily("handoff_budget_today_usd", "The daily budget.")
                budget.add_metric([], summary.budget_usd)
                yield budget


def _bounded(rows: list[tuple[tuple[str, ...], int]]) -> list[tuple[tuple[str, ...], int]]:
    """At most MAX_LABEL_VALUES values of each label, the most counted; the others summed as "other"."""
    if not rows or not rows[0][0]:
        return rows
    for position in range(len(rows[0][0])):
        totals: dict[str, int] = {}
        for values, n in rows:
            totals[values[position]] = totals.get(values[position], 0) + n
        if len(totals) <= MAX_LABEL_VALUES:
            continue
        kept = set(sorted(totals, key=lambda v: (-totals[v], str(v)))[: MAX_LABEL_VALUES - 1])
        merged: dict[tuple[str, ...], int] = {}
        for values, n in rows:
            if values[position] not in kept:
                values = (*values[:position], OTHER, *values[position + 1:])
            merged[values] = merged.get(values, 0) + n
        rows = list(merged.items())
    return rows


def render(feed: WebFeed, cost: Callable[[], CostSummary | None]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FeedCollector(feed, cost))
    return generate_latest(registry)
