"""The README's set-up: what it does on a machine that lacks system packages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def shim_path(tmp_path: Path, *, uid: int, hide: set[str]) -> str:
    """A PATH with the tools the script needs, minus `hide`, and an `id` that reports `uid`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "dirname", "cat", "cut", "rm", "sha256sum", "gcc", "espeak-ng", "flite", "text2wave", "sox", "apt-get",
                 "chromium", "chromedriver"):  # (--dev: the browser tests')
        real = shutil.which(tool)
        if real and tool not in hide:
            (bin_dir / tool).symlink_to(real)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "id").chmod(0o755)
    return str(bin_dir)


def run_setup(tmp_path: Path, path: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "HOME": str(tmp_path), "HANDOFF_PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "setup.sh"), "--dev"], env=env, capture_output=True, text=True, timeout=120
    )


def test_without_root_it_stops_with_the_exact_apt_line(tmp_path):
    result = run_setup(tmp_path, shim_path(tmp_path, uid=1000, hide={"espeak-ng", "sox"}))
    assert result.returncode == 1
    assert "Run: sudo apt-get install -y espeak-ng sox" in result.stderr, result.stderr
    assert not (tmp_path / ".venv").exists()


def test_as_root_it_installs_the_missing_packages_with_apt(tmp_path):
    # apt-get is a stand-in that records its arguments; nothing is installed for real.
    path = shim_path(tmp_path, uid=0, hide={"espeak-ng", "apt-get"})
    log = tmp_path / "apt.log"
    fake_apt = Path(path) / "apt-get"
    # `update` succeeds; `install` fails, so the script must stop right after it.
    fake_apt.write_text(f'#!/bin/sh\necho "$@" >> {log}\ncase "$*" in *" update "*) exit 0;; *) exit 7;; esac\n')
    fake_apt.chmod(0o755)
    result = run_setup(tmp_path, path)
    calls = log.read_text().splitlines()
    # Both wait for another apt-get's lock instead of failing at once (exit 100).
    assert calls[0] == "-o DPkg::Lock::Timeout=120 update -qq"
    assert calls[1].startswith("-o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends")
    assert calls[1].split()[6] == "espeak-ng"
    present = {"sox", "gcc"}  # on PATH: not asked for
    assert not present & set(calls[1].split()[6:])
    assert result.returncode == 1  # the stand-in failed, and the script does not carry on regardless
    assert "installing system packages: espeak-ng" in result.stderr
    assert "If another package manager was" in result.stderr and "apt-get install -y espeak-ng" in result.stderr


def test_a_too_old_python_is_named(tmp_path):
    fake_python = tmp_path / "python3"
    fake_python.write_text("#!/bin/sh\ncase \"$1\" in --version) echo 'Python 3.9.2';; *) exit 1;; esac\n")
    fake_python.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HANDOFF_PYTHON": str(fake_python)}
    result = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh")], env=env, capture_output=True, text=True)
    assert result.returncode == 1 and "Python 3.11 or newer; Python 3.9.2 found" in result.stderr


def fake_checkout(tmp_path: Path, fails: str = "") -> tuple[Path, Path]:
    """A copy of the script and the requirement files, with a .venv whose python only records
    the pip and uv commands it is given (nothing is installed) and fails those matching the shell
    pattern `fails`, and a .venv-satellite taken as made."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    for name in ("requirements.txt", "constraints.txt", "pyproject.toml", "requirements-dev.txt"):
        shutil.copy(REPO / name, root / name)
    (root / ".venv" / "bin").mkdir(parents=True)
    calls = tmp_path / "pip.log"
    python = root / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncase "$*" in {fails or "-"}) exit 3;; esac\n')
    python.chmod(0o755)
    # The satellite's own venv (--dev) as if made: its python imports anything. Not what is counted
    # here, and making a real one took over a minute of the test (a venv, pip, five packages).
    satellite = root / ".venv-satellite" / "bin" / "python"
    satellite.parent.mkdir(parents=True)
    satellite.write_text("#!/bin/sh\nexit 0\n")
    satellite.chmod(0o755)
    return root, calls


def test_test_and_run_in_turn_install_nothing_again(tmp_path):
    """./test (--dev) then ./run (plain) then ./test ...: one install, not one each time."""
    root, calls = fake_checkout(tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HANDOFF_PYTHON": sys.executable}

    def setup(*args: str) -> int:
        subprocess.run(["bash", str(root / "scripts" / "setup.sh"), *args], env=env, check=True, capture_output=True)
        return sum(" install " in line for line in calls.read_text().splitlines()) if calls.exists() else 0

    assert setup("--dev") == 3  # uv, then the requirements and the project itself
    assert [setup(), setup("--dev"), setup(), setup("--dev")] == [3, 3, 3, 3]
    (root / "requirements.txt").write_text((root / "requirements.txt").read_text() + "\n# changed\n")
    assert setup() == 6  # the requirements changed: installed again ...
    assert setup() == 6  # ... once
    assert setup("--dev") == 9


def installs(calls: Path) -> list[str]:
    """Each install's tool and what it installed: uv itself, the requirements or the project."""
    said = []
    for line in filter(lambda line: " install " in line, calls.read_text().splitlines()):
        tool = "uv" if line.startswith("-m uv pip install") else "pip"
        what = "requirements" if " -r " in line else "project" if " -e " in line else line.split()[-1]
        said.append(f"{tool}: {what}")
    return said


