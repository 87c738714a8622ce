"""The log of an assistant left alone for days: dated lines, an optional rotating private file,
a listener that cannot connect visible at WARNING, and overheard speech not written down."""

from __future__ import annotations

import logging
import re
import stat
from pathlib import Path

import pytest

from config.logging_setup import configure_logging
from config.settings import LogSettings, load_settings
from decisions.timeline import Timeline, TimelineKind
from realtime_sim import SimServer
from realtime_sim.script import Fault
from tests.support.pipeline_harness import running_pipeline

DATED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (INFO|WARNING) ")


@pytest.fixture
def restore_root_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_log_file_is_dated_private_rotated_and_redacted(tmp_path: Path, restore_root_logging) -> None:
    log_file = tmp_path / "handoff.log"
    configure_logging("INFO", secrets=["sk-secret-value-123456"], file=log_file, max_bytes=2000, backups=2)
    logger = logging.getLogger("handoff.test")
    for n in range(60):
        logger.info("line %d with the key sk-secret-value-123456", n)
    logger.warning("the last line")
    lines = log_file.read_text().splitlines()
    assert lines and all(DATED.match(line) for line in lines), lines[:3]
    assert lines[-1].endswith("handoff.test: the last line")
    rotated = sorted(tmp_path.glob("handoff.log*"))
    assert [p.name for p in rotated] == ["handoff.log", "handoff.log.1", "handoff.log.2"]  # capped at 2 backups
    for path in rotated:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert "sk-secret-value" not in path.read_text()


def test_an_existing_log_file_is_made_private(tmp_path: Path, restore_root_logging) -> None:
    log_file = tmp_path / "handoff.log"
    log_file.write_text("old\n")
    log_file.chmod(0o644)
    configure_logging("INFO", file=log_file)
    logging.getLogger("handoff.test").info("new")
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert log_file.read_text().startswith("old\n")  # appended, not replaced


def test_log_settings_from_the_environment(tmp_path: Path) -> None:
    settings = load_settings(environ={"LOG_FILE": str(tmp_path / "h.log"), "LOG_MAX_BYTES": "5_000",
                                      "LOG_BACKUPS": "0", "LOG_OVERHEARD": "yes"}, dotenv_path=None)  # fmt: skip
    assert settings.log == LogSettings(file=tmp_path / "h.log", max_bytes=5000, backups=0, overheard=True)
    assert load_settings(environ={}, dotenv_path=None).log == LogSettings()


def test_overheard_speech_is_counted_not_written(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="handoff"):
        Timeline().add(TimelineKind.IGNORED, "my bank PIN is one two three four")
        Timeline().add(TimelineKind.HEARD, "Computer, what time is it")
    assert "PIN" not in caplog.text
    assert "ignored an utterance not addressed to me (8 words)" in caplog.text
    assert "heard: Computer, what time is it" in caplog.text  # addressed speech is the user's command
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="handoff"):
        Timeline(log_overheard=True).add(TimelineKind.IGNORED, "my bank PIN is one two three four")
    assert "ignored: my bank PIN is one two three four" in caplog.text


async def test_a_listener_that_cannot_connect_shows_at_warning(tmp_path: Path, sim: SimServer, caplog) -> None:
    sim.script.push_fault(Fault("handshake_500"))
    sim.script.push_fault(Fault("handshake_500"))
    with caplog.at_level(logging.WARNING):
        async with running_pipeline(tmp_path, sim) as p:
            assert p.timeline.count("listening") == 1
    failures = [r for r in caplog.records if "listener connection attempt" in r.getMessage()]
    assert [r.levelname for r in failures] == ["WARNING", "WARNING"], caplog.text
    assert failures[0].getMessage().startswith("error: listener connection attempt 1 failed")


def test_model_text_cannot_forge_a_log_line_act_on_the_terminal_or_drop_the_line(tmp_path: Path, restore_root_logging, capfd) -> None:
    # Issue 23, defects 6 and 8: a transcript or tool result with escape sequences, newlines or
    # a lone surrogate came out raw (forged lines, a retitled terminal) or not at all.
    log_file = tmp_path / "handoff.log"
    configure_logging("INFO", file=log_file)
    timeline = Timeline()
    timeline.add(TimelineKind.HEARD, "hi\x1b]0;pwned\x07\x1b[2J\r\n2026-01-01 00:00:00 INFO    handoff: FORGED caf\ud800")
    try:
        raise ValueError("bad\x1b[31m value")
    except ValueError:
        logging.getLogger("handoff.test").exception("failed on %s", "x\x9by")
    written = log_file.read_text()
    err = capfd.readouterr().err
    for text in (written, err):
        assert "--- Logging error ---" not in text
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), text
        assert not any(line.startswith("2026-01-01") for line in text.splitlines())
        assert "heard: hi\\x1b]0;pwned\\x07\\x1b[2J\\r\\n2026-01-01 00:00:00 INFO    handoff: FORGED caf\ufffd" in text
        assert "failed on x\\x9by" in text and "ValueError: bad\\x1b[31m value" in text  # the traceback keeps its lines
