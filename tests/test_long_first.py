"""The suite's order under xdist: the long tests run early in each worker's slice (tests.support.long_first)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.long_first import LONG_TESTS, long_first, read_long_tests, slice_sizes

REPO = Path(__file__).resolve().parents[1]


def test_the_slices_are_the_ones_worksteal_hands_out():
    assert slice_sizes(1724, 5) == [344, 345, 345, 345, 345]
    assert slice_sizes(3, 5) == [0, 0, 1, 1, 1]


def test_each_slice_runs_its_share_of_the_long_tests_early_and_nothing_is_lost():
    items = [f"t{i}" for i in range(20)]
    long = {"t19": 100.0, "t18": 90.0, "t3": 80.0, "t17": 30.0, "t16": 20.0, "t15": 10.0}
    ordered = long_first(items, str, long, workers=3)
    assert sorted(ordered) == sorted(items)
    slices = [ordered[0:6], ordered[6:13], ordered[13:20]]  # slice_sizes(20, 3) == [6, 7, 7]
    # Longest first, each to the slice with the least long work so far.
    assert [[t for t in s if t in long] for s in slices] == [["t19", "t15"], ["t18", "t16"], ["t3", "t17"]]
    assert slices[0] == ["t19", "t15", "t0", "t1", "t2", "t4"]
    # Among many short ones, the long ones are spread over the first third of the slice.
    assert long_first([f"t{i}" for i in range(12)], str, {"t11": 5.0, "t10": 4.0}, workers=1)[:4] == ["t11", "t0", "t10", "t1"]
    # The others keep their collection order.
    rest = [t for t in ordered if t not in long]
    assert rest == [t for t in items if t not in long]


def test_every_listed_long_test_exists():
    """A renamed test would silently lose its place at the front."""
    missing = []
    for node_id in read_long_tests(LONG_TESTS):
        path, name = node_id.split("::")
        tree = ast.parse((REPO / path).read_text())
        functions = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if name.split("[")[0] not in functions:
            missing.append(node_id)
    assert not missing, missing
