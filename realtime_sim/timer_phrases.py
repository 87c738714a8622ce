"""How the simulated model fills the timer tools' arguments from spoken words, as a real model
does: numbers copied into an ISO 8601 duration ("ten minutes" -> "PT10M") and clock times into
24-hour form ("5 pm" -> "17:00"), never worked out into an absolute time.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

_SMALL = MappingProxyType({
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
})  # fmt: skip
_UNIT = MappingProxyType({"second": "S", "minute": "M", "hour": "H"})
_NUM = r"\d+(?:\.\d+)?|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[- ](?:one|two|three|four|five|six|seven|eight|nine)|[a-z]+"
_AMOUNT = re.compile(rf"\b(?P<n>{_NUM})(?P<half> and a half)? (?P<u>second|minute|hour)s?(?P<half2> and a half)?\b")
_HALF_HOUR = re.compile(r"\bhalf an? hour\b")
_CLOCK = re.compile(r"\b(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<half>[ap])\.?\s?m\b\.?|\b(?P<h24>\d{1,2}):(?P<m24>\d{2})\b|\b(?P<word>noon|midnight)\b")
_DAY = re.compile(r"\b(?:on )?(?P<day>today|tonight|tomorrow|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b")


def _number(word: str) -> float | None:
    word = word.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", word):
        return float(word)
    parts = re.split(r"[- ]", word)
    if all(p in _SMALL for p in parts):
        return float(sum(_SMALL[p] for p in parts))
    return None


def iso_duration(words: str) -> str | None:
    """"ten minutes" -> "PT10M", "an hour and a half" -> "PT1H30M", "half an hour" -> "PT30M"."""
    text = words.lower()
    seconds = 1800.0 if _HALF_HOUR.search(text) else 0.0
    for match in _AMOUNT.finditer(_HALF_HOUR.sub("", text)):
        amount = _number(match["n"])
        if amount is None:
            continue
        amount += 0.5 if match["half"] or match["half2"] else 0.0
        seconds += amount * {"S": 1, "M": 60, "H": 3600}[_UNIT[match["u"]]]
    if not seconds:
        return None
    hours, rest = divmod(int(round(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    return "PT" + "".join(f"{n}{u}" for n, u in ((hours, "H"), (minutes, "M"), (secs, "S")) if n)


def _clock(match: re.Match[str]) -> str:
    if match["word"]:
        return "12:00" if match["word"] == "noon" else "00:00"
    if match["h24"]:
        return f"{int(match['h24']):02d}:{match['m24']}"
    hour = int(match["h"]) % 12 + (12 if match["half"] == "p" else 0)
    return f"{hour:02d}:{match['m'] or '00'}"


def set_timer_arguments(text: str) -> dict[str, Any]:
    """"set a timer for ten minutes for the pasta" -> {"duration": "PT10M", "label": "pasta"}."""
    lowered = text.lower().strip(" .!?")
    label = re.search(r"\b(?:called|named|labelled|for the) (?P<label>[a-z ]+)$", lowered)
    duration = iso_duration(lowered[: label.start()] if label else lowered)
    arguments: dict[str, Any] = {"duration": duration or lowered}
    if label:
        arguments["label"] = label["label"].strip()
    return arguments


def set_reminder_arguments(text: str) -> dict[str, Any]:
    """"remind me at 5 pm to call the plumber" -> {"at": "17:00", "text": "call the plumber"};
    "in twenty minutes" -> "PT20M"; "tomorrow at 9 am" -> "tomorrow 09:00"."""
    lowered = text.lower().strip(" .!?")
    rest = re.sub(r"^.*?\bremind me\b", "", lowered).strip()
    at = ""
    clock = _CLOCK.search(rest)
    day = _DAY.search(rest)
    relative = re.search(rf"\bin (?P<d>(?:half an? hour|(?:{_NUM})(?: and a half)? (?:second|minute|hour)s?(?: and a half)?(?: and (?:{_NUM}) (?:second|minute|hour)s?)?))", rest)
    spans = []
    if clock:
        at = _clock(clock)
        spans.append(clock.span())
        if day:
            at = f"{day['day']} {at}"
            spans.append(day.span())
    elif relative:
        at = iso_duration(relative["d"]) or relative["d"]
        spans.append(relative.span())
    for start, end in sorted(spans, reverse=True):
        rest = rest[:start] + " " + rest[end:]
    rest = re.sub(r"\b(?:at|on)\s*$", "", re.sub(r"\s+", " ", rest).strip()).strip()
    rest = re.sub(r"^(?:at|on)\s+", "", rest)
    words = re.sub(r"^(?:to|about|that)\s+", "", rest).strip(" ,")
    return {"at": at, "text": words}


def timer_name_arguments(text: str) -> dict[str, Any]:
    """"how long is left on the pasta timer" -> {"name": "pasta"}; "... on my timer" -> {"name": "timer"}."""
    lowered = text.lower().strip(" .!?")
    found = re.search(r"\b(?:on|for|cancel|of|until) (?:the |my )?(?P<name>[a-z ]*?)\s*(?P<kind>timer|reminder)s?\b", lowered)
    if found is None:
        return {}
    return {"name": found["name"].strip() or found["kind"]}
