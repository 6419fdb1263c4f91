"""Gang scheduling: which mechanism a multi-pod Instance uses, and the objects it gets.

Two mechanisms place an Instance's pods all at once or not at all:

- ``Native``: Kubernetes' own gang scheduling, read by the default kube-scheduler:
  ``scheduling.k8s.io/v1beta1`` (1.37) or ``v1alpha2`` (1.36), whichever the cluster serves
  (``v1beta1`` first; ``NATIVE_API_VERSIONS``). One ``Workload``
  per (replica, revision), ``{prefix}-{revision hash}``, whose one PodGroup template holds
  the gang policy (``minCount`` = pods per Instance) and, when the replica sets
  ``topologyKey``, the topology constraint; one ``PodGroup`` per Instance attempt,
  ``{prefix}-{index}-{incarnation}``, made from that template; each pod joins it through
  ``spec.schedulingGroup.podGroupName``.
- ``PodGroup``: the scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``), one
  per attempt under the same name, joined through the ``scheduling.x-k8s.io/pod-group``
  label; a scheduler that reads it (coscheduling) must be named by ``schedulerName``.

Workload templates and PodGroup specs are immutable, so nothing here is ever updated: a
new revision gets a new Workload, a new attempt (whole-Instance restart, rebuild) a new
PodGroup. ``lifecycle.gangScheduling`` chooses (``choose_mechanism``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final

from omenative_core.jsoncopy import as_dict
from omenative_core.labels import (
    ANNOTATION_TOPOLOGY_KEY,
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_REVISION_HASH,
    owner_reference,
    replica_labels,
)
from omenative_core.model.spec import InferenceReplica, Runner
from omenative_core.replica_rules import MAX_NAME_LENGTH

__all__ = [
    "DEFAULT_SCHEDULER",
    "MECHANISM_NATIVE",
    "MECHANISM_NONE",
    "MECHANISM_POD_GROUP",
    "NATIVE_API_V1ALPHA2",
    "NATIVE_API_V1BETA1",
    "NATIVE_API_VERSIONS",
    "NATIVE_FEATURE_GATES",
    "POD_GROUP_API_VERSION",
    "POD_GROUP_TEMPLATE",
    "choose_mechanism",
    "gang_condition",
    "native_api_of",
    "pod_group_name",
    "priority_class_name",
    "render_native_pod_group",
    "render_pod_group",
    "render_workload",
    "schedule_timeout_seconds",
    "scheduler_name",
    "workload_name",
]

MECHANISM_NATIVE: Final = "Native"
"""Kubernetes' own gang scheduling (``scheduling.k8s.io/v1beta1`` or ``v1alpha2``)."""
MECHANISM_POD_GROUP: Final = "PodGroup"
"""The scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``)."""
MECHANISM_NONE: Final = "None"
"""No gang scheduling: pods are placed one by one."""

NATIVE_API_V1BETA1: Final = "scheduling.k8s.io/v1beta1"
"""Kubernetes 1.37's Workload and PodGroup (beta; ``v1alpha2`` is gone in 1.37)."""
NATIVE_API_V1ALPHA2: Final = "scheduling.k8s.io/v1alpha2"
"""Kubernetes 1.36's Workload and PodGroup (alpha)."""
NATIVE_API_VERSIONS: Final = (NATIVE_API_V1BETA1, NATIVE_API_V1ALPHA2)
"""The native gang API versions omenative writes, the preferred one first."""
NATIVE_FEATURE_GATES: Final = {
    NATIVE_API_V1BETA1: "GenericWorkload (1.37), --runtime-config=scheduling.k8s.io/v1beta1=true",
    NATIVE_API_V1ALPHA2: "GenericWorkload and GangScheduling (1.36), "
                         "--runtime-config=scheduling.k8s.io/v1alpha2=true",
}
"""What a cluster enables to serve each version (named when neither is served)."""
POD_GROUP_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
"""The API version of the scheduler-plugins PodGroup."""
POD_GROUP_TEMPLATE: Final = "instance"
"""The name of the one PodGroup template in every Workload."""
DEFAULT_SCHEDULER: Final = "default-scheduler"
"""The ``schedulerName`` of kube-scheduler (also what an empty one means)."""

_HASH_LENGTH: Final = 8


def _bounded(prefix: str, tail: str) -> str:
    """``{prefix}{tail}``, or, past ``MAX_NAME_LENGTH``, the prefix cut and an 8-hex-digit
    sha256 of the full name put before ``tail`` (distinct and valid as a label value)."""
    full = f"{prefix}{tail}"
    if len(full) <= MAX_NAME_LENGTH:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:_HASH_LENGTH]
    keep = max(MAX_NAME_LENGTH - len(tail) - _HASH_LENGTH - 1, 0)
    head = prefix[:keep].rstrip("-.")
    return (f"{head}-{digest}{tail}" if head else f"{digest}{tail}")[:MAX_NAME_LENGTH]


