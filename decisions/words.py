"""The one word tokenizer: what counts as a word wherever spoken text is compared.

Letters and digits of any script count ("компьютер", "コンピューター", "ordinateur"), so a wake
phrase in any language has words. Accents and other combining marks are dropped on both sides of
every comparison, so "Café" and "cafe" match (and "й" and "и": the same rule, applied to both).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterator

# A letter or digit of any script (\w without the underscore), or an apostrophe inside a word.
_WORD = re.compile(r"(?:[^\W_]|')+")
# Typographic apostrophes, as transcribers write them ("what’s").
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})


@dataclass(frozen=True)
class WordSpan:
    """Where a word stands in the original text."""

    start: int
    text: str


def words(text: str) -> list[str]:
    """Case-folded words, combining marks and punctuation dropped: "Hey, Café!" -> ["hey", "cafe"]."""
    return _WORD.findall(_plain(text))


def word_spans(text: str) -> Iterator[WordSpan]:
    """Where the words stand in the original text (to cut it at a word, keeping its case and
    punctuation). A span keeps its combining marks (a decomposed "é" is one word, not two)."""
    start: int | None = None
    for index, char in enumerate(text):
        if _in_word(char):
            if start is None:
                start = index
        elif start is not None:
            yield WordSpan(start, text[start:index])
            start = None
    if start is not None:
        yield WordSpan(start, text[start:])


def _plain(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.translate(_APOSTROPHES))
    return "".join(c for c in decomposed if not unicodedata.category(c).startswith("M")).casefold()


def _in_word(char: str) -> bool:
    return char.isalnum() or char in "'\u2019\u02bc" or unicodedata.category(char).startswith("M")
