"""The pipeline upload benchmark's quick mode: the whole assistant in both modes, its table printed
(figures not asserted), and speech-only routes every command continuous routes."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

from benchmarks import listener_upload_pipeline
from tests.benchmarks.test_listener_upload import rows


def test_quick_run_prints_both_modes_and_speech_only_routes_what_continuous_routes(tmp_path, capsys):
    assert listener_upload_pipeline.main(["--quick", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = {r[0]: r for r in rows(out, "") if r[0] in ("continuous", "speech_only")}
    assert list(table) == ["continuous", "speech_only"], out
    assert table["continuous"][1] == "6/6", out  # every command of the quick set goes through
    assert table["speech_only"][1] == "6/6", out
    assert "routed in continuous but not in speech_only: none" in out
    assert table["continuous"][4] == "1.000" and float(table["speech_only"][4]) < 1, out  # less went up


def test_listening_rows_name_a_chunk_and_how_much_is_read_at_a_time() -> None:
    assert listener_upload_pipeline.chunk_sizes("20,40,20/40") == ((20, None), (40, None), (20, 40))


def test_the_session16_baseline_runs_the_old_per_chunk_code_and_decides_the_same(tmp_path: Path) -> None:
    """`--baseline session16` swaps in the detectors' and gate's per-chunk code as it was (the
    CPU cuts of issue 34, session 17, must not change a decision): every verdict, every piece
    sent and every wake the same, near speech and far speech (the quiet path) alike."""
    from audio_io.format import audioop
    from benchmarks.corpus import NOISE_FLOOR_RMS, Corpus, Noise, UtteranceSpec, scale_to_rms
    from benchmarks.listening_session16 import as_in_session16
    from config.settings import UploadMode, UploadSettings
    from detectors.pipeline import Verdict, build_upload_filter
    from detectors.vad import SileroVad

    corpus = Corpus(tmp_path)
    command = corpus.utterance(UtteranceSpec((listener_upload_pipeline.LISTEN_COMMANDS[0],), "flite:slt", 165, True)).pcm
    quiet = bytes(24000 * 2 * 2)
    pcm = quiet + command + quiet + audioop.mul(command, 2, 0.03) + quiet + command + quiet  # near, far, near
    floor = scale_to_rms(corpus.noise(Noise.FAN, len(pcm) / 48000 + 1, seed=7), NOISE_FLOOR_RMS)
    pcm = audioop.add(pcm, floor[: len(pcm)], 2)

    def decisions() -> tuple[list[tuple[object, ...]], list[Verdict], int]:
        # (flite's voice, which the verifier refuses as often as not: the session-16 code had none to compare)
        upload = build_upload_filter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE, wake_verify=False), "hey jarvis", 8.0, 48000, 0.46, 0.14)
        detectors = upload.detectors
        assert detectors is not None
        verdicts: list[Verdict] = []
        detect = detectors.feed

        def feed(chunk: bytes, now: float) -> Verdict:
            verdicts.append(detect(chunk, now))
            return verdicts[-1]

        detectors.feed = feed  # type: ignore[method-assign]
        seen: list[tuple[object, ...]] = [(tuple(upload.feed(pcm[i:i + 960])), upload.take_wake(), upload.take_pause(), upload.take_turn())
                                          for i in range(0, len(pcm) - 959, 960)]
        return seen, verdicts, detectors.vad.windows_run

    today = SileroVad.feed
    now, verdicts, windows = decisions()
    with as_in_session16():
        assert SileroVad.feed is not today
        before, verdicts_before, windows_before = decisions()
    assert (now, verdicts, windows) == (before, verdicts_before, windows_before)
    assert sum(wake is not None for _, wake, _, _ in now) >= 2  # the near commands woke it
    assert any(verdict.is_speech for verdict in verdicts) and windows > 0


def test_the_session18_baseline_runs_the_old_learning_loop_and_the_gate_decides_the_same() -> None:
    """`--baseline session18` swaps in the echo gate's `_learn` as it was (issue 34, session 19's
    cut must not change what the gate decides): on random plays, gaps and stops, every chunk's
    verdict and margin, the learnt path, the gain's bound and each delay's running sums the same."""
    import random

    import numpy as np

    from audio_io.echo import EchoSuppressor
    from benchmarks.listening_session18 import as_in_session18

    def gate_decisions(seed: int) -> list[tuple[object, ...]]:
        rng, noise = random.Random(seed), np.random.default_rng(seed)
        gate, seen, at = EchoSuppressor(), [], 0.0
        speaker = np.zeros(24000 * 60)  # what left the speaker, at 24 kHz: the microphone hears it back
        delay, gain = rng.randrange(0, 2400), 10 ** (rng.uniform(-20, -3) / 20)
        for _ in range(600):
            if rng.random() < 0.08:
                played = noise.standard_normal(rng.choice([480, 2400, 4800])) * rng.choice([300, 1000, 5000])
                start = at + rng.uniform(-0.05, 0.2)
                gate.played(played.clip(-32768, 32767).astype("<i2").tobytes(), start)
                first = max(0, round(start * 24000))
                speaker[first:first + len(played)] += played[: len(speaker) - first]
            elif rng.random() < 0.02:
                gate.stopped(at + rng.uniform(-0.1, 0.1))
            first = round(at * 24000) - delay
            echo = speaker[max(0, first):first + 480] if first + 480 > 0 else np.zeros(0)
            echo = np.concatenate([np.zeros(480 - len(echo)), echo]) * gain
            mic = echo + noise.standard_normal(480) * rng.choice([1, 1, 50, 3000])
            seen.append((gate.process(mic.clip(-32768, 32767).astype("<i2").tobytes(), at) is None, gate.margin_db,
                         gate.path, gate._bound, tuple(gate._sums)))
            at += 0.02 if rng.random() > 0.02 else rng.uniform(0.02, 0.5)
        return seen

    today = EchoSuppressor._learn
    now = [gate_decisions(seed) for seed in range(6)]
    with as_in_session18():
        assert EchoSuppressor._learn is not today
        before = [gate_decisions(seed) for seed in range(6)]
    assert now == before
    assert any(path is not None for run in now for _, _, path, _, _ in run)  # a path was learnt
    assert any(dropped for run in now for dropped, *_ in run)  # and echo dropped


def test_the_session19_baseline_hands_a_sound_on_at_once_and_today_holds_the_same_when_someone_is_in_a_hurry() -> None:
    """`--baseline session19` swaps in `QuietReads.hold` as it was (issue 34, session 20): with no one
    unhurried today's holds exactly the reads it held, on random reads of hiss, blips and sounds."""
    import random

    from audio_io.format import audioop
    from audio_io.quiet_reads import QuietReads
    from benchmarks.listening_session19 import as_in_session19
    from tests.support.audio_helpers import noise

    def holds(seed: int, unhurried: bool) -> list[bool]:
        rng, reads = random.Random(seed), QuietReads(rms=20, after_s=rng_after(seed), reads=3)
        reads.unhurried = (lambda: True) if unhurried else None
        out = []
        for i in range(300):
            pcm = noise(0.04, seed * 1000 + i)
            out.append(reads.hold(audioop.mul(pcm, 2, rng.choice([5, 9, 15, 22, 40, 300]) / audioop.rms(pcm, 2)), 0.04, 2))
        return out

    def rng_after(seed: int) -> float:
        return (0.0, 0.2, 1.0)[seed % 3]

    today = QuietReads.hold
    now = [holds(seed, unhurried=False) for seed in range(6)]
    with as_in_session19():
        assert QuietReads.hold is not today
        before = [holds(seed, unhurried=False) for seed in range(6)]
        before_unhurried = [holds(seed, unhurried=True) for seed in range(6)]
    assert now == before
    assert before_unhurried == before  # the old hold never asked
    assert sum(map(sum, [holds(seed, unhurried=True) for seed in range(6)])) > sum(map(sum, now))  # today's holds sounds too


