"""Check how many tests ran against the floors in ``tests/floors.toml``; print the counts.

``scripts/make-test.sh`` runs each test folder with ``--junitxml`` and then calls::

    python scripts/count_tests.py tests/unit=/tmp/unit.xml [tests/property=...]

A test that ran is a JUnit ``testcase`` that was not skipped (an expected failure, xfail,
ran). Exit 1 when a folder ran fewer than its floor, or its report is missing; a folder
without a floor is printed only.
"""

from __future__ import annotations

import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ROOT / "tests" / "floors.toml"


def counts(report: Path) -> dict[str, int]:
    """``ran``, ``skipped``, ``failed`` (failures and errors) in one JUnit XML report."""
    ran = skipped = failed = 0
    for case in ET.parse(report).getroot().iter("testcase"):
        skip = case.find("skipped")
        if skip is not None and skip.get("type") != "pytest.xfail":
            skipped += 1
            continue
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
    return {"ran": ran, "skipped": skipped, "failed": failed}


def floors(path: Path = FLOORS) -> dict[str, int]:
    """Folder -> the fewest tests that must run there."""
    with path.open("rb") as f:
        return {str(k): int(v) for k, v in tomllib.load(f)["floors"].items()}


def check(reports: dict[str, Path], wanted: dict[str, int]) -> list[str]:
    """Print one line per folder; return the problems (empty: every floor met)."""
    problems = []
    for folder, report in reports.items():
        floor = wanted.get(folder)
        if not report.is_file():
            problems.append(f"{folder}: no JUnit report at {report}")
            continue
        got = counts(report)
        verdict = "no floor" if floor is None else (
            f"floor {floor}: " + ("ok" if got["ran"] >= floor else "TOO FEW"))
        print(f"test counts: {folder}: {got['ran']} ran, {got['skipped']} skipped, "
              f"{got['failed']} failed ({verdict})")
        if floor is not None and got["ran"] < floor:
            problems.append(f"{folder}: {got['ran']} tests ran, fewer than its floor {floor} "
                            f"(tests/floors.toml)")
    return problems


def main(argv: list[str]) -> int:
    """``folder=report.xml`` arguments; exit 1 on a missed floor."""
    reports = {}
    for arg in argv:
        folder, sep, path = arg.partition("=")
        if not sep:
            print(f"usage: count_tests.py FOLDER=REPORT.xml ...; got {arg!r}", file=sys.stderr)
            return 2
        reports[folder.rstrip("/")] = Path(path)
    problems = check(reports, floors())
    for p in problems:
        print(f"test counts: FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
