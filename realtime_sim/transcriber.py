"""What the simulator "hears" in a user's own recording, when no test scripted the words.

Two ways, chosen by `handoff sim`:

- a cue sheet (`--transcripts FILE`): lines of `start_seconds<TAB>text`, the times counted from
  the start of the recording the client streams. When the VAD ends a segment, the cues whose
  start falls inside it (from half a second before its padded start) are its words, each used once.
- an offline recogniser (no cue sheet): pocketsphinx, whose English model ships in its wheel,
  decodes the segment (24 kHz resampled to 16 kHz). Its general language model gets few words of
  a short command right, so the segment is decoded twice: against a grammar of the words the
  session itself names (the transcription prompt's wake word, the tools' names and a few
  hundred words of everyday commands), taken when it starts with the wake word; else against the
  general model (overheard speech stays overheard).

Positions in the recording come from the client: handoff names each audio append `mic_<ms>`,
where its chunk lies in the microphone's stream, so a segment is placed in the recording however
much silence was not uploaded (`StreamPlaces`). A client that does not name them is placed by the
audio every listener session received, in order (`RecordingPosition`): right only when it uploads
everything.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

MIC_EVENT_ID = re.compile(r"^mic_(\d{1,12})$")  # an append that says where its chunk lies in the mic stream
MAX_PLACES = 4096  # jumps kept per session (one per stretch the client did not upload)
CUE_TOLERANCE_MS = 500  # a cue written a little before the speech it marks still belongs to it
_CUE_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+(\S.*?)\s*$")
# Commands as people say them (the README's and the demo's, and their like): their word pairs
# make the command model prefer "ask the brain" to "ask new a".
COMMAND_PHRASES = (
    "what time is it", "what's the time", "what is the date today", "list the files", "list my files",
    "read the first two lines of notes", "read the file", "ask the brain why the sky is blue", "ask the brain",
    "echo hello", "say hello", "start the backup task", "start the task", "list my tasks", "list the tasks",
    "cancel the backup", "cancel the task", "how did the backup go", "what is the result of the task",
    "tell me the time", "remind me in ten minutes", "stop the timer", "echo the demo is complete",
)
# Words of everyday commands, so the command model has the verbs and the small words a command
# is made of whatever the session's tools are called.
COMMAND_WORDS = """
a about after all an and any are ask at back be before blue brain but by can cancel check date
day do does done echo file files find first folder for from give go hello help her here hey him
his how i in is it its last let lines list long me minutes my name new next notes now of off ok
okay on one open or our out please read remind run say seconds show sky so start status stop
take task tasks tell test tests text that the them then there these this three time timer to
today tomorrow two up us was we weather what when where which who why will with you your
backup complete demo four five ten hours day week
""".split()


class CueSheetError(ValueError):
    """The cue sheet cannot be used; the message says which line and what to change."""


@dataclass(frozen=True)
class Segment:
    """One speech segment the simulator's VAD committed."""

    start_ms: float  # in the recording (every listener session's audio, in order)
    end_ms: float
    pcm: bytes = b""  # its audio, pcm16 24 kHz (only for a transcriber that wants it)
    hints: tuple[str, ...] = ()  # words the session names (its transcription prompt, its tools)
    wake_words: tuple[str, ...] = ()  # the wake word(s) its transcription prompt spells
    session: str = ""  # the listener session it came in
    session_start_ms: float | None = None  # where that session's audio starts in the recording (when named)
    peek: bool = False  # speech still in progress, heard for a route that sent it inline: it uses up no cue


class Transcriber(Protocol):
    needs_audio: bool

    def transcribe(self, segment: Segment) -> str:
        """The segment's words ("" when it holds none). May take a while: run off the loop."""
        ...

    def close(self) -> None: ...


@dataclass
class RecordingPosition:
    """How much audio all listener sessions of one simulator have received, in ms."""

    total_ms: float = 0.0


