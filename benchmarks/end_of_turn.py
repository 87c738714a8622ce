"""Ending the turn sooner without cutting commands (issue 20): on a spoken corpus with pauses
inside the commands, which end-of-turn method and setting splits none and ends soonest.

    .venv/bin/python -m benchmarks.end_of_turn [--quick]

Corpus: five commands after the wake phrase, in four espeak-ng voices (en-us, en-us+f3, en-us+m3,
en), with a pause of 0, 200, 300 or 400 ms after the wake phrase or in the middle of the command
(digital silence: the hardest case for a silence-based end of turn), 0.5 s of silence before and
2 s after. Methods, each on the same audio:

- the server's `server_vad` at `silence_duration_ms` 200..700 (the simulator's energy VAD, timed
  in audio as the server's is);
- `semantic_vad` at each eagerness, as the simulator models it (a silence per eagerness; the real
  model's judgement of a finished sentence is not modelled, so this row is a stand-in);
- the device's own VAD (detectors/vad.py: webrtcvad then Silero, 20 ms chunks) ending the turn
  after `TURN_END_MS` 200..500 of silence (END_OF_TURN=device).

For each: commands split (more than one turn), and the end of turn after the true end of speech
(median, ms). Voice to voice at RTT 50 follows from it: the server's turn end reaches the client
1 RTT after the speech's end (the audio goes up, the event comes down), then the route and the
narrator take 1 RTT each; the device's own end of turn needs no trip: only the route and the
narrator (`benchmarks/voice_to_voice.py` measures both end to end).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from array import array
import sys
from dataclasses import dataclass

from detectors.vad import SileroVad
from realtime_sim.session_config import _SEMANTIC_SILENCE_MS
from realtime_sim.vad import EnergyVad, SpeechStarted, SpeechStopped, VadSettings
from speech.synth import SpeechSynthesizer

WAKE = "computer"
COMMANDS = (
    ("what time", "is it"),
    ("list the", "files"),
    ("set a timer", "for ten minutes"),
    ("read the first two lines", "of notes"),
    ("ask the brain", "why the sky is blue"),
)
VOICES = ("en-us", "en-us+f3", "en-us+m3", "en")
PAUSES_MS = (0, 200, 300, 400)
SERVER_MS = (200, 300, 400, 450, 500, 600, 700)
DEVICE_MS = (200, 300, 400, 420, 440, 450, 460, 500)
RTT_MS = 50
CLIENT_MS = 25  # the client's and the simulator's own time in a command, measured by voice_to_voice
BYTES_PER_MS = 48
CHUNK = 960  # 20 ms


def _silence(ms: int) -> bytes:
    return bytes(ms * BYTES_PER_MS)


def _trim(pcm: bytes, floor: int = 300) -> bytes:
    """Without espeak's quiet lead-in and tail (under about -40 dBFS): the pauses are what we add."""
    samples = array("h")
    samples.frombytes(pcm)
    loud = [i for i, v in enumerate(samples) if abs(v) >= floor]
    return samples[loud[0]:loud[-1] + 1].tobytes() if loud else b""


@dataclass(frozen=True)
class Clip:
    pcm: bytes
    speech_end_ms: float  # where the last word ends
    pause_ms: int


async def corpus(quick: bool) -> list[Clip]:
    clips = []
    for voice in VOICES[:2] if quick else VOICES:
        synth = SpeechSynthesizer(voice=voice, words_per_minute=170)
        try:
            wake = _trim(await synth.synthesize(WAKE))
            for head, tail in COMMANDS[:2] if quick else COMMANDS:
                first, second = _trim(await synth.synthesize(head)), _trim(await synth.synthesize(tail))
                whole = _trim(await synth.synthesize(f"{head} {tail}"))
                for pause in PAUSES_MS:
                    for body in ((wake, _silence(pause), whole), (wake, _silence(120), first, _silence(pause), second)):
                        speech = b"".join(body)
                        clips.append(Clip(_silence(500) + speech + _silence(2000), 500 + len(speech) / BYTES_PER_MS, pause))
        finally:
            synth.close()
    return clips


