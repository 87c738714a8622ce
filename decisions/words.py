"""The one word tokenizer: what counts as a word wherever spoken text is compared."""

from __future__ import annotations

import re
import unicodedata
from typing import Iterator

_WORD = re.compile(r"[a-z0-9']+")
_WORD_SPAN = re.compile(r"[A-Za-z0-9']+")


def words(text: str) -> list[str]:
    """Lower-case ASCII words (accents folded, punctuation dropped): "Hey, Café!" -> ["hey", "cafe"]."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return _WORD.findall(folded)


def word_spans(text: str) -> Iterator[re.Match[str]]:
    """Where the words stand in the original text (to cut it at a word, keeping its case and punctuation)."""
    return _WORD_SPAN.finditer(text)