class StreamPlaces:
    """Where one session's input audio lies in the client's microphone stream, from the appends
    that name it: input position -> stream position. Kept only where the two stop moving together
    (a stretch the client did not upload), so a session holds one entry per upload burst."""

    def __init__(self) -> None:
        self._shifts: deque[tuple[float, float]] = deque(maxlen=MAX_PLACES)  # (input ms, stream - input)

    def note(self, input_ms: float, event_id: object) -> None:
        """An append that begins at `input_ms` of this session's input, with the id it carried."""
        match = MIC_EVENT_ID.match(event_id) if isinstance(event_id, str) else None
        if match is None:
            return
        shift = float(match.group(1)) - input_ms
        if not self._shifts or abs(self._shifts[-1][1] - shift) > 0.5:
            self._shifts.append((input_ms, shift))

    @property
    def first_ms(self) -> float | None:
        """Where the first named append lies in the stream (None: none named one)."""
        return None if not self._shifts else self._shifts[0][0] + self._shifts[0][1]

    def place(self, input_ms: float, *, ending: bool = False) -> float | None:
        """The stream position of an input position (None when no append named one). An `ending`
        position belongs to the audio before it (a segment that ends where a burst ends)."""
        if not self._shifts:
            return None
        shift = self._shifts[0][1]
        for start, later in self._shifts:
            if start < input_ms or (start == input_ms and not ending):
                shift = later
            else:
                break
        return input_ms + shift


# -- the cue sheet ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cue:
    start_ms: float
    text: str


@dataclass
class CueSheet:
    """Cues in the order of their start; each is used by one segment at most, until a listener
    session starts at or before it: a new run of the recording (its positions start again) or
    a replay of audio a lost session never answered hears the words again (issue 28, item 6:
    the second run against one `handoff sim --transcripts` heard nothing)."""

    cues: list[Cue]
    used: set[int] = field(default_factory=set)
    needs_audio: bool = False
    sessions: set[str] = field(default_factory=set)  # the listener sessions seen

    @classmethod
    def read(cls, path: Path) -> "CueSheet":
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CueSheetError(f"cannot read the cue sheet {path}: {exc.strerror or exc}.") from None
        except UnicodeDecodeError:
            raise CueSheetError(f"the cue sheet {path} is not UTF-8 text; save it as UTF-8.") from None
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, name: str = "the cue sheet") -> "CueSheet":
        cues = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            match = _CUE_LINE.match(line)
            if match is None:
                raise CueSheetError(f"line {number} of {name} is not `seconds<TAB>words`: {line.strip()[:60]!r}; "
                                    "write it like `12.5<TAB>computer, what time is it`.")  # fmt: skip
            cues.append(Cue(float(match.group(1)) * 1000, match.group(2)))
        if not cues:
            raise CueSheetError(f"{name} has no cues; write lines like `12.5<TAB>computer, what time is it`.")
        return cls(sorted(cues, key=lambda c: c.start_ms))

    def transcribe(self, segment: Segment) -> str:
        if segment.session not in self.sessions:
            self.sessions.add(segment.session)
            if segment.session_start_ms is not None:  # the recording from there on is heard afresh
                start = segment.session_start_ms - CUE_TOLERANCE_MS
                self.used = {i for i in self.used if self.cues[i].start_ms < start}
        found = [
            index for index, cue in enumerate(self.cues)
            if index not in self.used and segment.start_ms - CUE_TOLERANCE_MS <= cue.start_ms <= segment.end_ms
        ]  # fmt: skip
        if not segment.peek:  # (the segment's own commit takes the cues later)
            self.used.update(found)
        return " ".join(self.cues[i].text for i in found)

    def close(self) -> None:
        """Nothing to release."""


# -- the recogniser -----------------------------------------------------------------------------

