"""Settings: one frozen object, built once from CLI flags, then environment, then `.env`, then defaults.

Everything that has a timeout, a path or a model name lives here and is injected, so tests
can build a `Settings` with millisecond timeouts and a temporary workspace.

Three parts, re-exported here for callers:
- `config.environment`: every key `.env` may set with its default (ENV_DEFAULTS, the one table
  of defaults) and how the sources are merged (`resolve_env`);
- `config.schema`: the frozen dataclasses, whose defaults come from that table;
- `config.checks`: key/value pairs -> `Settings`, every unusable value said at once.
A new setting: its key and default in ENV_DEFAULTS, its field in the schema (default read from
the table), its check in `build_settings`, and a line in .env.example.
"""

from __future__ import annotations

from config.checks import base_url_problems, build_settings, key_problems, load_settings, require_api_key
from config.environment import ENV_DEFAULTS, SETTINGS_FILE, dotenv_problems, resolve_env
from config.schema import (
    AudioSettings,
    BrainSettings,
    ConversationSettings,
    CostSettings,
    EchoSettings,
    EndOfTurn,
    FollowUp,
    ListenerSettings,
    LogLevel,
    LogSettings,
    NarratorSettings,
    NoiseReduction,
    PriceTable,
    RealtimeSettings,
    ReconnectSettings,
    ServiceSettings,
    Settings,
    SettingsError,
    StopSettings,
    UploadMode,
    UploadSettings,
    WebSettings,
    default_upload_mode,
    default_workspace,
)

__all__ = [
    "ENV_DEFAULTS", "SETTINGS_FILE", "AudioSettings", "BrainSettings", "ConversationSettings", "CostSettings",
    "EchoSettings", "EndOfTurn", "FollowUp", "ListenerSettings", "LogLevel", "LogSettings", "NarratorSettings",
    "NoiseReduction", "PriceTable", "RealtimeSettings", "ReconnectSettings", "ServiceSettings", "Settings",
    "SettingsError", "StopSettings", "UploadMode", "UploadSettings", "WebSettings", "base_url_problems",
    "build_settings", "default_upload_mode", "default_workspace", "dotenv_problems", "key_problems",
    "load_settings", "require_api_key", "resolve_env",
]
