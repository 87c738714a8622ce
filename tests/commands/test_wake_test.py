"""`handoff wake-test --input-wav`: a recording of the phrase said ten times (flite voices over a
-60 dB floor) is heard ten times; the corpus's near misses are reported as false wakes."""

from __future__ import annotations

import os
import wave
from pathlib import Path

import pytest

from benchmarks.corpus import NEAR_MISS_LINES, Corpus, Noise, _silence, with_floor
from commands import cli
from detectors.wake_test import Take, WakeReport

VOICES = ("flite:slt", "flite:rms", "flite:awb", "flite:kal16")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "HANDOFF_", "WAKE_", "AUDIO_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("wake-test-corpus"))


def recording(path: Path, corpus: Corpus, texts: list[str]) -> Path:
    pcm = b""
    for i, text in enumerate(texts):
        pcm += _silence(1.0) + corpus.speech(text, VOICES[i % len(VOICES)], (150, 165, 180)[i % 3])
    pcm = with_floor(pcm + _silence(1.0), corpus.noise(Noise.FAN, 10.0, seed=5))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(24000)
        w.writeframes(pcm)
    return path


def test_the_phrase_said_ten_times_is_heard_ten_times(home, corpus, capsys):
    wav = recording(home / "ten.wav", corpus, ["hey jarvis"] * 10)
    assert cli.main(["wake-test", "--input-wav", str(wav)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'10 utterance(s) in {wav}, each scored by the "hey jarvis" model:')
    assert "heard 10 of 10 wake phrases at cutoff 0.97 (the model's own)" in out
    assert out.count(" heard\n") == 10 and "score 0.9" in out


def test_the_corpus_near_misses_are_reported_as_false_wakes(home, corpus, capsys):
    lines = list(NEAR_MISS_LINES["hey jarvis"])
    wav = recording(home / "near.wav", corpus, lines)
    assert cli.main(["wake-test", "--input-wav", str(wav), "--not-phrase"]) == 0
    out = capsys.readouterr().out
    scored = [line for line in out.splitlines() if "not the phrase   score" in line]
    assert len(lines) <= len(scored) <= len(lines) + 2  # the VAD may hear a pause inside one as two
    false_wakes = sum("FALSE WAKE" in line for line in scored)
    assert f"false wakes: {false_wakes} of {len(scored)} utterances that were not the phrase" in out
    assert 0 < false_wakes < len(lines)  # "hey travis" and "hey jarvie" do fire it; "a jar of peas" does not


def test_a_phrase_with_no_model_and_a_missing_file_are_one_line_each(home, capsys):
    assert cli.main(["wake-test", "--wake-phrase", "computer", "--input-wav", "x.wav"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "WAKE_PHRASE=computer has no on-device model" in err[0]
    assert cli.main(["wake-test", "--input-wav", str(home / "missing.wav")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


def test_the_suggested_cutoff_separates_the_phrases_from_the_rest():
    takes = (Take(1, 0.95, True), Take(2, 0.62, True), Take(3, 0.30, False), Take(4, 0.1, False))
    report = WakeReport(takes, cutoff=0.97, model_cutoff=0.97)
    assert report.heard == 0 and report.false_wakes == 0
    assert report.suggested_cutoff() == 0.46  # halfway between 0.62 and 0.30
    assert "WAKE_CUTOFF=0.46 would have caught all 2 with no false wake" in report.lines("hey jarvis")[-1]
    overlapping = WakeReport(takes + (Take(5, 0.7, False),), cutoff=0.5, model_cutoff=0.97)
    assert overlapping.suggested_cutoff() is None
    assert overlapping.lines("hey jarvis")[-1].startswith("no cutoff catches every phrase with no false wake")


def test_live_takes_are_prompted_scored_and_counted(home, corpus, capsys, monkeypatch):
    """The live path, with an in-memory microphone standing in for the device: the phrase twice,
    then one sentence that is not it, each in its own 3 s take."""
    import audio_io
    from audio_io import PushMicrophone

    def take(text: str, voice: str) -> bytes:
        said = _silence(0.4) + corpus.speech(text, voice, 165)
        return said + _silence(3.0 - len(said) / 48000)

    takes = take("hey jarvis", "flite:slt") + take("hey jarvis", "flite:rms") + take("have you fed the cat yet", "flite:slt")

    class Device(PushMicrophone):
        def __init__(self, device: str | None) -> None:
            super().__init__(chunk_ms=20, pace=0)
            self.feed(with_floor(takes, corpus.noise(Noise.FAN, 10.0, seed=5)))

        async def close(self) -> None:
            pass

    monkeypatch.setattr(audio_io, "PyAudioMicrophone", Device)
    assert cli.main(["wake-test", "--times", "2", "--others", "1"]) == 0
    out = capsys.readouterr().out
    assert '1/3: say "hey jarvis" now' in out and '3/3: say "I think the train leaves at half past seven" now' in out
    assert "heard 2 of 2 wake phrases" in out and "false wakes: 0 of 1" in out