WAKE_THRESHOLD = 1e-50  # the keyword spotter's (benchmarks/detector_choice.py)
MAX_WAKE_LEAD_MS = 500  # after the speech onset: room for "hey" or "ok" in front, not for "I bought a new"
SPEECH_RMS = 300  # a 10 ms frame louder than this (about -40 dBFS) is speech (benchmarks/corpus.py)
_FRAME_MS = 10  # pocketsphinx's frames
_FRAME_BYTES = 16000 * 2 * _FRAME_MS // 1000
_NOT_WORDS = re.compile(r"^(<.*>|\[.*\])$")  # <s>, </s>, <sil>, [NOISE], [SPEECH]


class Recogniser:
    """pocketsphinx, loaded once (half a second) and used from one thread at a time.

    Its general English model gets few words of a short command right (measured on espeak-ng
    speech: "computer, what time is it" came back as "you will die"), so a segment is first
    searched for the wake phrase (keyword spotting, as the assistant's own spotter does); when
    it starts the segment, the words after it are decoded against the command vocabulary
    (`COMMAND_WORDS` and the session's own words, equally likely), and the transcript is
    "<Wake>, <words>". Anything else is decoded with the general model: overheard speech comes out
    as some English words that do not start with the wake phrase, which is all it needs to be.
    """

    needs_audio = True

    def __init__(self) -> None:
        from pocketsphinx import Decoder  # only here: the cue sheet and the tests need none of it

        self._decoder = Decoder(loglevel="FATAL", kws_threshold=WAKE_THRESHOLD)
        self._decoder.add_lm("general", self._decoder.get_lm())  # the wheel's general English model
        self._folder = tempfile.TemporaryDirectory(prefix="handoff-sim-lm-")
        # The command search has a decoder of its own whose dictionary holds only the
        # vocabulary's words: a language model added to the general decoder costs 6-7 s of CPU
        # (its whole dictionary is prepared again), over 30 s on a busy machine, which a route
        # waiting for these words did not survive; this one costs a few ms, and decodes the same.
        self._commands_decoder: Any = None
        self.command_dictionary_size = 0  # pronunciations the command search knows (0 before the first command)
        self._vocabulary: tuple[str, ...] = ()
        self._wake = ""

    def close(self) -> None:
        self._folder.cleanup()

    def transcribe(self, segment: Segment) -> str:
        from detectors.audio import Resampler

        pcm = Resampler(24000)(segment.pcm)
        phrase = " ".join(w for w in segment.wake_words if self._decoder.lookup_word(w) is not None)
        if phrase:
            wake_end = self._wake_end(pcm, phrase)
            if wake_end is not None:
                words = [w for w, start in _best_words(self._commands(segment), pcm) if start >= wake_end]
                return f"{phrase.capitalize()}, {' '.join(words)}" if words else f"{phrase.capitalize()}."
        self._decoder.activate_search("general")
        return " ".join(word for word, _ in _best_words(self._decoder, pcm))

    def _wake_end(self, pcm16k: bytes, phrase: str) -> int | None:
        """The frame where the wake phrase ends, if it starts the segment."""
        if phrase != self._wake:
            self._decoder.add_keyphrase("wake", phrase)
            self._wake = phrase
        self._decoder.activate_search("wake")
        self._decoder.start_utt()
        self._decoder.process_raw(pcm16k, full_utt=True)
        self._decoder.end_utt()
        hits = [(s.start_frame, s.end_frame) for s in self._decoder.seg()] if self._decoder.hyp() else []
        first = min(hits, default=None)
        if first is None or (first[0] - _onset_frame(pcm16k)) * _FRAME_MS > MAX_WAKE_LEAD_MS:
            return None  # not there, or not at the start ("I bought a new computer")
        return int(first[1]) - 10  # a word the decoder starts in the phrase's last 100 ms is the command's

    def _commands(self, segment: Segment) -> Any:
        """A decoder for the command vocabulary: a language model of equally likely words."""
        from pocketsphinx import Decoder

        words = tuple(sorted({w for w in (*COMMAND_WORDS, *segment.hints) if self._decoder.lookup_word(w) is not None}))
        if words != self._vocabulary or self._commands_decoder is None:
            folder = Path(self._folder.name)
            pronunciations = self._pronunciations(words)
            (folder / "commands.dict").write_text(
                "".join(f"{name} {phones}\n" for name, phones in pronunciations), encoding="ascii")
            (folder / "commands.lm").write_text(_command_arpa(words, COMMAND_PHRASES), encoding="ascii")
            self._commands_decoder = Decoder(loglevel="FATAL", dict=str(folder / "commands.dict"),
                                             lm=str(folder / "commands.lm"))
            self._vocabulary, self.command_dictionary_size = words, len(pronunciations)
        return self._commands_decoder

    def _pronunciations(self, words: tuple[str, ...]) -> list[tuple[str, str]]:
        """Each word's pronunciations in the general dictionary ("read", "read(2)", ...)."""
        found = []
        for word in words:
            count, phones = 1, self._decoder.lookup_word(word)
            while phones is not None:
                found.append((word if count == 1 else f"{word}({count})", phones))
                count += 1
                phones = self._decoder.lookup_word(f"{word}({count})")
        return found


