"""The GPU caretaker at fleet size (``make bench``): ``advise()`` on 250 to 1,000 8-GPU nodes.

Each cluster has 4 topology domains, two Instances per node on average (3 in 4 of them a
single 2- or 4-GPU pod, the rest a leader + worker of 4 GPUs each) placed at random, so
free GPUs are fragmented; 1% of the nodes NotReady and 1% cordoned; and pending gangs of
2 x 8 and 4 x 8 GPUs, half of them asking for one domain. The target of issue 17: 1,000
nodes and 2,000 Instances in under 1 s. Each figure is the median of 5 runs; the ratio
between sizes is printed beside the time, and the function calls (free of timing noise).

Timing lives here, never in pass/fail tests.
"""

from __future__ import annotations

import random
import statistics
import time

from callcount import function_calls
from tiny import pick

from omenative_core.advisor import (
    ClusterView,
    GpuNode,
    GpuPod,
    InstanceKey,
    PendingGang,
    ReplicaView,
    advise,
)

TOPO = "example.com/fabric"


def cluster(n_nodes: int, seed: int = 7) -> ClusterView:
    """A fragmented cluster of ``n_nodes`` nodes and ``2 * n_nodes`` Instances."""
    rng = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        bad = i % 100
        nodes.append(GpuNode(name=f"n{i:05d}", gpus=8, labels={TOPO: f"d{i % 4}"},
                             ready=bad != 1, schedulable=bad not in (1, 2), cordoned=bad == 2,
                             conditions=frozenset() if bad == 1 else frozenset({"Ready"})))
    free = {n.name: 8 for n in nodes}
    names = sorted(free)
    pods: list[GpuPod] = []
    replicas = []
    per_replica = 50
    for r in range(2 * n_nodes // per_replica):
        shape = [4, 4] if r % 4 == 3 else [rng.choice([2, 4])]
        ready = set()
        for index in range(per_replica):
            where = []
            for gpus in shape:
                for _ in range(20):
                    node = rng.choice(names)
                    if free[node] >= gpus:
                        break
                else:
                    node = next((n for n in names if free[n] >= gpus), "")
                if not node:
                    break
                free[node] -= gpus
                where.append((node, gpus))
            if len(where) == len(shape):
                ready.add(index)
                pods += [GpuPod(name=f"r{r}-{index}-{k}", node=node, gpus=gpus,
                                owner=InstanceKey("ml", f"r{r}", index))
                         for k, (node, gpus) in enumerate(where)]
        replicas.append(ReplicaView(namespace="ml", name=f"r{r}", desired=per_replica,
                                    ready=frozenset(ready),
                                    topology_key=TOPO if r % 2 else None))
    pending = tuple(
        PendingGang(namespace="ml", name=f"gang{g}", pod_gpus=(8,) * (2 if g % 2 else 4),
                    topology_key=TOPO if g % 3 == 0 else None)
        for g in range(max(2, n_nodes // 100))
    )
    return ClusterView(nodes=tuple(nodes), pods=tuple(pods), replicas=tuple(replicas),
                       pending=pending)


def main() -> None:
    """Print the median time and the function calls of ``advise()`` per size."""
    print(f"advise(): fragmented clusters, 2 Instances per node (median of {pick(5, 1)} runs)")
    print(f"{'nodes':>6} {'Instances':>9} {'moves':>5} {'time':>9} {'x prev':>7} "
          f"{'calls':>10} {'x prev':>7}")
    prev_t = prev_c = None
    for n in pick((250, 500, 1000), (20, 40)):
        view = cluster(n)
        instances = len({p.owner for p in view.pods})
        advice = advise(view)
        samples = []
        for _ in range(pick(5, 1)):
            t0 = time.perf_counter()
            advise(view)
            samples.append(time.perf_counter() - t0)
        t = statistics.median(samples)
        calls = function_calls(lambda v=view: advise(v))
        rt = f"{t / prev_t:6.2f}x" if prev_t else ""
        rc = f"{calls / prev_c:6.2f}x" if prev_c else ""
        print(f"{n:>6} {instances:>9} {len(advice.recommendations):>5} {t * 1000:>7.1f}ms "
              f"{rt:>7} {calls:>10} {rc:>7}")
        prev_t, prev_c = t, calls


if __name__ == "__main__":
    main()
