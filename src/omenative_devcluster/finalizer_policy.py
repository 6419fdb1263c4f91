"""The finalizer MutatingAdmissionPolicy of ``config/admission/finalizer.yaml``, bound to
one namespace for as long as a block runs: what the controller benchmark and the policy's
own test install (one namespace each, so no other test or run meets it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import yaml

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource

__all__ = ["MUTATING_ADMISSION_POLICIES", "MUTATING_ADMISSION_POLICY_BINDINGS",
           "POLICY_FILE", "namespaced_finalizer_policy"]

POLICY_FILE: Final = Path(__file__).resolve().parents[2] / "config" / "admission" / "finalizer.yaml"
"""The policy and its binding as an install applies them."""
MUTATING_ADMISSION_POLICIES: Final = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies",
    "MutatingAdmissionPolicy", namespaced=False)
"""The MutatingAdmissionPolicy resource (Kubernetes 1.36+)."""
MUTATING_ADMISSION_POLICY_BINDINGS: Final = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings",
    "MutatingAdmissionPolicyBinding", namespaced=False)
"""The MutatingAdmissionPolicyBinding resource."""


@contextlib.asynccontextmanager
async def namespaced_finalizer_policy(kube: KubeClient, namespace: str) -> AsyncIterator[None]:
    """The file's policy and binding, renamed with ``-{namespace}`` and matching only
    ``namespace``, while the block runs; both deleted afterwards (errors ignored)."""
    docs = [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d]
    policy = next(d for d in docs if d["kind"] == "MutatingAdmissionPolicy")
    binding = next(d for d in docs if d["kind"] == "MutatingAdmissionPolicyBinding")
    for doc in (policy, binding):
        doc["metadata"]["name"] += f"-{namespace}"
    binding["spec"]["policyName"] = policy["metadata"]["name"]
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": namespace}}}
    await kube.create(MUTATING_ADMISSION_POLICIES, policy)
    await kube.create(MUTATING_ADMISSION_POLICY_BINDINGS, binding)
    try:
        yield
    finally:
        for res, name in ((MUTATING_ADMISSION_POLICY_BINDINGS, binding["metadata"]["name"]),
                          (MUTATING_ADMISSION_POLICIES, policy["metadata"]["name"])):
            with contextlib.suppress(ApiError):
                await kube.delete(res, name)
