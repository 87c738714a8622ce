"""Barge-in over the assistant's own voice (issue 32): the echo canceller in front of the detectors.

The room: the narration (espeak-ng, en-us+f3) comes back into the microphone through a
reverberant path (a direct sound 20-120 ms late and a decaying diffuse tail, RT60 0.25-0.45 s)
that changes once mid-narration (another delay and tail, six seconds in), at 0, -6 and -12 dB
relative to the user's voice at the microphone; the user (flite and festival voices: another
engine, other voices) says "hey jarvis, stop" or "hey jarvis, what time is it" nine seconds in. A
-60 dBFS noise floor lies under everything. When the narration is cut, its echo stops (the tail
of the room's reverberation rings on).

Each trial runs what the coordinator's mic reader runs (handoff.Coordinator._listen_for_stop and
_take_chunk): the echo canceller (`audio_io.echo_cancel`) given what was played; the stop
listener with the assistant's detector (`BargeInDetector`: the stop phrase, pocketsphinx, and
the wake model); the `CommandHold`; then, once the mute lifts, the echo gate and the on-device
upload filter (VAD, wake model, the device's end of turn). "gate" rows: the same detector fed as
before this change (the raw microphone around what the echo gate passed, no canceller).

- stop found: the narration was cut at most 200 ms after the end of "stop" (since session 23 a "stop"
  the hold let through goes up and the router dismisses it, `decisions/dismissal.py`: counted found,
  and apart as "uploaded, dismissed"; before, only what nothing of went up was found);
- command stopped+routed: the narration was cut, the upload filter heard the wake phrase in what
  the hold released, and the device's end of turn came with the command (the route; that a
  routed command is answered is the pipeline's, tests/pipeline/test_pipeline_stop.py);
- false: hits (stops or wakes) on the narration's echo alone at 0 dB (it says "stop", "cancel",
  "hey jarvis" and "jarvis" on purpose), over `--false-minutes` scaled to an hour;
- wake recall with a loud unrelated sound (a TV voice and pink noise at the user's level, no
  reference for it), next to the quiet room;
- CPU per second of audio of the detector path, canceller on and off.

Options for the ideas measured in session 9 (docs/PERFORMANCE.md, "Barge-in: stream delay and
the twin veto"): `--delay device|true` tells the canceller the room's stream delay (its first
path's, as PortAudio's latencies would; or the path's own, following the change) instead of 0;
`--veto N` adds rows where the detectors hear every cancelled chunk (`EchoVetoListener`) and a
twin detector on what was played vetoes the narrator's own words (N: gate passes a hit needs);
`--levels=0,-6`, `--no-shipped` (no default canceller row), `--no-extras` (no CPU or recall) narrow a run.

Session 10 (docs/PERFORMANCE.md, "Barge-in: the stop check after a cut, the ungated wake
model"): the default row is the ungated wake model with its twin (`BargeInListener`, measured,
not switched on); `--wake-gated` adds the shipped path (the wake model behind the gate, the hold's
stop check `StopAfterWake`), `--before` session 9's (no stop check).

Session 11 (docs/PERFORMANCE.md, "Barge-in: following the room's change"): the canceller runs a
main and a shadow filter; `--one-filter` adds rows with the single filter of before, `--erle N`
prints only the echo taken off by each on N rooms, before and after the path's change.

Session 12 (docs/PERFORMANCE.md, "Barge-in: where the trials are lost, and a preroll"): `--preroll`
adds rows with `PrerollStopListener` (measured, not wired), `--preroll-settings P,ONSET,H` its
settings; `benchmarks/barge_in_stages.py` says where trials are lost, stage by stage.

Session 15 (docs/PERFORMANCE.md, "Barge-in: the wake model's cutoff while it talks, and where -6
dB's trials are lost"): `--alone-cutoff P` the barge-in wake model's cutoff alone
(`StopSettings.barge_in_alone_cutoff`), `--seed-offset N` fresh rooms.

Session 16 (docs/PERFORMANCE.md, "Barge-in: what was played explains"): the preroll row's hits are
judged by what was played too (`PrerollSettings.max_explained`); `--hold-after-s S` the hold's stop
check (`AfterWakeSettings.after_s`), `--phrases stop|command` one kind of trial only.

Session 20 (docs/PERFORMANCE.md, "Barge-in: where 0 dB's trials are lost; the suppressor switched on
by the echo's level"): `--suppress-over DB|none` the line for speexdsp's residual echo suppressor
(`EchoSettings.cancel_suppress_over_db`; none: never). Session 22: the two last columns (`benchmarks.barge_in_alone`).

The room, the narration, the voices and the stop phrase: `benchmarks.barge_in_room` (shared by every
barge-in benchmark).

Run: nice -n 10 .venv/bin/python -m benchmarks.barge_in [--quick] [--false-minutes 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Callable
from dataclasses import dataclass

import numpy as np

from audio_io.echo import EchoSuppressor
from audio_io.echo_cancel import EchoCanceller
from benchmarks.barge_in_alone import AloneSplit
from benchmarks.corpus import DEFAULT_CACHE, Corpus
from config.settings import EchoSettings, StopSettings, UploadMode, UploadSettings
from benchmarks.barge_in_room import (BPS, CHUNK, COMMAND_TEXT, FLOOR_RMS, NARRATION, PHRASE, RATE, STOP_SETTINGS, STOP_TEXT,
                                      USER_RMS, Scene, active_rms, build_scenes, convolve, narration as room_narration, pcm,
                                      room_ir, samples, two_paths)
from benchmarks.echo_veto import BargeInListener, EchoVetoListener
from detectors.barge_in import AfterWakeSettings, BargeInDetector, CommandHold, Held, PrerollSettings, PrerollStopListener, StopAfterWake
from detectors.pipeline import build_upload_filter, build_wake_spotter
from detectors.stop_phrase import StopPhraseDetector, StopPhraseSettings
from detectors.stop_word import StopListener

# The twin on what the speaker played spots stop words more readily than the microphone's
# detector (1e-20): the narration's "stop" must be found there whenever its echo could be heard.
TWIN_WAKE_THRESHOLD, TWIN_STOP_THRESHOLD = 1e-70, 1e-30


@dataclass
class Outcome:
    cut_at: float | None = None
    command_hit: bool = False
    released: int = 0
    dropped: int = 0
    wake_heard: bool = False
    turn: bool = False
    uploaded_s: float = 0.0
    hits: int = 0
    # The same released audio through an upload filter that must hear the wake itself (before
    # session 19: `Held.woke_s` ignored)
    wake_heard_alone: bool = False
    turn_alone: bool = False
    uploaded_alone_s: float = 0.0


class Aec3Canceller(EchoCanceller):
    """The same reference handling with WebRTC's AEC3 (`pywebrtc-audio`, dev only) as the filter:
    the candidate measured first."""

    def __init__(self, settings: EchoSettings = EchoSettings(), delay_s: Callable[[], float] = lambda: 0.0) -> None:
        super().__init__(settings, delay_s)
        from pywebrtc_audio import AudioProcessor

        self._aec3 = AudioProcessor(sample_rate=RATE, num_channels=1, echo_cancellation=True)

    def _cancel(self, near: bytes, far: bytes, loud: bool = True) -> bytes:
        return self._aec3.process(np.frombuffer(near, dtype=np.int16), np.frombuffer(far, dtype=np.int16)).tobytes()


def aec3_available() -> bool:
    try:
        import pywebrtc_audio  # noqa: F401
    except ImportError:
        return False
    return True


class Path:
    """The coordinator's mic path for one trial (fresh parts: a narration's start)."""

    def __init__(self, stop_settings: StopPhraseSettings, cancel: bool | str, delay: str = "zero", veto: int | None = None,
                 after_wake: bool = True, wake_ungated: bool = False, shadow: bool = True,
                 preroll: PrerollSettings | None = None, judged: bool = True,
                 alone_cutoff: float | None = StopSettings().barge_in_alone_cutoff,
                 after: AfterWakeSettings = AfterWakeSettings(), suppress: tuple[int, int, int] | None = None,
                 echo_settings: EchoSettings = EchoSettings(),
                 search_wakes: bool = StopSettings().barge_in_search_wakes) -> None:
        upload = UploadSettings(mode=UploadMode.ON_DEVICE_WAKE)
        wake = build_wake_spotter(upload, PHRASE, alone_cutoff)  # as `assembly.build.build_stop_detector`
        self.detector = BargeInDetector(StopPhraseDetector(stop_settings), wake, "hey jarvis", search_wakes)
        if veto is not None and cancel:  # the twin detector on what the speaker played
            lenient = dataclasses.replace(stop_settings, wake_threshold=TWIN_WAKE_THRESHOLD, stop_threshold=TWIN_STOP_THRESHOLD)
            twin = BargeInDetector(StopPhraseDetector(lenient), build_wake_spotter(upload, PHRASE), "hey jarvis")
            self.listener: StopListener = EchoVetoListener(self.detector, twin, veto)
        elif wake_ungated and cancel:  # the wake model hears every cancelled chunk; a twin on what played vetoes
            played = build_wake_spotter(upload, PHRASE)
            self.listener = BargeInListener(self.detector, played, lambda: self.canceller.far if self.canceller else b"")
        elif preroll is not None and cancel:
            margin = (lambda: self.gate.margin_db) if judged else None  # the gate in front, on the raw microphone
            echo = (lambda: (self.raw, self.canceller.far if self.canceller else b"")) if judged else None
            self.listener = PrerollStopListener(self.detector, preroll, margin, echo)
        else:
            self.listener = StopListener(self.detector)
        self.hold = CommandHold(check=StopAfterWake.for_detector(self.detector, after) if after_wake else None)
        self.raw = b""  # the microphone chunk being heard
        self.gate = EchoSuppressor(EchoSettings())
        self.delay = delay  # what the canceller is told of the devices' latency: see DELAYS
        self.delay_now = 0.0
        if cancel == "aec3":
            self.canceller: EchoCanceller | None = Aec3Canceller(EchoSettings(), lambda: self.delay_now)
        else:
            self.canceller = EchoCanceller(echo_settings, lambda: self.delay_now, shadow=shadow, suppress=suppress,
                                           echo_gain_db=self.gate.echo_gain_db) if cancel else None
        self.filter = build_upload_filter(upload, PHRASE, 8.0, BPS, turn_end_s=0.46)
        self.filter_alone = build_upload_filter(upload, PHRASE, 8.0, BPS, turn_end_s=0.46)  # the wake not carried

    def told(self, scene: Scene, at: float) -> float:
        if self.delay == "device":
            return scene.delays[0]
        if self.delay == "true":
            return scene.delay_at(at)
        return 0.0


def run_trial(scene: Scene, path: Path, stop_after_hit: bool = True) -> Outcome:
    out = Outcome()
    played = scene.narration.copy()
    mic = scene.user + scene.echo(played) + scene.noise
    narrating = True
    mutes_seen = False
    for i in range(len(mic) // CHUNK):
        at = i * CHUNK / RATE
        ref = pcm(played[i * CHUNK:(i + 1) * CHUNK]) if narrating else b""
        raw = pcm(mic[i * CHUNK:(i + 1) * CHUNK])
        path.raw = raw
        path.delay_now = path.told(scene, at)
        if isinstance(path.listener, EchoVetoListener):  # what was played, lined up with the mic, lead_s ahead
            lead = round(path.listener.lead_s * RATE)
            start = i * CHUNK + lead - round(path.delay_now * RATE)
            ahead = np.zeros(CHUNK)
            upcoming = played[max(0, start):max(0, start + CHUNK)]
            ahead[CHUNK - len(upcoming) if start < 0 else 0:][:len(upcoming)] = upcoming
            path.listener.heard_reference(pcm(ahead), narrating or path.hold.holding)
        if ref:
            path.gate.played(ref, at)
            if path.canceller is not None:
                path.canceller.played(ref, at)
        heard = path.canceller.process(raw, at) if path.canceller is not None else raw
        passed = path.gate.process(raw, at) is not None
        gated = raw if passed else bytes(len(raw))
        cancelled = path.canceller is not None
        heard_passed = path.canceller.passed if cancelled else passed  # the gate behind the canceller
        hit = path.listener.hear(heard if cancelled else raw, heard_passed, narrating or path.hold.holding)
        piece = Held(i * CHUNK * 2, heard if path.hold.holding else gated, path.listener.clock)
        if narrating and not path.hold.holding:
            path.hold.remember(Held(piece.offset, heard, piece.end_s))
        if hit is not None:
            out.hits += 1
            if not stop_after_hit:  # the echo alone: count it, cut nothing
                hit = None
        if hit is not None:
            if narrating:
                out.cut_at, out.command_hit, narrating = at + CHUNK / RATE, hit.command, False
                played[(i + 1) * CHUNK:] = 0  # the speaker is flushed: its echo stops, the room rings on
                mic[(i + 1) * CHUNK:] = (scene.user + scene.echo(played) + scene.noise)[(i + 1) * CHUNK:]
                path.gate.stopped(at)
                if path.canceller is not None:
                    path.canceller.stopped(at)
            path.hold.hit(hit)
        for held in path.hold.take(piece, muted=narrating):
            if narrating:
                path.filter.skip(held.chunk)
                path.filter_alone.skip(held.chunk)
                continue
            if not mutes_seen:
                mutes_seen = True
                path.filter.reset()
                path.filter_alone.reset()
            sent = path.filter.feed(held.chunk, held.woke_s)
            out.uploaded_s += sum(len(p) for p in sent) / BPS
            out.wake_heard |= path.filter.take_wake() is not None
            out.turn |= path.filter.take_turn() is not None
            sent = path.filter_alone.feed(held.chunk)
            out.uploaded_alone_s += sum(len(p) for p in sent) / BPS
            out.wake_heard_alone |= path.filter_alone.take_wake() is not None
            out.turn_alone |= path.filter_alone.take_turn() is not None
    out.released, out.dropped = path.hold.released, path.hold.dropped
    return out


def echo_reduction(scenes: list[Scene], shadow: bool, with_user: bool) -> np.ndarray:
    """Per room, the echo taken off (dB) in each of ERLE_WINDOWS: the echo against what is left of
    it in the canceller's output (the output less the user's voice and the floor)."""
    rows = []
    for scene in scenes:
        canceller = EchoCanceller(EchoSettings(), shadow=shadow)
        echo = scene.echo(scene.narration)
        user = scene.user if with_user else np.zeros(len(echo))
        mic = user + echo + scene.noise
        out = bytearray()
        for i in range(len(mic) // CHUNK):
            canceller.played(pcm(scene.narration[i * CHUNK:(i + 1) * CHUNK]), i * CHUNK / RATE)
            out += canceller.process(pcm(mic[i * CHUNK:(i + 1) * CHUNK]), i * CHUNK / RATE)
        left = samples(bytes(out))
        left = left - user[:len(left)] - scene.noise[:len(left)]
        rows.append([10 * np.log10((echo[int(a * RATE):int(b * RATE)] ** 2).sum() / ((left[int(a * RATE):int(b * RATE)] ** 2).sum() + 1.0))
                     for a, b in ERLE_WINDOWS])
    return np.array(rows)


ERLE_WINDOWS = ((3.0, 6.0), (6.0, 7.0), (7.0, 8.0), (8.0, 11.0))  # before the change, just after, where the user speaks


def cpu_per_s(fn, seconds: float) -> float:
    t = time.process_time()
    fn()
    return (time.process_time() - t) / seconds * 1000


def alone_cutoff_arg(text: str) -> float | None:
    """An `--alone-cutoff` argument: "" the default (`StopSettings`), "model" the model's own, else the cutoff."""
    if not text:
        return StopSettings().barge_in_alone_cutoff
    return None if text == "model" else float(text)


