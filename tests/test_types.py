"""The type checker over the whole product, the decision cores strictly (pyproject.toml's
[tool.mypy]): a missing method or a wrong argument is caught here, not in a room at night."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)  # a fresh clone has no mypy cache: over two minutes beside CPU hogs
def test_the_product_type_checks() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "."], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_type_checker_finds_what_it_is_for(tmp_path: Path) -> None:
    # A shell calling a method its part lacks (the MicFilter.command_heard kind of slip).
    (tmp_path / "slip.py").write_text("class MicFilter:\n    pass\n\n\ndef heard(f: MicFilter) -> None:\n    f.command_heard()\n")
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "slip.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 1 and '"MicFilter" has no attribute "command_heard"' in result.stdout
