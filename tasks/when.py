"""Timer lengths and reminder times, parsed in code from what the router sends (the model copies
the user's words into a standard form; it never does the arithmetic), and spoken back.

- Lengths: ISO 8601 durations ("PT10M", "PT1H30M", "PT1.5H", "P1DT2H"), and plainly written
  ones a model may send instead ("10 minutes", "1h 30m").
- Reminder times: a local clock time, "17:00", "5 pm", "5:30 p.m.", "noon", "midnight" (the
  next time it comes: a time already past today means tomorrow; "5" or "9:30" without am/pm is
  the next of the two), a local date and time "2026-11-24T09:00", or a length ("PT20M": in
  twenty minutes).

Pure: `now` is passed in as a naive local datetime, and results are naive local datetimes
(`.timestamp()` reads them as local time, daylight saving included). Every refusal is a
`WhenError` whose message is one sentence to read aloud.
"""

from __future__ import annotations

import math
import re
from types import MappingProxyType
from dataclasses import dataclass
from datetime import datetime, timedelta

from tasks.errors import TaskError
from tasks.speech import and_list, number_words

MAX_TIMER_S = 7 * 24 * 3600.0  # longer than a week is a reminder's job (or a calendar's)
MAX_REMINDER_AHEAD_S = 366 * 24 * 3600.0

# (seconds per unit, singular word) in the order a length is said.
_UNITS = (("days", 86400, "day"), ("hours", 3600, "hour"), ("minutes", 60, "minute"), ("seconds", 1, "second"))

_ISO = re.compile(
    r"^P(?!$)(?:(?P<weeks>\d+(?:[.,]\d+)?)W)?(?:(?P<days>\d+(?:[.,]\d+)?)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+(?:[.,]\d+)?)H)?(?:(?P<minutes>\d+(?:[.,]\d+)?)M)?(?:(?P<seconds>\d+(?:[.,]\d+)?)S)?)?$"
)
_ISO_CALENDAR = re.compile(r"^P\d+(?:[.,]\d+)?[YM]")  # years or months: no fixed length
_PLAIN_UNITS = MappingProxyType({
    "d": "days", "day": "days", "days": "days",
    "h": "hours", "hr": "hours", "hrs": "hours", "hour": "hours", "hours": "hours",
    "m": "minutes", "min": "minutes", "mins": "minutes", "minute": "minutes", "minutes": "minutes",
    "s": "seconds", "sec": "seconds", "secs": "seconds", "second": "seconds", "seconds": "seconds",
})  # fmt: skip
_PLAIN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_PLAIN = re.compile(r"^(?:\d+(?:\.\d+)?\s*[a-z]+)(?:(?:\s*,\s*|\s+and\s+|\s*)\d+(?:\.\d+)?\s*[a-z]+)*$")
_CLOCK = re.compile(r"^(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?(?:[:.](?P<s>\d{2}))?\s*(?P<half>am|pm)?$")


class WhenError(TaskError):
    """A length or time that cannot be used; the message says what to say instead."""


@dataclass(frozen=True)
class Length:
    """A timer's length in the units it was given in (PT90M stays ninety minutes)."""

    days: int = 0
    hours: int = 0
    minutes: int = 0
    seconds: int = 0

    @property
    def total_s(self) -> float:
        return float(self.days * 86400 + self.hours * 3600 + self.minutes * 60 + self.seconds)

    def words(self) -> str:
        """"ten minutes", "an hour and thirty minutes"."""
        parts = [(getattr(self, field), word) for field, _, word in _UNITS if getattr(self, field)]
        return and_list([_count(n, word) for n, word in parts])

    def adjective(self) -> str | None:
        """"ten-minute" when the length is one unit (a ten-minute timer); None for mixed ones."""
        parts = [(getattr(self, field), word) for field, _, word in _UNITS if getattr(self, field)]
        if len(parts) != 1:
            return None
        n, word = parts[0]
        return f"{number_words(n)}-{word}"


def _count(n: int, word: str) -> str:
    if n == 1:
        return f"an {word}" if word == "hour" else f"a {word}"
    return f"{number_words(n)} {word}s"


def _number(text: str) -> float:
    return float(text.replace(",", "."))


def _length(amounts: dict[str, float]) -> Length:
    """Whole units as given (PT90M stays ninety minutes); a fraction spills into the next smaller
    unit (PT1.5H: an hour and thirty minutes)."""
    whole: dict[str, int] = {}
    carry_s = 0.0
    for field, size, _ in _UNITS:
        value = amounts.get(field, 0.0) + carry_s / size
        whole[field] = round(value) if field == "seconds" else math.floor(value + 1e-9)
        carry_s = (value - whole[field]) * size
    return Length(**whole)


