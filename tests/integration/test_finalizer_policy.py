"""The MutatingAdmissionPolicy of ``config/admission/finalizer.yaml`` on the real API server.

An install adds the manager's finalizer ``ome.io/ir-teardown`` in the InferenceReplica's
create itself, so the manager's first pass has no finalizer to patch in (one write fewer
per replica; ``bench_controller.py``). The policy is the file's; its binding is scoped to
the test's namespace here, so no other test meets it, and both are removed afterwards.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster.finalizer_policy import namespaced_finalizer_policy

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import eventually  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

FINALIZER = "ome.io/ir-teardown"
_names = itertools.count()


def replica(name: str, finalizers: list[str] | None = None) -> JSON:
    """A valid standalone InferenceReplica of one pod (no manager runs here)."""
    meta: dict[str, Any] = {"name": name}
    if finalizers is not None:
        meta["finalizers"] = finalizers
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "metadata": meta,
            "spec": {"component": "engine", "replicas": 1, "runners": [
                {"name": "default", "template": {"spec": {"containers": [
                    {"name": "main", "image": "example.com/llm:1"}]}}}]}}


@pytest.fixture
async def finalizer_policy(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """The file's policy, bound to ``namespace`` only; removed afterwards."""
    try:
        async with namespaced_finalizer_policy(kube, namespace):
            yield namespace
    finally:
        page = await kube.list(INFERENCE_REPLICAS, namespace)
        for ir in page.get("items") or ():  # no manager here to release them
            with contextlib.suppress(ApiError):
                await kube.patch(INFERENCE_REPLICAS, ir["metadata"]["name"],
                                 {"metadata": {"finalizers": None}}, namespace)


async def _created_with_policy(kube: KubeClient, namespace: str,
                               finalizers: list[str] | None = None) -> JSON:
    """Create replicas until the policy (a moment to take effect) has mutated one."""

    async def once() -> JSON | None:
        obj = await kube.create(INFERENCE_REPLICAS,
                                replica(f"r-{next(_names)}", finalizers), namespace)
        return obj if FINALIZER in (obj["metadata"].get("finalizers") or ()) else None

    return await eventually(once, timeout=30, what="the finalizer policy in effect")


async def test_a_new_replica_carries_the_managers_finalizer_from_its_create(
    kube: KubeClient, ir_crd: str, finalizer_policy: str,
) -> None:
    obj = await _created_with_policy(kube, finalizer_policy)
    assert obj["metadata"]["finalizers"] == [FINALIZER]
    stored = await kube.get(INFERENCE_REPLICAS, obj["metadata"]["name"], finalizer_policy)
    assert stored["metadata"]["finalizers"] == [FINALIZER]


async def test_a_replicas_own_finalizers_are_kept_and_ours_is_not_added_twice(
    kube: KubeClient, ir_crd: str, finalizer_policy: str,
) -> None:
    other = await _created_with_policy(kube, finalizer_policy, ["example.com/keep"])
    assert other["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
    ours = await kube.create(INFERENCE_REPLICAS, replica("already", [FINALIZER]),
                             finalizer_policy)
    assert ours["metadata"]["finalizers"] == [FINALIZER]
