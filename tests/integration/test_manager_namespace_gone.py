"""A namespace deleted right after its InferenceService: the manager lets go of it.

Before: a write's answer written back into the watch cache after the watch had reported the
object deleted brought it back, and the manager retried creates in the gone namespace for
ever (hundreds of 404s). Now the cache keeps tombstones, and a 404 for the namespace (or a
403 because it is being deleted) ends the work for that key.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, NAMESPACES
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import eventually  # noqa: E402 - after the rewrite registration

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

QUIET_SECONDS = 20.0
"""How long the manager is watched after the namespace is gone (4x its backoff cap)."""


def _runtime_and_isvc(namespace: str) -> tuple[JSON, JSON]:
    runtime: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt", "namespace": namespace},
        "spec": {"routerConfig": {"terminationGracePeriodSeconds": 1,
                                  "runner": {"name": "ome-container",
                                             "image": "example.com/router:1"}}},
    }
    isvc: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": namespace},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "m"},
                 "runtime": {"name": "srt", "kind": "ServingRuntime"},
                 "router": {"minReplicas": 2}},
    }
    return runtime, isvc


def _failed_requests(handle: Any) -> float:
    """API answers 403 or 404 the manager got, but for the optional-API presence polls (a
    CRD's GET, a group version's discovery: KEDA's ``keda.sh`` is absent here); the
    namespace that stays has nothing else that can fail."""
    total = 0.0
    for family in handle.metrics.registry.collect():
        for s in family.samples:
            if (s.name == "omenative_api_errors_total" and s.labels.get("code") in ("403", "404")
                    and s.labels.get("resource") not in ("customresourcedefinitions",
                                                         "discovery")):
                total += s.value
    return total


async def test_a_namespace_deleted_right_after_its_isvc_ends_the_managers_work_there(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    doomed = f"{namespace}-gone"
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": doomed}})
    # Lease and config live in the test's namespace; the manager also watches the doomed one
    handle = await start_manager(namespaces=(namespace, doomed))
    runtime, isvc = _runtime_and_isvc(doomed)
    await kube.create(SERVING_RUNTIMES, runtime, doomed)
    await kube.create(INFERENCE_SERVICES, isvc, doomed)

    async def replica_exists() -> bool:
        try:
            await kube.get(INFERENCE_REPLICAS, "chat-router", doomed)
        except ApiError:
            return False
        return True

    await eventually(replica_exists, timeout=60, interval=0.05,
                     what="the router InferenceReplica created")
    await kube.delete(NAMESPACES, doomed)  # while the manager is creating its pods

    async def namespace_gone() -> bool:
        try:
            await kube.get(NAMESPACES, doomed)
        except ApiError as exc:
            return exc.not_found
        return False

    await eventually(namespace_gone, timeout=120, what=f"namespace {doomed} deleted")
    manager = handle.manager
    replica_key, isvc_key = f"{doomed}/chat-router", f"{doomed}/chat"

    def forgotten() -> list[str]:
        """What the manager still holds of the gone namespace."""
        held = []
        if manager.replicas is not None and manager.replicas.get(replica_key) is not None:
            held.append("replica in the IR cache")
        if manager.queue is not None and manager.queue.holds(replica_key):
            held.append("replica in the IR work queue")
        isvc_ctl = manager._isvc
        if isvc_ctl is not None and isvc_ctl.isvcs.get(isvc_key) is not None:
            held.append("ISVC in the ISVC cache")
        if isvc_ctl is not None and isvc_ctl.queue.holds(isvc_key):
            held.append("ISVC in the ISVC work queue")
        return held

    async def let_go() -> bool:
        return not forgotten()

    await eventually(let_go, timeout=30, what="the manager to let go of the gone namespace")
    failed, writes = _failed_requests(handle), handle.writes()
    await asyncio.sleep(QUIET_SECONDS)  # a retry loop would fail ~4 times per key meanwhile
    assert not forgotten(), forgotten()
    assert _failed_requests(handle) - failed <= 3, "still calling into the gone namespace"
    assert handle.writes() - writes <= 3, "still writing with nothing left to manage"
    assert handle.manager.health()[0]
