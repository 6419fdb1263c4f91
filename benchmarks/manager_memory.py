"""Where the running manager's memory goes: deep sizes of its structures (issue 36).

``OMENATIVE_MEMPROBE=DIR`` in the environment of ``manager_ticked.py`` (so of
``bench_controller.py`` and ``make bench-kwok``) starts a thread in the manager that every
30 s, and whenever ``DIR/now`` appears (it is removed), writes ``DIR/probe-*.txt``: VmRSS,
VmHWM, and the bytes reachable from each attribute of the ``Manager`` (one level deeper for
its caches, executor, metrics, queue...; informers split by their dicts), each object
counted once, for the first attribute that reaches it, with the types that hold most. A
walk holds the GIL for a second or two and allocates its own bookkeeping, so the RSS of a
probed run is not the benchmark's figure: run without the variable for that.

    OMENATIVE_MEMPROBE=/tmp/probe make bench-kwok KWOK_REPLICAS=1000 KWOK_NODES=500
    touch /tmp/probe/now    # once all are Ready: the structures at rest
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.CodeType,
        types.FrameType, types.MethodType)
"""Not walked into: code and modules are the same whatever the fleet."""
ATOMS = (str, bytes, int, float, bool, type(None))
SPLIT = ("executor", "caches", "metrics", "events", "recorder", "wakeups", "queue", "routed",
         "create_errors", "leader_tasks", "config_source")
"""Manager attributes reported one level deeper."""


def _children(o: Any) -> list[Any]:
    if isinstance(o, dict):
        return [*o.keys(), *o.values()]
    if isinstance(o, list | tuple | set | frozenset):
        return list(o)
    if isinstance(o, ATOMS):
        return []
    return list(attributes(o).values())


def attributes(o: Any) -> dict[str, Any]:
    """An object's attributes: its ``__dict__`` and its slots."""
    out = dict(getattr(o, "__dict__", None) or {})
    for cls in type(o).__mro__:
        for name in getattr(cls, "__slots__", ()) or ():
            if isinstance(name, str) and name not in ("__dict__", "__weakref__") \
                    and hasattr(o, name):
                out[name] = getattr(o, name)
    return out


def deep_size(root: Any, seen: set[int], by_type: Counter[str]) -> int:
    """Bytes reachable from ``root`` not in ``seen`` (which it extends), by type too."""
    total, stack = 0, [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, SKIP):
            continue
        seen.add(id(o))
        size = sys.getsizeof(o, 0)
        total += size
        by_type[type(o).__qualname__] += size
        stack.extend(_children(o))
    return total


def manager_sizes(manager: Any) -> list[tuple[int, str, list[tuple[str, int]]]]:
    """(bytes, attribute path, top types) of a Manager's structures, biggest first."""
    seen: set[int] = set()
    rows: list[tuple[int, str, list[tuple[str, int]]]] = []

    def add(value: Any, path: str) -> None:
        by_type: Counter[str] = Counter()
        rows.append((deep_size(value, seen, by_type), path, by_type.most_common(4)))

    for name, value in attributes(manager).items():
        if name in SPLIT and not isinstance(value, (*SKIP, *ATOMS)):
            for sub, sub_value in attributes(value).items():
                if type(sub_value).__name__ == "Informer":
                    for part, part_value in attributes(sub_value).items():
                        add(part_value, f"{name}.{sub}.{part}")
                add(sub_value, f"{name}.{sub}")
        add(value, name)
    rows.sort(key=lambda row: -row[0])
    return rows


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def report(out: Path, tag: str) -> Path:
    """Write one probe file into ``out`` (the first Manager object found), return its path."""
    frozen = gc.get_freeze_count() > 0
    gc.unfreeze()  # the frozen generation is invisible to get_objects
    managers = [o for o in gc.get_objects() if type(o).__name__ == "Manager"
                and type(o).__module__ == "omenative_controller.manager"]
    if frozen:  # as the manager had it (settle_after_sync), what came since too
        gc.freeze()
    rss = _kib("VmRSS")
    lines = [f"VmRSS {rss / 1024:.1f} MiB VmHWM {_kib('VmHWM') / 1024:.1f} MiB"]
    if managers:
        rows = manager_sizes(managers[0])
        lines.append(f"reachable from the Manager: {sum(r[0] for r in rows) / 1e6:.1f} MB")
        lines += [f"{size / 1e6:8.2f} MB {path}  "
                  + ", ".join(f"{t}:{n / 1e6:.1f}" for t, n in top)
                  for size, path, top in rows[:45]]
    path = out / f"probe-{tag}-{int(time.time())}-{rss // 1024:04d}MiB.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def start(out: Path, period: float = 30.0) -> threading.Thread:
    """The probe thread: a report every ``period`` s and whenever ``out/now`` appears."""
    out.mkdir(parents=True, exist_ok=True)

    def loop() -> None:
        last = time.monotonic()
        while True:
            time.sleep(1.0)
            now = out / "now"
            asked = now.exists()
            if asked:
                now.unlink(missing_ok=True)
            if asked or time.monotonic() - last >= period:
                last = time.monotonic()
                try:
                    report(out, "now" if asked else "t")
                except Exception as exc:  # a probe must not take the manager down
                    with (out / "errors.txt").open("a") as f:
                        f.write(f"{exc!r}\n")

    thread = threading.Thread(target=loop, name="memory-probe", daemon=True)
    thread.start()
    return thread


def start_from_env() -> None:
    """``start`` when ``OMENATIVE_MEMPROBE`` names a folder."""
    folder = os.environ.get("OMENATIVE_MEMPROBE")
    if folder:
        start(Path(folder))
