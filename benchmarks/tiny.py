"""Benchmarks at a tiny size: ``--tiny`` on a script's command line (or
``OMENATIVE_BENCH_TINY=1``) makes it run every section on small inputs, so CI runs every
benchmark and a change that breaks one fails CI. A tiny run's figures say nothing about
speed; only its exit code and its printed tables are checked."""

from __future__ import annotations

import os
import sys
from typing import TypeVar

T = TypeVar("T")

TINY = "--tiny" in sys.argv or os.environ.get("OMENATIVE_BENCH_TINY") == "1"
if "--tiny" in sys.argv:  # taken here, so argparse in the scripts never sees it
    sys.argv.remove("--tiny")


def pick(full: T, tiny: T) -> T:
    """``tiny`` in a tiny run, else ``full``."""
    return tiny if TINY else full