def test_the_session20_baseline_runs_the_wheels_features_and_the_filter_decides_the_same(tmp_path: Path) -> None:
    """`--baseline session20` swaps in microWakeWord's features and `MicroStream.probability` as they
    were (issue 34, session 21's cuts must not change a decision): every piece sent, every wake and
    every probability the spotter scored the same, on a command and an everyday sentence."""
    from pymicro_wakeword import MicroWakeWordFeatures

    from benchmarks.corpus import Corpus, UtteranceSpec
    from benchmarks.listening_session20 import as_in_session20
    from config.settings import UploadMode, UploadSettings
    from detectors.micro_stream import MicroStream
    from detectors.pipeline import build_upload_filter

    corpus = Corpus(tmp_path)
    said = [corpus.utterance(UtteranceSpec((text,), "flite:slt", 165, True)).pcm
            for text in (listener_upload_pipeline.LISTEN_COMMANDS[0], "the weather is nice today")]
    quiet = bytes(24000 * 2)
    pcm = quiet + said[1] + quiet + said[0] + quiet

    def decisions() -> tuple[list[tuple[object, ...]], list[float | None], str]:
        # (flite's voice, which the verifier refuses as often as not: the session-16 code had none to compare)
        upload = build_upload_filter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE, wake_verify=False), "hey jarvis", 8.0, 48000, 0.46, 0.14)
        spotter = upload.detectors.spotter if upload.detectors is not None else None
        scores: list[float | None] = []
        score = MicroStream.probability

        def scored(self: MicroStream, features: object) -> float | None:
            scores.append(score(self, features))  # type: ignore[arg-type]
            return scores[-1]

        with mock.patch.object(MicroStream, "probability", scored):
            seen = [(tuple(upload.feed(pcm[i:i + 960])), upload.take_wake()) for i in range(0, len(pcm) - 959, 960)]
        return seen, scores, type(getattr(spotter, "_features")).__name__

    now, now_scores, now_features = decisions()
    with as_in_session20():
        before, before_scores, before_features = decisions()
    assert (now_features, before_features) == ("MicroFeatures", MicroWakeWordFeatures.__name__)
    assert now == before and now_scores == before_scores
    assert any(wake is not None for _, wake in now) and max(s or 0.0 for s in now_scores) > 0.9  # the command woke it


