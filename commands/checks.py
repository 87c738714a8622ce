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
import difflib
import enum
import os
import shutil
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path

from openai.types.realtime.audio_transcription import AudioTranscription
from openai.types.realtime.realtime_audio_config_output import RealtimeAudioConfigOutput
from openai.types.realtime.realtime_session_create_request import RealtimeSessionCreateRequest
from openai.types.shared.responses_model import ResponsesModel

from config.settings import Settings, SettingsError, require_api_key
from decisions.words import words
from tasks import TaskConfigError, load_task_config
from tasks.config import TaskConfig

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


def preflight(settings: Settings) -> list[Finding]:
    """Every check that needs no network, in the order a user would fix them."""
    findings = [*_names(settings), *_wake_phrase(settings)]
    state = state_dir_problem(settings.state_dir)
    if state:
        findings.append(Finding(Severity.ERROR, state))
    findings += _audio_files(settings)
    findings += task_findings(settings)
    return findings


def errors_of(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


# -- names ----------------------------------------------------------------------------------------


def _names(settings: Settings) -> list[Finding]:
    realtime = settings.realtime
    found: list[Finding] = []
    if realtime.reader_voice not in VOICES:
        found.append(Finding(Severity.ERROR, f"READER_VOICE={realtime.reader_voice} is not a voice the narrator has; "
                                             f"use one of {', '.join(VOICES)}."))  # fmt: skip
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


def _wake_phrase(settings: Settings) -> list[Finding]:
    listener = settings.listener
    phrase_words = words(listener.wake_phrase)
    if not phrase_words:
        return [Finding(Severity.ERROR, f"WAKE_PHRASE={listener.wake_phrase} has no letters or digits; "
                                        "set a word to address the assistant by, like computer.")]  # fmt: skip
    found = [
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


# -- files ----------------------------------------------------------------------------------------


def state_dir_problem(path: Path) -> str | None:
    """None when handoff can keep its records in `path` (created, 0700, if missing); else why not.
    Tried for real (a probe file), because permission bits say nothing under /proc or on a
    read-only mount, nor for root."""
    fix = "point --state-dir or HANDOFF_STATE_DIR at a folder handoff may write to"
    if path.exists() and not path.is_dir():
        return f"HANDOFF_STATE_DIR={path} is a file, not a folder; {fix}."
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryFile(dir=path, prefix=".handoff-probe-"):
            pass
    except OSError as exc:
        return f"HANDOFF_STATE_DIR={path} cannot be written ({exc.strerror or exc}); {fix}."
    return None


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
    from commands.run import add_run_arguments  # the same flags as `run`, checked the same way

    add_run_arguments(parser)


def _settings_read() -> str:
    """Where the settings came from: only the current folder's .env is read, so say which (a .env
    elsewhere is not silently ignored)."""
    env_file = Path.cwd() / ".env"
    if env_file.is_file():
        return f"Settings read from: command-line flags, the environment, then {env_file}."
    return (f"Settings read from: command-line flags and the environment; there is no .env in {Path.cwd()} "
            "(only the current folder's .env is read).")


def run(args: argparse.Namespace) -> int:
    from commands.run import settings_from_args

    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"error: {problem}")
        return EXIT_PROBLEMS
    findings = preflight(settings)
    try:
        require_api_key(settings)
    except SettingsError as exc:
        findings.insert(0, Finding(Severity.ERROR, str(exc)))
    for finding in findings:
        print(finding.line())
    counts = {severity: sum(f.severity is severity for f in findings) for severity in Severity}
    if counts[Severity.ERROR] or counts[Severity.PROBLEM]:
        print(_settings_read())
        print(f"{counts[Severity.ERROR]} error(s), {counts[Severity.PROBLEM]} problem(s) to fix.")
        return EXIT_PROBLEMS
    templates = len(load_task_config(settings.tasks_config).templates)
    print(f"ok: settings, voice, models, wake phrase, state folder {settings.state_dir} and "
          f"{templates} task template(s) checked{' (with warnings above)' if findings else ''}. {_settings_read()}")  # fmt: skip
    return EXIT_OK
