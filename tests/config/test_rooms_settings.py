"""SATELLITES and the other rooms settings: what is accepted, what is refused and why."""

from __future__ import annotations

import pytest

from config.rooms import NoticesTo, SatelliteSpec, parse_satellites, room_settings


def test_satellites_parse_with_default_port_and_lower_case_rooms() -> None:
    satellites, problems = parse_satellites("Kitchen=tcp://192.168.1.20:10700, office=tcp://10.0.0.7,den=tcp://kitchen.local", False)
    assert problems == []
    assert satellites == (SatelliteSpec("kitchen", "192.168.1.20", 10700), SatelliteSpec("office", "10.0.0.7", 10700),
                          SatelliteSpec("den", "kitchen.local", 10700))


@pytest.mark.parametrize("uri", ["tcp://8.8.8.8:10700", "tcp://[2001:4860::1]:10700"])
def test_a_public_address_is_refused_unless_allowed(uri: str) -> None:
    _, problems = parse_satellites(f"kitchen={uri}", False)
    assert len(problems) == 1 and "SATELLITES_ALLOW_PUBLIC" in problems[0] and "no authentication" in problems[0]
    satellites, problems = parse_satellites(f"kitchen={uri}", True)
    assert problems == [] and len(satellites) == 1


@pytest.mark.parametrize("raw", ["kitchen", "kitchen=http://10.0.0.1", "kitchen=tcp://", "Küche=tcp://10.0.0.1",
                                 "a=tcp://10.0.0.1,a=tcp://10.0.0.2", "kitchen=tcp://10.0.0.1:99999"])
def test_bad_entries_are_one_sentence_each(raw: str) -> None:
    _, problems = parse_satellites(raw, False)
    assert len(problems) == 1


def test_room_settings_defaults_and_problems() -> None:
    problems: list[str] = []
    rooms = room_settings({}, problems)
    assert problems == [] and rooms.satellites == () and rooms.max_sessions == 2
    assert rooms.notices_to is NoticesTo.ORIGIN and rooms.listen.host == "127.0.0.1"  # never inbound by default
    problems = []
    room_settings({"SATELLITES": "kitchen=tcp://10.0.0.1", "NOTICES_TO": "garage", "MAX_REALTIME_SESSIONS": "0",
                   "SATELLITE_RATE": "100"}, problems)
    assert len(problems) == 3, problems
    problems = []
    rooms = room_settings({"SATELLITES": "kitchen=tcp://10.0.0.1", "NOTICES_TO": "kitchen"}, problems)
    assert problems == [] and rooms.notices_to is NoticesTo.ROOM and rooms.notices_room == "kitchen"


def test_a_room_is_paired_unless_marked_unauthenticated() -> None:
    satellites, problems = parse_satellites("kitchen=tcp://10.0.0.5,pi=unauthenticated:tcp://10.0.0.6:10700", False)
    assert problems == []
    assert [(s.room, s.unauthenticated) for s in satellites] == [("kitchen", False), ("pi", True)]
    assert satellites[1].uri == "tcp://10.0.0.6:10700"
