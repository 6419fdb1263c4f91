"""Rendering: names, pods, PodGroups and the headless Service of an InferenceReplica.

Everything here is a pure function of the replica, a runner set and an Instance's
identity; the same inputs always give the same JSON. Names are deterministic
(``{prefix}-{index}-{runner}-{ordinal}``) so a repeated create is answered "already
exists". ``validate_replica`` lists what must be rejected before anything is rendered.

Rendering never mutates its inputs: each pod starts from a private copy of the runner's
template (``jsoncopy``). Placement rules live in ``placement``, the replica's validation
rules in ``replica_rules``; ``validate_replica`` here puts them together with the naming
scheme.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from attrs import frozen

from omenative_core.gang import (
    pod_group_name,
    render_pod_group,
    schedule_timeout_seconds,
)
from omenative_core.jsoncopy import as_dict, as_list, copy_json
from omenative_core.labels import (
    ANNOTATION_IN_PLACE,
    ANNOTATION_KUEUE_POD_GROUP_NAME,
    ANNOTATION_KUEUE_POD_GROUP_SERVING,
    ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT,
    ANNOTATION_TOPOLOGY_KEY,
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_ISVC,
    LABEL_KUEUE_POD_GROUP,
    LABEL_KUEUE_QUEUE,
    LABEL_MANAGED_BY,
    LABEL_PAIRING,
    LABEL_POD_GROUP,
    LABEL_POD_ORDINAL,
    LABEL_REPLICA,
    LABEL_REVISION_HASH,
    LABEL_RUNNER,
    MANAGED_BY,
    PAIRED_COMPONENTS,
    SERVING_GATE,
    owner_reference,
    replica_labels,
)
from omenative_core.model.spec import COMPONENTS, InferenceReplica, Runner
from omenative_core.placement import place_pod
from omenative_core.policy import desired_instances
from omenative_core.replica_rules import (
    DNS_1035_LABEL,
    DNS_LABEL,
    LABEL_VALUE,
    MAX_NAME_LENGTH,
    placement_problems,
    runner_problems,
    too_long,
)

__all__ = [
    "ANNOTATION_IN_PLACE",
    "ANNOTATION_KUEUE_POD_GROUP_NAME",
    "ANNOTATION_KUEUE_POD_GROUP_SERVING",
    "ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT",
    "ANNOTATION_TOPOLOGY_KEY",
    "ENV_COMPONENT",
    "ENV_COMPONENT_REPLICAS",
    "ENV_INFERENCESERVICE_NAME",
    "ENV_INSTANCE_INDEX",
    "ENV_INSTANCE_POD_COUNT",
    "ENV_INSTANCE_POD_RANK",
    "ENV_INSTANCE_SUBDOMAIN",
    "ENV_LEADER_ADDRESS",
    "ENV_RUNNER",
    "ENV_RUNNER_INDEX",
    "ENV_RUNNER_SIZE",
    "FROM_SPEC",
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
    "MAX_NAME_LENGTH",
    "SERVING_GATE",
    "FromSpec",
    "PodSlot",
    "headless_service_name",
    "instance_slots",
    "instance_subdomain",
    "is_multi_pod",
    "kueue_pod_group_name",
    "pod_group_name",
    "pod_name",
    "pods_per_instance",
    "render_headless_service",
    "render_pod",
    "render_pod_group",
    "schedule_timeout_seconds",
    "validate_replica",
]

ENV_INFERENCESERVICE_NAME = "OME_INFERENCESERVICE_NAME"
"""The InferenceService name (the replica's own name when standalone)."""
ENV_COMPONENT = "OME_COMPONENT"
"""The component: engine, decoder or router."""
ENV_COMPONENT_REPLICAS = "OME_COMPONENT_REPLICAS"
"""The component's desired Instance count."""
ENV_INSTANCE_INDEX = "OME_INSTANCE_INDEX"
"""The pod's Instance index."""
ENV_RUNNER = "OME_RUNNER"
"""The pod's runner: default, leader or worker."""
ENV_RUNNER_SIZE = "OME_RUNNER_SIZE"
"""The size of the pod's runner (workers per Instance for a worker)."""
ENV_RUNNER_INDEX = "OME_RUNNER_INDEX"
"""The pod's ordinal within its runner."""
ENV_INSTANCE_SUBDOMAIN = "OME_INSTANCE_SUBDOMAIN"
"""``{prefix}-{index}`` (the pod's own prefix, ``render_pod(prefix=...)``)."""
ENV_LEADER_ADDRESS = "OME_LEADER_ADDRESS"
"""Multi-pod only: the leader's DNS name ``{prefix}-{index}-leader-0.{prefix}-headless``."""
ENV_INSTANCE_POD_RANK = "OME_INSTANCE_POD_RANK"
"""Multi-pod only: leader 0, worker k is k+1."""
ENV_INSTANCE_POD_COUNT = "OME_INSTANCE_POD_COUNT"
"""Multi-pod only: pods per Instance (leader plus workers)."""


class FromSpec(enum.Enum):
    """Sentinel type: take the value from the replica's spec."""

    FROM_SPEC = "FROM_SPEC"


FROM_SPEC: Final = FromSpec.FROM_SPEC
"""Default of ``render_pod(pairing_protocol=...)``: use ``replica.spec.pairing_protocol``."""


# ---------------------------------------------------------------------------- names


def pod_name(prefix: str, index: int, runner: str, ordinal: int) -> str:
    """``{prefix}-{index}-{runner}-{ordinal}``, e.g. ``chat-engine-0-leader-0``."""
    return f"{prefix}-{index}-{runner}-{ordinal}"


_KUEUE_HASH_LENGTH: Final = 8


def kueue_pod_group_name(prefix: str, index: int, incarnation: int, revision_hash: str) -> str:
    """Kueue's pod group (and Workload) of one attempt of multi-pod Instance ``index``.

    ``{prefix}-{index}-{incarnation}-{revision_hash}``, e.g. ``chat-engine-0-1-707e9a6aa7``:
    the attempt's identity, the same triple by which the planner tells the pods of one
    attempt from the others. Like the PodGroup (``pod_group_name``, one per attempt) it
    changes on every whole-Instance restart (incarnation), for a surge
    or migration Instance (a new index) and for a new Instance that reuses a freed index
    at another revision (an update's surge), so a new attempt never joins, or collides
    with, the Workload of a group being retired. Longer than ``MAX_NAME_LENGTH`` (a label
    value and the Workload's name), the prefix is cut and an 8-hex-digit sha256 of the full
    name is put before ``-{index}-{incarnation}-{revision_hash}``, so the result stays
    distinct and valid.
    """
    tail = f"-{index}-{incarnation}-{revision_hash}" if revision_hash else (
        f"-{index}-{incarnation}")
    full = f"{prefix}{tail}"
    if len(full) <= MAX_NAME_LENGTH:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:_KUEUE_HASH_LENGTH]
    room = MAX_NAME_LENGTH - len(tail) - _KUEUE_HASH_LENGTH - 1
    head = prefix[: max(room, 0)].rstrip("-.")
    name = f"{head}-{digest}{tail}" if head else f"{digest}{tail}"
    return name[:MAX_NAME_LENGTH]


