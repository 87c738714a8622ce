"""The spend of the last days (`<state dir>/cost-days.json`, 0600, written whole and renamed):
each run's totals per day, so a day is the sum of every run that day. The cost meter starts
from what earlier runs spent today (`earlier`: a restart does not reset today, nor the daily
budget), and `saving` writes this run's share as it spends; the page's bar chart reads it.
Days older than `KEEP_DAYS` are dropped."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import AsyncIterator, Callable

from concurrency.changes import Changes

COST_DAYS_FILE = "cost-days.json"
KEEP_DAYS = 31
PARTS = ("listener", "narrator", "transcription", "brain")
SAVE_EVERY_S = 5.0  # spending is written at most this often (and once more at the end)

log = logging.getLogger("handoff.cost")


class CostDays:
    def __init__(self, path: Path, run: str = "") -> None:
        self.path = path
        self._run = run  # this run's key: its start time and pid ("": only reads)
        self._stamp: tuple[int, int] | None = None
        self._days: dict[str, dict[str, dict[str, float]]] = {}
        self._reread()

    def earlier(self, day: datetime.date) -> dict[str, float]:
        """What the other runs recorded for `day`, by part."""
        runs = [parts for run, parts in self._days.get(day.isoformat(), {}).items() if run != self._run]
        return {p: sum(float(run.get(p, 0.0)) for run in runs) for p in PARTS}

    def record(self, day: datetime.date, parts: dict[str, float]) -> None:
        """This run's totals for `day` so far (replacing what it recorded before), written out."""
        self._reread()  # another run's days, if one wrote since (one daemon per state folder, but a day may hold several)
        self._days.setdefault(day.isoformat(), {})[self._run] = {p: float(parts.get(p, 0.0)) for p in PARTS}
        oldest = (day - datetime.timedelta(days=KEEP_DAYS)).isoformat()
        self._days = {d: runs for d, runs in self._days.items() if d > oldest}
        _write(self.path, {"version": 1, "days": self._days})
        self._stamp = _stamp(self.path)

    def last_days(self, today: datetime.date, count: int, today_parts: dict[str, float] | None) -> list[dict[str, object]]:
        """`count` days up to `today`, oldest first: {"day", "parts", "total"} each; today's bar
        is `today_parts` (the meter's live totals, earlier runs' included) when given."""
        self._reread()
        rows = []
        for back in range(count - 1, -1, -1):
            day = today - datetime.timedelta(days=back)
            if back == 0 and today_parts is not None:
                parts = {p: round(float(today_parts.get(p, 0.0)), 6) for p in PARTS}
            else:
                runs = self._days.get(day.isoformat(), {}).values()
                parts = {p: round(sum(float(run.get(p, 0.0)) for run in runs), 6) for p in PARTS}
            rows.append({"day": day.isoformat(), "parts": parts, "total": round(sum(parts.values()), 6)})
        return rows

    def _reread(self) -> None:
        stamp = _stamp(self.path)
        if stamp != self._stamp:
            self._days, self._stamp = _read(self.path), stamp


@contextlib.asynccontextmanager
async def saving(days: CostDays, own_today: Callable[[], tuple[datetime.date, dict[str, float]]],
                 spent: Changes) -> AsyncIterator[None]:  # fmt: skip
    """While the block runs, this run's spend today (`own_today()`) is written after each change
    `spent` reports (at most every SAVE_EVERY_S), and once more at the end: a restart, even after
    a crash, loses a few seconds of spending at most."""

    saved = own_today()

    def save() -> None:
        nonlocal saved
        saved = own_today()
        try:
            days.record(*saved)
        except OSError as exc:
            log.warning("could not write %s: %s", days.path, exc)

    async def forever() -> None:
        while True:
            await spent.wait_until(lambda: own_today() != saved)  # (spent while it slept: at once)
            save()
            await asyncio.sleep(SAVE_EVERY_S)  # a rate limit, not a poll: the next change waits

    saver = asyncio.create_task(forever(), name="cost days")
    try:
        yield
    finally:
        saver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await saver
        save()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _read(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        days = data["days"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # none yet, or not ours: start again
    if not isinstance(days, dict):
        return {}
    # Every level checked: a damaged file ({"<today>": {"old-run": 5}}) once made every /api/state
    # answer 500, in that run and the next. What does not fit is left out.
    kept: dict[str, dict[str, dict[str, float]]] = {}
    for day, runs in days.items():
        if not isinstance(runs, dict) or not _is_day(day):
            continue
        kept[day] = {run: {p: float(parts[p]) for p in PARTS if _is_amount(parts.get(p))}
                     for run, parts in runs.items() if isinstance(run, str) and isinstance(parts, dict)}  # fmt: skip
    return kept


def _is_day(value: object) -> bool:
    try:
        datetime.date.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def _is_amount(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e9


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".cost-days-", suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
