"""Spoken turns in and speech out, through the official SDK."""

from __future__ import annotations

import base64
import contextlib
import dataclasses

from realtime_sim import SimConfig
from speech.synth import SpeechSynthesizer, duration_ms, silence
from tests.support.sim import FAST, PERFECT, SPOKEN_TURN_ORDER, audio_of, pcm_rms, recv_until, running_sim, sdk, spoken_turn_head, text_session, user_text

WITH_ESPEAK = dataclasses.replace(FAST, use_espeak=True, realistic=False)  # transcripts compared verbatim


async def espeak(text: str) -> bytes:
    synthesizer = SpeechSynthesizer(use_espeak=True)
    assert synthesizer.uses_espeak, "espeak-ng is not installed (scripts/setup.sh installs it: apt-get install -y espeak-ng)"
    try:
        return await synthesizer.synthesize(text)
    finally:
        synthesizer.close()


async def stream(conn, pcm: bytes, chunk_ms: int = 100) -> None:
    step = chunk_ms * 48
    for offset in range(0, len(pcm), step):
        await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[offset : offset + step]).decode())


def listening_session(create_response: bool) -> dict:
    return text_session(
        audio={
            "input": {
                "transcription": {"model": "gpt-4o-mini-transcribe"},
                "turn_detection": {"type": "server_vad", "silence_duration_ms": 600, "create_response": create_response},
            }
        }
    )


@contextlib.asynccontextmanager
async def spoken_to(config: SimConfig, lead_ms: int, create_response: bool):
    """A listening session that has just been sent "computer, what time is it" after `lead_ms` of silence."""
    speech = silence(lead_ms) + await espeak("computer, what time is it") + silence(1000)
    async with running_sim(config) as sim:
        sim.script.push_transcript("computer, what time is it")
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=listening_session(create_response=create_response))
            await recv_until(conn, "session.updated")
            await stream(conn, speech)
            yield conn


async def test_spoken_turn_gives_vad_events_then_transcript_then_response_in_recorded_order() -> None:
    # The perfect model: the transcript right after the commit.
    async with spoken_to(PERFECT, 800, create_response=True) as conn:
        events = await recv_until(conn, "response.done")
    assert spoken_turn_head([e.type for e in events]) == list(SPOKEN_TURN_ORDER)
    started, stopped = events[0], events[1]
    assert started.item_id == stopped.item_id == events[2].item_id
    assert 800 - 300 - 50 <= started.audio_start_ms <= 800  # onset minus the 300 ms prefix padding
    assert stopped.audio_end_ms > started.audio_start_ms + 1000
    completed = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    deltas = "".join(e.delta for e in events if e.type == "conversation.item.input_audio_transcription.delta")
    assert completed.transcript == deltas == "computer, what time is it"
    answer = next(e for e in events if e.type == "response.output_text.done").text
    assert "computer, what time is it" in answer  # the response read the spoken words


async def test_a_realistic_transcript_completes_late_after_other_events() -> None:
    # (2 s late: time enough for the item below to arrive first, however busy the machine)
    async with spoken_to(dataclasses.replace(FAST, transcription_delay_ms=(2000, 2000)), 300, create_response=False) as conn:
        committed = await recv_until(conn, "input_audio_buffer.committed")
        # Something else happens before the transcript: an item of ours is added meanwhile.
        await conn.conversation.item.create(item=user_text("meanwhile"))
        events = await recv_until(conn, "conversation.item.input_audio_transcription.completed")
    kinds = [e.type for e in events]
    assert kinds.index("conversation.item.done") < kinds.index("conversation.item.input_audio_transcription.completed")
    assert any(e.type == "conversation.item.added" and e.item.content[0].type == "input_text" for e in events)
    assert events[-1].item_id == committed[-1].item_id and events[-1].transcript == "computer, what time is it"


