"""Cluster-wide objects the controller benchmark installs as an install would: the
InferenceReplica CRD (Established) and the finalizer MutatingAdmissionPolicy of
``config/admission/finalizer.yaml`` (the API server adds ``ome.io/ir-teardown`` in each
InferenceReplica's create, so the manager has no finalizer to patch in)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import yaml
from watching import say

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import CRDS, INFERENCE_REPLICAS
from omenative_devcluster.finalizer_policy import namespaced_finalizer_policy

REPO = Path(__file__).resolve().parents[1]
IR_CRD_FILE = REPO / "config" / "crd" / "ome.io_inferencereplicas.yaml"


async def apply_crd(kube: KubeClient) -> None:
    """Create or replace the InferenceReplica CRD and wait until it is Established."""
    body = yaml.safe_load(IR_CRD_FILE.read_text())
    name = body["metadata"]["name"]
    try:
        current = await kube.get(CRDS, name)
    except ApiError as exc:
        if not exc.not_found:
            raise
        await kube.create(CRDS, body)
    else:
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await kube.replace(CRDS, name, body)
    deadline = time.monotonic() + 30
    while True:
        crd = await kube.get(CRDS, name)
        if any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or ()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"CRD {name} not Established within 30s")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def finalizer_policy(kube: KubeClient, namespace: str, *, enabled: bool
                           ) -> AsyncIterator[None]:
    """The file's policy, bound to ``namespace`` (where the manager runs), while the block
    runs; a probe InferenceReplica shows it in effect first. Nothing when not ``enabled``."""
    if not enabled:
        yield
        return
    async with namespaced_finalizer_policy(kube, namespace):
        await _wait_in_effect(kube, namespace)
        yield


async def _wait_in_effect(kube: KubeClient, namespace: str) -> None:
    """Dry-run creates of a probe until the API server adds the finalizer (a second or so)."""
    probe = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
             "metadata": {"name": "finalizer-probe"},
             "spec": {"component": "engine", "replicas": 1, "runners": [
                 {"name": "default", "template": {"spec": {"containers": [
                     {"name": "main", "image": "example.com/probe:1"}]}}}]}}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            obj = await kube.request(  # a dry run: nothing is stored, no manager pass
                "POST", INFERENCE_REPLICAS.path(namespace), verb="create",
                resource=INFERENCE_REPLICAS.plural, query=(("dryRun", "All"),), body=probe,
                content_type="application/json")
        except ApiError as exc:
            if exc.status < 500:
                raise
            # 503 "Resource kind ... not found": a CRD just Established is not yet served
            # to every handler (seen 1 in 4 in CI's tiny run)
            await asyncio.sleep(0.25)
            continue
        if "ome.io/ir-teardown" in (obj.get("metadata", {}).get("finalizers") or ()):
            say("finalizer policy in effect (the API server adds ome.io/ir-teardown)")
            return
        await asyncio.sleep(0.25)
    raise RuntimeError("the finalizer MutatingAdmissionPolicy took no effect within 30s")