def suppress_arg(text: str) -> tuple[int, int, int] | None:
    """A `--suppress` argument: "" none, else "ECHO,ACTIVE,NOISE" in dB (`EchoCanceller(suppress=)`)."""
    if not text:
        return None
    echo, active, noise = (int(x) for x in text.split(","))
    return echo, active, noise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.barge_in")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--quick", action="store_true", help="6 trials per level, 1 minute of echo alone")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--gate-trials", type=int, default=10, help="trials per level for the gate rows (the figures before)")
    parser.add_argument("--false-minutes", type=float, default=5.0)
    parser.add_argument("--no-gate-rows", action="store_true")
    parser.add_argument("--no-shipped", action="store_true",
                        help="skip the default canceller row (since session 10 the ungated wake model with its twin, not what ships)")
    parser.add_argument("--delay", choices=("zero", "device", "true"), default="zero",
                        help="the stream delay the canceller is told: 0, the room's first path's (a device's latency), or the path's own as it changes")
    parser.add_argument("--veto", type=int, default=None, help="the detectors hear every cancelled chunk, a twin hears what was played and vetoes the narrator's own hits; a hit also needs this many gate-passed chunks (default: the gated feed)")
    parser.add_argument("--levels", default="0,-6,-12")
    parser.add_argument("--no-extras", action="store_true", help="skip the false-hit run, CPU and recall")
    parser.add_argument("--aec3", action="store_true", help="add rows with WebRTC AEC3 (pywebrtc-audio) as the filter")
    parser.add_argument("--before", action="store_true",
                        help="add rows for session 9's shipped path (the wake model behind the gate too, no stop check after a wake-cut)")
    parser.add_argument("--erle", type=int, default=0, metavar="ROOMS",
                        help="only print the echo taken off (dB) by one filter and by the main + shadow filters on this many 0 dB rooms")
    parser.add_argument("--one-filter", action="store_true",
                        help="add rows for session 10's shipped path with one speexdsp filter (no shadow filter following the room)")
    parser.add_argument("--wake-gated", action="store_true",
                        help="add rows for the shipped stop check with the wake model behind the gate (no twin)")
    parser.add_argument("--preroll", action="store_true",
                        help="add rows for session 12's stop listener: the gate behind the canceller opens the feed, the detectors hear it from a preroll on")
    parser.add_argument("--preroll-settings", default="", metavar="PREROLL_S,ONSET,HANGOVER_S",
                        help="the preroll row's settings (default: PrerollSettings())")
    parser.add_argument("--alone-cutoff", default="", metavar="P|model",
                        help="the barge-in wake model wakes alone above this (default: StopSettings().barge_in_alone_cutoff; model: its own 0.97)")
    parser.add_argument("--seed-offset", type=int, default=0, help="added to the trials' seeds (10 and 50 less the level): fresh rooms")
    parser.add_argument("--preroll-unjudged", action="store_true",
                        help="the preroll row without the gate's margins judging its hits (session 12's listener)")
    parser.add_argument("--hold-after-s", type=float, default=AfterWakeSettings().after_s,
                        help="the hold's stop check: speech after the stop word longer than this is a command")
    parser.add_argument("--phrases", default="stop,command", help="which trials: stop, command or both")
    parser.add_argument("--suppress", default="", metavar="ECHO,ACTIVE,NOISE",
                        help="speexdsp's residual echo suppressor after the canceller, dB (negative): echo, echo while the user talks, noise")
    parser.add_argument("--suppress-over", default=None, metavar="DB|none",
                        help="the suppressor only while the echo gate's learnt echo gain is above this (default: EchoSettings().cancel_suppress_over_db; none: never)")
    args = parser.parse_args(argv)
    trials = 6 if args.quick else args.trials
    false_minutes = 1.0 if args.quick else args.false_minutes
    corpus = Corpus(args.cache)
    narration = room_narration(corpus)
    stop_settings = STOP_SETTINGS
    if args.erle:
        rooms = build_scenes(corpus, STOP_TEXT, 0.0, args.erle, narration, seed=10)
        print("| filter | room | " + " | ".join(f"{a:g}-{b:g} s, median (min)" for a, b in ERLE_WINDOWS) + " |")
        print("|---|---|" + "---|" * len(ERLE_WINDOWS))
        for shadow in (False, True):
            for with_user in (False, True):
                r = echo_reduction(rooms, shadow, with_user)
                cells = " | ".join(f"{m:.1f} ({n:.1f})" for m, n in zip(np.median(r, axis=0), r.min(axis=0)))
                print(f"| {'main + shadow' if shadow else 'one filter'} | {'the user speaks at 9 s' if with_user else 'echo alone'} | {cells} |")
        return 0

    rows = []
    # (row, canceller, the delay it is told, the twin veto's gate count or None: the gated feed,
    # the hold's stop check after a wake-cut)
    variants: list[tuple[str, bool | str, str, int | None, bool]] = []
    one_filter = "canceller (speexdsp), session 10's shipped: one filter, wake model behind the gate, stop check after a cut"
    default_row = "canceller (speexdsp), not switched on: wake model on every cancelled chunk + twin veto, stop check after a cut"
    ungated: set[str] = {default_row}  # the wake model hears every cancelled chunk, a twin on what played vetoes
    variants += [] if args.no_shipped else [(default_row, True, "zero", None, True)]
    variants += [("canceller (speexdsp, main + shadow filter), shipped: wake model behind the gate, stop check after a cut", True, "zero", None, True)] if args.wake_gated else []
    variants += [(one_filter, True, "zero", None, True)] if args.one_filter else []
    alone_cutoff = alone_cutoff_arg(args.alone_cutoff)
    suppress = suppress_arg(args.suppress)
    echo = EchoSettings() if args.suppress_over is None else dataclasses.replace(
        EchoSettings(), cancel_suppress_over_db=None if args.suppress_over == "none" else float(args.suppress_over))
    preroll = PrerollSettings()
    if args.preroll_settings:
        pre, onset, hang = args.preroll_settings.split(",")
        preroll = dataclasses.replace(preroll, preroll_s=float(pre), onset=int(onset), hangover_s=float(hang))
    preroll_row = (f"canceller (speexdsp, main + shadow), session 12: the gate opens the feed ({preroll.onset} voiced passes in "
                   f"{preroll.window}, {preroll.hangover_s:g} s on), the detectors hear it from a {preroll.preroll_s:g} s preroll"
                   + ("" if args.preroll_unjudged else f"; a hit needs {preroll.min_voiced} voiced chunks, the mic {preroll.min_margin_db:g} dB over the echo"))
    variants += [(preroll_row, True, "zero", None, True)] if args.preroll else []
    variants += [("canceller (speexdsp), before (session 9: wake model behind the gate, no stop check)", True, "zero", None, False)] if args.before else []
    variants += [("canceller (speexdsp), stream delay, ungated + twin veto", True, args.delay, args.veto, True)] if args.veto is not None else []
    variants += [] if args.no_gate_rows else [("gate (before)", False, "zero", None, True)]
    variants += [("canceller (WebRTC AEC3)", "aec3", args.delay, None, True)] if args.aec3 and aec3_available() else []

    def path_for(name: str, cancel: bool | str, delay: str, veto: int | None, after_wake: bool) -> Path:
        return Path(stop_settings, cancel, delay, veto, after_wake, name in ungated, name != one_filter,
                    preroll if name == preroll_row else None, not args.preroll_unjudged, alone_cutoff,
                    AfterWakeSettings(after_s=args.hold_after_s), suppress, echo)

    for name, cancel, delay, veto, after_wake in variants:
        count = trials if cancel else min(trials, args.gate_trials)
        for level in [float(x) for x in args.levels.split(",") if x]:
            phrases = args.phrases.split(",")
            stops = build_scenes(corpus, STOP_TEXT, level, count, narration, seed=int(10 - level) + args.seed_offset) if "stop" in phrases else []
            commands = build_scenes(corpus, COMMAND_TEXT, level, count, narration, seed=int(50 - level) + args.seed_offset) if "command" in phrases else []
            found = early = went_up = found_alone = 0
            stop_split, command_split = AloneSplit(), AloneSplit()  # losses the wake model makes on the voice alone
            delays = []
            for scene in stops:
                o = run_trial(scene, path_for(name, cancel, delay, veto, after_wake))
                if o.cut_at is not None:
                    delays.append((o.cut_at - scene.word_end_s) * 1000)
                ok = o.cut_at is not None and o.cut_at <= scene.word_end_s + 0.2  # (gone up: dismissed)
                found += ok
                stop_split.add(scene.woken_alone(), ok)
                found_alone += o.cut_at is not None and o.cut_at <= scene.word_end_s + 0.2
                went_up += o.uploaded_s > 0
            routed = cut = routed_alone = 0
            for scene in commands:
                o = run_trial(scene, path_for(name, cancel, delay, veto, after_wake))
                cut += o.cut_at is not None
                routed += o.cut_at is not None and o.wake_heard and o.turn
                routed_alone += o.cut_at is not None and o.wake_heard_alone and o.turn_alone
                command_split.add(scene.woken_alone(), o.cut_at is not None and o.wake_heard and o.turn)
            d = sorted(delays)
            delay = f"{d[len(d) // 2]:.0f} / {d[-1]:.0f}" if d else "-"
            rows.append(f"| {name} | {level:+.0f} dB | {found}/{count} | {delay} | {went_up} | {cut}/{count} | {routed}/{count} "
                        f"| {found_alone}/{count} | {routed_alone}/{count} | {stop_split.cell(count - found)} | {command_split.cell(count - routed)} |")
            print(rows[-1], flush=True)
    print("\n| path | echo vs user | 'hey jarvis, stop': cut <= 200 ms, nothing uploaded | cut - end of word, ms (median / max) "
          "| 'stop' uploaded as a command | command: narration cut | command: cut and routed "
          "| the wake not carried (before session 19): 'stop' found | ... routed "
          "| 'stop' lost (of them, trials whose voice is not woken even alone: N of M such) | commands lost (the same) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))

    if false_minutes <= 0:
        return 0
    # False stops and wakes: the narration's echo alone at 0 dB, rooms changing every 30 s.
    rng = np.random.default_rng(7)
    seconds = false_minutes * 60
    false_hits = {}
    vetoed: dict[str, int] = {}
    cpu = {}
    for name, cancel, delay, veto, after_wake in variants:
        rng = np.random.default_rng(7)  # the same hour for each
        hits = 0
        spent = 0.0
        for block in range(int(seconds // 30)):
            length = 30 * RATE
            start = int(rng.uniform(0, len(narration) - length))
            narr = narration[start:start + length].copy()
            direct, irs = two_paths(rng)
            gain = USER_RMS / active_rms(convolve(narr, irs[0]))
            scene = Scene(narr, irs, gain, np.zeros(length), 0.0, rng.standard_normal(length) * FLOOR_RMS, direct)
            path = path_for(name, cancel, delay, veto, after_wake)
            t = time.process_time()
            o = run_trial(scene, path, stop_after_hit=False)
            spent += time.process_time() - t
            hits += o.hits
            vetoed[name] = vetoed.get(name, 0) + getattr(path.listener, "vetoed", 0)
        false_hits[name] = hits
        cpu[name] = spent / max(seconds, 1) * 1000
    print(f"\nfalse stops and wakes on {false_minutes:g} min of the narration's echo alone at 0 dB "
          f"(scaled to an hour): " + ", ".join(f"{n}: {h} ({h * 60 / false_minutes:.0f}/h)" for n, h in false_hits.items()))
    print("hits on the echo alone that the gate's count or a twin vetoed: " + ", ".join(f"{n}: {v}" for n, v in vetoed.items()))
    print("CPU per second of audio, the whole detector path (canceller, stop phrase, wake model, gate, hold): "
          + ", ".join(f"{n}: {c:.1f} ms" for n, c in cpu.items()))
    if args.no_extras:
        return 0

    # The canceller alone, per second of audio it runs on: the main and shadow filters, and one.
    ref = pcm(narration[: 30 * RATE])
    mic = pcm(convolve(narration[: 30 * RATE], room_ir(rng, 0.06)) * 0.3)

    def cancel_all(canceller: EchoCanceller) -> Callable[[], None]:
        def run() -> None:
            for i in range(0, len(ref), CHUNK * 2):
                canceller.played(ref[i:i + CHUNK * 2], i / BPS)
                canceller.process(mic[i:i + CHUNK * 2], i / BPS)
        return run

    alone = {label: cpu_per_s(cancel_all(EchoCanceller(EchoSettings(), shadow=shadow)), 30.0)
             for label, shadow in (("main + shadow filter", True), ("one filter", False))}
    print("the canceller alone (its gate behind it included), ms of CPU per second of audio (0 when nothing played for 2 s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in alone.items()))

    # Wake recall with a loud unrelated sound (no reference): a TV voice and pink noise at the user's level.
    tv = samples(corpus.speech(NARRATION, "en-gb+m3", 170))
    recall = {}
    for label, loud in (("quiet room", False), ("TV voice + pink noise at 0 dB", True)):
        heard = 0
        scenes = build_scenes(corpus, COMMAND_TEXT, -60.0, trials, narration, seed=99)
        for k, scene in enumerate(scenes):
            mic = scene.user + scene.noise
            if loud:
                start = (k * 7919) % (len(tv) - len(mic))
                sound = tv[start:start + len(mic)] * (USER_RMS / active_rms(tv)) * 0.7
                sound += rng.standard_normal(len(mic)) * USER_RMS * 0.7
                mic = mic + sound
            upload = UploadSettings(mode=UploadMode.ON_DEVICE_WAKE)
            f = build_upload_filter(upload, PHRASE, 8.0, BPS, turn_end_s=0.46)
            woke = False
            data = pcm(mic)
            for i in range(0, len(data), CHUNK * 2):
                f.feed(data[i:i + CHUNK * 2])
                woke |= f.take_wake() is not None
            heard += woke
        recall[label] = heard
    print("wake recall, 'hey jarvis, what time is it' (no narration): "
          + ", ".join(f"{k}: {v}/{trials}" for k, v in recall.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
