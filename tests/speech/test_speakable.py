"""The speakable filter: what a voice reads aloud has no markdown, URLs or JSON noise."""

from __future__ import annotations

import pytest

from speech.speakable import speakable_text


# --- speakable_text ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("# Title\nBody text here.", "Title. Body text here."),
        ("Intro:\n- first\n- second item\n* third\n1. fourth", "Intro: first. second item. third. fourth."),
        ("It is **very** _quite_ *really* ~~not~~ good.", "It is very quite really not good."),
        ("Read [the docs](https://docs.example.com/a_b) now.", "Read the docs now."),
        ("Before.\n```python\nprint('hi')\n```\nAfter.", "Before. After."),
        ("Use `snake_case_name` here.", "Use snake case name here."),
        ("Go to https://example.com/path. Or www.example.org!", "Go to. Or!"),
        ('{"status": "ok", "items": [1, 2]}', 'status: "ok", items: 1, 2'),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "a, b. 1, 2."),
        ("> quoted line\n\n---\nnext", "quoted line next"),
        ("  lots   of\n\n  space  ", "lots of space"),
        ("2 * 3 = 6.", "2 times 3 = 6."),
        ("Plain sentence. Another one!", "Plain sentence. Another one!"),
    ],
)
def test_speakable_text_strips_markdown_urls_and_noise(raw: str, expected: str) -> None:
    assert speakable_text(raw) == expected


def test_speakable_text_cuts_at_a_sentence_end() -> None:
    text = " ".join(f"Sentence {i} is here." for i in range(100))
    cut = speakable_text(text, max_chars=100)
    assert len(cut) <= 100
    assert cut.endswith("is here.")
    assert text.startswith(cut)


def test_speakable_text_without_sentence_ends_cuts_at_a_word() -> None:
    cut = speakable_text("word " * 100, max_chars=50)
    assert len(cut) <= 50
    assert cut.endswith("word…")
