"""The systemd user unit: rendered, verified by systemd-analyze where systemd is installed, and
`handoff service install` writes it and says what to run next (issue 13, part 4)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from commands import cli
from service.systemd import UnitSettings, render_unit, unit_path


def unit_for(tmp_path: Path, exec_start: tuple[str, ...] = ("/usr/bin/true", "run")) -> str:
    return render_unit(UnitSettings(exec_start=exec_start, working_directory=tmp_path))


def fields(unit: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))


def test_the_unit_has_what_a_service_needs(tmp_path: Path) -> None:
    unit = fields(unit_for(tmp_path / "my home"))
    assert unit["Type"] == "notify" and unit["NotifyAccess"] == "main"
    assert unit["ExecStart"] == "/usr/bin/true run" and unit["WorkingDirectory"] == str(tmp_path / "my home")
    assert unit["Restart"] == "on-failure" and unit["RestartPreventExitStatus"] == "2"
    assert (unit["StartLimitIntervalSec"], unit["StartLimitBurst"], unit["WatchdogSec"]) == ("600", "5", "60")
    assert unit["TimeoutStartSec"] == "300"  # ready comes with the first listener session
    assert unit["KillMode"] == "mixed"  # SIGTERM to handoff alone: it stops its tasks itself
    assert int(unit["LimitNOFILE"]) >= 65536  # systemd's 1,024 ran out under a connection flood (issue 27)
    assert unit["WantedBy"] == "default.target"


def test_exec_start_words_are_quoted_and_specifiers_escaped(tmp_path: Path) -> None:
    unit = fields(unit_for(tmp_path, ("/opt/my handoff/bin/handoff", "run", "--state-dir", "/srv/100%")))
    assert unit["ExecStart"] == '"/opt/my handoff/bin/handoff" run --state-dir /srv/100%%'


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd is not installed (apt-get install systemd)")
def test_systemd_analyze_verify_passes(tmp_path: Path) -> None:
    path = tmp_path / "handoff.service"
    path.write_text(unit_for(tmp_path, (shutil.which("true") or "/usr/bin/true", "run")))
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, timeout=60)
    complaints = [line for line in (result.stdout + result.stderr).splitlines() if "handoff.service" in line]
    assert result.returncode == 0 and not complaints, result.stdout + result.stderr


def test_install_writes_the_unit_and_says_what_to_run_next(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "home").mkdir()
    assert cli.main(["service", "install", "--working-directory", str(tmp_path / "home")]) == 0
    out = capsys.readouterr().out
    path = tmp_path / "config" / "systemd" / "user" / "handoff.service"
    assert path == unit_path() and path.is_file()
    assert out.startswith(f"Wrote {path} (runs `handoff run` in {tmp_path / 'home'}).")
    for command in ("systemctl --user daemon-reload", "systemctl --user enable --now handoff", "loginctl enable-linger"):
        assert command in out
    assert "does not exist yet" in out  # no .env there: the key would be missing
    exec_start = fields(path.read_text())["ExecStart"]
    assert exec_start.endswith(" run") and Path(exec_start.split()[0].strip('"')).is_absolute()
    assert cli.main(["service", "install", "--working-directory", str(tmp_path / "home")]) == 0
    assert capsys.readouterr().out.startswith(f"Replaced {path}")


def test_print_only_shows_the_unit(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert cli.main(["service", "install", "--print", "--working-directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("# handoff, the voice assistant") and "Type=notify" in out
    assert not (tmp_path / "config").exists()  # nothing written


def test_install_into_a_folder_that_is_not_one(tmp_path: Path, capsys) -> None:
    assert cli.main(["service", "install", "--working-directory", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"handoff service: --working-directory {tmp_path / 'nope'} is not a folder; give the folder with your .env."
