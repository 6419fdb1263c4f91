"""The router's own identity: a ServiceAccount that may read the namespace's pods, as OME
gives it.

Why: OME's router (sglang_router in prefill-decode mode) finds its prefill and decode pods
by label through the Kubernetes API. OME makes a ServiceAccount ``{isvc}-router``, a Role of
that name allowing get/list/watch on pods, a RoleBinding of that name, all owned by the
InferenceService, and runs the router's pods under that account. Without them the router of
OME's prefill-decode guide finds no pod and never turns ready.

The manager can only grant what it holds itself (Kubernetes' escalation check): its own
role allows reading pods, so it may make this Role; it has no ``bind`` or ``escalate``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omenative_core.service.model import InferenceService
from omenative_core.service.objects import object_meta

__all__ = ["ROUTER_POD_RULES", "router_account", "router_rbac_objects", "with_account"]

ROUTER_POD_RULES: Final = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
)
"""What the router's Role allows: reading the pods of its namespace, as OME's Role does."""

_RBAC: Final = "rbac.authorization.k8s.io"


def router_account(isvc: InferenceService) -> str:
    """The router's ServiceAccount, Role and RoleBinding name: ``{isvc}-router`` (OME's)."""
    return f"{isvc.name}-router"


def router_rbac_objects(isvc: InferenceService,
                        labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The router's ServiceAccount, Role and RoleBinding, owned by the InferenceService
    (garbage collected with it), in the order they must exist."""
    name = router_account(isvc)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": object_meta(isvc, name, labels)},
        {"apiVersion": f"{_RBAC}/v1", "kind": "Role", "metadata": object_meta(isvc, name, labels),
         "rules": [dict(rule) for rule in ROUTER_POD_RULES]},
        {"apiVersion": f"{_RBAC}/v1", "kind": "RoleBinding",
         "metadata": object_meta(isvc, name, labels),
         "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": isvc.namespace}]},
    ]


def with_account(template: Mapping[str, Any], account: str) -> dict[str, Any]:
    """``template`` whose pods run as ``account`` (OME sets the router's, whatever the spec
    says)."""
    spec = {**dict(template.get("spec") or {}), "serviceAccountName": account}
    return {**template, "spec": spec}
