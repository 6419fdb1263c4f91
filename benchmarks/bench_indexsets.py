"""Index set speed: formatting and parsing 20,000 members (a status's index sets at fleet size).

The worst case is every other index (20,000 single terms, no ranges); beside it the best, one
range of 20,000. Each is formatted then parsed back ``--repeat`` times; printed: the median
and worst time of the round trip, and the string's length. The tests
(``tests/property/test_indexsets.py``) assert the round trip gives the set back, never how
fast: timing lives here. Run::

    .venv/bin/python benchmarks/bench_indexsets.py [--members 20000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from omenative_core.status import format_index_set, parse_index_set


def round_trip(members: list[int], repeat: int) -> tuple[list[float], int]:
    """Seconds of each format + parse of ``members``; the formatted length."""
    times = []
    text = ""
    for _ in range(repeat):
        start = time.perf_counter()
        text = format_index_set(members)
        back = parse_index_set(text)
        times.append(time.perf_counter() - start)
        if back != tuple(members):
            raise AssertionError("the round trip changed the set")
    return times, len(text)


def main() -> int:
    """Time both shapes and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    shapes = {"every other index": list(range(0, 2 * args.members, 2)),
              "one range": list(range(args.members))}
    print(f"{'members':>8} {'shape':<18} {'chars':>8} {'median ms':>10} {'worst ms':>9}")
    for name, members in shapes.items():
        times, chars = round_trip(members, args.repeat)
        print(f"{len(members):>8,} {name:<18} {chars:>8,} {statistics.median(times) * 1e3:>10.2f}"
              f" {max(times) * 1e3:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
