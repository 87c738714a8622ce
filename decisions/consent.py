"""A spoken yes: whether a reply to "Shall I unlock the front door?" says go ahead. Only a plain
yes counts; "no", "wait", "yes, no, don't" and anything else run nothing (nothing irreversible on
a guess)."""

from __future__ import annotations

from decisions.words import words

_YES_FIRST = frozenset({"yes", "yeah", "yep", "yup", "sure", "ok", "okay", "affirmative", "confirm", "confirmed",
                        "correct", "please", "absolutely", "definitely", "go", "do"})
_YES_WORDS = _YES_FIRST | frozenset({"it", "ahead", "please", "that's", "right", "thanks", "thank", "you", "go", "do",
                                     "jarvis", "hey", "sir"})
_NO = frozenset({"no", "not", "don't", "dont", "never", "stop", "cancel", "wait", "nope", "nah", "hold", "later"})


def is_yes(reply: str) -> bool:
    said = words(reply)
    if not said or _NO.intersection(said):
        return False
    if said[0] in ("do", "go") and said[1:2] not in (["it"], ["ahead"]):
        return False  # "do the other thing", "go back"
    return said[0] in _YES_FIRST and all(word in _YES_WORDS for word in said)


def question_for(command: str) -> str:
    """What is asked before a tool that cannot be undone runs: the user's own words, as a question."""
    asked = command.strip().rstrip(".!?").strip()
    if asked[:1].isupper() and not asked[1:2].isupper():
        asked = asked[0].lower() + asked[1:]
    return f"Just to be sure: shall I {asked}?"
