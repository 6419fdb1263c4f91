"""Regenerate the generated sections of docs/ from the code (``make docs``).

Today one section: the Instance lifecycle table of ``docs/lifecycle.md``, rendered by
``omenative_core.lifecycle.render_table`` between the marker comments below.
``--check`` writes nothing and exits 1 when a committed section is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omenative_core.lifecycle import render_table

ROOT = Path(__file__).resolve().parents[1]
LIFECYCLE_DOC = ROOT / "docs" / "lifecycle.md"
BEGIN = "<!-- BEGIN GENERATED: lifecycle table (make docs) -->"
END = "<!-- END GENERATED: lifecycle table -->"


def splice(text: str, section: str) -> str:
    """``text`` with the part between the markers replaced by ``section``."""
    head, sep, rest = text.partition(BEGIN)
    if not sep or END not in rest:
        raise SystemExit(f"{LIFECYCLE_DOC}: the markers {BEGIN!r} and {END!r} are missing")
    tail = rest.split(END, 1)[1]
    return f"{head}{BEGIN}\n{section}{END}{tail}"


def main() -> int:
    """Rewrite (or with ``--check`` compare) every generated section."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a section is stale")
    args = parser.parse_args()
    old = LIFECYCLE_DOC.read_text()
    new = splice(old, render_table())
    if new == old:
        return 0
    if args.check:
        print(f"{LIFECYCLE_DOC} is stale: run `make docs`", file=sys.stderr)
        return 1
    LIFECYCLE_DOC.write_text(new)
    print(f"wrote {LIFECYCLE_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
