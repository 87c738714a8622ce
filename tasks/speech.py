"""Words for speaking about tasks: durations ("an hour and five minutes"), outcomes ("the backup
finished in two minutes"), output summaries. Pure functions over plain values, shared by the
notices and the voice tool formatters so both say things the same way.
"""

from __future__ import annotations

import re
import time
from typing import Iterable, Sequence

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """0..999 in words ("forty-two"); larger numbers as digits, which speech reads fine."""
    if n < 0 or n > 999:
        return str(n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    hundreds, rest = divmod(n, 100)
    return f"{_ONES[hundreds]} hundred" + (f" and {number_words(rest)}" if rest else "")


def _count(n: int, unit: str, one: str = "a") -> str:
    """"a minute", "two minutes" ("an hour" via one="an")."""
    return f"{one} {unit}" if n == 1 else f"{number_words(n)} {unit}s"


def duration_words(seconds: float) -> str:
    """A duration as speech says it: "forty seconds", "two minutes", "an hour and five minutes"."""
    total = int(round(seconds))
    if seconds < 1:
        return "less than a second"
    if total < 60:
        return "one second" if total == 1 else f"{number_words(total)} seconds"
    if total < 120:
        rest = total - 60
        if rest == 0:
            return "a minute"
        return "a minute and " + ("one second" if rest == 1 else f"{number_words(rest)} seconds")
    minutes = int(round(total / 60))
    if minutes < 60:
        return _count(minutes, "minute")
    if minutes < 24 * 60:
        hours, minutes = divmod(minutes, 60)
        head = _count(hours, "hour", one="an")
        return head if minutes == 0 else f"{head} and {_count(minutes, 'minute')}"
    hours = int(round(total / 3600))
    days, hours = divmod(hours, 24)
    head = _count(days, "day")
    return head if hours == 0 else f"{head} and {_count(hours, 'hour', one='an')}"


def clock_time(timestamp: float) -> str:
    """Local wall-clock time as "10:02", for telling two runs apart."""
    return time.strftime("%H:%M", time.localtime(timestamp))


def sentence_start(text: str) -> str:
    return text[:1].upper() + text[1:]


def sentence(text: str) -> str:
    """Capitalised, ending with a full stop (unless it already ends with punctuation)."""
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."


def and_list(items: Sequence[str], sep: str = ", ", last: str = " and ") -> str:
    """"a, b and c"; with sep="; ", last="; and " for clauses that contain commas."""
    items = list(items)
    return "".join(items) if len(items) <= 1 else sep.join(items[:-1]) + last + items[-1]


def or_list(items: Sequence[str]) -> str:
    items = list(items)
    return "".join(items) if len(items) <= 1 else ", ".join(items[:-1]) + " or " + items[-1]


def match_key(text: str) -> str:
    """What a spoken name is compared by: lowercase, separators as single spaces, without a
    leading "the" or a trailing "task" ("The Unit-Tests task" -> "unit tests")."""
    key = re.sub(r"[\s_\-]+", " ", str(text).lower()).strip(" .,?!'\"")
    key = re.sub(r"^(the|a|an)\s+", "", key)
    key = re.sub(r"\s+(task|job|run)$", "", key)
    return key.strip()


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_URL = re.compile(r"\b(?:https?|ftp)://\S+")
_NOISE = re.compile(r"[`*#>|{}\[\]<>\\_=~^]+")


def speakable_line(line: str, max_chars: int = 160) -> str:
    """One output line made fit to read aloud: no colour codes, URLs, markup or runs of symbols;
    cut at a word boundary."""
    line = line.rsplit("\r", 1)[-1]  # a progress bar redraws itself after \r: keep what was shown last
    line = _ANSI.sub("", line)
    line = _URL.sub("a link", line)
    line = _NOISE.sub(" ", line)
    line = "".join(ch for ch in line if ch.isprintable())
    line = re.sub(r"\s+", " ", line).strip(" -:;,.")
    if len(line) > max_chars:
        line = line[:max_chars].rsplit(" ", 1)[0]
    return line


def output_summary(tail: Iterable[str], lines: int = 2) -> str:
    """The last few non-empty output lines, speakable, joined as one phrase ("" if none)."""
    picked: list[str] = []
    for line in reversed(list(tail)):
        spoken = speakable_line(line)
        if spoken:
            picked.append(spoken)
        if len(picked) >= lines:
            break
    return ". ".join(reversed(picked))


def status_clause(
    spoken: str,
    status: str,
    duration_s: float | None,
    *,
    exit_code: int | None = None,
    timeout_s: float | None = None,
    error: str | None = None,
    detailed: bool = False,
) -> str:
    """One clause, no capital or full stop, e.g. "the backup finished in two minutes".

    `detailed` adds what only matters when this one task is being talked about (exit code,
    why it could not start)."""
    took = duration_words(duration_s) if duration_s is not None else None
    if status == "queued":
        return f"{spoken} is waiting for a free slot"
    if status == "running":
        return f"{spoken} is still going" + (f", {took} so far" if took else "")
    if status == "succeeded":
        return f"{spoken} finished in {took}" if took else f"{spoken} finished"
    if status == "failed":
        if error and took is None:
            return f"{spoken} could not start" + (f": {error}" if detailed else "")
        if error:
            return f"{spoken} failed after {took}" + (f": {error}" if detailed else "")
        clause = f"{spoken} failed after {took}" if took else f"{spoken} failed"
        if detailed and exit_code is not None:
            clause += f", killed by signal {-exit_code}" if exit_code < 0 else f", with exit code {exit_code}"
        return clause
    if status == "timed_out":
        limit = f" of {duration_words(timeout_s)}" if timeout_s else ""
        return f"{spoken} was stopped when it ran past its time limit{limit}"
    if status == "cancelled":
        return f"{spoken} was cancelled after {took}" if took else f"{spoken} was cancelled before it started"
    if status == "interrupted":
        if duration_s is None:
            return f"{spoken} never started because handoff stopped"
        return f"{spoken} was interrupted when handoff stopped"
    if status == "stopped":
        if took is None:
            return f"{spoken} never started: handoff was stopped first"
        return f"{spoken} was stopped after {took}, when handoff was stopped"
    return f"{spoken} is {status.replace('_', ' ')}"
