"""Runtime-revision garbage collection on the real manager (OME v1.3, ome-docs
``concepts/runtimes/runtime-revisions.md`` "Garbage collection" at 7f641a34): with
``--runtime-revision-retention 1`` and a one-second grace period, the runtime's unused old
revisions are deleted, while the one a pinned InferenceService serves from
(``status.pinnedRevisionName``) and the one another names in ``spec.runtime.revision`` stay,
unmarked. Runtime revisions live in OME's namespace: here the manager's config namespace,
the test's."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import CONTROLLER_REVISIONS
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import eventually  # noqa: E402 - after the rewrite registration

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

RUNTIME = "sglang-llama-3-2-3b"
SPEC = {"disabled": False, "engineConfig": {
    "terminationGracePeriodSeconds": 1,
    "runner": {"name": "ome-container", "image": "example.com/sglang:1",
               "args": ["--tp-size=1", "--mem-frac=0.9"]}}}


def revision(namespace: str, suffix: str) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": f"r-{namespace}-{RUNTIME}-{suffix}",
                         "labels": {"ome.io/runtime-of": RUNTIME}},
            "data": {"spec": SPEC}, "revision": 1}


def isvc(namespace: str, name: str, pinned_to: str | None = None) -> JSON:
    runtime: JSON = {"name": RUNTIME, "kind": "ServingRuntime", "autoSync": False}
    if pinned_to is not None:
        runtime["revision"] = pinned_to
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", "runtime": runtime,
                     "engine": {"minReplicas": 1, "maxReplicas": 1}}}


async def test_unused_revisions_are_pruned_and_used_ones_kept(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    await kube.create(SERVING_RUNTIMES, {"apiVersion": "ome.io/v1beta1",
                                         "kind": "ServingRuntime",
                                         "metadata": {"name": RUNTIME, "namespace": namespace},
                                         "spec": SPEC}, namespace)
    for suffix in ("0000000a", "0000000b", "0000000c"):  # older than the pin made below
        await kube.create(CONTROLLER_REVISIONS, revision(namespace, suffix), namespace)
    named = f"r-{namespace}-{RUNTIME}-0000000c"
    await kube.create(INFERENCE_SERVICES, isvc(namespace, "rollback", named), namespace)
    await start_manager(runtime_revision_retention=1, runtime_revision_grace=1.0)
    await kube.create(INFERENCE_SERVICES, isvc(namespace, "pinned"), namespace)

    async def pinned() -> str | None:
        obj = await kube.get(INFERENCE_SERVICES, "pinned", namespace)
        name = (obj.get("status") or {}).get("pinnedRevisionName")
        return name if isinstance(name, str) else None
    live = await eventually(pinned, timeout=60, what="status.pinnedRevisionName")

    async def left() -> dict[str, JSON] | None:
        page = await kube.list(CONTROLLER_REVISIONS, namespace,
                               label_selector=f"ome.io/runtime-of={RUNTIME}")
        found = {r["metadata"]["name"]: r for r in page["items"]}
        return found if len(found) == 2 else None
    kept = await eventually(left, timeout=60, what="the unused revisions pruned")
    assert set(kept) == {live, named}
    for rev in kept.values():
        assert "ome.io/gc-eligible-since" not in (rev["metadata"].get("annotations") or {})