def headless_service_name(prefix: str) -> str:
    """The headless Service every pod's DNS name hangs off: ``{prefix}-headless``."""
    return f"{prefix}-headless"


def instance_subdomain(prefix: str, index: int) -> str:
    """``OME_INSTANCE_SUBDOMAIN``: ``{prefix}-{index}``."""
    return f"{prefix}-{index}"


# ---------------------------------------------------------------------------- slots


@frozen
class PodSlot:
    """One pod of an Instance: its runner, ordinal within the runner and rank in the gang."""

    runner: str
    ordinal: int
    rank: int


_DEFAULT_SLOTS = (PodSlot("default", 0, 0),)


def _runner_map(runners: Sequence[Runner]) -> dict[str, Runner]:
    return {r.name: r for r in runners}


def instance_slots(runners: Sequence[Runner]) -> tuple[PodSlot, ...]:
    """The pods of one Instance in rank order.

    ``default`` alone gives one slot (rank 0); ``leader`` + ``worker`` (size k) gives the
    leader (ordinal 0, rank 0) then workers ordinal 0..k-1 with rank 1..k. Any other runner
    set raises ``ValueError`` (``validate_replica`` reports it first).
    """
    by_name = _runner_map(runners)
    names = sorted(by_name)
    if names == ["default"] and len(runners) == 1:
        return _DEFAULT_SLOTS
    if names == ["leader", "worker"] and len(runners) == 2:
        size = by_name["worker"].size
        if size < 1:
            raise ValueError(f"worker runner size is {size}; it must be >= 1")
        workers = (PodSlot("worker", k, k + 1) for k in range(size))
        return (PodSlot("leader", 0, 0), *workers)
    raise ValueError(
        f"runners {[r.name for r in runners]} are neither 'default' alone nor 'leader' and 'worker'"
    )


