"""Gang scheduling: which mechanism a multi-pod Instance uses, and the objects it gets.

Two mechanisms place an Instance's pods all at once or not at all:

- ``Native``: Kubernetes' own gang scheduling (1.36, alpha; API group
  ``scheduling.k8s.io/v1alpha2``, read by the default kube-scheduler). One ``Workload``
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
    "NATIVE_API_VERSION",
    "POD_GROUP_API_VERSION",
    "POD_GROUP_TEMPLATE",
    "choose_mechanism",
    "gang_condition",
    "pod_group_name",
    "render_native_pod_group",
    "render_pod_group",
    "render_workload",
    "schedule_timeout_seconds",
    "scheduler_name",
    "workload_name",
]

MECHANISM_NATIVE: Final = "Native"
"""Kubernetes' own gang scheduling (``scheduling.k8s.io/v1alpha2``)."""
MECHANISM_POD_GROUP: Final = "PodGroup"
"""The scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``)."""
MECHANISM_NONE: Final = "None"
"""No gang scheduling: pods are placed one by one."""

NATIVE_API_VERSION: Final = "scheduling.k8s.io/v1alpha2"
"""The API version of Kubernetes' Workload and PodGroup."""
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


def choose_mechanism(
    setting: str,
    *,
    multi_pod: bool,
    native_api: bool,
    pod_group_crd: bool,
    scheduler: str | None,
) -> str:
    """The gang mechanism for a replica: ``Native``, ``PodGroup`` or ``None``.

    Single-pod Instances need none. ``Native`` and ``PodGroup`` are used when their API is
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
    native_api: bool,
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
                f"{NATIVE_API_VERSION} Workload and PodGroups are used")
    if chosen == MECHANISM_POD_GROUP:
        return ("False", "GangSchedulingAvailable",
                f"gang mechanism PodGroup (lifecycle.gangScheduling {setting}): "
                f"scheduler-plugins PodGroups ({POD_GROUP_API_VERSION}) are used")
    native = "served" if native_api else "not served"
    crd = "installed" if pod_group_crd else "not installed"
    who = scheduler or "the default scheduler"
    return ("True", "PodGroupCRDNotInstalled",
            f"gang mechanism None (lifecycle.gangScheduling {setting}; "
            f"{NATIVE_API_VERSION} {native}, the scheduler-plugins PodGroup CRD {crd}, "
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
        pod_group_name(replica.prefix, index, incarnation),
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


def _gang_spec(replica: InferenceReplica, min_count: int) -> dict[str, Any]:
    """The gang policy and (with ``topologyKey``) the topology constraint."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if replica.spec.topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": replica.spec.topology_key}]}
    return spec


def render_workload(
    replica: InferenceReplica, *, revision_hash: str, min_count: int
) -> dict[str, Any]:
    """The native Workload of one revision: one PodGroup template, the Instance's gang."""
    metadata = _metadata(
        replica, workload_name(replica.prefix, revision_hash),
        {LABEL_REVISION_HASH: revision_hash},
    )
    metadata["ownerReferences"] = [owner_reference(replica)]
    template = {"name": POD_GROUP_TEMPLATE, **_gang_spec(replica, min_count)}
    return {
        "apiVersion": NATIVE_API_VERSION,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {"podGroupTemplates": [template]},
    }


def render_native_pod_group(
    replica: InferenceReplica,
    *,
    index: int,
    incarnation: int,
    revision_hash: str,
    min_count: int,
) -> dict[str, Any]:
    """The native PodGroup of one attempt, made from its revision's Workload template."""
    metadata = _metadata(
        replica,
        pod_group_name(replica.prefix, index, incarnation),
        {
            LABEL_INSTANCE_INDEX: str(index),
            LABEL_INCARNATION: str(incarnation),
            LABEL_REVISION_HASH: revision_hash,
        },
    )
    metadata["ownerReferences"] = [owner_reference(replica)]
    ref = {
        "workload": {
            "workloadName": workload_name(replica.prefix, revision_hash),
            "podGroupTemplateName": POD_GROUP_TEMPLATE,
        }
    }
    return {
        "apiVersion": NATIVE_API_VERSION,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": {"podGroupTemplateRef": ref, **_gang_spec(replica, min_count)},
    }
