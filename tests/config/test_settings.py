"""Settings precedence, validation, the missing-key message, and secrets kept out of logs."""

import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.logging_setup import RedactingFilter, redact
from config.settings import (
    ENV_DEFAULTS, CostSettings, PriceTable, Settings, SettingsError, StopSettings, UploadMode, load_settings, require_api_key,
)

REPO = Path(__file__).resolve().parents[2]


def test_precedence_cli_then_environment_then_dotenv_then_defaults(tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text("WAKE_PHRASE=jarvis\nREADER_VOICE=cedar\nBRAIN_MODEL=from-dotenv\n")
    settings = load_settings(
        cli={"WAKE_PHRASE": "hal"},
        environ={"WAKE_PHRASE": "env-phrase", "READER_VOICE": "ash"},
        dotenv_path=dotenv,
    )
    assert settings.listener.wake_phrase == "hal"
    assert settings.realtime.reader_voice == "ash"
    assert settings.brain.model == "from-dotenv"
    assert settings.realtime.realtime_model == ENV_DEFAULTS["REALTIME_MODEL"]


def test_settings_are_frozen_and_hide_the_key():
    settings = load_settings(environ={"OPENAI_API_KEY": "sk-supersecretvalue123"}, dotenv_path=None)
    assert "sk-supersecret" not in repr(settings)
    with pytest.raises(Exception):
        settings.log_level = "DEBUG"  # type: ignore[misc]


def test_aliases_and_workspace(tmp_path):
    settings = load_settings(
        environ={"WAKE_ALIASES": "komputer, compooter ,", "WORKSPACE_ROOT": str(tmp_path)}, dotenv_path=None
    )
    assert settings.listener.wake_aliases == ("komputer", "compooter")
    assert settings.workspace_root == tmp_path.resolve()
    assert settings.listener.stop_words == ("stop", "cancel")  # the default
    custom = load_settings(environ={"STOP_WORDS": "Halt, enough ,", "WORKSPACE_ROOT": str(tmp_path)}, dotenv_path=None)
    assert custom.listener.stop_words == ("halt", "enough")
    with pytest.raises(SettingsError, match="WORKSPACE_ROOT"):
        load_settings(environ={"WORKSPACE_ROOT": str(tmp_path / "missing")}, dotenv_path=None)


def test_missing_key_is_one_clear_line():
    with pytest.raises(SettingsError, match="OPENAI_API_KEY.*\\.env"):
        require_api_key(Settings())


def test_env_example_documents_every_key():
    example = (REPO / ".env.example").read_text()
    for key in ENV_DEFAULTS:
        assert f"\n{key}=" in "\n" + example, key


def test_upload_settings_are_read_from_the_environment():
    settings = load_settings(environ={"HANDOFF_UPLOAD_MODE": "continuous", "HANDOFF_PREROLL_MS": "400"}, dotenv_path=None)
    assert settings.upload.mode is UploadMode.CONTINUOUS and settings.upload.preroll_ms == 400



def test_private_by_default_a_phrase_with_a_shipped_model_gets_on_device_wake_and_any_other_speech_only():
    default = load_settings(environ={}, dotenv_path=None)
    assert default.listener.wake_phrase == "hey jarvis"
    assert default.upload.mode is UploadMode.ON_DEVICE_WAKE
    assert default.upload.wake_cutoff is None and 2 <= default.upload.wake_refractory_s <= 5
    for phrase in ("Okay Nabu", "OK nabu", "alexa", "hey, Mycroft"):
        assert load_settings(environ={"WAKE_PHRASE": phrase}, dotenv_path=None).upload.mode is UploadMode.ON_DEVICE_WAKE
    assert load_settings(environ={"WAKE_PHRASE": "computer"}, dotenv_path=None).upload.mode is UploadMode.SPEECH_ONLY
    chosen = load_settings(environ={"WAKE_PHRASE": "computer", "HANDOFF_UPLOAD_MODE": "wake_word"}, dotenv_path=None)
    assert chosen.upload.mode is UploadMode.ON_DEVICE_WAKE  # pocketsphinx, asked for
    speech = load_settings(environ={"HANDOFF_UPLOAD_MODE": "speech_only"}, dotenv_path=None)
    assert speech.upload.mode is UploadMode.SPEECH_ONLY


def test_wake_cutoff_and_refractory_are_read_and_checked():
    settings = load_settings(environ={"WAKE_CUTOFF": "0.8", "WAKE_REFRACTORY_S": "2"}, dotenv_path=None)
    assert settings.upload.wake_cutoff == 0.8 and settings.upload.wake_refractory_s == 2.0
    assert not settings.upload.wake_strict
    assert load_settings(environ={"WAKE_STRICT": "true"}, dotenv_path=None).upload.wake_strict
    for key, value in (("WAKE_CUTOFF", "1.5"), ("WAKE_CUTOFF", "high"), ("WAKE_REFRACTORY_S", "60"), ("WAKE_STRICT", "maybe")):
        with pytest.raises(SettingsError, match=key) as raised:
            load_settings(environ={key: value}, dotenv_path=None)
        assert len(raised.value.problems) == 1


def test_prices_and_budget_default_to_published_prices_and_no_budget_and_can_be_set():
    assert load_settings(environ={}, dotenv_path=None).cost == CostSettings(PriceTable(), None)
    for f in dataclasses.fields(PriceTable):
        assert f"PRICE_{f.name.upper()}" in ENV_DEFAULTS  # so .env.example documents it
    settings = load_settings(environ={"PRICE_REALTIME_AUDIO_IN": "$30", "DAILY_BUDGET_USD": " 2.50 "}, dotenv_path=None)
    assert settings.cost.prices == PriceTable(realtime_audio_in=30.0) and settings.cost.daily_budget_usd == 2.5


@pytest.mark.parametrize("key", ["DAILY_BUDGET_USD", "PRICE_BRAIN_TEXT_OUT"])
@pytest.mark.parametrize("value", ["two dollars", "-1", "nan", "inf"])
def test_a_bad_price_or_budget_is_one_sentence_naming_it(key, value):
    with pytest.raises(SettingsError) as raised:
        load_settings(environ={key: value}, dotenv_path=None)
    message = str(raised.value)
    assert message.startswith(f"{key}={value} is not ") and "\n" not in message and message.endswith("environment.")


def test_a_zero_budget_is_refused_with_what_to_do_instead():
    with pytest.raises(SettingsError, match="DAILY_BUDGET_USD=0 .*leave it empty for no budget"):
        load_settings(environ={"DAILY_BUDGET_USD": "0"}, dotenv_path=None)


def test_handoff_run_without_key_exits_2_without_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "commands.cli", "run"], cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stderr and ".env" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_redaction_covers_keys_and_bearer_tokens():
    text = "connecting with Authorization: Bearer sk-proj-abcdefghijklmnop and key sk-abcdefghijklmnopqrst"
    cleaned = redact(text)
    assert "abcdefghijklmnop" not in cleaned and "[redacted]" in cleaned
    assert redact("my key is hunter2hunter2", secrets=["hunter2hunter2"]) == "my key is [redacted]"