def pods_per_instance(runners: Sequence[Runner]) -> int:
    """How many pods one Instance has: 1, or 1 + the worker size."""
    for r in runners:
        if r.name == "worker":
            return 1 + r.size
    return 1


def is_multi_pod(runners: Sequence[Runner]) -> bool:
    """True for a leader + worker Instance, False for a single ``default`` pod."""
    return any(r.name in ("leader", "worker") for r in runners)


# ---------------------------------------------------------------------------- pods


def render_pod(
    replica: InferenceReplica,
    *,
    runners: Sequence[Runner],
    revision_hash: str,
    index: int,
    incarnation: int,
    slot: PodSlot,
    ordinal_slot: int = 0,
    replicas: int,
    use_pod_group: bool,
    native_gang: bool = False,
    avoid_node: str | None = None,
    prefer_nodes: Sequence[str] = (),
    pairing_protocol: str | Literal[FromSpec.FROM_SPEC] | None = FROM_SPEC,
    prefix: str | None = None,
) -> dict[str, Any]:
    """A complete v1 Pod for one slot of Instance ``index`` at revision ``revision_hash``.

    ``prefix`` names the pod, its headless Service (``subdomain``) and its leader's
    address; default the replica's (``InferenceReplica.prefix``). The planner passes the
    pre-OME ``{replica}`` for an attempt whose pods already carry it
    (``PassView.attempt_prefix``).

    ``runners`` are the revision's runners (not necessarily the spec's). The ordinal in
    the name is ``slot.ordinal`` for a multi-pod Instance and ``ordinal_slot`` (the
    Instance's active ordinal, 0 or 1) for a single ``default`` pod. ``pairing_protocol``
    defaults to the spec's; pass the revision's when rendering an older revision.

    A multi-pod Instance's pods join the attempt's PodGroup (``pod_group_name``): with
    ``use_pod_group`` (scheduler-plugins) through the ``scheduling.x-k8s.io/pod-group``
    label; with ``native_gang`` (Kubernetes' own) through ``spec.schedulingGroup``, and
    then the worker's pod affinity to its leader is left out: the PodGroup's topology
    constraint keeps the gang in one ``topologyKey`` domain, and kube-scheduler 1.36 finds
    no placement for a gang whose workers need an unbound leader.

    OME's labels win over the template's. A multi-pod Instance whose pod carries
    ``kueue.x-k8s.io/queue-name`` also gets Kueue's pod group: the label
    ``kueue.x-k8s.io/pod-group-name`` (``kueue_pod_group_name``, per attempt) and the
    annotations ``kueue.x-k8s.io/pod-group-total-count`` (pods per Instance) and
    ``kueue.x-k8s.io/pod-group-serving: "true"``, all replacing the template's;
    single-pod Instances and pods without a queue keep whatever the template has. These
    are rendered per pod, not part of the hashed template, so they never change a
    revision. OME's env vars go first in every non-init
    container, replacing any template entry of the same name, so template vars can refer
    to them with ``$(OME_...)`` (Kubernetes only expands references to earlier entries;
    LWS orders its variables the same way).
    """
    by_name = _runner_map(runners)
    runner = by_name.get(slot.runner)
    if runner is None:
        raise ValueError(
            f"InferenceReplica {replica.metadata.name!r}: no runner {slot.runner!r} "
            f"in {sorted(by_name)}"
        )
    multi = "leader" in by_name or "worker" in by_name
    worker = by_name.get("worker")
    count = 1 + (worker.size if worker is not None else 0)
    ordinal = slot.ordinal if multi else ordinal_slot
    prefix = replica.prefix if prefix is None else prefix
    name = pod_name(prefix, index, slot.runner, ordinal)
    headless = headless_service_name(prefix)
    pairing = replica.spec.pairing_protocol if pairing_protocol is FROM_SPEC else pairing_protocol

    template = copy_json(runner.template) if runner.template else {}
    identity = _PodIdentity(
        name=name,
        index=index,
        incarnation=incarnation,
        runner=slot.runner,
        ordinal=ordinal,
        multi=multi,
        count=count,
    )
    metadata = _pod_metadata(
        replica,
        as_dict(template.get("metadata")),
        identity,
        revision_hash=revision_hash,
        pairing=pairing,
        use_pod_group=use_pod_group,
    )

    spec = as_dict(template.get("spec"))
    spec["hostname"] = name
    spec["subdomain"] = headless

    gates = as_list(spec.get("readinessGates"))
    if not any(isinstance(g, Mapping) and g.get("conditionType") == SERVING_GATE for g in gates):
        gates.append({"conditionType": SERVING_GATE})
    spec["readinessGates"] = gates

    ours: list[tuple[str, str]] = [
        (ENV_INFERENCESERVICE_NAME, replica.isvc_name),
        (ENV_COMPONENT, replica.spec.component),
        (ENV_COMPONENT_REPLICAS, str(replicas)),
        (ENV_INSTANCE_INDEX, str(index)),
        (ENV_RUNNER, slot.runner),
        (ENV_RUNNER_SIZE, str(runner.size)),
        (ENV_RUNNER_INDEX, str(ordinal)),
        (ENV_INSTANCE_SUBDOMAIN, instance_subdomain(prefix, index)),
    ]
    if multi:
        ours += [
            (ENV_LEADER_ADDRESS, f"{pod_name(prefix, index, 'leader', 0)}.{headless}"),
            (ENV_INSTANCE_POD_RANK, str(slot.rank)),
            (ENV_INSTANCE_POD_COUNT, str(count)),
        ]
    spec["containers"] = _with_env_first(as_list(spec.get("containers")), ours)
    native = native_gang and multi
    if native:
        spec["schedulingGroup"] = {
            "podGroupName": pod_group_name(replica.stable_prefix, index, incarnation)
        }
    place_pod(
        spec,
        replica,
        runner=slot.runner,
        index=index,
        incarnation=incarnation,
        avoid_node=avoid_node,
        prefer_nodes=prefer_nodes,
        leader_affinity=not native,
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@frozen(kw_only=True)
class _PodIdentity:
    """Which pod: its name, Instance, incarnation, runner and ordinal, and the Instance's
    shape (multi-pod, pods per Instance)."""

    name: str
    index: int
    incarnation: int
    runner: str
    ordinal: int
    multi: bool
    count: int


def _pod_metadata(
    replica: InferenceReplica,
    tmeta: dict[str, Any],
    pod: _PodIdentity,
    *,
    revision_hash: str,
    pairing: str | None,
    use_pod_group: bool,
) -> dict[str, Any]:
    """The pod's metadata: the template's labels and annotations, then OME's (and Kueue's
    pod group for a queued multi-pod Instance), owned by the replica."""
    prefix = replica.stable_prefix  # the groups' names; the pod's is ``pod.name``
    labels: dict[str, str] = as_dict(tmeta.get("labels"))
    labels.update(replica_labels(replica))
    labels[LABEL_INSTANCE_INDEX] = str(pod.index)
    labels[LABEL_INCARNATION] = str(pod.incarnation)
    labels[LABEL_RUNNER] = pod.runner
    labels[LABEL_POD_ORDINAL] = str(pod.ordinal)
    labels[LABEL_REVISION_HASH] = revision_hash
    if pairing and replica.spec.component in PAIRED_COMPONENTS:
        labels[LABEL_PAIRING] = pairing
    if use_pod_group and pod.multi:
        labels[LABEL_POD_GROUP] = pod_group_name(prefix, pod.index, pod.incarnation)

    metadata: dict[str, Any] = {
        "name": pod.name,
        "namespace": replica.metadata.namespace,
        "labels": labels,
    }
    annotations = as_dict(tmeta.get("annotations"))
    if pod.multi and labels.get(LABEL_KUEUE_QUEUE):
        # one Kueue Workload per attempt, admitted all at once
        kueue_group = kueue_pod_group_name(prefix, pod.index, pod.incarnation, revision_hash)
        labels[LABEL_KUEUE_POD_GROUP] = kueue_group
        if ANNOTATION_KUEUE_POD_GROUP_NAME in annotations:
            annotations[ANNOTATION_KUEUE_POD_GROUP_NAME] = kueue_group
        annotations[ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT] = str(pod.count)
        annotations[ANNOTATION_KUEUE_POD_GROUP_SERVING] = "true"
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(replica)]
    return metadata


