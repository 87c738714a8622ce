"""Text in the form it is spoken, for comparing a script with what a voice model said.

A real model performs a script, it does not copy it: "3:05 PM" comes back as "three oh five
p.m.", "March 3" as "March third", "5 GB" as "five gigabytes". `spoken_words` brings both sides
to one form: numbers, ordinals, times, dates, units and abbreviations in words, case, accents and
punctuation dropped. Number words come from `num2words` (a small, long-kept library).
"""

from __future__ import annotations

import re

from num2words import num2words

from decisions.words import words

MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
)

# Unit symbols after a number, and the spoken words for them (singular; plurals fold to these).
UNITS = {
    "kb": "kilobyte", "mb": "megabyte", "gb": "gigabyte", "tb": "terabyte",
    "ms": "millisecond", "s": "second", "sec": "second", "secs": "second", "min": "minute", "mins": "minute",
    "h": "hour", "hr": "hour", "hrs": "hour",
    "km": "kilometre", "m": "metre", "cm": "centimetre", "mm": "millimetre",
    "kg": "kilogram", "g": "gram", "mph": "miles per hour", "kph": "kilometres per hour",
    "%": "percent", "°c": "degrees celsius", "°f": "degrees fahrenheit", "°": "degree",
}
# Spoken spellings that mean the same word: plurals of units, US spellings, percent signs.
SAME_WORD = {
    **{unit + "s": unit for unit in set(UNITS.values()) if " " not in unit},
    "kilometer": "kilometre", "kilometers": "kilometre", "meter": "metre", "meters": "metre",
    "centimeter": "centimetre", "centimeters": "centimetre", "millimeter": "millimetre",
    "millimeters": "millimetre", "per cent": "percent", "degrees": "degree", "o'clock": "",
    "oclock": "",
}

_AM_PM = re.compile(r"\b([ap])\.?\s?m\b\.?", re.IGNORECASE)
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_DATE = re.compile(r"\b(" + "|".join(MONTHS) + r")\.?\s+(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)?\b", re.IGNORECASE)
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(" + "|".join(MONTHS) + r")\b", re.IGNORECASE)
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE)
_MONTH_THE = re.compile(r"\b(" + "|".join(MONTHS) + r")\s+the\s+(?=[a-z]+(?:st|nd|rd|th)\b)", re.IGNORECASE)
_UNIT = re.compile(
    r"(\d)\s*(" + "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True)) + r")(?![a-z])", re.IGNORECASE
)
_MONEY = re.compile(r"([$£€])\s?(\d[\d,]*(?:\.\d+)?)")
_CURRENCY = {"$": "dollars", "£": "pounds", "€": "euros"}
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _cardinal(text: str) -> str:
    digits = text.replace(",", "")
    if "." in digits:
        whole, fraction = digits.split(".", 1)
        return f"{_cardinal(whole)} point {' '.join(num2words(int(d)) for d in fraction)}"
    value = int(digits)
    if len(digits) == 4 and 1100 <= value <= 2099 and "," not in text:
        return num2words(value, to="year")  # "2026": "twenty twenty-six", as it is said
    return num2words(value)


def _time(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    if minute == 0:
        return num2words(hour)
    return f"{num2words(hour)} {'oh ' if minute < 10 else ''}{num2words(minute)}"


def spoken(text: str) -> str:
    """`text` as a voice says it: "It's 3:05 PM on March 3." -> "It's three oh five pm on March third."."""
    text = _AM_PM.sub(lambda m: f" {m.group(1).lower()}m ", text)
    text = _TIME.sub(_time, text)
    text = _DATE.sub(lambda m: f"{m.group(1)} {num2words(int(m.group(2)), to='ordinal')}", text)
    text = _DAY_MONTH.sub(lambda m: f"{num2words(int(m.group(1)), to='ordinal')} of {m.group(2)}", text)
    text = _MONTH_THE.sub(lambda m: f"{m.group(1)} ", text)
    text = _ORDINAL.sub(lambda m: num2words(int(m.group(1)), to="ordinal"), text)
    text = _MONEY.sub(lambda m: f"{m.group(2)} {_CURRENCY[m.group(1)]}", text)
    text = _UNIT.sub(lambda m: f"{m.group(1)} {UNITS[m.group(2).lower()]}", text)
    return _NUMBER.sub(lambda m: f" {_cardinal(m.group(0))} ", text)


def spoken_words(text: str) -> list[str]:
    """The words of `text` as spoken, in one form for comparison (see the module docstring)."""
    said = spoken(text).replace("-", " ").replace("per cent", "percent")
    out: list[str] = []
    for word in words(said):
        word = SAME_WORD.get(word, word)
        if word:
            out.append(word)
    return out
