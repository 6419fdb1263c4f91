"""Fixtures for tests against a real local control plane (``omenative_devcluster``).

If ``KUBECONFIG`` is set (CI starts one cluster with ``python -m
omenative_devcluster up`` and exports it), the tests use that cluster, and faults
go through the ``faults.json`` next to that kubeconfig (the state folder). Otherwise one
cluster is started for the whole session (building the binaries first if they are missing),
with the kubelet stand-in running in the test process, and stopped at the end. A cluster
that cannot start FAILS the tests with the reason; it never skips them.

Async tests here must run in the session loop, like these fixtures:
``pytestmark = pytest.mark.asyncio(loop_scope="session")``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("omenative_controller") is None:  # not installed: use src/
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from kubernetes_asyncio import client, config

from omenative_devcluster.cluster import (
    FAULTS_FILE,
    Cluster,
    ClusterError,
    ClusterOptions,
)
from omenative_devcluster.kubelet import (
    REQUEST_TIMEOUT,
    Faults,
    KubeletStandIn,
    applied_path,
    raw_call,
)

# The folder's helper modules (manager_fixtures, traffic_checks...) get pytest's assertion
# rewriting only if it is registered before the first test module imports them: a test
# module that registers one itself may come after another already imported it (pytest
# then warns "Module already imported so cannot be rewritten").
pytest.register_assert_rewrite(*sorted(
    p.stem for p in Path(__file__).parent.glob("*.py")
    if not p.stem.startswith(("test_", "conftest"))))


class FaultControl:
    """Inject kubelet stand-in faults: in-process through ``set_fault``, else the fault file."""

    def __init__(self, kubelet: KubeletStandIn | None, fault_file: Path) -> None:
        self.kubelet = kubelet
        self.fault_file = fault_file
        self._generation = 0

    def current(self) -> Faults:
        """Faults set through this control (Python side or the file)."""
        if self.kubelet is not None:
            return self.kubelet.faults
        try:
            return Faults.from_json(json.loads(self.fault_file.read_text()))
        except (OSError, ValueError):
            return Faults()

    async def set(
        self,
        *,
        bad_images: Iterable[str] | None = None,
        crash_images: Iterable[str] | None = None,
        dead_nodes: Iterable[str] | None = None,
        timeout: float = 15.0,
    ) -> None:
        """Replace the given fault lists (``None`` keeps a list as is); return once in force.

        Through the file, "in force" means the stand-in acknowledged this file's generation
        in ``faults.applied.json``.
        """
        if self.kubelet is not None:
            self.kubelet.set_fault(
                bad_images=bad_images, crash_images=crash_images, dead_nodes=dead_nodes
            )
            return
        cur = self.current()
        new = Faults(
            frozenset(bad_images) if bad_images is not None else cur.bad_images,
            frozenset(crash_images) if crash_images is not None else cur.crash_images,
            frozenset(dead_nodes) if dead_nodes is not None else cur.dead_nodes,
        )
        self._generation = max(self._generation, self._file_generation()) + 1
        tmp = self.fault_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"generation": self._generation, **new.to_json()}) + "\n")
        tmp.replace(self.fault_file)
        ack = applied_path(self.fault_file)
        deadline = time.monotonic() + timeout
        while True:
            try:
                done = json.loads(ack.read_text()).get("generation") == self._generation
            except (OSError, ValueError, AttributeError):
                done = False
            if done:
                return
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the kubelet stand-in did not apply {self.fault_file} within {timeout}s "
                    f"(no generation {self._generation} in {ack})",
                    pytrace=False,
                )
            await asyncio.sleep(0.1)

    def _file_generation(self) -> int:
        try:
            gen = json.loads(self.fault_file.read_text()).get("generation")
        except (OSError, ValueError, AttributeError):
            return 0
        return gen if isinstance(gen, int) else 0

    async def clear(self) -> None:
        """Drop every fault (and wait until that is in force)."""
        await self.set(bad_images=(), crash_images=(), dead_nodes=())


class DevCluster:
    """What the session-wide cluster fixture hands out."""

    def __init__(
        self, kubeconfig_path: Path, faults: FaultControl, cluster: Cluster | None
    ) -> None:
        self.kubeconfig_path = kubeconfig_path
        self.faults = faults
        #: None when the cluster came from ``KUBECONFIG``
        self.cluster = cluster


COMPONENT_ORDER = ("runc", "containerd", "coredns", "lws", "helm", "kueue", "scheduler-plugins")
"""The order ``make test`` builds the Go components in the background (its ``WITH``): the
real nodes' first (their tests, marked ``component("coredns")``, come first among these)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that need a Go component last, in the order those are built.

    ``make test`` builds the components in the background while the other tests run
    (``omenative_devcluster.components.build_in_order``); a test marked
    ``@pytest.mark.component("kueue")`` waits for its component, so it goes after every
    test that needs none, and after the tests of components built before its own.
    """
    def rank(item: pytest.Item) -> int:
        marker = item.get_closest_marker("component")
        if marker is None:
            return -1
        name = str(marker.args[0])
        return COMPONENT_ORDER.index(name) if name in COMPONENT_ORDER else len(COMPONENT_ORDER)

    items.sort(key=rank)


@pytest.fixture(scope="session")
async def devcluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    """The cluster of this session: from ``KUBECONFIG``, or one we start and stop."""
    env = os.environ.get("KUBECONFIG")
    if env:
        path = Path(env.split(os.pathsep)[0]).resolve()
        if not path.is_file():
            pytest.fail(f"KUBECONFIG={env} does not name a file", pytrace=False)
        yield DevCluster(path, FaultControl(None, path.parent / FAULTS_FILE), None)
        return
    state = tmp_path_factory.mktemp("devcluster")
    # the aggregation layer for extension API servers (KEDA's metrics adapter: make test-keda)
    cluster = Cluster(ClusterOptions(state_dir=state, aggregation=True))
    try:
        cluster.start()
        kubelet = await cluster.start_kubelet()
    except (ClusterError, TimeoutError, OSError) as exc:
        if cluster.kubelet is not None:
            await cluster.kubelet.stop()
        cluster.stop()
        pytest.fail(f"the local control plane did not start: {exc}", pytrace=False)
    try:
        yield DevCluster(cluster.kubeconfig_path, FaultControl(kubelet, cluster.faults_path),
                         cluster)
    finally:
        await kubelet.stop()
        cluster.stop()


@pytest.fixture(scope="session")
def kubeconfig_path(devcluster: DevCluster) -> Path:
    """Absolute path of the admin kubeconfig of the test cluster."""
    return devcluster.kubeconfig_path


@pytest.fixture(scope="session")
async def api_client(kubeconfig_path: Path) -> AsyncIterator[client.ApiClient]:
    """A kubernetes-asyncio ApiClient for the test cluster (session-wide, closed at the end)."""
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=cfg)
    api = client.ApiClient(cfg)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
async def namespace(api_client: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting for it to go)."""
    core = client.CoreV1Api(api_client)
    name = f"t-{uuid.uuid4().hex[:10]}"
    body: dict[str, Any] = {"metadata": {"name": name, "labels": {"omenative.io/test": "true"}}}
    await raw_call(core.create_namespace(body, _preload_content=False,  # type: ignore[arg-type]
                                         _request_timeout=REQUEST_TIMEOUT))
    try:
        yield name
    finally:
        await raw_call(
            core.delete_namespace(name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT),
            ok=(200, 202, 404),
        )


@pytest.fixture
async def faults(devcluster: DevCluster) -> AsyncIterator[FaultControl]:
    """Fault injection for one test (``await faults.set(...)``); cleared afterwards."""
    await devcluster.faults.clear()
    try:
        yield devcluster.faults
    finally:
        await devcluster.faults.clear()