def test_uv_installs_the_packages_and_pip_does_when_uv_cannot_be_had_or_fails(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HANDOFF_PYTHON": sys.executable}
    for fails, said in [
        ("", ["pip: uv", "uv: project", "uv: requirements"]),
        ("*constraints.txt?uv", ["pip: uv", "pip: project", "pip: requirements"]),  # no uv on the index
        ("*-m?uv*--no-compile*", ["pip: uv", "uv: project", "uv: requirements", "pip: requirements"]),  # uv could not
    ]:
        root, calls = fake_checkout(tmp_path / f"case{len(fails)}", fails)
        result = subprocess.run(["bash", str(root / "scripts" / "setup.sh"), "--dev"], env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert sorted(installs(calls)) == sorted(said), calls.read_text()  # (the project's install runs beside)
        assert (root / ".venv" / ".handoff-stamp-1").exists()


def test_a_failed_install_beside_the_requirements_stops_the_set_up_and_is_tried_again(tmp_path):
    """The project's own install runs beside the requirements': when it fails the set-up says so
    and fails, and nothing is stamped as installed, so the next ./test installs again."""
    root, calls = fake_checkout(tmp_path)
    python = root / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncase "$*" in *" -e "*) exit 3;; esac\n')  # (uv is had)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HANDOFF_PYTHON": sys.executable}
    result = subprocess.run(["bash", str(root / "scripts" / "setup.sh"), "--dev"], env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "installing handoff itself (pip install -e .) failed" in result.stderr, result.stderr
    assert not list((root / ".venv").glob(".handoff-stamp-*"))
    again = subprocess.run(["bash", str(root / "scripts" / "setup.sh"), "--dev"], env=env, capture_output=True, text=True)
    assert again.returncode == 1
    assert sum(" install " in line and " uv" not in line[-4:] for line in calls.read_text().splitlines()) == 4  # both, twice


def test_what_the_set_up_leaves_uncompiled_is_nothing_a_running_assistant_imports() -> None:
    # The set-up compiles the packages once, for every later process (a machine may forbid Python
    # to write bytecode: then whatever is left out is compiled again at every start).
    script = (REPO / "scripts" / "setup.sh").read_text()
    left_out = re.compile(re.search(r"-m compileall -q -j 0 \\\n\s+-x '([^']+)'", script).group(1))
    code = ("import sys, assembly.build, commands.run, commands.checks, rooms.hub, brain, pytest\n"
            "print('\\n'.join(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))")
    imported = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    packaged = [f for f in imported.stdout.split() if "/site-packages/" in f and f.endswith(".py")]
    assert len(packaged) > 500  # (openai, pydantic, numpy, ...: the sample is real)
    assert [f for f in packaged if left_out.search(f)] == []
    # ... and what it leaves out is there to leave out.
    site = Path(packaged[0][: packaged[0].index("/site-packages/") + len("/site-packages/")])
    assert left_out.search(str(site / "pip" / "__init__.py")) and left_out.search(str(site / "numpy" / "tests" / "test_x.py"))


def test_the_test_command_compiles_the_code_but_leaves_test_modules_to_pytest() -> None:
    line = re.search(r"-m compileall -q -j 0 -x '([^']+)' (\S+)", (REPO / "test").read_text())
    left_out = re.compile(line.group(1))
    # It compiles "." (paths as compileall sees them), so a clone inside a dot-folder is compiled too.
    assert line.group(2) == "."
    kept = ["handoff.py", "detectors/wake_model.py", "tests/support/daemon.py", "tests/benchmarks/__init__.py", "benchmarks/spawned.py"]
    assert [p for p in kept if left_out.search(f"./{p}")] == [] and all((REPO / p).exists() for p in kept)
    assert left_out.search("./tests/test_types.py") and left_out.search("./tests/rooms/test_rooms.py")
    assert left_out.search("./.venv/lib/x.py")
