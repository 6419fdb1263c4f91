"""Regenerate the generated sections of docs/ from the code (``make docs``).

Two sections, each rendered between its marker comments: the Instance lifecycle table of
``docs/lifecycle.md`` (``omenative_core.lifecycle.render_table``) and the rollout-group
transitions of ``docs/rollout-groups.md`` (``omenative_core.rollout.machine.render_table``).
``--check`` writes nothing and exits 1 when a committed section is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from omenative_core.lifecycle import render_table
from omenative_core.rollout.machine import render_table as render_transitions

ROOT = Path(__file__).resolve().parents[1]
LIFECYCLE_DOC = ROOT / "docs" / "lifecycle.md"
BEGIN = "<!-- BEGIN GENERATED: lifecycle table (make docs) -->"
END = "<!-- END GENERATED: lifecycle table -->"
ROLLOUT_DOC = ROOT / "docs" / "rollout-groups.md"
ROLLOUT_BEGIN = "<!-- BEGIN GENERATED: rollout transitions (make docs) -->"
ROLLOUT_END = "<!-- END GENERATED: rollout transitions -->"

SECTIONS: tuple[tuple[Path, str, str, Callable[[], str]], ...] = (
    (LIFECYCLE_DOC, BEGIN, END, render_table),
    (ROLLOUT_DOC, ROLLOUT_BEGIN, ROLLOUT_END, render_transitions),
)
"""Each generated section: its document, its markers and the function that renders it."""


def splice(text: str, section: str, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with the part between the markers replaced by ``section``."""
    head, sep, rest = text.partition(begin)
    if not sep or end not in rest:
        raise SystemExit(f"the markers {begin!r} and {end!r} are missing")
    tail = rest.split(end, 1)[1]
    return f"{head}{begin}\n{section}{end}{tail}"


def main() -> int:
    """Rewrite (or with ``--check`` compare) every generated section."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a section is stale")
    args = parser.parse_args()
    stale = 0
    for doc, begin, end, render in SECTIONS:
        old = doc.read_text()
        new = splice(old, render(), begin, end)
        if new == old:
            continue
        if args.check:
            print(f"{doc} is stale: run `make docs`", file=sys.stderr)
            stale = 1
            continue
        doc.write_text(new)
        print(f"wrote {doc}")
    return stale


if __name__ == "__main__":
    sys.exit(main())