def _amounts(text: str) -> dict[str, float] | None:
    """Amount per unit of an ISO 8601 duration or a plainly written length; None if it is neither."""
    iso = text.upper().replace(" ", "")
    match = _ISO.match(iso)
    if match:
        amounts = {k: _number(v) for k, v in match.groupdict().items() if v is not None}
        amounts["days"] = amounts.get("days", 0.0) + 7 * amounts.pop("weeks", 0.0)
        return amounts
    plain = text.lower()
    if not _PLAIN.match(plain):
        return None
    amounts = {}
    for number, unit in _PLAIN_PART.findall(plain):
        if unit not in _PLAIN_UNITS:
            return None  # "5 pm" is a time, not a length
        amounts[_PLAIN_UNITS[unit]] = amounts.get(_PLAIN_UNITS[unit], 0.0) + float(number)
    return amounts


def parse_length(text: str, what: str = "the timer") -> Length:
    """An ISO 8601 duration ("PT10M") or a plainly written one ("10 minutes"); WhenError otherwise."""
    raw = str(text).strip()
    if _ISO_CALENDAR.match(raw.upper().replace(" ", "")):
        raise WhenError(f"Months and years have no fixed length; say how long {what} should be in days, hours or minutes.")
    amounts = _amounts(raw)
    if amounts is None:
        raise WhenError(f"I didn't understand how long {what} should be ('{raw[:40]}'); say it like ten minutes or an hour and a half.")
    length = _length(amounts)
    if length.total_s < 1:
        raise WhenError(f"{what[0].upper() + what[1:]} needs a length of at least a second.")
    return length


def _hour_minute(text: str) -> tuple[list[int], int, int]:
    """The candidate hours (one, or two when am/pm is left open), minute and second of a clock time."""
    spoken = re.sub(r"\s+", " ", str(text).strip().lower())
    spoken = re.sub(r"\b([ap])\.?\s?m\b\.?", r"\1m", spoken)
    spoken = re.sub(r"\s*o'?clock\b", "", spoken).strip()
    if spoken in ("noon", "midday", "12 noon"):
        return [12], 0, 0
    if spoken in ("midnight", "12 midnight"):
        return [0], 0, 0
    match = _CLOCK.match(spoken)
    if not match:
        raise ValueError(spoken)
    hour, minute, second = int(match["h"]), int(match["m"] or 0), int(match["s"] or 0)
    if minute > 59 or second > 59:
        raise ValueError(spoken)
    if match["half"]:
        if not 1 <= hour <= 12:
            raise ValueError(spoken)
        return [hour % 12 + (12 if match["half"] == "pm" else 0)], minute, second
    if hour > 23:
        raise ValueError(spoken)
    if 1 <= hour <= 12 and len(match["h"]) == 1 or match["m"] is None and 10 <= hour <= 12:
        # Not the 24-hour HH:MM the tool asks for, and no am/pm ("5", "9:30", "10"): the user's
        # own open words, so whichever comes first, as a person means it. "10:30" is 24-hour.
        return [hour % 12, hour % 12 + 12], minute, second
    return [hour], minute, second


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_WORD = re.compile(r"\b(?:on\s+)?(today|tonight|tomorrow|" + "|".join(_WEEKDAYS) + r")\b(?:\s+at\b)?")


def next_clock_time(text: str, now: datetime) -> datetime:
    """The next moment after `now` that the local clock shows `text` ("17:00", "5 pm"), on the
    day it names if it names one ("tomorrow 9 am", "friday 17:00", "tonight at 9")."""
    spoken = re.sub(r"^at\s+", "", str(text).strip().lower())
    day = _DAY_WORD.search(spoken)
    if day:
        spoken = re.sub(r"^at\s+", "", (spoken[: day.start()] + " " + spoken[day.end() :]).strip())
    try:
        hours, minute, second = _hour_minute(spoken)
    except ValueError:
        raise WhenError(f"I didn't understand the time '{str(text).strip()[:40]}'; say it like 5 PM or 17:30.") from None
    today = now.date()
    word = day.group(1) if day else None
    if word is None:
        dates = [today, today + timedelta(days=1)]
    elif word in ("today", "tonight"):
        dates = [today]
        if word == "tonight" and len(hours) == 2:
            hours = hours[1:]  # "tonight at 9": the evening one
    elif word == "tomorrow":
        dates = [today + timedelta(days=1)]
    else:
        dates = [today + timedelta(days=n) for n in range(8) if (today + timedelta(days=n)).strftime("%A").lower() == word]
    candidates = [
        datetime.combine(date, datetime.min.time()).replace(hour=hour, minute=minute, second=second)
        for date in dates
        for hour in hours
    ]
    coming = [moment for moment in candidates if moment > now]
    if not coming:
        raise _passed(max(candidates), now)
    return min(coming)


