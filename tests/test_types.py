"""The type checker over the whole product, the decision cores strictly (pyproject.toml's
[tool.mypy]): a missing method or a wrong argument is caught here, not in a room at night."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.mypy_cache import KEPT_KEYS, KEYED_BY, LEFTOVER_S, put_back, shared_cache, take_copy

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)  # a machine with no mypy cache yet: over two minutes beside CPU hogs
def test_the_product_type_checks(tmp_path: Path) -> None:
    shared, work = shared_cache(REPO), tmp_path / "mypy-cache"
    take_copy(shared, work)
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(work), "."], cwd=REPO, capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    put_back(work, shared)


def test_the_type_checker_finds_what_it_is_for(tmp_path: Path) -> None:
    # A shell calling a method its part lacks (the MicFilter.command_heard kind of slip).
    (tmp_path / "slip.py").write_text("class MicFilter:\n    pass\n\n\ndef heard(f: MicFilter) -> None:\n    f.command_heard()\n")
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "slip.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 1 and '"MicFilter" has no attribute "command_heard"' in result.stdout


def test_the_shared_cache_is_one_per_set_of_pins_and_is_replaced_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in KEYED_BY:
        (repo / name).write_bytes((REPO / name).read_bytes())
    shared = shared_cache(repo)
    assert shared_cache(repo) == shared and shared.is_relative_to(tmp_path / "cache")
    (repo / "constraints.txt").write_text((REPO / "constraints.txt").read_text() + "mypy==0.0\n")
    other = shared_cache(repo)
    assert other != shared and other.parent == shared.parent

    # No cache yet: the check starts cold.
    take_copy(shared, tmp_path / "cold")
    assert not (tmp_path / "cold").exists()
    # A passed check's cache is put back, whole; the next takes a copy of it.
    (tmp_path / "work1").mkdir()
    (tmp_path / "work1" / "cache.db").write_text("first")
    put_back(tmp_path / "work1", other)
    (tmp_path / "work2").mkdir()
    (tmp_path / "work2" / "cache.db").write_text("second")
    put_back(tmp_path / "work2", shared)
    take_copy(shared, tmp_path / "next")
    assert (tmp_path / "next" / "cache.db").read_text() == "second"
    # ... again: it replaces the last whole (not merged into it), and nothing half-made is left.
    (tmp_path / "work2" / "cache.db").write_text("third")
    (shared / "only-the-second.db").write_text("x")
    put_back(tmp_path / "work2", shared)
    assert sorted(p.name for p in shared.parent.iterdir()) == sorted([shared.name, other.name])
    assert [p.name for p in shared.iterdir()] == ["cache.db"] and (shared / "cache.db").read_text() == "third"
    # A killed run's half-made copy goes once it is old; caches for other pins beyond the newest few go.
    leftover = shared.parent / f".{shared.name}.killed"
    leftover.mkdir()
    os.utime(leftover, (time.time() - 2 * LEFTOVER_S,) * 2)
    for k in range(KEPT_KEYS + 2):
        (shared.parent / f"older{k}").mkdir()
        os.utime(shared.parent / f"older{k}", (time.time() - 100 * (k + 1),) * 2)
    put_back(tmp_path / "work2", shared)
    assert sorted(p.name for p in shared.parent.iterdir()) == sorted([shared.name, other.name, "older0", "older1"])


def test_a_cache_that_cannot_be_written_leaves_the_check_alone(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "home").write_text("a file where the cache's folder would be")
    put_back(tmp_path / "work", tmp_path / "home" / "handoff" / "mypy" / "key")  # no error
    assert (tmp_path / "home").is_file()