async def test_without_transcription_or_scripted_text_a_segment_still_commits_with_the_fallback() -> None:
    speech = silence(300) + await espeak("hello there") + silence(800)
    config = dataclasses.replace(FAST, fallback_transcript="uh-huh")
    async with running_sim(config) as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(
                session=text_session(audio={"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}})
            )
            await recv_until(conn, "session.updated")
            await stream(conn, speech)
            events = await recv_until(conn, "response.done")
        assert not any("transcription" in e.type for e in events)
        text = next(e for e in events if e.type == "response.output_text.done").text
        assert text == "I heard: uh-huh"


async def test_create_response_false_commits_the_turn_but_never_answers() -> None:
    speech = silence(300) + await espeak("mm hm, sure") + silence(1000)
    async with running_sim() as sim:
        sim.script.push_transcript("mm-hm, sure")
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session=listening_session(create_response=False))
            await recv_until(conn, "session.updated")
            await stream(conn, speech)
            await recv_until(conn, "conversation.item.input_audio_transcription.completed")
            # Events are processed in order: had a response been due, it would precede this.
            await conn.input_audio_buffer.clear()
            tail = await recv_until(conn, "input_audio_buffer.cleared")
        sent = sim.connections[0].sent_types()
        assert "input_audio_buffer.committed" in sent
        assert "response.created" not in sent
        assert [e.type for e in tail] == ["input_audio_buffer.cleared"]


async def test_out_of_band_narration_streams_real_speech_and_echoes_metadata() -> None:
    script_text = "The backup finished. Seven files were copied."
    async with running_sim(WITH_ESPEAK) as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
            await recv_until(conn, "session.updated")
            await conn.response.create(
                response={
                    "conversation": "none",
                    "output_modalities": ["audio"],
                    "instructions": "Read the user's text aloud, word for word.",
                    "input": [user_text(script_text)],
                    "tool_choice": "none",
                    "metadata": {"narration": "n-1"},
                }
            )
            events = await recv_until(conn, "response.done")
            await conn.conversation.item.retrieve(item_id=events[-1].response.output[0].id)
            missing = (await recv_until(conn, "error"))[-1]
        created, done = events[0], events[-1]
        assert created.response.metadata == done.response.metadata == {"narration": "n-1"}
        assert created.response.conversation_id is None
        assert not any(e.type.startswith("conversation.item") for e in events)  # nothing written
        assert missing.error.code == "item_retrieve_invalid_item_id"
        transcript = next(e for e in events if e.type == "response.output_audio_transcript.done").transcript
        assert transcript == script_text
        pcm = audio_of(events)
        deltas = [e for e in events if e.type == "response.output_audio.delta"]
        assert len(deltas) > 3  # streamed in chunks, not one burst
        assert pcm_rms(pcm) > 500  # speech, not silence
        assert 30 * len(script_text) < duration_ms(pcm) < 150 * len(script_text)
        kinds = [e.type for e in events]
        assert kinds.index("response.output_audio_transcript.delta") < kinds.index("response.output_audio.delta")
        assert kinds.index("response.output_audio.done") < kinds.index("response.output_audio_transcript.done")


async def test_push_reading_makes_the_next_narration_deviate() -> None:
    async with running_sim(PERFECT) as sim:
        sim.script.push_reading("the backup failed")
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            for _ in range(2):
                await conn.response.create(
                    response={"conversation": "none", "input": [user_text("The backup finished.")]}
                )
            first = await recv_until(conn, "response.done")
            second = await recv_until(conn, "response.done")
        spoken = [
            next(e for e in events if e.type == "response.output_audio_transcript.done").transcript
            for events in (first, second)
        ]
        assert sorted(spoken) == ["The backup finished.", "the backup failed"]


async def test_second_response_create_during_a_streaming_answer_is_refused() -> None:
    paced = dataclasses.replace(FAST, audio_frame_delay_s=0.2, audio_chunk_ms=100)
    async with running_sim(paced) as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.conversation.item.create(item=user_text("This is a fairly long sentence for the narrator to read."))
            await conn.response.create()
            await recv_until(conn, "response.output_audio.delta")
            await conn.response.create(event_id="evt_again")
            error = (await recv_until(conn, "error"))[-1]
            assert error.error.code == "conversation_already_has_active_response"
            assert error.error.event_id == "evt_again"
            await conn.response.cancel()
            done = (await recv_until(conn, "response.done"))[-1]
            assert done.response.status == "cancelled"
        assert sim.connections[0].sent_types().count("response.created") == 1


async def test_item_delete_and_its_errors() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.conversation.item.create(item={**user_text("forget me"), "id": "item_forget"})
            await recv_until(conn, "conversation.item.done")
            await conn.conversation.item.delete(item_id="item_forget")
            deleted = (await recv_until(conn, "conversation.item.deleted"))[-1]
            assert deleted.item_id == "item_forget"
            await conn.conversation.item.delete(item_id="item_forget", event_id="evt_del")
            error = (await recv_until(conn, "error"))[-1]
            assert (error.error.code, error.error.event_id) == ("item_delete_invalid_item_id", "evt_del")
            await conn.conversation.item.create(
                previous_item_id="item_forget",
                item={"type": "function_call_output", "call_id": "call_1", "output": "x"},
            )
            error = (await recv_until(conn, "error"))[-1]
            assert error.error.param == "previous_item_id"


async def test_voice_cannot_change_once_the_session_has_spoken() -> None:
    async with running_sim() as sim:
        async with sdk(sim).realtime.connect(model="gpt-realtime") as conn:
            await conn.session.update(session={"type": "realtime", "audio": {"output": {"voice": "marin"}}})
            await recv_until(conn, "session.updated")
            await conn.response.create(response={"conversation": "none", "input": [user_text("Hello.")]})
            await recv_until(conn, "response.done")
            await conn.session.update(session={"type": "realtime", "audio": {"output": {"voice": "cedar"}}})
            error = (await recv_until(conn, "error"))[-1]
        assert error.error.code == "cannot_update_voice"
        assert sim.connections[0].session["audio"]["output"]["voice"] == "marin"


def test_the_vad_level_is_the_exact_root_mean_square_even_at_full_scale() -> None:
    import math
    import random
    import struct

    from realtime_sim.vad import frame_rms

    rng = random.Random(21)
    frames = [b"", b"\x01", struct.pack("<240h", *[-32768] * 240), struct.pack("<3h", 32767, -32768, 1) + b"\x7f"]
    frames += [bytes(rng.randrange(256) for _ in range(rng.choice((2, 479, 480, 960)))) for _ in range(50)]
    for pcm in frames:
        samples = struct.unpack(f"<{len(pcm) // 2}h", pcm[: len(pcm) // 2 * 2])
        exact = math.sqrt(sum(s * s for s in samples) / len(samples)) if samples else 0.0
        assert frame_rms(pcm) == exact, pcm[:8]
