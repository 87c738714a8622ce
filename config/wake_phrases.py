"""The wake phrases that have an on-device model, and how a transcriber writes them.

A phrase in `MODEL_PHRASES` is spotted on the machine by a model shipped inside the
pymicro-wakeword wheel (`detectors/wake_model.py`), so by default nothing of the room is
uploaded until it is heard. Any other WAKE_PHRASE falls back to speech-only upload: every
sentence said in the room goes up and the server-side transcript gate decides (less private).

Pure data, no imports of the detectors: settings, `handoff check` and the transcript gate read it
without loading numpy or TFLite.
"""

from __future__ import annotations

from dataclasses import dataclass

from decisions.words import words


@dataclass(frozen=True)
class WakeModel:
    phrase: str  # canonical spelling, lower case
    model: str  # pymicro_wakeword.Model value
    # How transcribers write it besides the phrase itself (punctuation and case never matter).
    transcriptions: tuple[str, ...] = ()
    # About how long the phrase lasts when said at an ordinary pace: the model reports it at its
    # end, and the upload gate wants where it began.
    spoken_s: float = 0.8
    # The phrase in words pocketsphinx's dictionary has (the stop phrase "<wake phrase> stop" is
    # heard by pocketsphinx while the narrator talks): "nabu" and "mycroft" are not in it.
    dictionary_words: str = ""
    # openWakeWord's model for the phrase confirms microWakeWord's candidates (`detectors.wake_confirm`):
    # only where measured to help (pyopen-wakeword's "hey mycroft" heard 0 of 30, its "okay nabu" 37 %).
    confirmed: bool = False

    @property
    def said_as(self) -> str:
        return self.dictionary_words or self.phrase


MODEL_PHRASES: dict[str, WakeModel] = {
    m.phrase: m
    for m in (
        # Two models must agree (`detectors.wake_confirm`): see PERFORMANCE.md, "Choosing the wake phrase".
        WakeModel("hey jarvis", "hey_jarvis", ("hi jarvis",), 0.8, confirmed=True),
        WakeModel("okay nabu", "okay_nabu", ("ok nabu", "okay navu", "ok navu", "okay naboo", "ok naboo"), 0.8, "okay na boo"),
        WakeModel("alexa", "alexa", ("alexia",), 0.6),
        WakeModel("hey mycroft", "hey_mycroft", ("hi mycroft",), 0.9, "hey my croft"),
    )
}
DEFAULT_PHRASE = "hey jarvis"  # chosen by measurement: docs/PERFORMANCE.md "Choosing the wake phrase"


def model_for(phrase: str) -> WakeModel | None:
    """The shipped model for `phrase` (any case or punctuation, "ok" for "okay"), or None."""
    spoken = words(phrase)
    for model in MODEL_PHRASES.values():
        if spoken in ([*words(model.phrase)], *(words(t) for t in model.transcriptions)):
            return model
    return None


def model_phrases() -> str:
    """For messages: the phrases that have a model."""
    return ", ".join(f'"{p}"' for p in MODEL_PHRASES)
