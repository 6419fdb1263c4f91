"""Fixtures of the traffic tests: a client of the real-node cluster, a fresh namespace
there, and the manager run as the other manager tests run it (``start_manager``).

A test module names both fixture files as plugins, so each session fixture exists once per
session (helpers are in traffic_checks.py and ``omenative_devcluster.model_engine``)::

    pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]

Every fixture here talks to the real-node cluster (``real_cluster``, realnode_fixtures.py)
through its own clients, never through the stand-in cluster's session fixtures, so a
session that runs both kinds of test never mixes them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from manager_fixtures import (
    TEST_LIFECYCLE,
    ManagerHandle,
    apply_crd,
    eventually,
    manager_settings,
    put_lifecycle,
    release_finalizers,
)

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import NAMESPACES, Resource
from omenative_controller.manager import Manager, ManagerOptions

__all__ = ["real_kube", "real_kubeconfig", "real_manager", "real_namespace"]

REPO = Path(__file__).resolve().parents[2]
IR_CRD_FILE = REPO / "config" / "crd" / "ome.io_inferencereplicas.yaml"

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")


@pytest.fixture(scope="session")
def real_kubeconfig(real_cluster: Any) -> Path:
    """The real-node cluster's kubeconfig."""
    return Path(real_cluster.kubeconfig_path)


@pytest.fixture(scope="session")
async def real_kube(real_kubeconfig: Path) -> AsyncIterator[KubeClient]:
    """A raw-JSON client of the real-node cluster (no rate limit); the IR CRD applied."""
    client = await KubeClient.connect(str(real_kubeconfig), qps=0, burst=1, timeout=30)
    try:
        await apply_crd(client, IR_CRD_FILE)
        yield client
    finally:
        await client.close()


@pytest.fixture
async def real_namespace(real_kube: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace on the real-node cluster, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await real_kube.create(NAMESPACES, {"metadata": {"name": name,
                                                     "labels": {"omenative.io/test": "true"}}})

    async def service_account() -> bool:
        # pods are refused until the namespace's default ServiceAccount exists
        try:
            await real_kube.get(SERVICE_ACCOUNTS, "default", name)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    await eventually(service_account, timeout=30, what=f"{name}'s default ServiceAccount")
    try:
        yield name
    finally:
        await release_finalizers(real_kube, name)
        with contextlib.suppress(ApiError):
            await real_kube.delete(NAMESPACES, name)


@pytest.fixture
async def real_manager(
    real_kubeconfig: Path, real_namespace: str, real_kube: KubeClient,
) -> AsyncIterator[Callable[..., Awaitable[ManagerHandle]]]:
    """Factory: the manager on the test's namespace, set up as ``start_manager`` sets it up
    (TEST_LIFECYCLE unless told otherwise), against the real-node cluster."""
    handles: list[ManagerHandle] = []

    async def start(*, lifecycle: dict[str, Any] | None = None, **extra: Any) -> ManagerHandle:
        await put_lifecycle(real_kube, real_namespace,
                            TEST_LIFECYCLE if lifecycle is None else lifecycle)
        settings = manager_settings(real_kubeconfig, real_namespace,
                                    identity=f"traffic-{len(handles)}")
        manager = Manager(ManagerOptions(**{**settings, **extra}))
        handle = ManagerHandle(manager, asyncio.create_task(manager.run(), name="manager"))
        handles.append(handle)
        await handle.wait_leader()
        return handle

    try:
        yield start
    finally:
        for h in handles:
            with contextlib.suppress(Exception):
                await h.kill()