def test_log_records_are_redacted(caplog):
    logger = logging.getLogger("test.redaction")
    logger.addFilter(RedactingFilter(["customsecretvalue"]))
    with caplog.at_level(logging.INFO, logger="test.redaction"):
        logger.info("key=%s other=%s", "customsecretvalue", "sk-abcdefghijklmnopqrstu")
    assert "customsecretvalue" not in caplog.text and "sk-abcdefghijkl" not in caplog.text


def test_narrator_warm_settings_from_the_environment():
    default = load_settings(environ={}, dotenv_path=None).narrator
    assert (default.warm, default.warm_max_age_s) == (True, 3000.0)
    narrator = load_settings(environ={"NARRATOR_WARM": "false", "NARRATOR_WARM_MAX_AGE_S": "120"}, dotenv_path=None).narrator
    assert (narrator.warm, narrator.warm_max_age_s) == (False, 120.0)
    with pytest.raises(SettingsError, match="NARRATOR_WARM=maybe is neither true nor false"):
        load_settings(environ={"NARRATOR_WARM": "maybe"}, dotenv_path=None)
    with pytest.raises(SettingsError, match="NARRATOR_WARM_MAX_AGE_S=0 is not a positive number"):
        load_settings(environ={"NARRATOR_WARM_MAX_AGE_S": "0"}, dotenv_path=None)


def test_stop_while_talking_is_read_from_the_environment():
    assert load_settings(environ={}, dotenv_path=None).stop == StopSettings(enabled=True)
    assert not load_settings(environ={"STOP_WHILE_TALKING": "off"}, dotenv_path=None).stop.enabled
    with pytest.raises(SettingsError, match="STOP_WHILE_TALKING=maybe"):
        load_settings(environ={"STOP_WHILE_TALKING": "maybe"}, dotenv_path=None)
