"""pocketsphinx keyphrase searches built with a dictionary of their own words only.

The wheel's pronouncing dictionary holds 135,000 pronunciations, and a `Decoder` given it spends
about 0.12 s of CPU reading it; the stop phrase detector builds one search per word (the wake
phrase and each stop word), and every `run`, `check` and satellite start builds a detector: about
half a second of CPU each time, for words of which a keyphrase search uses only its own. So the
search gets a dictionary of just those words, every pronunciation of each ("read", "read(2)"),
copied from the wheel's file: 10 ms a search, and the same hits to the frame (tests/detectors/
test_sphinx_words.py). Whether a word is known is asked of the wheel's whole dictionary, as before.
It saves memory too: a stop phrase detector of "hey jarvis" and two stop words adds 20 MB to the
process, 81 MB when each search held the whole dictionary (session 22).
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from typing import Any

from pocketsphinx import Decoder, get_model_path


@functools.cache
def _dictionary() -> str:
    """The wheel's dictionary, one "word phones" line each, sorted; a newline first so each entry
    can be found as "\\nword "."""
    with open(os.path.join(get_model_path(), "en-us", "cmudict-en-us.dict"), encoding="utf-8") as file:
        return "\n" + file.read()


def pronunciations(word: str) -> list[str]:
    """The dictionary's lines for `word`: "word phones", then "word(2) phones" ... ([] if unknown)."""
    text = _dictionary()
    found = []
    for name in (word, *(f"{word}({n})" for n in range(2, 100))):
        at = text.find(f"\n{name} ")
        if at < 0:
            break
        found.append(text[at + 1:text.find("\n", at + 1)].rstrip())
    return found


def known(word: str) -> bool:
    return bool(pronunciations(word))


def keyphrase_decoder(phrase: str, **config: Any) -> Any:
    """A `Decoder` searching for `phrase` (words separated by spaces), whose dictionary holds only
    the phrase's words; `config`: the search's other settings (kws_threshold, kws_delay ...)."""
    lines = [line for word in dict.fromkeys(phrase.split()) for line in pronunciations(word)]
    # pocketsphinx reads the dictionary while the decoder is made: the file is gone right after.
    with contextlib.ExitStack() as stack:
        try:
            file = stack.enter_context(tempfile.NamedTemporaryFile("w", suffix=".dict", prefix="handoff-words-",
                                                                   encoding="utf-8"))  # fmt: skip
            file.write("".join(f"{line}\n" for line in lines))
            file.flush()
        except OSError:  # nowhere to write it (a full disk): the whole dictionary, slower to read, the same hits
            return Decoder(keyphrase=phrase, loglevel="FATAL", **config)
        return Decoder(keyphrase=phrase, dict=file.name, loglevel="FATAL", **config)
