"""What the on-device detectors are built from the settings, for `run`, `check`, `wake-test` and a
satellite: kept apart from `assembly.build`, which brings the whole assistant (the openai SDK, the
coordinator, MCP, tasks: 1.6 s of CPU to import), none of which a satellite or `check` needs."""

from __future__ import annotations

from dataclasses import replace

from audio_io import BYTES_PER_SECOND
from config.settings import EndOfTurn, Settings, SettingsError
from config.wake_phrases import model_for
from detectors.barge_in import BargeInDetector
from detectors.keyword import UnknownWakeWord
from detectors.pipeline import UploadFilter, build_upload_filter, build_wake_spotter
from detectors.stop_phrase import StopPhraseDetector, StopPhraseSettings
from detectors.stop_word import StopDetector


def build_stop_detector(settings: Settings) -> StopDetector:
    """"<wake phrase> <stop word>" while the narrator talks (pocketsphinx, on the machine), and,
    for a phrase with a shipped model, the wake phrase alone: a barge-in (`detectors.barge_in`)."""
    listener = settings.listener
    model = model_for(listener.wake_phrase)
    phrase = model.said_as if model is not None else listener.wake_phrase  # in words pocketsphinx knows
    try:
        stop = StopPhraseDetector(StopPhraseSettings(wake_phrase=phrase, stop_words=listener.stop_words))
        if model is None or not settings.stop.barge_in:
            return stop
        # Never the verifier (`WAKE_VERIFY`): its weights may wait after the wake (`delay_s`) and relax the
        # cutoffs (`ask_*`), which would delay the cut and change what the narration's echo wakes.
        wake = build_wake_spotter(replace(settings.upload, wake_verify=False), listener.wake_phrase,
                                  settings.stop.barge_in_alone_cutoff)
        return BargeInDetector(stop, wake, phrase, search_wakes=settings.stop.barge_in_search_wakes)
    except UnknownWakeWord as exc:
        raise SettingsError(
            f"{exc}; choose STOP_WORDS (and a WAKE_PHRASE) the on-device spotter knows, or set STOP_WHILE_TALKING=false."
        ) from None


def upload_filter(settings: Settings) -> UploadFilter:
    """The on-device detectors and gate that decide what of the microphone leaves the machine."""
    listener = settings.listener
    try:
        turn_end_s = listener.turn_end_ms / 1000 if listener.end_of_turn is EndOfTurn.DEVICE else None
        pause_s = listener.provisional_ms / 1000 if turn_end_s and 0 < listener.provisional_ms < listener.turn_end_ms else None
        return build_upload_filter(settings.upload, listener.wake_phrase, listener.wake_window_s, BYTES_PER_SECOND,
                                   turn_end_s, pause_s)
    except UnknownWakeWord as exc:
        raise SettingsError(
            f"{exc}; HANDOFF_UPLOAD_MODE=wake_word needs a wake phrase the on-device spotter knows, "
            "so choose another WAKE_PHRASE or use HANDOFF_UPLOAD_MODE=speech_only."
        ) from None
