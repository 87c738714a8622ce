"""Everything checked before the assistant starts, and `handoff check`, which runs the same
checks and exits (0: nothing to fix, 2: something to fix).

Settings that cannot even be read (an unknown LOG_LEVEL, a key with a pasted quote, a base URL
that is no URL) are refused while the settings are built (`config.settings`); what needs a list,
the file system or the task templates is checked here. Each finding is one sentence saying what
to change. Known voices and models come from the installed openai SDK's own types, so the lists
move with the pinned SDK instead of going stale in our code.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import enum
import errno
import os
import shutil
import sys
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path

from openai.types.realtime.audio_transcription import AudioTranscription
from openai.types.realtime.realtime_audio_config_output import RealtimeAudioConfigOutput
from openai.types.realtime.realtime_session_create_request import RealtimeSessionCreateRequest
from openai.types.shared.responses_model import ResponsesModel

from commands.options import add_common_arguments, settings_from_args
from config.rooms import pinned_satellite
from config.settings import (
    SETTINGS_FILE, Settings, SettingsError, UploadMode, default_upload_mode, default_workspace, require_api_key,
)
from config.wake_phrases import model_for, model_phrases
from decisions.words import words
from detectors.wake_confirm import confirm_available
from detectors.wake_verify import verifier_available
from hands.check import command_problems, file_problems, unreachable
from speech.sounds import sound_problems
from tasks import TaskConfigError, load_task_config
from tasks.config import TaskConfig

if typing.TYPE_CHECKING:
    from detectors.stop_word import StopDetector

EXIT_OK = 0
EXIT_PROBLEMS = 2


class Severity(enum.Enum):
    ERROR = "error"  # handoff cannot run like this: `run` refuses to start
    PROBLEM = "problem"  # one part will not work (a task template): `run` starts and says so
    WARNING = "warning"  # may well be fine (a model this SDK does not list yet): said at start


@dataclass(frozen=True)
class Finding:
    severity: Severity
    message: str

    def line(self) -> str:
        return f"{self.severity.value}: {self.message}"


def _literals(annotation: object) -> tuple[str, ...]:
    """The string literals inside a type annotation (Union[str, Literal[...]], Optional[...])."""
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(a for a in typing.get_args(annotation) if isinstance(a, str))
    return tuple(v for arg in typing.get_args(annotation) for v in _literals(arg))


VOICES = _literals(RealtimeAudioConfigOutput.model_fields["voice"].annotation)
REALTIME_MODELS = _literals(RealtimeSessionCreateRequest.model_fields["model"].annotation)
TRANSCRIBE_MODELS = _literals(AudioTranscription.model_fields["model"].annotation)
BRAIN_MODELS = _literals(ResponsesModel)


def preflight(settings: Settings, built: list[StopDetector] | None = None) -> list[Finding]:
    """Every check that needs no network, in the order a user would fix them. `built`: given,
    it receives the stop detector the check built, for `run` to use (built once, not twice:
    its pocketsphinx searches cost about half a second of CPU)."""
    findings = [*_names(settings), *_wake_phrase(settings)]
    state = state_dir_problem(settings.state_dir)
    if state:
        findings.append(Finding(Severity.ERROR, state))
    findings += workspace_findings(settings)
    findings += _audio_files(settings)
    findings += [Finding(Severity.ERROR, problem) for problem in sound_problems(settings.audio)]
    findings += _detectors(settings, built if built is not None else [])
    findings += task_findings(settings)
    findings += room_findings(settings)
    findings += mcp_findings(settings)
    return findings


def room_findings(settings: Settings) -> list[Finding]:
    """What each satellite's link protects: a room to pair, a room in the clear."""
    findings = []
    for spec in settings.rooms.satellites:
        if spec.unauthenticated:
            findings.append(Finding(Severity.WARNING, f"the {spec.room} satellite is unauthenticated (plain Wyoming): anyone "
                                    "on the network can hear its audio and play sounds in it; pair a `handoff satellite` "
                                    "there instead where you can."))  # fmt: skip
        elif not pinned_satellite(settings.state_dir, spec.room).exists():
            findings.append(Finding(Severity.PROBLEM, f"the {spec.room} satellite is not paired: run `handoff satellite pair` "
                                    f"there and `handoff rooms pair {spec.room} CODE` here (or mark it unauthenticated: in "
                                    "SATELLITES for a plain Wyoming satellite)."))  # fmt: skip
    return findings


