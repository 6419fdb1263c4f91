"""Label, annotation and condition names OME uses, and the metadata every owned object shares.

The values follow OME v1.3 (``docs/ome-facts.md`` section 5) so that selectors, dashboards
and runtimes written for OME keep working. ``LABEL_REPLICA`` is omenative's own: it names
the InferenceReplica that owns a pod, and is what the headless Service and the shell select
on (``ome.io/inferenceservice`` alone is ambiguous between a projected and a standalone
replica of the same name).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "ANNOTATION_IN_PLACE",
    "ANNOTATION_KUEUE_POD_GROUP_NAME",
    "ANNOTATION_KUEUE_POD_GROUP_SERVING",
    "ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT",
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_TOPOLOGY_KEY",
    "KUEUE_ADMISSION_GATE",
    "LABEL_COMPONENT",
    "LABEL_INCARNATION",
    "LABEL_INSTANCE_INDEX",
    "LABEL_ISVC",
    "LABEL_KUEUE_POD_GROUP",
    "LABEL_KUEUE_QUEUE",
    "LABEL_MANAGED_BY",
    "LABEL_PAIRING",
    "LABEL_POD_GROUP",
    "LABEL_POD_ORDINAL",
    "LABEL_REPLICA",
    "LABEL_REVISION_HASH",
    "LABEL_RUNNER",
    "MANAGED_BY",
    "NODE_HOSTNAME_LABEL",
    "OWNER_API_VERSION",
    "OWNER_KIND",
    "PAIRED_COMPONENTS",
    "SERVING_GATE",
    "Owner",
    "owner_reference",
    "replica_labels",
]

LABEL_ISVC = "ome.io/inferenceservice"
"""The InferenceService name (the replica's own name when standalone)."""

LABEL_COMPONENT = "component"
"""``engine``, ``decoder`` or ``router``."""

LABEL_MANAGED_BY = "ome.io/managed-by"
"""Which OME machinery manages the object; value ``MANAGED_BY``."""

MANAGED_BY = "OMENative"
"""The value of ``LABEL_MANAGED_BY`` on everything omenative creates."""

LABEL_REPLICA = "ome.io/inferencereplica"
"""omenative's own: the name of the InferenceReplica that owns the object."""

LABEL_INSTANCE_INDEX = "ome.io/instance-index"
"""The Instance index, as a decimal string."""

LABEL_INCARNATION = "ome.io/instance-incarnation"
"""The Instance incarnation (bumped on each whole-Instance recreate), as a decimal string."""

LABEL_RUNNER = "ome.io/runner"
"""``default``, ``leader`` or ``worker``."""

LABEL_POD_ORDINAL = "ome.io/pod-ordinal"
"""The pod's ordinal within its runner, as a decimal string."""

LABEL_REVISION_HASH = "ome.io/revision-hash"
"""The 10-character hash of the ControllerRevision the pod was rendered from."""

LABEL_PAIRING = "ome.io/pairing-protocol"
"""Engine/decoder pairing token (only when ``pairingProtocol`` is set)."""

LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"
"""The scheduler-plugins PodGroup of a multi-pod Instance."""

LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
"""Kueue's LocalQueue label; a pod carrying it is admitted by Kueue (the user sets it)."""

KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue's pod webhook puts on every pod carrying ``LABEL_KUEUE_QUEUE``
when it is created, until Kueue admits its Workload."""

LABEL_KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
"""Kueue's pod group: pods with the same value form one Workload, admitted all at once.

omenative sets it on every pod of a multi-pod Instance that carries ``LABEL_KUEUE_QUEUE``;
the value is per attempt (index, incarnation, revision: ``render.kueue_pod_group_name``)."""

ANNOTATION_KUEUE_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
"""The annotation form of ``LABEL_KUEUE_POD_GROUP`` (read first by Kueue's
``WorkloadIdentifierAnnotations`` feature gate); omenative overrides it only when the
template carries it."""

ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
"""How many pods Kueue's pod group has: every pod of the Instance, as a decimal string."""

ANNOTATION_KUEUE_POD_GROUP_SERVING = "kueue.x-k8s.io/pod-group-serving"
"""``"true"``: the pod group serves and never finishes, so Kueue does not apply its batch
rules (a pod that exits giving back its share of the quota); Kueue's own LeaderWorkerSet
integration sets it the same way."""

SERVING_GATE = "ome.io/serving"
"""The readiness gate (pod condition type) that puts a pod in rotation."""

ANNOTATION_IN_PLACE = "internal.ome.io/in-place-image-transition"
"""Set on a pod while its images are being replaced in place."""

ANNOTATION_TOPOLOGY_KEY = "ome.io/topology-key"
"""On a PodGroup: the replica's ``topologyKey``."""

ANNOTATION_MIGRATION_PREFIX = "ome.io/migration-request-v1-"
"""A migration request, on an InferenceService and forwarded to the component's
InferenceReplica; the rest of the key is the request's UUID."""

NODE_HOSTNAME_LABEL = "kubernetes.io/hostname"
"""The well-known node label that node (anti-)affinity terms match on."""

OWNER_API_VERSION = "ome.io/v1beta1"
"""apiVersion of the InferenceReplica in owner references."""

OWNER_KIND = "InferenceReplica"
"""kind of the InferenceReplica in owner references."""

PAIRED_COMPONENTS = ("engine", "decoder")
"""Components whose pods carry ``LABEL_PAIRING`` when a pairing protocol is set."""


class _Meta(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...


class _Spec(Protocol):
    @property
    def component(self) -> str: ...


class Owner(Protocol):
    """What the two functions below read of an ``InferenceReplica`` (a protocol, so the
    names at the bottom of the core do not import the model, which imports them)."""

    @property
    def metadata(self) -> _Meta: ...
    @property
    def spec(self) -> _Spec: ...
    @property
    def isvc_name(self) -> str: ...


def owner_reference(replica: Owner) -> dict[str, Any]:
    """The controller owner reference to ``replica`` (blocks owner deletion)."""
    return {
        "apiVersion": OWNER_API_VERSION,
        "kind": OWNER_KIND,
        "name": replica.metadata.name,
        "uid": replica.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replica_labels(replica: Owner) -> dict[str, str]:
    """The labels every object owned by ``replica`` carries (a fresh dict)."""
    return {
        LABEL_ISVC: replica.isvc_name,
        LABEL_COMPONENT: replica.spec.component,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_REPLICA: replica.metadata.name,
    }