def _with_env_first(containers: list[Any], ours: list[tuple[str, str]]) -> list[Any]:
    """Every container with OME's variables first, replacing template entries of the same
    name (so template variables can refer to them with ``$(OME_...)``)."""
    our_names = {n for n, _ in ours}
    out: list[Any] = []
    for c in containers:
        container = as_dict(c)
        env: list[Any] = [{"name": n, "value": v} for n, v in ours]
        env.extend(
            e
            for e in as_list(container.get("env"))
            if not (isinstance(e, Mapping) and e.get("name") in our_names)
        )
        container["env"] = env
        out.append(container)
    return out


# ---------------------------------------------------------------------------- Service


def render_headless_service(replica: InferenceReplica) -> dict[str, Any]:
    """The ``{prefix}-headless`` Service: DNS for every pod, ready or not."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": headless_service_name(replica.prefix),
            "namespace": replica.metadata.namespace,
            "labels": replica_labels(replica),
            "ownerReferences": [owner_reference(replica)],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_REPLICA: replica.metadata.name},
        },
    }


# ---------------------------------------------------------------------------- validation


def _longest_pod_name(prefix: str, runners: Sequence[Runner], top: int) -> str:
    """The longest pod name Instance ``top`` can get (the highest ordinal of each runner)."""
    by_name = _runner_map(runners)
    if "default" in by_name:
        return pod_name(prefix, top, "default", 1)
    candidates = [
        pod_name(prefix, top, "leader", 0),
        pod_name(prefix, top, "worker", by_name["worker"].size - 1),
    ]
    return max(candidates, key=len)


def _name_problems(
    replica: InferenceReplica, max_index: int | None, *, shape_ok: bool
) -> list[str]:
    """Names and label values the replica's objects would get that Kubernetes refuses."""
    spec = replica.spec
    prefix = replica.prefix
    errors: list[str] = []
    if shape_ok:
        desired = desired_instances(spec.replicas)
        top = max(2 * desired - 1, 0) if max_index is None else max_index
        longest = _longest_pod_name(prefix, spec.runners, top)
        msg = too_long("pod name", longest)
        if msg:
            errors.append(msg)
        elif not DNS_LABEL.match(longest):
            errors.append(
                f"InvalidName: pod name {longest!r} is not a DNS label (lowercase letters, "
                "digits and '-', starting and ending with a letter or digit)"
            )
    service = headless_service_name(prefix)
    msg = too_long("headless Service name", service)
    if msg:
        errors.append(msg)
    elif not DNS_1035_LABEL.match(service):
        errors.append(
            f"InvalidName: headless Service name {service!r} is not a DNS-1035 label "
            "(lowercase letters, digits and '-', starting with a letter)"
        )
    for key, value in (
        (LABEL_REPLICA, replica.metadata.name),
        (LABEL_ISVC, replica.isvc_name),
        (LABEL_COMPONENT, spec.component),
    ):
        msg = too_long(f"label {key} value", value)
        if msg:
            errors.append(msg)
        elif not LABEL_VALUE.match(value):
            errors.append(f"InvalidName: label {key} value {value!r} is not a valid label value")
    return errors


def validate_replica(replica: InferenceReplica, *, max_index: int | None = None) -> tuple[str, ...]:
    """Why ``replica`` must be rejected, as ``"<Reason>: <message>"`` entries; () when valid.

    Name lengths are checked for the longest pod name an Instance can get: index
    ``max_index`` (default ``2 * desired - 1``: the desired Instances plus a full surge of
    replacements) and the highest ordinal (1 for ``default``, whose surge slot is 1).
    """
    spec = replica.spec
    errors: list[str] = []
    if spec.component not in COMPONENTS:
        errors.append(
            f"UnknownComponent: component {spec.component!r} is not one of {', '.join(COMPONENTS)}"
        )
    if spec.replicas is not None and spec.replicas < 0:
        errors.append(f"InvalidReplicas: replicas is {spec.replicas}; it must be >= 0")
    runner_errors, shape_ok = runner_problems(spec.runners)
    errors += runner_errors
    errors += placement_problems(spec)
    errors += _name_problems(replica, max_index, shape_ok=shape_ok)
    return tuple(errors)
