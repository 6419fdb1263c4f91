"""The real-node cluster of a test session: a control plane with real kubelets and containerd.

Independent of the stand-in cluster (``devcluster`` in conftest.py): its own control plane
on ``realnodes_host.HOST_ADDRESS``, ``REAL_NODES`` real nodes, no stand-in nodes. Started
once, on first use, and stopped (leaving nothing on the host) at the end of the session.
Tests using it are marked ``@pytest.mark.component("coredns")``: ``make test`` builds the
real-node components first in the background and these tests wait for them. If the nodes
cannot start, every such test FAILS with the reason; none is skipped.

Use it with ``pytest_plugins = ["realnode_fixtures"]`` in the test module.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from omenative_devcluster import build
from omenative_devcluster.cluster import Cluster, ClusterError, ClusterOptions
from omenative_devcluster.realnodes import RealNodes, start_with_real_nodes, stop_with_real_nodes

REAL_NODES = 2


@attrs.define
class RealCluster:
    """A control plane with real nodes (``start``/``stop``), and kubectl against it."""

    options: ClusterOptions
    cluster: Cluster | None = None
    nodes: RealNodes | None = None

    def start(self) -> None:
        """Start the control plane and the nodes; fail the test with the reason if they don't."""
        cluster = Cluster(self.options)
        try:
            self.nodes = start_with_real_nodes(cluster)
        except (ClusterError, OSError) as exc:
            pytest.fail(f"the real nodes did not start: {exc}", pytrace=False)
        self.cluster = cluster

    def stop(self) -> list[str]:
        """Stop everything; return what was left on the host (nothing, when all went well)."""
        if self.cluster is None:
            return []
        left = stop_with_real_nodes(self.cluster, self.nodes)
        self.cluster = self.nodes = None
        return left

    @property
    def kubeconfig_path(self) -> Path:
        """The admin kubeconfig (server on the host address pods reach)."""
        assert self.cluster is not None, "the real-node cluster is stopped"
        return self.cluster.kubeconfig_path

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run kubectl; fail the test with its stderr when it fails (unless ``check=False``)."""
        out = subprocess.run(
            [str(build.bin_dir() / "kubectl"), f"--kubeconfig={self.kubeconfig_path}", *args],
            input=stdin, capture_output=True, text=True, check=False)
        if check and out.returncode:
            pytest.fail(f"kubectl {' '.join(args)} failed: {out.stderr.strip()}", pytrace=False)
        return out.stdout

    def apply(self, *objects: dict[str, Any]) -> None:
        """``kubectl apply`` the objects."""
        self.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": list(objects)}))

    def get(self, *args: str) -> Any:
        """``kubectl get ... -o json``, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def namespace(self) -> str:
        """A fresh namespace whose default service account exists (pods can be created)."""
        ns = f"rn-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", ns)
        deadline = time.monotonic() + 30
        while not self.kubectl("get", "serviceaccount", "default", "-n", ns, "-o", "name",
                               check=False):
            if time.monotonic() > deadline:
                pytest.fail(f"namespace {ns}: no default service account after 30 s",
                            pytrace=False)
            time.sleep(0.2)
        return ns


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """The session's real-node cluster (started on first use, removed at the end)."""
    state = tmp_path_factory.mktemp("realnodes")
    rc = RealCluster(ClusterOptions(state_dir=state, nodes=0, real_nodes=REAL_NODES,
                                    build_if_missing=False))
    rc.start()
    try:
        yield rc
    finally:
        left = rc.stop()
        assert not left, f"real nodes left host state behind: {left}"
