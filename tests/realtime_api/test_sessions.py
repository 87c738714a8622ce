"""The session configs we send, against the openai SDK's GA types and the simulator."""

import dataclasses

from config.settings import ListenerSettings, NoiseReduction, RealtimeSettings, Settings
from realtime_api.sessions import listener_session, narrator_session
from realtime_api.wire import ClientEvents
from realtime_sim.validation import ClientEventValidator

TOOLS = [{"type": "function", "name": "get_time", "description": "the time", "parameters": {"type": "object"}}]


def test_the_listener_hints_the_transcriber_and_reduces_far_field_noise():
    settings = Settings(listener=ListenerSettings(wake_phrase="computer"))
    audio_in = listener_session(settings, TOOLS)["audio"]["input"]
    assert audio_in["transcription"]["language"] == "en"
    assert '"computer"' in audio_in["transcription"]["prompt"]
    assert audio_in["noise_reduction"] == {"type": "far_field"}


def test_hints_follow_the_settings():
    settings = Settings(
        realtime=RealtimeSettings(transcribe_language=None, noise_reduction=NoiseReduction.OFF),
        listener=ListenerSettings(wake_phrase="jarvis"),
    )
    audio_in = listener_session(settings, TOOLS)["audio"]["input"]
    assert "language" not in audio_in["transcription"] and "jarvis" in audio_in["transcription"]["prompt"]
    assert audio_in["noise_reduction"] is None


def test_every_config_we_send_is_a_valid_ga_client_event():
    validator = ClientEventValidator()
    near = Settings(realtime=dataclasses.replace(RealtimeSettings(), noise_reduction=NoiseReduction.NEAR_FIELD))
    for settings in (Settings(), near):
        for session in (listener_session(settings, TOOLS), narrator_session(settings)):
            assert validator.check(ClientEvents.session_update(session)) is None
    assert validator.check(ClientEvents.route_command("what time is it", TOOLS)) is None
