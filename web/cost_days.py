"""The spend of the last days, for the page's bar chart. The cost meter counts today only, from
this run's start; this file (`<state dir>/cost-days.json`, 0600, written whole and renamed) keeps
each run's totals per day, so a day's bar is the sum of every run that day. Days older than
`KEEP_DAYS` are dropped."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import tempfile
from pathlib import Path

COST_DAYS_FILE = "cost-days.json"
KEEP_DAYS = 31
PARTS = ("listener", "narrator", "transcription", "brain")


class CostDays:
    def __init__(self, path: Path, run: str) -> None:
        self.path = path
        self._run = run  # this run's key: its start time and pid
        self._days: dict[str, dict[str, dict[str, float]]] = _read(path)

    def record(self, day: datetime.date, parts: dict[str, float]) -> None:
        """This run's totals for `day` so far (replacing what it recorded before), written out."""
        self._days.setdefault(day.isoformat(), {})[self._run] = {p: float(parts.get(p, 0.0)) for p in PARTS}
        oldest = (day - datetime.timedelta(days=KEEP_DAYS)).isoformat()
        self._days = {d: runs for d, runs in self._days.items() if d > oldest}
        _write(self.path, {"version": 1, "days": self._days})

    def last_days(self, today: datetime.date, count: int, today_parts: dict[str, float] | None) -> list[dict[str, object]]:
        """`count` days up to `today`, oldest first: {"day", "parts", "total"} each; today's bar
        counts this run's live totals (`today_parts`) in place of what was last written."""
        rows = []
        for back in range(count - 1, -1, -1):
            day = today - datetime.timedelta(days=back)
            runs = dict(self._days.get(day.isoformat(), {}))
            if back == 0 and today_parts is not None:
                runs[self._run] = today_parts
            parts = {p: round(sum(run.get(p, 0.0) for run in runs.values()), 6) for p in PARTS}
            rows.append({"day": day.isoformat(), "parts": parts, "total": round(sum(parts.values()), 6)})
        return rows


def _read(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        days = data["days"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # none yet, or not ours: start again (it only feeds a chart)
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
