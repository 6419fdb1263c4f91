"""The API request each plan action becomes: the resource it writes, the patch it sends.

Pure functions of an action (and the time), kept apart from the executor that sends them:
what a request looks like is read and tested on its own, how and when it goes is the
executor's business.
"""

from __future__ import annotations

from datetime import datetime

from omenative_controller.kube.client import JSON
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    PODS,
    Resource,
    pod_groups,
    resource_for,
)
from omenative_core.labels import SERVING_GATE
from omenative_core.model.plan import (
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeleteObject,
    DeletePodGroup,
    DeleteRevision,
    PatchPodImages,
    SetServingGate,
)
from omenative_core.model.timefmt import format_time

__all__ = ["create_resource", "delete_resource", "gate_patch", "images_patch"]


def create_resource(
    action: CreatePod | CreatePodGroup | CreateRevision | CreateObject,
) -> Resource:
    """The API resource a create action writes to."""
    if isinstance(action, CreatePod):
        return PODS
    if isinstance(action, CreatePodGroup):
        group, _, version = str(action.body.get("apiVersion", "")).rpartition("/")
        if group and group != pod_groups().group:  # Kubernetes' own PodGroup
            return resource_for(str(action.body["apiVersion"]), "PodGroup")
        return pod_groups(version or "v1alpha1")
    if isinstance(action, CreateRevision):
        return CONTROLLER_REVISIONS
    return resource_for(str(action.body.get("apiVersion", "")), str(action.body.get("kind", "")))


def delete_resource(action: DeletePodGroup | DeleteRevision | DeleteObject) -> Resource:
    """The API resource a delete action removes from (pods have their own path)."""
    if isinstance(action, DeletePodGroup):
        return resource_for(action.api_version, "PodGroup")
    if isinstance(action, DeleteRevision):
        return CONTROLLER_REVISIONS
    return resource_for(action.api_version, action.object_kind)


def gate_patch(action: SetServingGate, now: datetime) -> JSON:
    """The pod-status patch that sets the ``ome.io/serving`` gate (a strategic merge on
    the condition type), naming the pod's UID: a pod re-created under the name is refused."""
    return {
        "metadata": {"uid": action.uid},
        "status": {"conditions": [{
            "type": SERVING_GATE,
            "status": "True" if action.value else "False",
            "reason": "InstanceServing" if action.value else "InstanceDraining",
            "message": ("all pods of the Instance are ready" if action.value
                        else "the Instance is leaving rotation"),
            "lastTransitionTime": format_time(now),
        }]},
    }


def images_patch(action: PatchPodImages) -> JSON:
    """The pod patch that swaps container images in place (and relabels the pod), naming
    the pod's UID."""
    meta: JSON = {"uid": action.uid}
    if action.labels:
        meta["labels"] = dict(action.labels)
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": n, "image": i}
                                for n, i in sorted(action.images.items())]},
    }