def pod_group_name(prefix: str, index: int, incarnation: int) -> str:
    """The PodGroup of one attempt of Instance ``index``: ``{prefix}-{index}-{incarnation}``.

    Both mechanisms use it. A whole-Instance restart (a new incarnation) gets a new name,
    so the new attempt never waits for, or joins, the old group.
    """
    return _bounded(prefix, f"-{index}-{incarnation}")


def workload_name(prefix: str, revision_hash: str) -> str:
    """The native Workload of one revision: ``{prefix}-{revision hash}``."""
    return _bounded(prefix, f"-{revision_hash}")


def scheduler_name(runners: Sequence[Runner]) -> str | None:
    """The ``schedulerName`` the runners' pod templates name (None: the default one)."""
    for runner in runners:
        spec = as_dict(as_dict(runner.template).get("spec"))
        name = spec.get("schedulerName")
        if isinstance(name, str) and name and name != DEFAULT_SCHEDULER:
            return name
    return None


def native_api_of(served: frozenset[str] | set[str]) -> str:
    """The preferred native gang API version among ``served`` ("" when none is)."""
    return next((v for v in NATIVE_API_VERSIONS if v in served), "")


def choose_mechanism(
    setting: str,
    *,
    multi_pod: bool,
    native_api: str,
    pod_group_crd: bool,
    scheduler: str | None,
) -> str:
    """The gang mechanism for a replica: ``Native``, ``PodGroup`` or ``None``.

    ``native_api`` is the native gang API version served ("" when none is). Single-pod
    Instances need none. ``Native`` and ``PodGroup`` are used when their API is
    there (else none); ``Auto`` takes the native one when it is served and the pods use the
    default scheduler, the PodGroup when its CRD is installed and the pods name another
    scheduler (``scheduler``), else none.
    """
    if not multi_pod or setting == MECHANISM_NONE:
        return MECHANISM_NONE
    if setting == MECHANISM_NATIVE:
        return MECHANISM_NATIVE if native_api else MECHANISM_NONE
    if setting == MECHANISM_POD_GROUP:
        return MECHANISM_POD_GROUP if pod_group_crd else MECHANISM_NONE
    if native_api and scheduler is None:
        return MECHANISM_NATIVE
    if pod_group_crd and scheduler is not None:
        return MECHANISM_POD_GROUP
    return MECHANISM_NONE


def gang_condition(
    setting: str,
    *,
    multi_pod: bool,
    native_api: str,
    pod_group_crd: bool,
    scheduler: str | None,
) -> tuple[str, str, str]:
    """``GangSchedulingUnavailable`` as (status, reason, message): the one rule for it.

    Both the InferenceReplica and its InferenceService (``status.components``) report it,
    so both say the same: which mechanism ``choose_mechanism`` picks and why. OME's reasons
    are kept: ``GangSchedulingAvailable`` when a mechanism is used (or none is needed),
    ``PodGroupCRDNotInstalled`` when a multi-pod Instance gets none.
    """
    if not multi_pod:
        return ("False", "GangSchedulingAvailable", "single-pod Instances need no gang scheduling")
    chosen = choose_mechanism(setting, multi_pod=True, native_api=native_api,
                              pod_group_crd=pod_group_crd, scheduler=scheduler)
    if chosen == MECHANISM_NATIVE:
        return ("False", "GangSchedulingAvailable",
                f"gang mechanism Native (lifecycle.gangScheduling {setting}): Kubernetes "
                f"{native_api} Workload and PodGroups are used")
    if chosen == MECHANISM_POD_GROUP:
        return ("False", "GangSchedulingAvailable",
                f"gang mechanism PodGroup (lifecycle.gangScheduling {setting}): "
                f"scheduler-plugins PodGroups ({POD_GROUP_API_VERSION}) are used")
    if native_api:
        native = f"{native_api} served"
    else:
        gates = "; ".join(f"{v} needs {g}" for v, g in NATIVE_FEATURE_GATES.items())
        native = f"{' and '.join(NATIVE_API_VERSIONS)} not served ({gates})"
    crd = "installed" if pod_group_crd else "not installed"
    who = scheduler or "the default scheduler"
    return ("True", "PodGroupCRDNotInstalled",
            f"gang mechanism None (lifecycle.gangScheduling {setting}; "
            f"{native}, the scheduler-plugins PodGroup CRD {crd}, "
            f"pods use {who}); multi-pod Instances may schedule partially")


