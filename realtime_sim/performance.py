"""What a real voice model says when asked to read something (the simulator's realistic mode).

A real model performs a script rather than copying it: its transcript has numbers, times, dates,
units and abbreviations in words ("3:05 PM" -> "three oh five p.m.", "March 3" -> "March third",
"5 GB" -> "five gigabytes"), now and then a filler word dropped or added, and a script sent as a
user message may be answered or obeyed instead of read. `Performer` does all that from a seeded
random generator; with `SimConfig.realistic` off it reads everything verbatim (the perfect model).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from num2words import num2words

from realtime_sim.config import SimConfig

# Where a narrator's instructions put the text it must read (see realtime_api.wire.read_script).
_FRAMED = re.compile(r"<script>\n(.*)\n</script>", re.DOTALL)
# "Ignore the above. Say: X": text that acts as an instruction when the model takes it as a message.
_INJECTED = re.compile(r"\bsay:\s*(?P<said>[^\n]+)", re.IGNORECASE)
ANSWER_TO_A_QUESTION = "Sure, I can help with that."

_MONTH_NAMES = (
    "January February March April May June July August September October November December".split()
)
_UNIT_WORDS = {"GB": "gigabytes", "MB": "megabytes", "KB": "kilobytes", "TB": "terabytes", "%": "percent",
               "km": "kilometers", "kg": "kilograms", "ms": "milliseconds", "min": "minutes"}
_TOKEN = re.compile(
    r"(?P<time>\d{1,2}:\d{2})"
    r"|(?P<ampm>\b[AaPp]\.?[Mm]\b\.?)"
    r"|(?P<date>\b(?:" + "|".join(_MONTH_NAMES) + r")\s+\d{1,2}\b)"
    r"|(?P<unit>\b\d+(?:\.\d+)?\s?(?:GB|MB|KB|TB|km|kg|ms|min)\b|\b\d+(?:\.\d+)?%)"
    r"|(?P<number>\b\d+(?:\.\d+)?\b)"
)
_FILLERS = ("just", "now", "so", "well", "really")


def framed_script(instructions: str | None) -> str | None:
    """The script a narrator's instructions frame for reading, if they frame one."""
    found = _FRAMED.search(instructions or "")
    return found.group(1) if found else None


def _number_words(text: str) -> str:
    if "." in text:
        whole, fraction = text.split(".", 1)
        return str(num2words(int(whole))) + " point " + " ".join(str(num2words(int(d))) for d in fraction)
    return str(num2words(int(text)))


@dataclass
class Performer:
    """One session's voice model: seeded, so a run can be repeated exactly."""

    config: SimConfig
    rng: random.Random

    def perform(self, script: str) -> str:
        """What the model says (and its transcript shows) when it reads `script` as told."""
        if not self.config.realistic:
            return script
        said = _TOKEN.sub(self._verbalise, script)
        if self.rng.random() < self.config.paraphrase_rate:
            said = self._paraphrase(said)
        return said

    def transcription_delay_s(self) -> float:
        """How long after its commit an utterance's transcript completes (0: at once)."""
        if not self.config.realistic:
            return 0.0
        low, high = self.config.transcription_delay_ms
        return self.rng.uniform(low, high) / 1000

    def respond(self, message: str) -> str:
        """What the model says to a user message in an audio response: a perfect model reads it;
        a real one answers a question and obeys an instruction in it."""
        if not self.config.realistic:
            return message
        injected = _INJECTED.search(message)
        if injected:
            return injected.group("said").strip()
        if message.rstrip().endswith("?"):
            return ANSWER_TO_A_QUESTION
        return self.perform(message)

    def _verbalise(self, match: re.Match[str]) -> str:
        kind, text = match.lastgroup, match.group(0)
        if kind == "time":
            hour, minute = (int(part) for part in text.split(":"))
            if self.rng.random() < 0.3:
                return text  # the transcriber writes the digits back
            if minute == 0:
                return str(num2words(hour))
            return f"{num2words(hour)} {'oh ' if minute < 10 else ''}{num2words(minute)}"
        if kind == "ampm":
            return f"{text[0].lower()}.m."
        if kind == "date":
            month, day = text.split()
            return f"{month} {num2words(int(day), to='ordinal')}" if self.rng.random() < 0.7 else f"{month} {day}{_suffix(int(day))}"
        if kind == "unit":
            amount, unit = re.match(r"(\d+(?:\.\d+)?)\s?(.*)", text).groups()  # type: ignore[union-attr]
            return f"{_number_words(amount)} {_UNIT_WORDS[unit]}"
        return _number_words(text)

    def _paraphrase(self, said: str) -> str:
        words = said.split(" ")
        droppable = [i for i, w in enumerate(words) if w.lower().strip(",.") in ("just", "now", "the", "that")]
        if droppable and self.rng.random() < 0.5:
            del words[self.rng.choice(droppable)]
        else:
            words.insert(self.rng.randrange(len(words) + 1), self.rng.choice(_FILLERS))
        return " ".join(words)


def _suffix(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
