"""The suite's long tests start early, one worker's share each (`tests/conftest.py` orders by it).

`pytest -n N --dist worksteal` hands each worker a contiguous slice of the collection (the
first `len // N`, then a fair share of the rest, ...), runs each slice from its start, and lets an
idle worker take the back half of the longest queue. In collection order a two-minute test that
happens to come late in its slice starts in the last minutes and sets the suite's end. Here the
tests in `tests/long_tests.txt` (seconds, node id: measured by `--durations`) are dealt longest
first to the slice with the least long work so far, and run in each slice's first third,
longest first, between its short tests; those keep their collection order. Workers collect
alike, so they order alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence, TypeVar

LONG_TESTS = Path(__file__).resolve().parents[1] / "long_tests.txt"

T = TypeVar("T")


def read_long_tests(path: Path = LONG_TESTS) -> dict[str, float]:
    """{node id: seconds} from lines `seconds node-id` ('#' starts a comment)."""
    long: dict[str, float] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            seconds, node_id = line.split(maxsplit=1)
            long[node_id] = float(seconds)
    return long


def slice_sizes(count: int, workers: int) -> list[int]:
    """How many tests worksteal hands each worker at the start (xdist's `check_schedule`)."""
    sizes: list[int] = []
    for i in range(workers):
        size = (count - sum(sizes)) // (workers - i)
        sizes.append(size)
    return sizes


def long_first(items: Sequence[T], node_id: Callable[[T], str], long: dict[str, float], workers: int) -> list[T]:
    """`items` reordered so each worker's slice starts with its share of the long tests."""
    sizes = slice_sizes(len(items), workers)
    slices: list[list[T]] = [[] for _ in sizes]
    loads = [0.0 for _ in sizes]
    known = sorted((item for item in items if node_id(item) in long), key=lambda item: -long[node_id(item)])
    for item in known:
        room = [i for i in range(workers) if len(slices[i]) < sizes[i]]
        i = min(room, key=lambda i: (loads[i], i))
        slices[i].append(item)
        loads[i] += long[node_id(item)]
    chosen = {id(item) for item in known}
    rest = iter(item for item in items if id(item) not in chosen)
    ordered: list[T] = []
    for part, size in zip(slices, sizes):
        short = [next(rest) for _ in range(size - len(part))]
        # The long ones spread over the first third among the short (not all at once: the
        # heavy tests would then all share the machine together), the rest short only.
        step = len(short) // 3 // max(1, len(part))
        for k, item in enumerate(part):
            ordered.append(item)
            ordered.extend(short[k * step:(k + 1) * step])
        ordered.extend(short[len(part) * step:])
    return ordered
