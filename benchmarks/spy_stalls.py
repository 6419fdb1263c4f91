"""What the event loop ran during its longest busy stretches, from a py-spy timeline.

``bench_controller.py --py-spy FILE.json --py-spy-rate 1000`` samples the manager with
``py-spy record --format speedscope --idle``: every sample of every thread, in order, the
idle ones (the loop waiting in ``select``) included. This script finds the loop thread's
stretches of consecutive busy samples, the longest first, and shows for each the
callbacks it ran in order (the frame ``Handle._run`` called) with the deepest frame of
ours each spent its samples in.

It answers what the stall probe (``loop_callbacks.py``) cannot: what *inside* a long
callback took the time. A sample is wall time, so a stretch includes time the OS gave
other processes while the loop was runnable; its length is an upper bound of the hold.

    python benchmarks/spy_stalls.py FILE.json [--top 20] [--min-ms 8] [--flat]

``--flat`` says instead where all the loop thread's busy samples went.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

IDLE = ("EpollSelector.select", "select")
"""Leaf frames of a loop waiting for its sockets and timers."""

OURS = ("omenative_controller", "omenative_core")
"""Path parts of our own code: the deepest such frame names where a sample's time went."""


def _loop_profile(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The profile of the thread that runs ``BaseEventLoop._run_once``."""
    frames = doc["shared"]["frames"]
    for profile in doc["profiles"]:
        for stack in profile["samples"][:5000]:
            if any(frames[i]["name"] == "BaseEventLoop._run_once" for i in stack):
                return dict(profile)
    return None


def _label(frame: dict[str, Any], line: bool = True) -> str:
    where = str(frame.get("file") or "").rsplit("/", 1)[-1]
    return f"{frame['name']} ({where}:{frame.get('line', '?')})" if line else \
        f"{frame['name']} ({where})"


def _callback(stack: Sequence[int], frames: list[dict[str, Any]], line: bool = True) -> str:
    """The frame ``Handle._run`` called (a task step's coroutine, a reader, a timer),
    or the loop's own frame when no callback runs."""
    names = [frames[i]["name"] for i in stack]
    for at, name in enumerate(names):
        if name == "Handle._run" and at + 1 < len(stack):
            return _label(frames[stack[at + 1]], line)
    return names[-1] if names else "?"


def _ours(stack: Sequence[int], frames: list[dict[str, Any]], line: bool = True) -> str:
    """The deepest frame of our code in the stack, and the leaf under it (``line``: with
    their line numbers)."""
    deepest = None
    for i in stack:
        if any(part in str(frames[i].get("file") or "") for part in OURS):
            deepest = i
    leaf = _label(frames[stack[-1]], line) if stack else "?"
    if deepest is None:
        return leaf
    mine = _label(frames[deepest], line)
    return mine if deepest == stack[-1] else f"{mine} > {leaf}"


def _idle(stack: Sequence[int], frames: list[dict[str, Any]]) -> bool:
    """True for a sample of the loop waiting in ``select``."""
    return bool(stack) and frames[stack[-1]]["name"] in IDLE


def stretches(doc: dict[str, Any]) -> list[tuple[int, int]]:
    """(first, past-the-last) sample indices of the loop thread's busy stretches."""
    profile = _loop_profile(doc)
    return [] if profile is None else _stretches(profile, doc["shared"]["frames"])


def _stretches(profile: dict[str, Any], frames: list[dict[str, Any]]
               ) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = None
    for at, stack in enumerate(profile["samples"]):
        idle = _idle(stack, frames)
        if idle and start is not None:
            out.append((start, at))
            start = None
        elif not idle and start is None:
            start = at
    if start is not None:
        out.append((start, len(profile["samples"])))
    return out


def report(doc: dict[str, Any], top: int, min_ms: float) -> list[str]:
    """The ``top`` longest busy stretches of at least ``min_ms``, each with its callbacks."""
    profile = _loop_profile(doc)
    if profile is None:
        return ["no thread runs an asyncio loop in this profile"]
    frames = doc["shared"]["frames"]
    samples, weights = profile["samples"], profile["weights"]
    found = sorted(_stretches(profile, frames), key=lambda s: -sum(weights[s[0]:s[1]]))
    lines = [f"{len(found)} busy stretches; the longest {top} of at least {min_ms} ms:"]
    for first, end in found[:top]:
        ms = sum(weights[first:end]) * 1000
        if ms < min_ms:
            break
        lines.append(f"- {ms:.0f} ms (samples {first}-{end}):")
        runs: list[tuple[str, Counter[str]]] = []
        for at in range(first, end):
            stack = samples[at]
            callback = _callback(stack, frames)
            if not runs or runs[-1][0] != callback:
                runs.append((callback, Counter()))
            runs[-1][1][_ours(stack, frames)] += 1
        for callback, where in runs:
            n = sum(where.values())
            lines.append(f"    {n:>3} {callback}")
            for what, count in where.most_common(3):
                lines.append(f"          {count:>3} {what}")
    return lines


def flat(doc: dict[str, Any], top: int) -> list[str]:
    """Where the loop thread's busy samples went in all: the ``top`` deepest frames of ours
    and the callbacks that ran them, by share of the busy samples."""
    profile = _loop_profile(doc)
    if profile is None:
        return ["no thread runs an asyncio loop in this profile"]
    frames = doc["shared"]["frames"]
    where: Counter[str] = Counter()
    callbacks: Counter[str] = Counter()
    for stack in profile["samples"]:
        if stack and not _idle(stack, frames):
            where[_ours(stack, frames, line=False)] += 1
            callbacks[_callback(stack, frames, line=False)] += 1
    busy = sum(where.values()) or 1
    lines = [f"{busy} busy samples of {len(profile['samples'])}; by callback:"]
    lines += [f"  {100 * n / busy:5.1f}% {what}" for what, n in callbacks.most_common(top)]
    lines.append("by the deepest frame of ours:")
    lines += [f"  {100 * n / busy:5.1f}% {what}" for what, n in where.most_common(top)]
    return lines


def main() -> None:
    """Print the report of a py-spy speedscope file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--min-ms", type=float, default=8.0)
    parser.add_argument("--flat", action="store_true",
                        help="where all the busy samples went, not the stretches")
    args = parser.parse_args()
    doc = json.loads(args.file.read_text())
    lines = flat(doc, args.top) if args.flat else report(doc, args.top, args.min_ms)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