def mcp_findings(settings: Settings) -> list[Finding]:
    """The MCP servers' file (errors: the assistant will not start) and their programs (problems)."""
    servers, errors = file_problems(settings.mcp_config, settings.mcp_config_named)
    findings = [Finding(Severity.ERROR, message) for message in errors]
    return findings + [Finding(Severity.PROBLEM, message) for message in command_problems(servers)]


def mcp_url_findings(settings: Settings) -> list[Finding]:
    """MCP servers nothing answers at (`handoff check` only: it uses the network)."""
    servers, _ = file_problems(settings.mcp_config, settings.mcp_config_named)
    return [Finding(Severity.PROBLEM, message) for message in asyncio.run(unreachable(servers))]


def errors_of(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


# -- names ----------------------------------------------------------------------------------------


def _names(settings: Settings) -> list[Finding]:
    realtime = settings.realtime
    found: list[Finding] = []
    voice = voice_problem(realtime.reader_voice, "READER_VOICE")
    if voice:
        found.append(Finding(Severity.ERROR, voice))
    for key, value, known in (
        ("REALTIME_MODEL", realtime.realtime_model, REALTIME_MODELS),
        ("TRANSCRIBE_MODEL", realtime.transcribe_model, TRANSCRIBE_MODELS),
        ("BRAIN_MODEL", settings.brain.model, BRAIN_MODELS),
    ):
        if value not in known:
            close = difflib.get_close_matches(value, known, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            found.append(Finding(Severity.WARNING, f"{key}={value} is not a model the installed openai library knows; "
                                                   f"{hint}handoff will try it anyway, so check the spelling."))  # fmt: skip
    language = realtime.transcribe_language
    if language is not None and not (len(language) == 2 and language.isascii() and language.isalpha()):
        found.append(Finding(Severity.WARNING, f"TRANSCRIBE_LANGUAGE={language} is not a two-letter ISO-639-1 code "
                                               "(en, de, ru, ...); set one, or leave it empty to let the transcriber detect it."))  # fmt: skip
    return found


def voice_problem(voice: str, named: str) -> str | None:
    """None for a voice the narrator has; else one sentence (`named`: READER_VOICE or --voice)."""
    if voice in VOICES:
        return None
    shown = f"{named}={voice}" if named.isupper() else f"{named} {voice}"
    return f"{shown} is not a voice the narrator has; use one of {', '.join(VOICES)}."


def _detectors(settings: Settings, built: list[StopDetector]) -> list[Finding]:
    """The on-device detectors `run` builds (the wake-word upload filter, the stop phrase), built
    here too: a phrase the spotter does not know is refused by `check`, not first by `run`."""
    from assembly.detectors import build_stop_detector, upload_filter  # the spotter's model: only when checking

    found = []
    try:
        upload_filter(settings)
    except SettingsError as exc:
        found.append(Finding(Severity.ERROR, str(exc)))
    if settings.stop.enabled:
        try:
            built.append(build_stop_detector(settings))
        except SettingsError as exc:
            found.append(Finding(Severity.ERROR, str(exc)))
    return found


def _wake_phrase(settings: Settings) -> list[Finding]:
    listener = settings.listener
    phrase_words = words(listener.wake_phrase)
    if not phrase_words:
        return [Finding(Severity.ERROR, f"WAKE_PHRASE={listener.wake_phrase} has no letters or digits; "
                                        "set a word to address the assistant by, like computer.")]  # fmt: skip
    found = [Finding(Severity.WARNING, wake_mode_line(settings))] if not wake_is_private(settings) else []
    found += [
        Finding(Severity.WARNING, f"WAKE_ALIASES has {alias!r}, which has no letters or digits; it is ignored.")
        for alias in listener.wake_aliases
        if not words(alias)
    ]
    latin = all(c.isascii() for word in phrase_words for c in word)
    if not latin and settings.realtime.transcribe_language == "en":
        found.append(Finding(Severity.WARNING, f"WAKE_PHRASE={listener.wake_phrase} is not English but "
                                               "TRANSCRIBE_LANGUAGE=en; set it to the language you speak (ru, ja, ...) "
                                               "or leave it empty, or the transcriber may never write the phrase."))  # fmt: skip
    return found


def wake_is_private(settings: Settings) -> bool:
    """Nothing of the room leaves the machine before a shipped model hears the wake phrase."""
    return settings.upload.mode is UploadMode.ON_DEVICE_WAKE and model_for(settings.listener.wake_phrase) is not None


def wake_mode_line(settings: Settings) -> str:
    """Which upload mode the wake phrase gets, and why, in one sentence (`handoff check` prints it)."""
    phrase, mode = settings.listener.wake_phrase, settings.upload.mode
    model = model_for(phrase)
    chosen = "" if mode is default_upload_mode(phrase) else f"HANDOFF_UPLOAD_MODE={mode.value} is set: "
    if mode is UploadMode.ON_DEVICE_WAKE and model is not None:
        cutoff = settings.upload.wake_cutoff
        if cutoff is not None:
            how = f"pymicro-wakeword alone, WAKE_CUTOFF {cutoff:g}"
        elif model.confirmed and confirm_available() and settings.upload.wake_strict:
            how = "WAKE_STRICT: pymicro-wakeword and pyopen-wakeword must both agree, fewer sound-alikes and fewer voices"
        elif model.confirmed and confirm_available():
            how = "pymicro-wakeword at its own cutoff, or lower with pyopen-wakeword agreeing"
        else:
            how = "pymicro-wakeword, cutoff the model's own"
        if settings.upload.wake_verify and cutoff is None:
            # The conditions under which the spotter builds its verifier (detectors.wake_model).
            verified = model.confirmed and confirm_available() and verifier_available(model.model)
            how += ("; then a third opinion on each wake, WAKE_VERIFY: fewer sound-alikes, and the name alone is heard "
                    "when pyopen-wakeword agrees" if verified
                    else f"; no wake verifier (WAKE_VERIFY) ships for \"{phrase}\", so sound-alikes wake it more often")
        return (f"wake phrase \"{phrase}\": {chosen}heard on this machine by its shipped model ({how}); nothing said in "
                "the room is uploaded until it is heard (upload mode wake_word, the private one).")
    if mode is UploadMode.ON_DEVICE_WAKE:
        return (f"wake phrase \"{phrase}\": {chosen}spotted on this machine by pocketsphinx, which also wakes on "
                f"sound-alikes (\"commuter\" for \"computer\") and then uploads them, and misses most speech from across "
                f"the room (PERFORMANCE.md); so only the transcript makes a "
                f"command, and each answer waits for it; the phrases with a shipped model ({model_phrases()}) are heard "
                f"far more reliably and answered sooner.")
    sends = ("everything the microphone hears is uploaded" if mode is UploadMode.CONTINUOUS
             else "every sentence said in the room is uploaded and transcribed, and the transcript decides")
    why = (f"{chosen}{sends}" if chosen else
           f"it has no on-device model, so {sends} (upload mode speech_only, the less private one)")
    return f"wake phrase \"{phrase}\": {why}; set WAKE_PHRASE to one of {model_phrases()} to keep the room on this machine."


# -- files ----------------------------------------------------------------------------------------


_PROBE_BYTES = 64 * 1024  # about what the task database and history need to open


def state_dir_problem(path: Path) -> str | None:
    """None when handoff can keep its records in `path` (created, 0700, if missing); else why not.
    Tried for real (a probe file), because permission bits say nothing under /proc or on a
    read-only mount, nor for root."""
    fix = "point --state-dir or HANDOFF_STATE_DIR at a folder handoff may write to"
    if path.exists() and not path.is_dir():
        return f"HANDOFF_STATE_DIR={path} is a file, not a folder; {fix}."
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryFile(dir=path, prefix=".handoff-probe-") as probe:
            # Some bytes, written through to the disk: a full disk creates an empty file but refuses data.
            probe.write(bytes(_PROBE_BYTES))
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return f"HANDOFF_STATE_DIR={path} has no room to write ({exc.strerror}); free some disk space there, or {fix}."
        return f"HANDOFF_STATE_DIR={path} cannot be written ({exc.strerror or exc}); {fix}."
    return state_dir_owner_problem(path)


def state_dir_owner_problem(path: Path) -> str | None:
    """The folder must be ours and writable by nobody else: another user could plant a web-token
    (then adopted: they would know the page's token) or replace the records."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"HANDOFF_STATE_DIR={path} cannot be read ({exc.strerror or exc})."
    if info.st_uid != os.geteuid():
        return (f"HANDOFF_STATE_DIR={path} belongs to another user (uid {info.st_uid}): another user could change "
                "handoff's records and its page's token; point it at a folder of your own.")
    if info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid != os.getegid()):  # (a user's own group: fine)
        return (f"HANDOFF_STATE_DIR={path} can be written by other users (mode {info.st_mode & 0o777:o}): run "
                f"`chmod 700 {path}`.")
    return None


def workspace_findings(settings: Settings, settings_file: Path = SETTINGS_FILE) -> list[Finding]:
    """The file tools' folder: the default one is created (0700); one that holds the settings
    file (and so the API key) is refused, one that holds the state folder is warned about (the
    file tools never read either: tools.workspace)."""
    root = settings.workspace_root
    fix = "point WORKSPACE_ROOT at a folder of its own (the default is ~/handoff-workspace)"
    if not root.is_dir() and root == default_workspace().resolve():
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            return [Finding(Severity.ERROR, f"the workspace folder {root} cannot be created ({exc.strerror or exc}); {fix}.")]
    root = root.resolve()
    found = []
    dotenv = settings_file.absolute()
    if dotenv.is_file() and dotenv.resolve().is_relative_to(root):
        found.append(Finding(Severity.ERROR, f"WORKSPACE_ROOT={root} holds the settings file {dotenv}, which holds "
                                             f"the API key; {fix}, or move .env out of it."))  # fmt: skip
    state = settings.state_dir.resolve()
    if state.is_relative_to(root):
        found.append(Finding(Severity.WARNING, f"WORKSPACE_ROOT={root} holds the state folder {state} (history, "
                                               f"task logs); the file tools never read it, but {fix}."))  # fmt: skip
    return found


def _audio_files(settings: Settings) -> list[Finding]:
    audio = settings.audio
    found = []
    if audio.input_wav is not None and not audio.input_wav.is_file():
        what = "is a folder" if audio.input_wav.is_dir() else "does not exist"
        found.append(Finding(Severity.ERROR, f"--input-wav {audio.input_wav} {what}; give a WAV file to read."))
    if audio.output_wav is not None:
        problem = output_file_problem(audio.output_wav, "--output-wav")
        if problem:
            found.append(Finding(Severity.ERROR, problem))
    if settings.log.file is not None:
        problem = output_file_problem(settings.log.file, "LOG_FILE", "handoff.log")
        if problem:
            found.append(Finding(Severity.ERROR, problem))
    return found


def output_file_problem(path: Path, flag: str, example: str = "out.wav") -> str | None:
    """None when a file can be written at `path`; else one sentence saying what to change.
    `flag` names the setting as the user gave it: "--output-wav" or "LOG_FILE"."""
    named = f"{flag}={path}" if flag.isupper() else f"{flag} {path}"
    if path.is_dir():
        return f"{named} is a folder; give a file name, like {path / example}."
    if not path.parent.is_dir():
        return f"{named}: the folder {path.parent} does not exist; create it or write somewhere else."
    if path.exists() and not os.access(path, os.W_OK):
        return f"{named} cannot be written; choose another file."
    return None


def device_findings(settings: Settings) -> list[Finding]:
    """The microphone and speaker `run` would open (none to find with --input-wav / --output-wav):
    `check` said ok on a machine with neither, and `run` then failed."""
    audio = settings.audio
    wanted = [(kind, spec) for kind, spec, wav in (("input", audio.input_device, audio.input_wav),
                                                   ("output", audio.output_device, audio.output_wav)) if wav is None]  # fmt: skip
    if not wanted:
        return []
    from audio_io.interface import AudioDeviceError  # PortAudio: only when a device is to be found
    from audio_io.portaudio import list_devices, open_portaudio, select_device

    try:
        pa = open_portaudio()
    except AudioDeviceError as exc:
        return [Finding(Severity.ERROR, f"{exc}.")]
    try:
        devices = list_devices(pa)
    finally:
        pa.terminate()
    found = []
    for kind, spec in wanted:
        try:
            select_device(devices, spec, kind)  # type: ignore[arg-type]
        except AudioDeviceError as exc:
            found.append(Finding(Severity.ERROR, str(exc).rstrip(".") + "."))
    return found


# -- background tasks -----------------------------------------------------------------------------


def task_findings(settings: Settings) -> list[Finding]:
    """The templates file (required when named), then each template's program and folder."""
    path = settings.tasks_config
    if path is not None and settings.tasks_config_named and not path.is_file():
        return [Finding(Severity.ERROR, f"HANDOFF_TASKS_CONFIG={path} does not exist; create it (see "
                                        "tasks/example_tasks.toml) or leave HANDOFF_TASKS_CONFIG empty.")]  # fmt: skip
    try:
        config = load_task_config(path)
    except TaskConfigError as exc:
        return [Finding(Severity.ERROR, str(exc))]
    return [Finding(Severity.PROBLEM, message) for message in template_problems(config)]


def template_problems(config: TaskConfig, search_path: str | None = None) -> list[str]:
    """Templates whose program or working folder is missing: found now rather than when someone
    asks for the task (a service's PATH is often shorter than a login shell's)."""
    search_path = os.environ.get("PATH", os.defpath) if search_path is None else search_path
    where = f" in {config.source}" if config.source else ""
    problems = []
    if config.allow_shell and config.shell_cwd is not None and not config.shell_cwd.is_dir():
        problems.append(f"shell_cwd{where} is {config.shell_cwd}, which is not a folder; create it or change it.")
    for template in config.templates:
        label = f"The task template '{template.name}'{where}"
        cwd = template.cwd if template.cwd is not None else Path.home()
        if not cwd.is_dir():
            problems.append(f"{label} runs in {cwd}, which is not a folder; create it or change cwd.")
            continue
        program = template.argv[0]
        if "/" in program:
            target = Path(program) if Path(program).is_absolute() else cwd / program
            if not (target.is_file() and os.access(target, os.X_OK)):
                problems.append(f"{label} runs {program}, which is not an executable file; fix argv or the file.")
        elif shutil.which(program, path=search_path) is None:
            problems.append(f"{label} runs {program}, which is not on PATH ({search_path}); install it, "
                            "give its full path in argv, or remove the template.")  # fmt: skip
    return problems


# -- `handoff check` ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)  # the flags of `run` that choose what `run` needs, checked the same way
    parser.add_argument("--input-device", help="the microphone `run` would open, by index or name part (see `handoff devices`)")
    parser.add_argument("--output-device", help="the speaker `run` would open, by index or name part")
    parser.add_argument("--input-wav", type=Path, help="check for `run --input-wav`: this file, and no microphone")
    parser.add_argument("--output-wav", type=Path, help="check for `run --output-wav`: this file, and no speaker")


def _settings_read() -> str:
    """Where the settings came from: only the current folder's .env is read, so say which (a .env
    elsewhere is not silently ignored)."""
    env_file = Path.cwd() / ".env"
    if env_file.is_file():
        return f"Settings read from: command-line flags, the environment, then {env_file}."
    return (f"Settings read from: command-line flags and the environment; there is no .env in {Path.cwd()} "
            "(only the current folder's .env is read).")


def _audio_checked(settings: Settings) -> str:
    audio = settings.audio
    mic = f"input {audio.input_wav}" if audio.input_wav else "microphone"
    speaker = f"output {audio.output_wav}" if audio.output_wav else "speaker"
    return f"{mic}, {speaker}"


def validate(args: argparse.Namespace, built: list[StopDetector] | None = None) -> tuple[Settings | None, list[Finding]]:
    """Every check `run` and `check` make before starting, all found at once: the settings
    (None when they cannot be built; every problem is then an error finding), the key, then
    what `preflight` checks (`built`: see there)."""
    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        return None, [Finding(Severity.ERROR, problem) for problem in exc.problems]
    findings = preflight(settings, built)
    try:
        require_api_key(settings)
    except SettingsError as exc:
        findings.insert(0, Finding(Severity.ERROR, str(exc)))
    return settings, findings


def count_line(findings: list[Finding]) -> str:
    counts = {severity: sum(f.severity is severity for f in findings) for severity in Severity}
    return f"{counts[Severity.ERROR]} error(s), {counts[Severity.PROBLEM]} problem(s) to fix."


def print_errors(errors: list[Finding]) -> None:
    """What `run` says when it refuses to start: every error (one is one sentence), then, for
    more than one, how many."""
    for finding in errors:
        print(f"handoff: {finding.message}", file=sys.stderr)
    if len(errors) > 1:
        print(f"handoff: {len(errors)} errors to fix.", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    settings, findings = validate(args)
    if settings is not None:
        findings += device_findings(settings)
        findings += mcp_url_findings(settings)
    failed = settings is None or any(f.severity in (Severity.ERROR, Severity.PROBLEM) for f in findings)
    if failed:  # first, so that what to fix follows and the count ends it
        print(_settings_read())
    severities = list(Severity)  # what stops it first, then what breaks a part, then the rest
    for finding in sorted(findings, key=lambda f: severities.index(f.severity)):
        print(finding.line())
    if failed or settings is None:  # (no settings has failed: this says so to the type checker)
        print(count_line(findings))
        return EXIT_PROBLEMS
    if wake_is_private(settings):  # (the less private fallback is a warning above)
        print(wake_mode_line(settings))
    templates = len(load_task_config(settings.tasks_config).templates)
    servers = len(file_problems(settings.mcp_config, settings.mcp_config_named)[0])
    print(f"ok: settings, voice, models, wake phrase, sounds, state folder {settings.state_dir}, {_audio_checked(settings)}, "
          f"{templates} task template(s) and {servers} MCP server(s) checked{' (with warnings above)' if findings else ''}. {_settings_read()}")  # fmt: skip
    return EXIT_OK