def schedule_timeout_seconds(
    instance_ready_timeout: timedelta | None, gang_min: timedelta, gang_max: timedelta
) -> int:
    """A PodGroup's ``scheduleTimeoutSeconds``: the readiness deadline clamped to [min, max].

    No deadline gives the max (with the chart, 30m becomes 600). Fractions round up.
    """
    timeout = gang_max if instance_ready_timeout is None else instance_ready_timeout
    timeout = max(gang_min, min(timeout, gang_max))
    return math.ceil(timeout.total_seconds())


def _metadata(replica: InferenceReplica, name: str, extra: dict[str, str]) -> dict[str, Any]:
    labels = replica_labels(replica)
    labels.update(extra)
    return {"name": name, "namespace": replica.metadata.namespace, "labels": labels}


def render_pod_group(
    replica: InferenceReplica,
    *,
    index: int,
    incarnation: int,
    min_member: int,
    schedule_timeout_seconds: int,
) -> dict[str, Any]:
    """The scheduler-plugins PodGroup of one attempt of multi-pod Instance ``index``."""
    metadata = _metadata(
        replica,
        pod_group_name(replica.stable_prefix, index, incarnation),
        {LABEL_INSTANCE_INDEX: str(index), LABEL_INCARNATION: str(incarnation)},
    )
    if replica.spec.topology_key:
        metadata["annotations"] = {ANNOTATION_TOPOLOGY_KEY: replica.spec.topology_key}
    metadata["ownerReferences"] = [owner_reference(replica)]
    return {
        "apiVersion": POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": schedule_timeout_seconds},
    }


def priority_class_name(runners: Sequence[Runner]) -> str:
    """The ``priorityClassName`` the runners' pod templates name ("" when none does)."""
    for runner in runners:
        name = as_dict(as_dict(runner.template).get("spec")).get("priorityClassName")
        if isinstance(name, str) and name:
            return name
    return ""


def _gang_spec(
    replica: InferenceReplica, min_count: int, api_version: str, priority_class: str
) -> dict[str, Any]:
    """The gang policy and (with ``topologyKey``) the topology constraint; with ``v1beta1``
    also ``disruptionMode: {all: {}}`` (an Instance is disrupted whole) and the pods'
    ``priorityClassName``."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if replica.spec.topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": replica.spec.topology_key}]}
    if api_version == NATIVE_API_V1BETA1:
        spec["disruptionMode"] = {"all": {}}
        if priority_class:
            spec["priorityClassName"] = priority_class
    return spec


def render_workload(
    replica: InferenceReplica,
    *,
    revision_hash: str,
    min_count: int,
    api_version: str = NATIVE_API_V1BETA1,
    priority_class: str = "",
) -> dict[str, Any]:
    """The native Workload of one revision (in ``api_version``): one PodGroup template, the
    Instance's gang; ``v1beta1`` names the InferenceReplica in ``spec.controllerRef``."""
    metadata = _metadata(
        replica, workload_name(replica.stable_prefix, revision_hash),
        {LABEL_REVISION_HASH: revision_hash},
    )
    metadata["ownerReferences"] = [owner_reference(replica)]
    template = {"name": POD_GROUP_TEMPLATE,
                **_gang_spec(replica, min_count, api_version, priority_class)}
    spec: dict[str, Any] = {"podGroupTemplates": [template]}
    if api_version == NATIVE_API_V1BETA1:
        owner = owner_reference(replica)
        spec = {"controllerRef": {"apiGroup": str(owner["apiVersion"]).split("/")[0],
                                  "kind": owner["kind"], "name": owner["name"]}, **spec}
    return {"apiVersion": api_version, "kind": "Workload", "metadata": metadata, "spec": spec}


def render_native_pod_group(
    replica: InferenceReplica,
    *,
    index: int,
    incarnation: int,
    revision_hash: str,
    min_count: int,
    api_version: str = NATIVE_API_V1BETA1,
    priority_class: str = "",
) -> dict[str, Any]:
    """The native PodGroup of one attempt, made from its revision's Workload template
    (``v1beta1``: ``spec.workloadRef``; ``v1alpha2``: ``spec.podGroupTemplateRef.workload``)."""
    metadata = _metadata(
        replica,
        pod_group_name(replica.stable_prefix, index, incarnation),
        {
            LABEL_INSTANCE_INDEX: str(index),
            LABEL_INCARNATION: str(incarnation),
            LABEL_REVISION_HASH: revision_hash,
        },
    )
    metadata["ownerReferences"] = [owner_reference(replica)]
    workload = workload_name(replica.stable_prefix, revision_hash)
    ref: dict[str, Any] = (
        {"workloadRef": {"workloadName": workload, "templateName": POD_GROUP_TEMPLATE}}
        if api_version == NATIVE_API_V1BETA1 else
        {"podGroupTemplateRef": {"workload": {"workloadName": workload,
                                              "podGroupTemplateName": POD_GROUP_TEMPLATE}}})
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": {**ref, **_gang_spec(replica, min_count, api_version, priority_class)},
    }
