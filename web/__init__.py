"""The page `handoff run` serves (WEB_PORT, 127.0.0.1:8788 by default): what it is doing now,
the last commands with their stage bars, tasks, cost and latency, updated live; and /metrics.

`feed` (the in-memory ring the daemon feeds, no I/O), `token` (the token file, stdlib only: read
by `handoff status` and `handoff web-url`), `cost_days` (the last days' spend), `snapshot` (what
the page shows, as JSON), `metrics` (Prometheus), `server` (aiohttp: the page, its event
stream, task start/cancel). Only `server` and `metrics` import aiohttp or prometheus_client.
"""
