"""CI counts the tests that ran in each folder against a floor (``tests/floors.toml``), and an
empty parametrize fails collection: a suite that quietly shrinks does not end green."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import count_tests  # noqa: E402  (scripts/, not a package)


def junit(path: Path, *cases: str) -> Path:
    """A JUnit report of one suite with ``cases`` (``pass``, ``skip``, ``xfail``, ``fail``)."""
    body = {
        "pass": "",
        "skip": '<skipped type="pytest.skip" message="no"/>',
        "xfail": '<skipped type="pytest.xfail" message="known"/>',
        "fail": '<failure message="boom"/>',
    }
    rows = "".join(f'<testcase classname="t" name="c{i}">{body[c]}</testcase>'
                   for i, c in enumerate(cases))
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{rows}'
                    "</testsuite></testsuites>")
    return path


def test_skips_do_not_count_but_expected_failures_and_failures_ran(tmp_path: Path) -> None:
    report = junit(tmp_path / "r.xml", "pass", "pass", "skip", "xfail", "fail")
    assert count_tests.counts(report) == {"ran": 4, "skipped": 1, "failed": 1}


def test_a_folder_below_its_floor_fails_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = {"tests/unit": junit(tmp_path / "u.xml", "pass", "pass", "pass"),
               "tests/property": junit(tmp_path / "p.xml", "pass", "skip", "skip")}
    problems = count_tests.check(reports, {"tests/unit": 3, "tests/property": 2})
    assert problems == ["tests/property: 1 tests ran, fewer than its floor 2 "
                        "(tests/floors.toml)"]
    out = capsys.readouterr().out
    assert "tests/unit: 3 ran, 0 skipped, 0 failed (floor 3: ok)" in out
    assert "tests/property: 1 ran, 2 skipped, 0 failed (floor 2: TOO FEW)" in out


def test_a_missing_report_fails_and_a_subset_without_a_floor_is_printed_only(
    tmp_path: Path
) -> None:
    assert count_tests.main([f"tests/unit={tmp_path / 'none.xml'}"]) == 1
    subset = junit(tmp_path / "s.xml", "pass")
    assert count_tests.main([f"tests/integration/test_helm.py={subset}"]) == 0
    assert count_tests.main(["tests/unit"]) == 2


def test_the_floors_cover_every_test_folder() -> None:
    floors = count_tests.floors()
    assert set(floors) == {"tests/unit", "tests/property", "tests/integration"}
    assert all(n > 100 for n in floors.values()), floors


def test_an_empty_parametrize_fails_collection_with_the_project_config(tmp_path: Path) -> None:
    (tmp_path / "test_empty.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('path', [])\n"
        "def test_each(path):\n"
        "    assert path\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
         str(tmp_path / "test_empty.py")],
        check=False, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode != 0, done.stdout
    assert "Empty parameter set in 'test_each'" in done.stdout, done.stdout
