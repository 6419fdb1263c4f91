"""How long decoding a big replica's new resourceVersion holds the manager's event loop.

Every status write of a rollout gives the InferenceReplica a new resourceVersion, and the
manager's next pass decodes it again (``decoded.ReplicaDecoder``): about 10 µs per row.
This decodes the cached (packed) object of a replica whose status holds ``--instances``
rows mid-rollout (``tests/status_states.representative``, built directly: no pods), while a
task asks the loop for a 1 ms sleep, side by side in one run, in turn:

* ``on the loop``: ``ReplicaDecoder.decode`` (the manager before this work);
* ``decode_replica``: as the manager decodes now (``planning.decode_replica``: from
  ``OFF_LOOP_INSTANCES`` Instances, in a worker thread, the switch interval short meanwhile).

Printed: the decode's own time, the longest gap between ticks (wall) and the most CPU the
process ran within one gap (a loaded machine adds other processes' time to the wall gap).
Timing lives here, never in tests. Run::

    .venv/bin/python benchmarks/bench_decode.py [--instances 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit")]

from loop_hold import loop_hold  # noqa: E402
from sim_helpers import engine_manifest  # noqa: E402
from tests import status_states as states  # noqa: E402

from omenative_controller.cache_views import replica_view  # noqa: E402
from omenative_controller.decoded import ReplicaDecoder  # noqa: E402
from omenative_controller.planning import OFF_LOOP_INSTANCES, decode_replica  # noqa: E402
from omenative_core.status.wire import status_to_json  # noqa: E402


def _raw(instances: int, version: int) -> object:
    """The manager's cached view of the replica at one resourceVersion."""
    obj = engine_manifest(replicas=instances)
    obj["metadata"].update(uid="bench-uid", resourceVersion=str(version))
    obj["status"] = status_to_json(states.representative(instances))
    return replica_view(obj)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    raws = [_raw(args.instances, v) for v in range(2 * args.repeat)]
    print(f"== decoding a new resourceVersion: {args.instances:,} status rows mid-rollout "
          f"(off the loop from {OFF_LOOP_INSTANCES:,} Instances) ==")

    async def on_loop() -> object:
        return ReplicaDecoder().decode(raws.pop())  # type: ignore[arg-type]

    async def manager() -> object:
        return await decode_replica(ReplicaDecoder(), raws.pop())  # type: ignore[arg-type]

    ways = [("on the loop (ReplicaDecoder.decode)", on_loop),
            ("decode_replica (worker thread)", manager)]
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in ways}
    for _ in range(args.repeat):
        for name, run in ways:
            gap, cpu, took, _gc = asyncio.run(loop_hold(run))
            got[name].append((gap, cpu, took))
    print(f"{'decoded':<38} {'decode':>9} {'worst gap':>10} {'median gap':>11} {'CPU in gap':>11}")
    for name, runs in got.items():
        took = statistics.median(t for _, _, t in runs)
        gaps = [g for g, _, _ in runs]
        cpu = max(c for _, c, _ in runs)
        print(f"{name:<38} {took * 1000:>7.1f}ms {max(gaps) * 1000:>8.1f}ms "
              f"{statistics.median(gaps) * 1000:>9.1f}ms {cpu * 1000:>9.1f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
