"""Leader hand-over benchmark: how long a standby manager takes to lead after the leader dies.

Two of the manager's own ``LeaderElector`` s campaign for one Lease on a real API server,
with the integration tests' timings (Lease 3 s, renew deadline 2 s, retry 0.5 s):

1. **hard kill**: the leader's task is cancelled (no release, as a ``kill -9``); the standby
   must wait the Lease out, so its takeover is about the Lease duration plus a few retries
   (the bound printed: Lease + 4 retries);
2. **graceful stop**: the leader releases the Lease (no holder, 1 s) as ``omenative-manager``
   does on SIGTERM; a fresh elector takes it on its first try (bound: under one Lease).

Each is repeated ``--rounds`` times; printed: every takeover, the median and the bound. The
pass/fail tests (``tests/integration/test_manager_failover.py``) assert who leads, never
how fast: timings live here.

The cluster: ``--kubeconfig``, else ``KUBECONFIG``, else one started here (``python -m
omenative_devcluster up``, one node), removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from processes import DevCluster
from watching import say

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import NAMESPACES
from omenative_controller.leader import LeaderConfig, LeaderElector

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5


class Campaign:
    """One elector running as a task; when it started leading (monotonic), if it has."""

    def __init__(self, kube: KubeClient, namespace: str, identity: str) -> None:
        config = LeaderConfig(name="bench-failover", namespace=namespace, identity=identity,
                              lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY)
        self.led_at: float | None = None
        self.leading = asyncio.Event()
        self.elector = LeaderElector(kube, config, on_state=self._state)
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self.elector.run(self.stop), name=identity)

    def _state(self, leading: bool) -> None:
        if leading and self.led_at is None:
            self.led_at = time.monotonic()
            self.leading.set()

    async def lead(self, timeout: float = 60.0) -> float:
        """Until this elector leads; the monotonic time it started to."""
        await asyncio.wait_for(self.leading.wait(), timeout)
        assert self.led_at is not None
        return self.led_at

    async def kill(self) -> None:
        """Cancel the task: nothing is released."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def graceful(self) -> None:
        """Stop campaigning; the elector releases the Lease it holds."""
        self.stop.set()
        await asyncio.wait_for(self.task, 30)


async def one_round(kube: KubeClient, namespace: str, n: int) -> tuple[float, float]:
    """(takeover after a hard kill, takeover after a graceful stop), seconds."""
    first = Campaign(kube, namespace, f"first-{n}")
    await first.lead()
    standby = Campaign(kube, namespace, f"standby-{n}")
    await asyncio.sleep(2 * RETRY)  # the standby has seen the Lease held
    await first.kill()
    killed = time.monotonic()
    hard = await standby.lead() - killed
    await standby.graceful()
    stopped = time.monotonic()
    fresh = Campaign(kube, namespace, f"fresh-{n}")
    soft = await fresh.lead() - stopped
    await fresh.graceful()
    return hard, soft


async def run(args: argparse.Namespace, workdir: Path) -> list[tuple[float, float]]:
    """Every round on the cluster, in a namespace of its own (deleted at the end)."""
    cluster: DevCluster | None = None
    kubeconfig = args.kubeconfig or (Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
                                     if os.environ.get("KUBECONFIG") else None)
    if kubeconfig is None:
        say(f"starting the local control plane in {workdir}")
        cluster = DevCluster(workdir / "devcluster", nodes=1)
        kubeconfig = await cluster.start()
    kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
    namespace = f"bench-failover-{uuid.uuid4().hex[:8]}"
    try:
        await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
        rounds = []
        for n in range(args.rounds):
            rounds.append(await one_round(kube, namespace, n))
            say(f"round {n + 1}: hard kill {rounds[-1][0]:.2f}s, graceful {rounds[-1][1]:.2f}s")
        return rounds
    finally:
        with contextlib.suppress(Exception):
            await kube.delete(NAMESPACES, namespace)
        await kube.close()
        if cluster is not None:
            await cluster.stop()


def report(rounds: list[tuple[float, float]]) -> None:
    """The table: each case's takeovers, median and the bound it is expected under."""
    print(f"{'case':<15} {'takeovers (s)':<30} {'median':>7} {'bound':>6}"
          f"  (Lease {LEASE:g} s, retry {RETRY:g} s)")
    for i, (case, bound) in enumerate((("hard kill", LEASE + 4 * RETRY),
                                       ("graceful stop", LEASE))):
        times = [r[i] for r in rounds]
        print(f"{case:<15} {' '.join(f'{t:.2f}' for t in times):<30}"
              f" {statistics.median(times):>7.2f} {bound:>6.1f}"
              f"  {'within' if max(times) <= bound else 'OVER'}")


def main() -> int:
    """Run the rounds and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--kubeconfig", type=Path, help="the cluster (default: KUBECONFIG, else "
                    "one started here)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as workdir:
        report(asyncio.run(run(args, Path(workdir))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
