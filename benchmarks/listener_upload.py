"""What leaves the machine in each upload mode: bytes, audio seconds and detector CPU, per room.

The microphone audio of three rooms, made from the corpus (benchmarks/corpus.py), goes through
the on-device detectors (detectors/) and the upload gate (decisions/upload_gate.py) in each mode:

- quiet room: a long silence with a microphone's own hiss;
- noisy room: a fan and mains hum at a realistic level, nobody talking;
- overheard room: people talking (everyday chatter, not to the assistant) 30 % of the time
  over a quiet fan; and the same with an addressed command about once a minute. (The near misses, "my
  computer is slow", are measured on their own in the second table.)

For each: base64 bytes per minute (as input_audio_buffer.append carries them), chunks and
seconds of audio sent (a proxy for transcription seconds billed), the detector path's CPU in %
of one core (time.process_time per second of audio), all also as ratios to CONTINUOUS measured
in the same run. Then, per mode, at 20 and 10 dB SNR: the addressed utterances whose upload
includes the wake-word onset (recall) and the non-addressed ones that caused an upload, scaled to
40 (for ON_DEVICE_WAKE: false local wakes).

The listener's transcript gate is played by the benchmark: when an utterance that is not
addressed opened a command window (a false local wake of the phrase alone), its rejection closes
the window REJECT_AFTER_S after its speech ended (the server's VAD silence, 0.5 s, plus the
transcription), as the coordinator does (UtteranceRejected -> UploadFilter.rejected()).

Figures are printed, never asserted. Run: .venv/bin/python -m benchmarks.listener_upload [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field, replace

from benchmarks.corpus import (
    DEFAULT_CACHE, FRAME_BYTES, FRAME_S, NOISE_FLOOR_RMS, RATE, WIDTH, audioop, Clip, Corpus, Noise, mix, near_miss_specs, ordinary_specs,
    scale_to_rms, standard, wake_specs,
)
from config.settings import UploadSettings
from config.wake_phrases import DEFAULT_PHRASE
from decisions.upload_gate import GateState, UploadGate, UploadGateSettings, UploadMode
from detectors.pipeline import MicDetectors, build_upload_filter, build_wake_spotter
from detectors.vad import QUIET_MARGIN, SileroVad, VadSettings

MIC_HISS_RMS = 12  # about -69 dBFS: a decent microphone's self-noise in a silent room
FAN_RMS = 250  # about -42 dBFS: a fan that is clearly audible, speech at the desk is ~3000
HUM_RMS = 120
OVERHEARD_SHARE = 0.30
REJECT_AFTER_S = 1.5  # from the end of an utterance to the transcript gate's verdict on it


@dataclass(frozen=True)
class Scenario:
    name: str
    pcm: bytes
    addressed_onsets: tuple[float, ...] = ()  # seconds into pcm


@dataclass(frozen=True)
class RunResult:
    sent: frozenset[int]  # indexes of the chunks uploaded
    wire_bytes: int  # base64, as the wire carries it
    detector_cpu_s: float
    seconds: float

    @property
    def sent_seconds(self) -> float:
        return len(self.sent) * FRAME_S

    def includes(self, at_s: float) -> bool:
        return int(at_s / FRAME_S) in self.sent


@dataclass
class Variant:
    """A mode as a user gets it: the default is wake_word with the default phrase's shipped model;
    "computer" (no model) gets speech_only, or pocketsphinx when wake_word is asked for."""

    label: str
    mode: UploadMode
    phrase: str
    addressed: list[Clip]  # said to it, with its phrase
    near: list[Clip]  # its phrase's sound-alikes
    path: MicDetectors | None = None  # built once (the models take a moment to load)
    vad: VadSettings = field(default_factory=VadSettings)  # the shipped VAD, or its quiet path switched (`--quiet-path`)

    def detectors(self) -> MicDetectors | None:
        if self.mode is UploadMode.CONTINUOUS:
            return None
        if self.path is None:
            wake = UploadSettings(mode=self.mode)
            spotter = build_wake_spotter(wake, self.phrase) if self.mode is UploadMode.ON_DEVICE_WAKE else None
            self.path = MicDetectors(SileroVad(self.vad), spotter)
        self.path.reset()
        return self.path


def run(pcm: bytes, variant: Variant, addressed_onsets: tuple[float, ...] = ()) -> RunResult:
    """Feeds pcm through detectors and gate, chunk by chunk, on a clock that follows the audio.
    A command window opened by speech that is not addressed (no onset in `addressed_onsets` in the
    10 s before) is closed when the transcript gate would have rejected it."""
    mode = variant.mode
    gate = UploadGate(UploadGateSettings(mode=mode))
    last_speech: float | None = None
    path = variant.detectors()
    sent: set[int] = set()
    wire = 0
    cpu = 0.0
    count = len(pcm) // FRAME_BYTES
    for index in range(count):
        chunk = pcm[index * FRAME_BYTES : (index + 1) * FRAME_BYTES]
        now = (index + 1) * FRAME_S
        started = time.process_time()
        if path is None:
            out = gate.feed(chunk, now, True)
        else:
            verdict = path.feed(chunk, now)
            out = gate.feed(chunk, now, verdict.is_speech, verdict.keyword_hit)
            last_speech = now if verdict.is_speech else last_speech
        cpu += time.process_time() - started
        if gate.state is GateState.WINDOW and last_speech is not None and now >= last_speech + REJECT_AFTER_S \
                and not any(last_speech - 10 <= t <= last_speech for t in addressed_onsets):
            gate.rejected()
        for piece in out:
            wire += 4 * math.ceil(len(piece) / 3)
        # Chunks come back unchanged and in order: the newest `len(out)` held ones end at `index`.
        sent.update(range(index - len(out) + 1, index + 1))
    return RunResult(frozenset(sent), wire, cpu, count * FRAME_S)


def rooms(corpus: Corpus, chatter: list[Clip], minutes: float) -> list[Scenario]:
    seconds = minutes * 60
    hiss = scale_to_rms(corpus.noise(Noise.FAN, 30.0, seed=1), MIC_HISS_RMS)
    quiet = _loop(hiss, seconds)
    fan = scale_to_rms(corpus.noise(Noise.FAN, 30.0, seed=2), FAN_RMS)
    hum = scale_to_rms(corpus.noise(Noise.HUM, 30.0), HUM_RMS)
    noisy = audioop.add(_loop(fan, seconds), _loop(hum, seconds), WIDTH)
    return [
        Scenario("quiet room", quiet),
        Scenario("noisy room (fan + hum)", noisy),
        _overheard(corpus, [], chatter, seconds),
    ]


def _overheard(corpus: Corpus, addressed: list[Clip], others: list[Clip], seconds: float, phrase: str = "") -> Scenario:
    """Talk not meant for us 30 % of the time over a quiet fan; with `addressed`, one of them about once a minute."""
    pcm = b""
    talk = 0.0
    onsets = []
    i = j = 0
    while len(pcm) < seconds * RATE * WIDTH:
        elapsed = len(pcm) / WIDTH / RATE
        if elapsed >= (len(onsets) + 0.5) * 60 and j < len(addressed):
            clip = addressed[j]
            j += 1
            onsets.append(elapsed + clip.wake_onset_s)
        elif talk < OVERHEARD_SHARE * max(elapsed, 1.0):
            clip = others[i % len(others)]
            i += 1
            talk += sum(b - a for a, b in clip.speech_spans)
        else:
            pcm += bytes(FRAME_BYTES * 50)  # a second of nobody talking
            continue
        pcm += clip.pcm
    pcm = pcm[: int(seconds * RATE) * WIDTH]
    fan = scale_to_rms(corpus.noise(Noise.FAN, 30.0, seed=3), MIC_HISS_RMS * 4)
    name = "overheard room (30 % talk)" + (f' + a command a minute ("{phrase}")' if addressed else "")
    return Scenario(name, audioop.add(pcm, _loop(fan, len(pcm) / WIDTH / RATE), WIDTH),
                    tuple(t for t in onsets if t < seconds))


def _loop(pcm: bytes, seconds: float) -> bytes:
    total = int(seconds * RATE) * WIDTH
    return (pcm * (total // len(pcm) + 1))[:total]


def wake_figures(corpus: Corpus, addressed: list[Clip], others: list[Clip], variant: Variant, snr: float) -> tuple[int, int]:
    """(addressed clips whose upload includes the wake onset, non-addressed clips that caused any upload)."""
    kinds = list(Noise)
    found = fired = 0
    for index, clip in enumerate(addressed + others):
        noisy = mix(clip.pcm, corpus.noise(kinds[index % 3], 10.0, seed=index % 4), snr)
        result = run(noisy, variant, (clip.wake_onset_s,) if clip.addressed else ())
        if clip.addressed:
            found += result.includes(clip.wake_onset_s)
        else:
            fired += bool(result.sent)
    return found, fired


def quiet_path(on: bool) -> VadSettings:
    """The shipped VAD with its quiet path (`VadSettings.quiet_margin`) on or off."""
    return replace(VadSettings(), quiet_margin=QUIET_MARGIN if on else 0.0)


def floor_table(corpus: Corpus, minutes: float) -> list[str]:
    """False speech, wakes, uploads and the detector path's CPU in rooms where nobody talks (the
    neural corpus's -60 dBFS pink floor, 120 s looped; a microphone's hiss, 30 s looped), through
    the default upload filter with the VAD's quiet path off and on, `minutes` each, chunk by chunk
    (an hour is never held in memory)."""
    rooms = (("-60 dBFS pink floor", scale_to_rms(corpus.noise(Noise.FAN, 120.0, seed=7), NOISE_FLOOR_RMS)),
             (f"a microphone's hiss ({MIC_HISS_RMS} RMS, -69 dBFS)", scale_to_rms(corpus.noise(Noise.FAN, 30.0, seed=1), MIC_HISS_RMS)))
    lines = ["| room | VAD | minutes | chunks called speech | speech onsets | Silero windows | wakes | chunks uploaded "
             "| detector path CPU % of a core |", "|---|---|---|---|---|---|---|---|---|"]
    count = int(minutes * 60 / FRAME_S)
    for name, noise in rooms:
        for on in (False, True):
            upload = build_upload_filter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), DEFAULT_PHRASE, 8.0, RATE * WIDTH)
            assert upload.detectors is not None
            vad = upload.detectors.vad = SileroVad(quiet_path(on))
            speech = onsets = wakes = sent = 0
            was_speech = False
            cpu = 0.0
            chunks = len(noise) // FRAME_BYTES
            for index in range(count):
                chunk = noise[(index % chunks) * FRAME_BYTES : (index % chunks + 1) * FRAME_BYTES]
                started = time.process_time()
                out = upload.feed(chunk)
                cpu += time.process_time() - started
                speech += upload.speech
                onsets += upload.speech and not was_speech
                was_speech = upload.speech
                wakes += upload.take_wake() is not None
                sent += len(out)
            label = f"quiet path on (margin {QUIET_MARGIN:g})" if on else "quiet path off"
            lines.append(f"| {name} | {label} | {minutes:g} | {speech} | {onsets} | {vad.windows_run} | {wakes} | {sent} "
                         f"| {100 * cpu / (count * FRAME_S):.3f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 s rooms and six clips (a smoke test)")
    parser.add_argument("--minutes", type=float, default=None, help="length of each room (default 5, quick 0.5)")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--quiet-path", action="store_true",
                        help="continuous and the default wake_word mode only, the latter with the VAD's quiet path off and on, in the same run")
    parser.add_argument("--floor-minutes", type=float, default=0, metavar="M",
                        help="only false speech and CPU on a -60 dBFS floor and a microphone's hiss, M minutes each, quiet path off and on")
    args = parser.parse_args(argv)
    minutes = args.minutes or (0.5 if args.quick else 5.0)
    corpus = Corpus(args.cache)
    if args.floor_minutes:
        print("\n".join(floor_table(corpus, args.floor_minutes)))
        return 0
    addressed, others = standard(corpus, small=args.quick)
    count = 3 if args.quick else 48
    model_addressed = corpus.clips(wake_specs(DEFAULT_PHRASE, count))
    model_near = corpus.clips(near_miss_specs(DEFAULT_PHRASE, count))
    if args.quick:  # a smoke test: enough to print every row
        addressed, others = addressed[:3], others[:3]
    # Everyday talk in every voice family (the wake model hears some families far better than others).
    chatter = corpus.clips(ordinary_specs(3 if args.quick else 24))
    variants = [
        Variant("continuous", UploadMode.CONTINUOUS, "computer", addressed, others),
        Variant('speech_only ("computer": no model, the fallback)', UploadMode.SPEECH_ONLY, "computer", addressed, others),
        Variant('wake_word, pocketsphinx ("computer", asked for)', UploadMode.ON_DEVICE_WAKE, "computer", addressed, others),
        Variant(f'wake_word, shipped model ("{DEFAULT_PHRASE}": the default)', UploadMode.ON_DEVICE_WAKE, DEFAULT_PHRASE,
                model_addressed, model_near),
    ]
    if args.quiet_path:  # the default mode as shipped and with the quiet path switched
        default = variants[-1]
        variants = [variants[0]] + [replace(default, label=f"{default.label}, quiet path {'on' if on else 'off'}", vad=quiet_path(on))
                                    for on in (False, True)]
    seconds = minutes * 60
    commanded = {phrase: _overheard(corpus, clips, chatter, seconds, phrase)
                 for phrase, clips in (("computer", addressed), (DEFAULT_PHRASE, model_addressed))}

    print(f"Upload per room ({minutes:g} min each); ratios are to continuous in the same run")
    print("| room | mode | KB/min (base64) | ratio | chunks sent | audio s sent | ratio | detector CPU % of a core | addressed kept |")
    print("|---|---|---|---|---|---|---|---|---|")
    for scenario in rooms(corpus, chatter, minutes) + list(commanded.values()):
        baseline = None
        for variant in variants:
            if scenario.addressed_onsets and scenario is not commanded[variant.phrase] and variant.mode is not UploadMode.CONTINUOUS:
                continue  # commands in another phrase than this variant's
            result = run(scenario.pcm, variant, scenario.addressed_onsets)
            baseline = baseline or result
            per_min = result.wire_bytes / (result.seconds / 60) / 1000
            kept = sum(result.includes(t) for t in scenario.addressed_onsets)
            print(
                f"| {scenario.name} | {variant.label} | {per_min:.1f} | {result.wire_bytes / baseline.wire_bytes:.3f} "
                f"| {len(result.sent)} | {result.sent_seconds:.1f} | {result.sent_seconds / baseline.sent_seconds:.3f} "
                f"| {100 * result.detector_cpu_s / result.seconds:.2f} | {kept}/{len(scenario.addressed_onsets)} |"
            )

    print()
    print("Wake onset kept, and non-addressed utterances that caused an upload (for wake_word: false local"
          f" wakes): per mode its own phrase's addressed utterances and near misses; {len(chatter)} everyday sentences")
    print("| mode | SNR dB | addressed with onset uploaded | recall % | near misses uploaded | per 40 "
          "| everyday chatter uploaded | per 40 |")
    print("|---|---|---|---|---|---|---|---|")
    for variant in variants:
        for snr in (20, 10):
            found, fired = wake_figures(corpus, variant.addressed, variant.near, variant, snr)
            _, chatted = wake_figures(corpus, [], chatter, variant, snr)
            print(f"| {variant.label} | {snr} | {found}/{len(variant.addressed)} | {100 * found / len(variant.addressed):.0f} "
                  f"| {fired}/{len(variant.near)} | {fired * 40 / len(variant.near):.1f} | {chatted}/{len(chatter)} "
                  f"| {chatted * 40 / len(chatter):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