def _best_words(decoder: Any, pcm16k: bytes) -> list[tuple[str, int]]:
    """(word, start frame) of the decoder's best hypothesis for its active search, fillers left out."""
    decoder.start_utt()
    decoder.process_raw(pcm16k, full_utt=True)
    decoder.end_utt()
    if decoder.hyp() is None:
        return []
    return [(s.word.split("(")[0], s.start_frame) for s in decoder.seg() if not _NOT_WORDS.match(s.word)]


def _onset_frame(pcm16k: bytes) -> int:
    """The first 10 ms frame loud enough to be speech (0 if none is)."""
    from detectors.audio import audioop  # type: ignore[attr-defined]  # imported without its warning there

    for frame in range(len(pcm16k) // _FRAME_BYTES):
        if audioop.rms(pcm16k[frame * _FRAME_BYTES : (frame + 1) * _FRAME_BYTES], 2) >= SPEECH_RMS:
            return frame
    return 0


def _command_arpa(words: tuple[str, ...], phrases: tuple[str, ...]) -> str:
    """An ARPA model in which every word is as likely as any other, and a word pair from
    `phrases` far likelier than chance (a scoring aid for the decoder, not a normalised model)."""
    known = set(words)
    pairs = sorted({(a, b) for phrase in phrases for a, b in zip(phrase.split(), phrase.split()[1:])
                    if a in known and b in known})  # fmt: skip
    unigram = math.log10(1 / (len(words) + 1))
    histories = {a for a, _ in pairs}
    backoff = math.log10(0.5)  # a word with known followers gives half its weight to the rest
    lines = ["\\data\\", f"ngram 1={len(words) + 2}", f"ngram 2={len(pairs)}", "", "\\1-grams:",
             "-99 <s> 0", f"{unigram:.4f} </s> 0"]  # fmt: skip
    lines += [f"{unigram:.4f} {word} {backoff if word in histories else 0:.4f}" for word in words]
    lines += ["", "\\2-grams:"] + [f"{math.log10(0.3):.4f} {a} {b}" for a, b in pairs]
    return "\n".join([*lines, "", "\\end\\", ""])


def session_words(session: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(hint words, wake words) a session names: its transcription prompt and its tools."""
    transcription = (((session.get("audio") or {}).get("input") or {}).get("transcription")) or {}
    prompt = str(transcription.get("prompt") or "")
    tool_names = " ".join(str(t.get("name", "")) for t in session.get("tools") or [] if isinstance(t, dict))
    hints = tuple(w for w in re.findall(r"[a-z]+", f"{prompt} {tool_names.replace('_', ' ')}".lower()))
    wake = tuple(w for phrase in re.findall(r'wake word "([^"]+)"', prompt) for w in phrase.lower().split()[:1])
    return hints, wake
