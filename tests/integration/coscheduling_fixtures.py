"""Fixtures for the tests on the real scheduler-plugins coscheduling scheduler.

* ``sched_plugins`` (module): the coscheduling scheduler (profile
  ``scheduler-plugins-scheduler``) and the PodGroup controller, run out of cluster
  (``omenative_devcluster.schedplugins``), with the module's own PodGroup and ElasticQuota
  CRDs; it waits for a background build of scheduler-plugins in a thread first. A
  scheduler-plugins that cannot start FAILS the tests.
* ``gang_nodes`` (function): GPU nodes of the test's own, from a kubelet stand-in run in
  this process, named after the test's namespace so that pods pinned to them (by node
  affinity) see only them: none of the session's nodes, none of another test's pods.
  ``add()`` joins nodes, in batches. At the end the test's pods are removed at once, the
  stand-ins stop and the nodes and their Leases are deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import PODS, Resource
from omenative_devcluster import components
from omenative_devcluster.kubelet import LEASE_NAMESPACE, KubeletStandIn, StandInConfig
from omenative_devcluster.schedplugins import SchedPluginsError, SchedulerPlugins

__all__ = ["NODES", "GangNodes", "bound", "gang_nodes", "node_affinity", "sched_plugins"]

NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
GPUS_PER_NODE = 8


@pytest.fixture(scope="module")
async def sched_plugins(kubeconfig_path: Path, tmp_path_factory: pytest.TempPathFactory
                        ) -> AsyncIterator[SchedulerPlugins]:
    """The real coscheduling scheduler and PodGroup controller for this module's tests."""
    try:
        await asyncio.to_thread(components.wait_for, "scheduler-plugins")
    except components.ComponentUnavailable as exc:
        pytest.fail(f"scheduler-plugins is not available: {exc}", pytrace=False)
    procs = SchedulerPlugins(kubeconfig_path, tmp_path_factory.mktemp("scheduler-plugins"))
    try:
        await asyncio.to_thread(procs.start)
    except (SchedPluginsError, OSError) as exc:
        pytest.fail(f"scheduler-plugins did not start: {exc}", pytrace=False)
    try:
        yield procs
    finally:
        await asyncio.to_thread(procs.stop)


def node_affinity(names: list[str]) -> JSON:
    """A pod ``affinity`` that allows only the nodes ``names``."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": names}]}]}}}


class GangNodes:
    """The test's own GPU nodes, joined in named batches (``add``)."""

    def __init__(self, api: client.ApiClient, kube: KubeClient, namespace: str) -> None:
        self.api = api
        self.kube = kube
        self.namespace = namespace
        self.names: list[str] = []
        self.stand_ins: list[KubeletStandIn] = []

    def names_of(self, batch: str, count: int) -> list[str]:
        """The names batch ``batch`` of ``count`` nodes gets (known before it joins)."""
        return [f"{self.namespace}-{batch}-{i}" for i in range(count)]

    async def add(self, batch: str, count: int) -> list[str]:
        """Join ``count`` nodes of 8 GPUs (``names_of(batch, count)``); return them once Ready."""
        cfg = StandInConfig(nodes=count, gpus_per_node=GPUS_PER_NODE,
                            node_prefix=f"{self.namespace}-{batch}-")
        stand_in = KubeletStandIn(cfg, api_client=self.api)
        self.stand_ins.append(stand_in)
        self.names.extend(stand_in.node_names)
        await stand_in.start()
        await stand_in.wait_nodes_ready()
        return list(stand_in.node_names)

    async def close(self) -> None:
        """Remove the test's pods at once, stop the stand-ins, delete the nodes and Leases."""
        with contextlib.suppress(ApiError):
            page = await self.kube.list(PODS, self.namespace)
            for pod in page.get("items") or ():
                with contextlib.suppress(ApiError):
                    await self.kube.delete(PODS, pod["metadata"]["name"], self.namespace,
                                           grace_period_seconds=0)
        for stand_in in self.stand_ins:
            await stand_in.stop()
        for name in self.names:
            for res, ns in ((NODES, None), (LEASES, LEASE_NAMESPACE)):
                with contextlib.suppress(ApiError):
                    await self.kube.delete(res, name, ns)


@pytest.fixture
async def gang_nodes(api_client: client.ApiClient, kube: KubeClient, namespace: str
                     ) -> AsyncIterator[GangNodes]:
    """The test's own GPU nodes (none yet: call ``add``); all removed afterwards."""
    nodes = GangNodes(api_client, kube, namespace)
    try:
        yield nodes
    finally:
        await nodes.close()


def bound(pods: dict[str, JSON]) -> dict[str, str]:
    """Pod name -> node, for the pods a scheduler has bound."""
    return {n: str(p["spec"]["nodeName"]) for n, p in pods.items()
            if p["spec"].get("nodeName")}

