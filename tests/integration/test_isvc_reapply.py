"""An InferenceService pass applies only what changed, and still puts back what others did.

The router's ServiceAccount, Role and RoleBinding are written by the InferenceService
controller alone. A pass that renders them as last applied, onto objects still as that
apply left them, writes none; a user's edit of a field we set, another controller's
server-side apply over one, and a delete each bring a write that restores the object; a
restarted manager (which remembers nothing) applies them again.
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource, resource_for
from omenative_controller.service_controller import (
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    ServiceController,
)
from omenative_core.labels import LABEL_ISVC
from omenative_core.service.router_rbac import ROUTER_POD_RULES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import ManagerHandle, eventually  # noqa: E402 - after the registration
from test_manager_namespace_gone import _runtime_and_isvc  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

NAME = "chat-router"
KINDS = {"ServiceAccount": "v1", "Role": "rbac.authorization.k8s.io/v1",
         "RoleBinding": "rbac.authorization.k8s.io/v1"}
RES: dict[str, Resource] = {kind: resource_for(api, kind) for kind, api in KINDS.items()}


def rbac_writes(handle: ManagerHandle) -> float:
    """Write calls on the router's ServiceAccount, Role and RoleBinding (only the
    InferenceService controller writes those)."""
    plurals = {res.plural for res in RES.values()}
    total = 0.0
    for family in handle.metrics.registry.collect():
        for s in family.samples:
            if s.name == "omenative_api_writes_total" and s.labels.get("resource") in plurals:
                total += s.value
    return total


def isvc_controller(handle: ManagerHandle) -> ServiceController:
    ctl = handle.manager._isvc
    assert ctl is not None
    return ctl


def cached(ctl: ServiceController, namespace: str, kind: str) -> JSON | None:
    """The router object of ``kind`` in the controller's watch cache, once it has listed."""
    return ctl.owned_caches.cached({"apiVersion": KINDS[kind], "kind": kind,
                                    "metadata": {"name": NAME, "namespace": namespace}})


async def pass_writes(handle: ManagerHandle, key: str) -> float:
    """Run one pass of the InferenceService; the router RBAC writes it made."""
    before = rbac_writes(handle)
    assert await isvc_controller(handle).reconcile(key)
    return rbac_writes(handle) - before


async def test_a_pass_reapplies_only_what_changed(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    handle = await start_manager()
    runtime, isvc = _runtime_and_isvc(namespace)
    await kube.create(SERVING_RUNTIMES, runtime, namespace)
    await kube.create(INFERENCE_SERVICES, isvc, namespace)
    ctl, key = isvc_controller(handle), f"{namespace}/chat"

    async def all_cached() -> bool:
        return all(cached(ctl, namespace, kind) for kind in KINDS)

    await eventually(all_cached, timeout=60, what="the router RBAC applied and cached")
    assert await pass_writes(handle, key) == 0  # as last applied: nothing written

    # a user edits a field we set: the next pass puts it back (one write)
    await kube.patch(RES["Role"], NAME, {"rules": [{"apiGroups": [""], "resources": [
        "pods", "secrets"], "verbs": ["get"]}]}, namespace)

    async def role_edit_seen() -> bool:
        role = cached(ctl, namespace, "Role")
        return role is not None and len(role["rules"][0]["resources"]) == 2

    await eventually(role_edit_seen, timeout=30, what="the Role edit in the watch cache")
    assert await pass_writes(handle, key) >= 1  # (a worker's pass may race ours to it)
    role = await kube.get(RES["Role"], NAME, namespace)
    assert role["rules"] == [dict(r) for r in ROUTER_POD_RULES]
    assert await pass_writes(handle, key) == 0  # and at rest again

    # another controller takes a label we set by server-side apply: put back too
    await kube.request(
        "PATCH", RES["ServiceAccount"].path(namespace, NAME), verb="patch",
        resource=RES["ServiceAccount"].plural,
        query=[("fieldManager", "someone-else"), ("force", "true")],
        body={"apiVersion": "v1", "kind": "ServiceAccount",
              "metadata": {"name": NAME, "labels": {LABEL_ISVC: "other"}}},
        content_type="application/apply-patch+yaml")

    async def label_taken() -> bool:
        account = cached(ctl, namespace, "ServiceAccount")
        return account is not None and account["metadata"]["labels"][LABEL_ISVC] == "other"

    await eventually(label_taken, timeout=30, what="the ServiceAccount change in the cache")
    assert await pass_writes(handle, key) >= 1
    account = await kube.get(RES["ServiceAccount"], NAME, namespace)
    assert account["metadata"]["labels"][LABEL_ISVC] == "chat"
    assert await pass_writes(handle, key) == 0  # and at rest again

    # a delete brings the object back at once (the cache's delete queues the ISVC)
    binding = await kube.get(RES["RoleBinding"], NAME, namespace)
    await kube.delete(RES["RoleBinding"], NAME, namespace)

    async def recreated() -> bool:
        try:
            again = await kube.get(RES["RoleBinding"], NAME, namespace)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return again["metadata"]["uid"] != binding["metadata"]["uid"]

    await eventually(recreated, timeout=30, what="the deleted RoleBinding applied again")

    # a restarted manager remembers nothing: its first pass applies every object again
    await handle.stop()
    restarted = await start_manager(identity="restarted")

    async def reapplied() -> bool:
        return rbac_writes(restarted) >= len(KINDS)

    await eventually(reapplied, timeout=60, what="the restarted manager's applies")
