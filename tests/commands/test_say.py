"""`handoff say TEXT` as a user runs it: through the real narrator against the simulator."""

from __future__ import annotations

import wave

from realtime_sim import SimServer
from tests.commands.test_cli import clean_env, run_handoff
from tests.support.sim import pcm_rms


async def test_say_reads_the_text_through_the_narrator_into_a_wav(tmp_path):
    output_wav = tmp_path / "said.wav"
    async with SimServer() as sim:
        env = clean_env(tmp_path, OPENAI_BASE_URL=sim.base_url)  # the simulator needs no key
        code, out, err = await run_handoff(tmp_path, "say", "hello", "there", "--output-wav", str(output_wav), env=env)
        narrators = [c for c in sim.connections if c.role == "narrator"]
    assert code == 0, err
    assert out.startswith("Said it") and "Traceback" not in err
    assert len(narrators) == 1  # one narrator session, as for any answer
    with wave.open(str(output_wav)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24000, 1, 2)
        pcm = wav.readframes(wav.getnframes())
    assert len(pcm) > 24000 * 2 // 4 and pcm_rms(pcm) > 300  # a quarter second or more, and not silence


async def test_say_without_a_key_or_a_simulator_says_what_it_needs(tmp_path):
    code, out, err = await run_handoff(tmp_path, "say", "hello", env=clean_env(tmp_path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "OPENAI_API_KEY" in err and "OPENAI_BASE_URL" in err and "Traceback" not in err


async def test_say_into_a_folder_is_one_sentence(tmp_path):
    code, out, err = await run_handoff(tmp_path, "say", "hello", "--output-wav", str(tmp_path),
                                       env=clean_env(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1"))  # fmt: skip
    assert code == 2 and out == ""
    assert err == f"handoff say: --output-wav {tmp_path} is a folder; give a file name, like {tmp_path / 'out.wav'}.\n"


async def test_say_refuses_a_voice_check_refuses(tmp_path):
    code, out, err = await run_handoff(tmp_path, "say", "hello", "--voice", "bob",
                                       env=clean_env(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1"))  # fmt: skip
    assert code == 2 and out == ""
    assert err.startswith("handoff say: --voice bob is not a voice the narrator has; use one of alloy, ") and err.count("\n") == 1


async def test_a_failed_say_leaves_an_existing_output_file_as_it_was(tmp_path):
    output_wav = tmp_path / "said.wav"
    output_wav.write_bytes(b"the last good recording")
    code, _, err = await run_handoff(tmp_path, "say", "hello", "--output-wav", str(output_wav),
                                     env=clean_env(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1"))  # nothing listens there
    assert code != 0 and "Traceback" not in err
    assert output_wav.read_bytes() == b"the last good recording"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["said.wav"]  # no partial file left behind
