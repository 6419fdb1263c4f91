"""Runtime pinning on the real manager, as OME's "Runtime revisions and pinning" shows it.

The ServingRuntime, the InferenceService and the steps (pin, change the runtime, see
``RuntimeDrifted``, roll forward with ``ome.io/runtime-sync``) are OME's docs,
concepts/runtimes/runtime-revisions.md (ome-projects/ome-docs), with the test image and no
model (a pin holds only the runtime's spec). Runtime revisions live in OME's namespace: here
the manager's config namespace, the test's.
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import CONTROLLER_REVISIONS, INFERENCE_REPLICAS
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import eventually  # noqa: E402 - after the rewrite registration

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

RUNTIME = "sglang-llama-3-2-3b"


def runtime_body(namespace: str, mem_frac: str) -> JSON:
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": RUNTIME, "namespace": namespace},
            "spec": {"disabled": False, "engineConfig": {
                "terminationGracePeriodSeconds": 1,
                "runner": {"name": "ome-container", "image": "example.com/sglang:1",
                           "args": ["--tp-size=1", f"--mem-frac={mem_frac}"]}}}}


def isvc_body(namespace: str) -> JSON:
    """The docs' ``isvc.yaml`` on OMENative, without ``spec.model``."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llama-3-2-3b-instruct", "namespace": namespace},
            "spec": {"deploymentMode": "OMENative",
                     "runtime": {"name": RUNTIME, "kind": "ServingRuntime", "autoSync": False},
                     "engine": {"minReplicas": 1, "maxReplicas": 1}}}


def _drift(isvc: JSON) -> JSON | None:
    return next((c for c in (isvc.get("status") or {}).get("conditions") or ()
                 if c["type"] == "RuntimeDrifted"), None)


async def _args(kube: KubeClient, namespace: str) -> list[str]:
    ir = await kube.get(INFERENCE_REPLICAS, "llama-3-2-3b-instruct-engine", namespace)
    return list(ir["spec"]["runners"][0]["template"]["spec"]["containers"][0]["args"])


async def test_pin_drift_and_roll_forward(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "0.9"), namespace)
    await start_manager()
    await kube.create(INFERENCE_SERVICES, isvc_body(namespace), namespace)

    async def status() -> JSON:
        return await kube.get(INFERENCE_SERVICES, "llama-3-2-3b-instruct", namespace)

    async def pinned() -> str | None:
        name = ((await status()).get("status") or {}).get("pinnedRevisionName")
        return name if isinstance(name, str) else None

    first = await eventually(pinned, timeout=60, what="status.pinnedRevisionName")
    assert first.startswith(f"r-{namespace}-{RUNTIME}-")
    revisions = await kube.list(CONTROLLER_REVISIONS, namespace,
                                label_selector=f"ome.io/runtime-of={RUNTIME}")
    (rev,) = [r for r in revisions["items"] if r["metadata"]["name"] == first]
    assert rev["data"]["spec"]["engineConfig"]["runner"]["args"][1] == "--mem-frac=0.9"
    await eventually(lambda: _args(kube, namespace), timeout=60, what="the engine rendered")

    live = await kube.get(SERVING_RUNTIMES, RUNTIME, namespace)
    live["spec"]["engineConfig"]["runner"]["args"][1] = "--mem-frac=0.85"
    await kube.replace(SERVING_RUNTIMES, RUNTIME, live, namespace)

    async def drifted() -> JSON | None:
        cond = _drift(await status())
        return cond if cond and cond["status"] == "True" else None

    cond = await eventually(drifted, timeout=60, what="RuntimeDrifted=True")
    assert cond["reason"] == "RevisionMismatch"
    assert cond["message"] == (f"pinned {first}, live spec differs; bump ome.io/runtime-sync "
                               "annotation to advance")
    assert (await _args(kube, namespace))[1] == "--mem-frac=0.9"  # the pods stay pinned

    await kube.patch(INFERENCE_SERVICES, "llama-3-2-3b-instruct",
                     {"metadata": {"annotations": {"ome.io/runtime-sync": "mem-frac-0-85"}}},
                     namespace)

    async def rolled_forward() -> JSON | None:
        isvc = await status()
        st = isvc.get("status") or {}
        ok = st.get("pinnedRevisionName") not in (None, first) and \
            st.get("lastRuntimeSyncToken") == "mem-frac-0-85" and _drift(isvc) is None
        return isvc if ok else None

    await eventually(rolled_forward, timeout=60, what="the roll forward")

    async def new_args() -> bool:
        return (await _args(kube, namespace))[1] == "--mem-frac=0.85"

    await eventually(new_args, timeout=60, what="the engine rendered from the new revision")
