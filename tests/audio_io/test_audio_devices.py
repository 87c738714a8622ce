"""The pyaudio layer: device choice, format choice, conversion, the thread boundary, and the real
PyAudioMicrophone / PyAudioSpeaker through ALSA's file plugin (see tests/support/audio_helpers.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from audio_io import AudioDeviceError, NoAudioDeviceError, PcmConverter, PyAudioMicrophone, PyAudioSpeaker, portaudio
from audio_io.portaudio import AudioDevice, StreamFormat, choose_stream_format, list_devices, select_device
from commands.devices import NO_DEVICES_LINE, format_device_list
from tests.support.audio_helpers import (
    alsa_file_device,
    alsa_without_devices,
    dominant_frequency,
    has_sound_card,
    noise,
    rms,
    run_scenario,
    strip_silence,
    tone,
)

DEVICES = [
    AudioDevice(0, "HDA Intel PCH: ALC3246 Analog (hw:0,0)", 2, 2, 48000),
    AudioDevice(1, "USB PnP Sound Device: Audio (hw:1,0)", 1, 0, 44100),
    AudioDevice(2, "pulse", 32, 32, 44100),
    AudioDevice(3, "default", 32, 32, 44100, is_default_input=True, is_default_output=True),
    AudioDevice(4, "HDMI 0 (hw:0,3)", 0, 8, 48000),
]


# --------------------------------------------------------------------------- selection (pure)


def test_no_spec_picks_the_system_default() -> None:
    assert select_device(DEVICES, None, "input").index == 3
    assert select_device(DEVICES, "", "output").index == 3


def test_no_default_falls_back_to_the_first_device_of_the_kind() -> None:
    devices = [AudioDevice(0, "speakers", 0, 2, 48000), AudioDevice(1, "mic", 1, 0, 48000)]
    assert select_device(devices, None, "input").name == "mic"


def test_index_selects_that_device_for_its_kind_only() -> None:
    assert select_device(DEVICES, "1", "input").name.startswith("USB PnP")
    with pytest.raises(NoAudioDeviceError, match="AUDIO_OUTPUT_DEVICE='1'"):
        select_device(DEVICES, "1", "output")  # a microphone-only device is no speaker


def test_name_substring_is_case_insensitive_and_kind_aware() -> None:
    assert select_device(DEVICES, "usb pnp", "input").index == 1
    assert select_device(DEVICES, "hdmi", "output").index == 4
    assert select_device(DEVICES, "hw:0", "output").index == 0  # first match in PortAudio order


def test_exact_name_beats_an_earlier_substring_match() -> None:
    devices = [AudioDevice(0, "default mixer", 2, 2, 48000), AudioDevice(1, "Default", 2, 2, 48000)]
    assert select_device(devices, "default", "input").index == 1


def test_no_match_lists_the_available_devices_of_that_kind() -> None:
    with pytest.raises(NoAudioDeviceError) as info:
        select_device(DEVICES, "blue yeti", "input")
    message = str(info.value)
    assert "AUDIO_INPUT_DEVICE='blue yeti'" in message
    for device in DEVICES:
        assert (repr(device.name) in message) == (device.max_input_channels > 0)
    assert "`./run devices`" in message


@pytest.mark.parametrize(
    ("kind", "devices", "expected"),
    [
        ("input", [], portaudio.NO_INPUT_DEVICE),
        ("output", [], portaudio.NO_OUTPUT_DEVICE),
        ("input", [AudioDevice(0, "HDMI", 0, 8, 48000)], portaudio.NO_INPUT_DEVICE),
    ],
)
def test_no_device_of_the_kind_raises_the_clear_error(kind, devices, expected) -> None:
    with pytest.raises(NoAudioDeviceError) as info:
        select_device(devices, None, kind)
    assert str(info.value) == expected
    assert "--input-wav" in portaudio.NO_INPUT_DEVICE and "--output-wav" in portaudio.NO_OUTPUT_DEVICE


# --------------------------------------------------------------------------- format choice (pure)


def test_24khz_mono_is_used_when_offered() -> None:
    assert choose_stream_format(lambda rate, ch: True, 48000, 2) == StreamFormat(24000, 1)


def test_without_24khz_the_device_default_rate_is_used() -> None:
    assert choose_stream_format(lambda rate, ch: rate != 24000, 44100, 1) == StreamFormat(44100, 1)


def test_a_stereo_only_device_is_opened_in_stereo() -> None:
    def stereo_48k_only(rate: int, channels: int) -> bool:
        return channels == 2 and rate == 48000

    assert choose_stream_format(stereo_48k_only, 48000, 2) == StreamFormat(48000, 2)


def test_nothing_supported_gives_none() -> None:
    assert choose_stream_format(lambda rate, ch: False, 48000, 2) is None
    asked: list[int] = []
    choose_stream_format(lambda rate, ch: asked.append(ch) or False, 48000, 1)
    assert set(asked) == {1}  # never asks a mono device for stereo


# --------------------------------------------------------------------------- conversion


def test_chunked_resampling_equals_one_shot_resampling() -> None:
    source = tone(440, 1.0, rate=44100)
    whole = PcmConverter(44100, 24000).convert(source)
    chunked = PcmConverter(44100, 24000)
    step = 882 * 2  # 20 ms at 44.1 kHz
    pieces = b"".join(chunked.convert(source[i : i + step]) for i in range(0, len(source), step))
    assert pieces == whole
    assert abs(len(whole) / 2 - 24000) <= 1
    assert dominant_frequency(whole, 24000) == pytest.approx(440, abs=5)


def test_stereo_device_audio_is_downmixed_and_speaker_audio_upmixed() -> None:
    stereo = tone(300, 0.1, rate=24000, channels=2)
    mono = PcmConverter(24000, 24000, in_channels=2, out_channels=1).convert(stereo)
    assert mono == tone(300, 0.1, rate=24000)
    assert PcmConverter(24000, 24000, in_channels=1, out_channels=2).convert(mono) == stereo


# --------------------------------------------------------------------------- PortAudio device list (fake pa)


class FakePortAudio:
    def __init__(self, infos: list[dict], default_in: int | None, default_out: int | None) -> None:
        self.infos, self.default_in, self.default_out = infos, default_in, default_out

    def get_device_count(self) -> int:
        return len(self.infos)

    def get_device_info_by_index(self, index: int) -> dict:
        return self.infos[index]

    def get_default_input_device_info(self) -> dict:
        if self.default_in is None:
            raise OSError("No Default Input Device Available")
        return self.infos[self.default_in]

    def get_default_output_device_info(self) -> dict:
        if self.default_out is None:
            raise OSError("No Default Output Device Available")
        return self.infos[self.default_out]


def _info(index: int, name: str, ins: int, outs: int, rate: float) -> dict:
    return {
        "index": index, "name": name,
        "maxInputChannels": ins, "maxOutputChannels": outs, "defaultSampleRate": rate,
    }


def test_list_devices_marks_defaults_and_survives_missing_ones() -> None:
    pa = FakePortAudio([_info(0, "mic", 1, 0, 48000.0), _info(1, "speakers", 0, 2, 44100.0)], 0, None)
    devices = list_devices(pa)
    assert devices == [
        AudioDevice(0, "mic", 1, 0, 48000, is_default_input=True),
        AudioDevice(1, "speakers", 0, 2, 44100),
    ]
    listing = format_device_list(devices)
    assert "* " in listing.splitlines()[1] and "mic" in listing.splitlines()[1]
    assert "48000 Hz" in listing and "speakers" in listing


def test_listing_with_no_devices_is_one_clear_line() -> None:
    assert format_device_list([]) == NO_DEVICES_LINE
    listing = format_device_list(list_devices(FakePortAudio([], None, None)))
    assert listing.startswith("no audio devices found")


# --------------------------------------------------------------------------- thread boundary (fake stream)


class FakeStream:
    """Stands in for a PortAudio stream; the test calls the callback from its own thread."""

    def __init__(self, callback) -> None:  # type: ignore[no-untyped-def]
        self.callback = callback
        self.active = False
        self.stopped = False

    def start_stream(self) -> None:
        self.active = True

    def get_input_latency(self) -> float:
        return 0.01

    def get_output_latency(self) -> float:
        return 0.01

    def is_active(self) -> bool:
        return self.active

    def stop_stream(self) -> None:
        self.stopped = True
        self.active = False

    def close(self) -> None:
        pass


class FakePyAudio:
    def __init__(self) -> None:
        self.streams: list[FakeStream] = []
        self.terminated = False

    def terminate(self) -> None:
        self.terminated = True


@pytest.fixture
def fake_device(monkeypatch):  # type: ignore[no-untyped-def]
    pa = FakePyAudio()
    device = AudioDevice(7, "fake", 2, 2, 48000, True, True)

    def open_stream(kind, spec, buffer_ms, callback):  # type: ignore[no-untyped-def]
        pa.streams.append(FakeStream(callback))
        return portaudio._DeviceStream(pa, pa.streams[-1], device, StreamFormat(24000, 1))

    monkeypatch.setattr(portaudio, "_open_stream", open_stream)
    return pa


def _from_device_thread(fn, *args):  # type: ignore[no-untyped-def]
    result: list = []
    thread = threading.Thread(target=lambda: result.append(fn(*args)))
    thread.start()
    thread.join()
    return result[0]


async def test_microphone_delivers_callback_audio_in_order_and_close_ends_chunks(fake_device) -> None:
    mic = PyAudioMicrophone(None)
    await mic.start()
    stream = fake_device.streams[0]
    pieces = [noise(0.02, seed) for seed in range(5)]
    for piece in pieces:
        assert _from_device_thread(stream.callback, piece, 480, {}, 0) == (None, 0)
    chunks = mic.chunks()
    assert [await anext(chunks) for _ in pieces] == pieces
    await mic.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(chunks), 5)
    assert stream.stopped and fake_device.terminated


async def test_a_device_read_40_ms_at_a_time_is_handed_on_in_20_ms_chunks_each_stamped(fake_device) -> None:
    mic = PyAudioMicrophone(None, chunk_ms=20, read_ms=40)
    await mic.start()
    reads = [noise(0.04, seed) for seed in range(3)]
    for read in reads:
        _from_device_thread(fake_device.streams[0].callback, read, 960, {}, 0)
    chunks = mic.chunks()
    got, stamps = [], []
    for _ in range(6):
        got.append(await anext(chunks))
        stamps.append(mic.captured_at)
    assert got == [read[half:half + 960] for read in reads for half in (0, 960)]
    assert all(abs(stamps[i + 1] - stamps[i] - 0.02) < 1e-9 for i in range(0, 6, 2))  # the second half: 20 ms on
    await mic.close()


async def test_a_silent_rooms_device_reads_cross_to_the_loop_two_at_a_time_and_a_sound_at_once(fake_device, monkeypatch) -> None:
    """Issue 34: after the room has been silent a while (here 0.2 s), a quiet callback's audio waits
    for the next callback: one wake-up of the loop for two reads. A louder read crosses at once,
    with what was held; every chunk arrives, in order, with its own capture time."""
    from audio_io.format import audioop
    from audio_io.quiet_reads import QuietReads

    sent: list[int] = []
    send = portaudio._LoopBridge.send
    monkeypatch.setattr(portaudio._LoopBridge, "send", lambda self, fn, reads: (sent.append(len(reads)), send(self, fn, reads)))
    mic = PyAudioMicrophone(None, chunk_ms=20, read_ms=40, quiet=QuietReads(20, 0.2, 2))
    await mic.start()
    reads = [audioop.mul(noise(0.04, seed), 2, 0.0005) for seed in range(10)] + [noise(0.04, 10)]  # 0.4 s of hiss, a sound
    called_at = []
    for read in reads:
        called_at.append(portaudio.time.monotonic())
        _from_device_thread(fake_device.streams[0].callback, read, 960, {}, 0)
    assert sent == [1] * 5 + [2, 2, 2]  # 0.2 s each read alone; then two by two; the sound at once, after the one held
    chunks = mic.chunks()
    got, stamps = [], []
    for _ in range(2 * len(reads)):
        got.append(await anext(chunks))
        stamps.append(mic.captured_at)
    assert got == [read[half:half + 960] for read in reads for half in (0, 960)]
    assert all(called_at[i // 2] - 0.05 < stamps[i] < called_at[i // 2] + 1 for i in range(0, len(got), 2))  # each read its own time
    await mic.close()


async def test_microphone_reports_a_device_that_stopped(fake_device) -> None:
    mic = PyAudioMicrophone(None, stall_timeout_s=0.01)
    await mic.start()
    fake_device.streams[0].active = False  # PortAudio ended the stream: unplugged
    with pytest.raises(AudioDeviceError, match="stopped delivering audio"):
        await asyncio.wait_for(anext(mic.chunks()), 5)
    await mic.close()


async def test_microphone_queue_is_bounded_and_keeps_the_newest_audio(fake_device) -> None:
    mic = PyAudioMicrophone(None, chunk_ms=20, max_queued_s=0.1)  # room for 5 chunks
    await mic.start()
    pieces = [noise(0.02, seed) for seed in range(8)]
    for piece in pieces:
        _from_device_thread(fake_device.streams[0].callback, piece, 480, {}, 0)
    chunks = mic.chunks()
    assert [await anext(chunks) for _ in range(5)] == pieces[3:]
    await mic.close()


async def test_speaker_drained_waits_for_the_callback_to_take_everything(fake_device) -> None:
    speaker = PyAudioSpeaker(None)
    await speaker.start()
    callback = fake_device.streams[0].callback
    audio = noise(0.05, 1)  # 1200 frames: three callbacks of 480
    speaker.play(audio)
    waiter = asyncio.create_task(speaker.drained())
    taken = b""
    for _ in range(2):
        data, _ = _from_device_thread(callback, None, 480, {}, 0)
        taken += data
        await asyncio.sleep(0)
        assert not waiter.done()
    no_latency = {"output_buffer_dac_time": 0.0, "current_time": 0.0}
    data, _ = _from_device_thread(callback, None, 480, no_latency, 0)
    taken += data
    await asyncio.wait_for(waiter, 5)
    assert taken[: len(audio)] == audio and taken[len(audio) :] == bytes(len(taken) - len(audio))
    await speaker.close()


async def test_speaker_flush_drops_queued_audio_and_releases_drained(fake_device) -> None:
    speaker = PyAudioSpeaker(None)
    await speaker.start()
    callback = fake_device.streams[0].callback
    speaker.play(noise(1.0, 2))
    waiter = asyncio.create_task(speaker.drained())
    await asyncio.sleep(0)
    assert not waiter.done()
    speaker.flush()
    await asyncio.wait_for(waiter, 5)
    data, _ = _from_device_thread(callback, None, 480, {}, 0)
    assert data == bytes(960)  # nothing of the flushed audio is played
    await speaker.close()


async def test_speaker_ignores_a_stale_ran_dry_signal_after_new_audio(fake_device) -> None:
    speaker = PyAudioSpeaker(None)
    await speaker.start()
    callback = fake_device.streams[0].callback
    speaker.play(noise(0.02, 3))
    # The callback empties the buffer; its "ran dry" signal is still on its way to the loop
    # when the next play() arrives: that signal must not mark the speaker drained.
    _from_device_thread(callback, None, 480, {}, 0)
    speaker.play(noise(0.02, 4))
    for _ in range(3):  # let the loop run the stale signal
        await asyncio.sleep(0)
    waiter = asyncio.create_task(speaker.drained())
    await asyncio.sleep(0)
    assert not waiter.done()
    _from_device_thread(callback, None, 480, {}, 0)
    await asyncio.wait_for(waiter, 5)
    await speaker.close()


async def test_speaker_play_before_start_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="start"):
        PyAudioSpeaker(None).play(b"\0\0")


# --------------------------------------------------------------------------- real pyaudio through ALSA


@pytest.fixture
def pyaudio_available() -> None:
    import pyaudio  # noqa: F401  (a requirement: missing, these tests fail rather than skip)


def test_microphone_captures_the_device_audio_byte_for_byte(tmp_path, pyaudio_available) -> None:
    spoken = noise(1.0, seed=11)
    alsa = alsa_file_device(tmp_path, spoken)
    out = tmp_path / "captured.raw"
    result = run_scenario(alsa.env, "capture", "--bytes", str(len(spoken)), "--out", str(out))
    assert result == {"device": "default", "rate": 24000, "channels": 1, "stderr": ""}
    assert out.read_bytes()[: len(spoken)] == spoken


def test_speaker_output_reaches_the_device_byte_for_byte(tmp_path, pyaudio_available) -> None:
    answer = noise(0.5, seed=12)
    alsa = alsa_file_device(tmp_path, b"")
    pcm = tmp_path / "answer.raw"
    pcm.write_bytes(answer)
    result = run_scenario(alsa.env, "play", "--pcm", str(pcm))
    assert result["rate"] == 24000
    written = alsa.speaker.read_bytes()
    start = written.find(answer)
    assert start >= 0, "the played audio is not in what the device received"
    assert written[:start] == bytes(start)  # silence before: the stream idles with zeros
    assert written[start + len(answer) :] == bytes(len(written) - start - len(answer))


def test_microphone_without_24khz_resamples_the_device_rate(tmp_path, pyaudio_available) -> None:
    seconds = 1.5
    alsa = alsa_file_device(tmp_path, tone(440, seconds, rate=44100) + bytes(int(0.5 * 44100) * 2))
    out = tmp_path / "captured.raw"
    wanted = int(1.9 * 24000) * 2  # into the silence after the tone (the file plugin then starts over)
    result = run_scenario(alsa.env, "capture", "--bytes", str(wanted), "--out", str(out), "--refuse-24k")
    assert (result["rate"], result["channels"]) == (44100, 1)
    captured = out.read_bytes()
    sound = strip_silence(captured)
    assert len(sound) / 2 / 24000 == pytest.approx(seconds, abs=0.01)
    # At the wrong rate the same samples would read as 440 * 44100 / 24000 = 808 Hz.
    assert dominant_frequency(sound, 24000) == pytest.approx(440, abs=5)
    assert rms(sound) == pytest.approx(rms(tone(440, seconds)), rel=0.05)


def test_speaker_without_24khz_resamples_to_the_device_rate(tmp_path, pyaudio_available) -> None:
    seconds = 0.8
    alsa = alsa_file_device(tmp_path, b"")
    pcm = tmp_path / "answer.raw"
    pcm.write_bytes(tone(330, seconds))
    result = run_scenario(alsa.env, "play", "--pcm", str(pcm), "--refuse-24k")
    assert result["rate"] == 44100
    sound = strip_silence(alsa.speaker.read_bytes())
    assert len(sound) / 2 / 44100 == pytest.approx(seconds, abs=0.01)
    assert dominant_frequency(sound, 44100) == pytest.approx(330, abs=5)
    assert rms(sound) == pytest.approx(rms(tone(330, seconds)), rel=0.05)


def test_devices_are_chosen_by_index_or_name_through_portaudio(tmp_path, pyaudio_available) -> None:
    alsa = alsa_file_device(tmp_path, b"")
    result = run_scenario(alsa.env, "select", "-", "0", "DEFAU", "no such mic")
    for kind in ("input", "output"):
        for spec in ("-", "0", "DEFAU"):
            assert result[f"{kind}:{spec}"] == {"ok": "default", "index": 0}
        failure = result[f"{kind}:no such mic"]
        assert failure["type"] == "NoAudioDeviceError"
        assert "'no such mic'" in failure["error"] and "0 'default'" in failure["error"]


def test_devices_command_lists_the_default_device(tmp_path, pyaudio_available) -> None:
    alsa = alsa_file_device(tmp_path, b"")
    result = run_scenario(alsa.env, "devices")
    assert result["exit"] == 0 and result["stderr"] == ""
    lines = result["stdout"].splitlines()
    assert lines[0].startswith("Input devices")
    assert lines[1].split() == ["*", "0", "default", "(128", "channels,", "44100", "Hz)"]
    assert any(line.startswith("Output devices") for line in lines)


@pytest.mark.skipif(has_sound_card(), reason="this machine has a sound card, so PortAudio does see devices")
def test_no_devices_gives_clear_messages_not_crashes(tmp_path, pyaudio_available) -> None:
    env = alsa_without_devices(tmp_path)
    listing = run_scenario(env, "devices")
    # Without a card ALSA and JACK complain loudly while PortAudio starts; none of it may show.
    assert listing == {"exit": 0, "stdout": NO_DEVICES_LINE + "\n", "stderr": ""}
    result = run_scenario(env, "select", "-")
    assert result["input:-"] == {"error": portaudio.NO_INPUT_DEVICE, "type": "NoAudioDeviceError"}
    assert result["output:-"] == {"error": portaudio.NO_OUTPUT_DEVICE, "type": "NoAudioDeviceError"}


def test_echo_cancellers_stream_delay_is_the_devices_latency_from_portaudios_timestamps(tmp_path, pyaudio_available) -> None:
    """The canceller's stream delay (output latency + input latency) comes from PortAudio: the
    stream's reported latencies where the callbacks' timestamps say nothing (ALSA's file plugin
    stamps every buffer at the current time), and the timestamps where they say something (here
    shifted by 35 ms before the input callback and 45 ms after the output one, as a sound card's are)."""
    alsa = alsa_file_device(tmp_path, noise(2.0, seed=13))
    plain = run_scenario(alsa.env, "latency")
    assert plain["reported"] == pytest.approx([0.02, 0.02], abs=0.005)  # the file plugin's 20 ms buffers
    assert plain["stamps"] == pytest.approx([0.0, 0.0])  # its timestamps: all "now"
    assert plain["delay_ms"] == round(1000 * sum(plain["reported"]))
    shifted = run_scenario(alsa.env, "latency", "--shift-ms", "35,45")
    assert shifted["stamps"] == pytest.approx([0.035, 0.045], abs=0.001)
    assert shifted["delay_ms"] == 80  # 35 + 45: from the timestamps, not the reported 20 + 20
