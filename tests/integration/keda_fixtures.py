"""KEDA on the test API server: its ``scaledobjects.keda.sh`` CRD alone (v2.21.1, from its
Go module; no operator), for the tests that render or switch ScaledObjects, and KEDA's real
operator and metrics adapter with every KEDA CRD (``keda_operator``; ``make test-keda``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import CRDS, SERVICES, Resource
from omenative_controller.service_autoscalers import SCALED_OBJECTS
from omenative_devcluster.keda import (
    KEDA_NAMESPACE,
    METRICS_API,
    METRICS_SERVICE,
    KedaProcesses,
    apply_metrics_api,
    keda_crds,
    scaledobject_crd,
    start_keda,
)

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import delete_crd, eventually  # noqa: E402

__all__ = ["RunningKeda", "keda_crd", "keda_operator"]


@pytest.fixture
async def keda_crd(kube: KubeClient) -> AsyncIterator[str]:
    """KEDA's ScaledObject CRD, Established; removed (with its objects) at the end, and
    waited for until it is gone."""
    crd = scaledobject_crd()
    name = crd["metadata"]["name"]
    try:
        await kube.create(CRDS, crd)
    except ApiError as exc:
        if not exc.already_exists:
            raise

    async def served() -> bool:
        got = await kube.get(CRDS, name)
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (got.get("status") or {}).get("conditions") or ())

    await eventually(served, timeout=30, what=f"CRD {name} Established")
    yield name
    await delete_crd(kube, name)  # gone before the next test creates it again


# ------------------------------------------------------------------ KEDA's operator

APISERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService",
                       namespaced=False)


@attrs.define
class RunningKeda:
    """KEDA's operator and adapter serving the test's namespace (``keda_operator``)."""

    processes: KedaProcesses
    namespace: str

    def check_alive(self) -> None:
        """Fail the test when the operator or the adapter has exited."""
        dead = self.processes.dead()
        if dead:
            pytest.fail(dead, pytrace=False)


async def _apiservice_available(kube: KubeClient) -> bool:
    got = await kube.get(APISERVICES, METRICS_API)
    return any(c.get("type") == "Available" and c.get("status") == "True"
               for c in (got.get("status") or {}).get("conditions") or ())


async def _finalize_scaled_objects(kube: KubeClient, namespace: str) -> None:
    """Delete the namespace's ScaledObjects while KEDA still runs (its finalizer goes with
    its HPA); a leftover after 60 s has the finalizer taken off, so nothing is left behind."""
    for obj in (await kube.list(SCALED_OBJECTS, namespace)).get("items") or ():
        with contextlib.suppress(ApiError):
            await kube.delete(SCALED_OBJECTS, obj["metadata"]["name"], namespace)

    async def gone() -> bool:
        return not (await kube.list(SCALED_OBJECTS, namespace)).get("items")

    try:
        await eventually(gone, timeout=60, what="the ScaledObjects finalized by KEDA")
    except AssertionError:
        for obj in (await kube.list(SCALED_OBJECTS, namespace)).get("items") or ():
            with contextlib.suppress(ApiError):
                await kube.patch(SCALED_OBJECTS, obj["metadata"]["name"],
                                 {"metadata": {"finalizers": None}}, namespace)
        raise


@pytest.fixture
async def keda_operator(kube: KubeClient, kubeconfig_path: Path, namespace: str,
                        tmp_path: Path) -> AsyncIterator[RunningKeda]:
    """Every KEDA CRD, KEDA's operator watching the test's namespace, and its metrics
    adapter behind the APIService ``v1beta1.external.metrics.k8s.io`` (Available).

    Request it before ``start_manager``: it is torn down after the manager, so nothing
    re-creates a ScaledObject while KEDA finalizes them; then the APIService goes (an
    unavailable one would break discovery for the tests after), the processes stop and the
    CRDs are deleted."""
    names = []
    for crd in keda_crds():
        names.append(crd["metadata"]["name"])
        try:
            await kube.create(CRDS, crd)
        except ApiError as exc:
            if not exc.already_exists:
                raise
    processes = await asyncio.to_thread(start_keda, kubeconfig_path, tmp_path, [namespace])
    running = RunningKeda(processes, namespace)
    try:
        await asyncio.to_thread(apply_metrics_api, kubeconfig_path, processes)

        async def available() -> bool:
            running.check_alive()
            return await _apiservice_available(kube)

        await eventually(available, timeout=60, what=f"APIService {METRICS_API} Available")
        yield running
    finally:
        try:
            await _finalize_scaled_objects(kube, namespace)
        finally:
            with contextlib.suppress(ApiError):
                await kube.delete(APISERVICES, METRICS_API)
            with contextlib.suppress(ApiError):
                await kube.delete(SERVICES, METRICS_SERVICE, KEDA_NAMESPACE)
            processes.stop()
            for name in names:
                await delete_crd(kube, name)