def _passed(moment: datetime, now: datetime) -> WhenError:
    days = (now.date() - moment.date()).days
    day = "today" if days == 0 else "yesterday" if days == 1 else f"on {moment:%A}, {moment:%B} {moment.day}"
    when = f"{clock_words(moment)} {day}"
    return WhenError(f"{when[0].upper()}{when[1:]} has already passed; say a time still to come.")


def parse_due(text: str, now: datetime) -> datetime:
    """When a reminder is due: a clock time, a local date and time, or a length from now."""
    raw = str(text).strip()
    if not raw:
        raise WhenError("Say when to remind you, like at 5 PM or in twenty minutes.")
    if re.match(r"^\d{4}-\d{2}-\d{2}", raw):
        try:
            moment = datetime.fromisoformat(raw.replace(" ", "T"))
        except ValueError:
            raise WhenError(f"I didn't understand the date '{raw[:40]}'; say it like tomorrow at 9 AM.") from None
        if moment.tzinfo is not None:
            try:
                moment = moment.astimezone().replace(tzinfo=None)  # local wall-clock time, like the rest
            except OverflowError:  # 0001-01-01T00:00:00+14:00: before the first day there is
                raise WhenError(f"The date '{raw[:40]}' is not one I can keep; say it like tomorrow at 9 AM.") from None
        if moment <= now:
            raise _passed(moment, now)
    elif raw.upper().startswith("P") or _amounts(raw) is not None:
        seconds = parse_length(raw, "the reminder").total_s
        if seconds > MAX_REMINDER_AHEAD_S:  # (checked before the sum: 99999999999 days overflow a date)
            raise WhenError("I can only keep reminders for the coming year.")
        moment = now + timedelta(seconds=seconds)
    else:
        moment = next_clock_time(raw, now)
    if (moment - now).total_seconds() > MAX_REMINDER_AHEAD_S:
        raise WhenError("I can only keep reminders for the coming year.")
    return moment


# --- speaking times --------------------------------------------------------------------------


def clock_words(moment: datetime) -> str:
    """"5 PM", "5:30 PM", "noon", "midnight"."""
    if moment.minute == 0 and moment.hour in (0, 12):
        return "noon" if moment.hour == 12 else "midnight"
    hour = moment.hour % 12 or 12
    half = "AM" if moment.hour < 12 else "PM"
    return f"{hour} {half}" if moment.minute == 0 else f"{hour}:{moment.minute:02d} {half}"


def when_words(moment: datetime, now: datetime) -> str:
    """A moment near `now`: "at 5 PM" (today), "tomorrow at 9 AM", "yesterday at 5 PM", "on
    Friday at noon" (this week), "on Monday, December 7 at 5 PM"."""
    days = (moment.date() - now.date()).days
    at = f"at {clock_words(moment)}"
    if days == 0:
        return at
    if abs(days) == 1:
        return f"{'tomorrow' if days == 1 else 'yesterday'} {at}"
    if 1 < days < 7:
        return f"on {moment:%A} {at}"
    return f"on {moment:%A}, {moment:%B} {moment.day} {at}"


def remaining_words(seconds: float) -> str:
    """Time left, as precise as it is useful: "forty seconds", "four minutes and twelve seconds",
    "twenty minutes", "two hours and five minutes", "a day and three hours"."""
    total = max(0, int(math.ceil(seconds - 1e-6)))  # "one second" until it is really over
    if total < 60:
        return "less than a second" if total == 0 else _count(total, "second")
    minutes, secs = divmod(total, 60)
    if total < 600:
        return and_list([_count(minutes, "minute")] + ([_count(secs, "second")] if secs else []))
    minutes = int(round(total / 60))
    if minutes < 60:
        return _count(minutes, "minute")
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return and_list([_count(hours, "hour")] + ([_count(minutes, "minute")] if minutes else []))
    days, hours = divmod(hours, 24)
    return and_list([_count(days, "day")] + ([_count(hours, "hour")] if hours else []))
