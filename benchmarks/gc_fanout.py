"""What a young garbage collection walks: the young objects with the most references
(``OMENATIVE_GCFANOUT=FILE``), written for each young collection that took long.

A young collection visits every reference its young objects hold, and each referent,
young or old, is a memory read (a cache miss when the referent is an old object in a big
cache). So one young container that points at the whole fleet (a list of every pod, a
copied dict of every node) makes each young collection walk the fleet. Before each
collection of generation 0 this counts the references of the objects in it; after it, a
collection over ``SLOW`` s of CPU is written with the count and the containers that held
the most: ``<CLOCK_MONOTONIC end> young <CPU s> <objects> <references> <container>; ...``.
Counting costs about what the collection does: a probed run's timings are not figures.
"""

from __future__ import annotations

import gc
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

SLOW = 0.003
"""A young collection over this (s of the collecting thread's CPU) is written."""

WIDE = 100
"""A young object holding more references than this is named in the line."""

ENV = "OMENATIVE_GCFANOUT"


def _name(obj: object, refs: int) -> str:
    """A young container, named well enough to find where it was made."""
    kind = type(obj).__qualname__
    if isinstance(obj, dict):
        keys = [repr(k)[:40] for k in list(obj)[:3]]
        return f"dict[{len(obj)}]{{{', '.join(keys)}...}} ({refs} refs)"
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = Counter(type(x).__qualname__ for x in list(obj)[:50])
        return f"{kind}[{len(obj)}] of {dict(items.most_common(3))} ({refs} refs)"
    return f"{kind} ({refs} refs)"


class _Counted:
    """What the young generation held when its collection started."""

    def __init__(self) -> None:
        young = gc.get_objects(generation=0)  # the list itself is not among them
        self.objects = len(young)
        self.refs = 0
        kinds: Counter[str] = Counter()
        wide: list[tuple[int, str]] = []
        for obj in young:
            refs = len(gc.get_referents(obj))
            self.refs += refs
            kinds[type(obj).__qualname__] += refs
            if refs > WIDE:
                wide.append((refs, _name(obj, refs)))
        wide.sort(reverse=True, key=lambda row: row[0])
        self.kinds = ", ".join(f"{k} {n}" for k, n in kinds.most_common(5))
        self.widest = "; ".join(text for _, text in wide[:5])
        self.cpu = time.thread_time()  # after counting: the collection's own CPU from here


def install(out: Path) -> Callable[[], None]:
    """Count each young collection's references from now on; returns what undoes it."""
    sink: TextIO = out.open("a", buffering=1)
    counted: list[_Counted] = []  # the collection under way

    def callback(phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 0:
            return
        if phase == "start":
            counted[:] = [_Counted()]
            return
        if not counted:
            return
        last = counted.pop()
        cpu = time.thread_time() - last.cpu
        if cpu > SLOW:
            sink.write(f"{time.monotonic():.3f} young {cpu:.6f} {last.objects} {last.refs} "
                       f"by type: {last.kinds}; widest: {last.widest}\n")

    gc.callbacks.insert(0, callback)

    def undo() -> None:
        gc.callbacks.remove(callback)
        sink.close()

    return undo


def install_from_env() -> None:
    """``install`` into the file ``OMENATIVE_GCFANOUT`` names, when it is set."""
    if value := os.environ.get(ENV):
        install(Path(value))