def server_turns(clip: Clip, silence_ms: int) -> tuple[int, float]:
    """(turns, end of the last turn after the end of speech, ms) with the energy VAD at `silence_ms`."""
    vad = EnergyVad(VadSettings(silence_duration_ms=silence_ms))
    events = vad.feed(clip.pcm)
    starts = sum(isinstance(e, SpeechStarted) for e in events)
    stops = [e.audio_end_ms for e in events if isinstance(e, SpeechStopped)]
    return starts, (stops[-1] - clip.speech_end_ms) if stops else float("nan")


def device_speech(clip: Clip) -> list[bool]:
    vad = SileroVad()
    return [vad.feed(clip.pcm[i:i + CHUNK]).is_speech for i in range(0, len(clip.pcm) - CHUNK + 1, CHUNK)]


def device_turns(flags: list[bool], clip: Clip, turn_end_ms: int) -> tuple[int, float]:
    """(turns, end of the last turn after the end of speech, ms): a turn ends `turn_end_ms` after
    the last speech chunk, as detectors.pipeline.UploadFilter ends one."""
    turns, last, in_turn, end = 0, None, False, float("nan")
    for index, speech in enumerate(flags):
        now = (index + 1) * 20
        if speech:
            if not in_turn:
                turns, in_turn = turns + 1, True
            last = now
        elif in_turn and last is not None and now - last >= turn_end_ms:
            in_turn, end = False, now - clip.speech_end_ms
    return turns, end


def _row(name: str, setting: str, results: list[tuple[int, float]], clips: list[Clip], trips: int) -> str:
    split = sum(1 for turns, _ in results if turns > 1)
    by_pause = " / ".join(str(sum(1 for (turns, _), c in zip(results, clips) if turns > 1 and c.pause_ms == pause))
                          for pause in PAUSES_MS)
    delays = [delay for _, delay in results if delay == delay]
    median = statistics.median(delays) if delays else float("nan")
    v2v = median + trips * RTT_MS + CLIENT_MS
    return (f"| {name} | {setting} | {split} of {len(clips)} ({by_pause}) | {median:.0f} ms | {v2v:.0f} ms | "
            f"{'yes' if split == 0 and v2v <= 450 else 'no'} |")


async def measure(quick: bool) -> str:
    clips = await corpus(quick)
    lines = [
        f"End of turn on {len(clips)} commands (pauses of {', '.join(map(str, PAUSES_MS))} ms after the wake phrase or",
        "inside the command): commands split, end of turn after the end of speech (median), and voice to",
        f"voice at RTT {RTT_MS} ms that follows (server: + 3 RTT; device: + 2 RTT; + {CLIENT_MS} ms of client and",
        "simulator time):",
        "",
        "| method | setting | commands split (at pause " + " / ".join(map(str, PAUSES_MS)) + " ms) | end of turn after speech | voice to voice at RTT 50 | no split and <= 450 ms |",
        "|---|---|---|---|---|---|",
    ]
    for silence_ms in SERVER_MS:
        lines.append(_row("server_vad", f"silence_duration_ms {silence_ms}",
                          [server_turns(c, silence_ms) for c in clips], clips, 3))
    for eagerness in ("high", "auto", "low"):
        silence_ms = _SEMANTIC_SILENCE_MS[eagerness]
        lines.append(_row("semantic_vad (simulated)", f"eagerness {eagerness} (~{silence_ms} ms)",
                          [server_turns(c, silence_ms) for c in clips], clips, 3))
    flags = [device_speech(c) for c in clips]
    for turn_end_ms in DEVICE_MS:
        lines.append(_row("device VAD (END_OF_TURN=device)", f"TURN_END_MS {turn_end_ms}",
                          [device_turns(f, c, turn_end_ms) for f, c in zip(flags, clips)], clips, 2))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.end_of_turn", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two voices, two commands")
    args = parser.parse_args(argv)
    print(asyncio.run(measure(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