def test_the_canceller_baselines_build_a_rooms_canceller_as_they_say_with_the_gates_echo_gain() -> None:
    """`--baseline idle2s` (the canceller 2 s after every sound) and `--baseline aec22` (20 ms frames,
    the shadow on demand: issue 34, session 22) change the settings a room builds its canceller
    with, and nothing else: it still suppresses by the echo gate's learnt gain (a room passes it
    since session 20, which `idle2s` dropped)."""
    from audio_io.echo_reference import RoomEcho
    from audio_io.memory import MemorySpeaker
    from benchmarks import listening_baselines
    from config.settings import EchoSettings

    def room() -> RoomEcho:
        return RoomEcho(MemorySpeaker(), object(), EchoSettings(), lambda: 0.0)

    with listening_baselines.canceller_idle_2s():
        idle = room()
    with listening_baselines.canceller_measured_in_session22():
        fast = room()
    today = room()
    assert idle.canceller is not None and fast.canceller is not None and today.canceller is not None
    assert (idle.canceller._idle_s, today.canceller._idle_s) == (2.0, EchoSettings().cancel_idle_s)
    assert (fast.canceller._frame_bytes, fast.canceller._shadow_always) == (960, False)
    assert (today.canceller._frame_bytes, today.canceller._shadow_always) == (480, True)
    for echo in (idle, fast, today):
        assert echo.canceller._echo_gain_db == echo.gate.echo_gain_db
