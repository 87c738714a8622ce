"""A keyphrase search with a dictionary of its own words hears what it heard with the whole one."""

from __future__ import annotations

import pytest
from pocketsphinx import Decoder

from benchmarks.corpus import _silence
from detectors.audio import Resampler
from detectors.sphinx_words import keyphrase_decoder, known, pronunciations


def every_pronunciation(decoder: Decoder, word: str) -> list[str]:
    found, count = [], 1
    while (phones := decoder.lookup_word(word if count == 1 else f"{word}({count})")) is not None:
        found.append(phones)
        count += 1
    return found


def test_each_word_keeps_every_pronunciation_the_whole_dictionary_has() -> None:
    whole = Decoder(keyphrase="stop", loglevel="FATAL")
    for word in ("read", "live", "either", "jarvis", "hey", "stop", "cancel", "computer", "don't"):
        lines = pronunciations(word)
        assert [line.split(" ", 1)[1] for line in lines] == every_pronunciation(whole, word), word
        assert known(word)
    assert len(pronunciations("read")) == 2  # "read" and "read(2)": both are searched
    assert pronunciations("jarvisx") == [] and not known("jarvisx") and not known("")


def hits(decoder: Decoder, pcm16k: bytes) -> list[tuple[str, int, int]]:
    """Every keyphrase hit with its segment's frames, the search restarted after each (as the
    stop phrase detector does), fed in 20 ms pieces."""
    found: list[tuple[str, int, int]] = []
    decoder.start_utt()
    for at in range(0, len(pcm16k), 640):
        decoder.process_raw(pcm16k[at:at + 640], False, False)
        if decoder.hyp() is not None:
            found += [(seg.word, seg.start_frame, seg.end_frame) for seg in decoder.seg()]
            decoder.end_utt()
            decoder.start_utt()
    decoder.end_utt()
    return found


@pytest.mark.parametrize(("phrase", "threshold"), [("computer", 1e-70), ("stop", 1e-20), ("read", 1e-20), ("cancel", 1e-20)])
def test_the_search_hears_the_same_hits_to_the_frame(corpus, phrase: str, threshold: float) -> None:
    said = [("computer, stop", "en-us"), ("hey jarvis, cancel that", "en-us+f3"), ("the weather is nice today", "en-us"),
            ("stop the computer from reading", "en-us+m3"), ("hey jarvis, read me the news", "en-us")]  # fmt: skip
    pcm = Resampler(24000)(b"".join(_silence(0.3) + corpus.speech(text, voice, 160) for text, voice in said))
    whole = hits(Decoder(keyphrase=phrase, kws_threshold=threshold, kws_delay=2, loglevel="FATAL"), pcm)
    own = hits(keyphrase_decoder(phrase, kws_threshold=threshold, kws_delay=2), pcm)
    assert own == whole
    assert whole  # the thresholds are low enough that there is something to compare


def test_with_nowhere_to_write_its_words_the_search_reads_the_whole_dictionary(corpus, monkeypatch) -> None:
    """A full disk (the temporary folder refuses the little file): the search is still made, and
    hears the same, from the wheel's own dictionary; `run` then says the disk is full, once."""
    import tempfile

    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    pcm = Resampler(24000)(_silence(0.3) + corpus.speech("computer, stop", "en-us", 160))
    made = hits(keyphrase_decoder("stop", kws_threshold=1e-20, kws_delay=2), pcm)
    monkeypatch.setattr(tempfile, "NamedTemporaryFile", no_room)
    assert hits(keyphrase_decoder("stop", kws_threshold=1e-20, kws_delay=2), pcm) == made != []
