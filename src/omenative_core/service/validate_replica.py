"""Admission checks for InferenceReplicas: user-written (standalone) specs, and the
annotations users write on any replica.

``validate_standalone_replica(obj, old)`` returns every ``Rejection`` of a standalone
replica's spec; ``validate_replica_annotations(obj, old, projected=...)`` those of its
annotations (an empty ``ome.io/release-held-revision``; migration requests, judged by the
same ``migration_rejections`` as on an InferenceService); ``replica_warnings(obj, old,
stored_revisions)`` what admits with a warning (more Instances than the manager decodes, a
partition left above ``replicas`` by a scale-down, a ``rollbackToRevision`` that names no
stored ControllerRevision). All take the JSON as submitted; nothing here reads the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from omenative_core.codec import CodecError, spec_from_json
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import InferenceReplica, ObjectMeta
from omenative_core.render import validate_replica
from omenative_core.revisions import hash_of
from omenative_core.rollout.validate import budget_problem
from omenative_core.service.migration_request import MigrationTarget, migration_rejections
from omenative_core.service.rejection import Rejection, reject, warn

__all__ = [
    "ANNOTATION_RELEASE_HELD",
    "MAX_DECODED_INSTANCES",
    "colliding_service_names",
    "name_collision",
    "partition_rejections",
    "replica_warnings",
    "too_many_instances",
    "validate_replica_annotations",
    "validate_standalone_replica",
]

ANNOTATION_RELEASE_HELD: Final = "ome.io/release-held-revision"
"""Gives a held revision another try; its value names the revision (name or hash)."""

MAX_DECODED_INSTANCES: Final = LifecycleConfig().max_decoded_instances
"""OME's ``maxDecodedInstances`` (20,000): most Instances whose status the manager decodes."""

_BUDGETS: Final = (
    ("lifecycle", "updateStrategy", "rollingUpdate", "maxSurge"),
    ("lifecycle", "updateStrategy", "rollingUpdate", "maxUnavailable"),
    ("pacing", "maxUnavailable"),
)
_PARTITIONS: Final = (
    ("lifecycle", "updateStrategy", "rollingUpdate", "partition"),
    ("pacing", "partition"),
)


def _dig(obj: object, *keys: str) -> object:
    """``obj[k1][k2]...`` through mappings; None where a level is missing."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _mapping(obj: object) -> Mapping[str, Any]:
    return obj if isinstance(obj, Mapping) else {}


def _replicas(spec: Mapping[str, Any]) -> int | None:
    """``spec.replicas`` (1 when unset, as the manager reads it); None when not a count."""
    value = spec.get("replicas", 1)
    if value is None:
        return 1
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---------------------------------------------------------------------------- spec rules

_SpecCheck = Callable[[Mapping[str, Any], Mapping[str, Any]], list[Rejection]]


def _controller_only(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> list[Rejection]:
    return [
        reject("ControllerOnlyField", f"spec.{key}", f"spec.{key} is set only by the controller")
        for key in ("placementExecution", "placementReplicaLimit")
        if spec.get(key) is not None
    ]


def _parent_ref(spec: Mapping[str, Any], meta: Mapping[str, Any]) -> list[Rejection]:
    parent = spec.get("parentRef")
    if not isinstance(parent, Mapping):
        return []
    owners = meta.get("ownerReferences")
    owned = isinstance(owners, list) and any(
        isinstance(o, Mapping)
        and o.get("kind") == "InferenceService"
        and o.get("name") == parent.get("name")
        for o in owners
    )
    if owned:
        return []
    return [
        reject(
            "ParentRefWithoutOwner",
            "spec.parentRef",
            f"spec.parentRef names {parent.get('name')!r} but the InferenceReplica has no "
            "owner reference to that InferenceService",
        )
    ]


def _autoscaler(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> list[Rejection]:
    klass = _dig(spec, "autoscaler", "class")
    if not (isinstance(klass, str) and klass.lower() in ("hpa", "keda")):
        return []
    return [
        reject(
            "AutoscalerClassNotAllowed",
            "spec.autoscaler.class",
            f"autoscaler class {klass} is not allowed on a standalone InferenceReplica; "
            "scale it through its scale subresource",
        )
    ]


def _lifecycle_min_ready(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> list[Rejection]:
    if _dig(spec, "lifecycle", "minReadySeconds") is None:
        return []
    return [
        reject(
            "LifecycleMinReadySecondsNotAllowed",
            "spec.lifecycle.minReadySeconds",
            "spec.lifecycle.minReadySeconds is not read on an InferenceReplica; "
            "set spec.minReadySeconds",
        )
    ]


def _refs(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> list[Rejection]:
    out: list[Rejection] = []
    refs = [k for k in ("modelRef", "runtimeRef") if spec.get(k) is not None]
    if refs and spec.get("runners"):
        out.append(
            reject(
                "RunnersWithRefs",
                "spec.runners",
                f"spec.runners cannot be combined with spec.{' or spec.'.join(refs)}",
            )
        )
    runtime_ref = spec.get("runtimeRef")
    if isinstance(runtime_ref, Mapping) and (
        runtime_ref.get("autoSync") is False or runtime_ref.get("revision") is not None
    ):
        out.append(
            reject(
                "PinnedRuntimeRef",
                "spec.runtimeRef",
                "a pinned runtimeRef (autoSync: false or a revision) is not allowed; "
                "the InferenceReplica follows the live runtime",
            )
        )
    return out


def _budgets(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> list[Rejection]:
    out: list[Rejection] = []
    for keys in _BUDGETS:
        path = "spec." + ".".join(keys)
        problem = budget_problem(_dig(spec, *keys), path)
        if problem is not None:
            out.append(reject(problem[0], path, problem[1]))
    return out


_SPEC_CHECKS: Final[tuple[_SpecCheck, ...]] = (
    _controller_only,
    _parent_ref,
    _autoscaler,
    _lifecycle_min_ready,
    _refs,
    _budgets,
)


def partition_rejections(
    partitions: Sequence[tuple[str, object, object]], replicas: int | None, where: str
) -> list[Rejection]:
    """``PartitionAboveReplicas`` for each (path, partition, old partition) whose new,
    changed partition is above ``replicas`` (``where`` names that count). A partition left
    above by a scale-down is only warned (``replica_warnings``), so scaling is never refused.
    """
    out: list[Rejection] = []
    for path, value, old in partitions:
        if replicas is None or not isinstance(value, int) or isinstance(value, bool):
            continue
        if value > replicas and value != old:
            out.append(
                reject(
                    "PartitionAboveReplicas", path, _partition_text(path, value, replicas, where)
                )
            )
    return out


def _partition_text(path: str, value: int, replicas: int, where: str) -> str:
    return (
        f"{path} is {value}, above {where} ({replicas}): the partition keeps the Instances "
        f"with an index below it on their revision, so it must be at most {where}; "
        "lower the partition or raise the replica count"
    )


def _partitions(spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Rejection]:
    rows = [
        ("spec." + ".".join(keys), _dig(spec, *keys), _dig(old, *keys) if old else None)
        for keys in _PARTITIONS
    ]
    return partition_rejections(rows, _replicas(spec), "spec.replicas")


def validate_standalone_replica(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> list[Rejection]:
    """Every reason to refuse a user-written InferenceReplica (JSON as submitted; ``old``
    is the stored object on an update).

    Rejected: ``parentRef`` without an InferenceService owner reference of that name
    (``ParentRefWithoutOwner``), the controller-only placement fields
    (``ControllerOnlyField``), an HPA or KEDA ``autoscaler.class``
    (``AutoscalerClassNotAllowed``), ``lifecycle.minReadySeconds``
    (``LifecycleMinReadySecondsNotAllowed``; use ``spec.minReadySeconds``), runners together
    with ``modelRef`` / ``runtimeRef`` (``RunnersWithRefs``), a pinned ``runtimeRef``
    (``PinnedRuntimeRef``), a ``maxSurge`` / ``maxUnavailable`` that is neither a count >= 0
    nor a percentage up to 100% (``InvalidRollingUpdateInteger`` / ``...Percent``), a
    partition set above ``replicas`` (``PartitionAboveReplicas``), and whatever the core's
    ``validate_replica`` finds (reason as it names it). Name collisions with an ISVC's
    objects need the cluster: the shell checks.
    """
    raw_spec = obj.get("spec")
    if not isinstance(raw_spec, Mapping):
        return [reject("InvalidSpec", "spec", "spec must be an object")]
    meta = _mapping(obj.get("metadata"))
    out = [r for check in _SPEC_CHECKS for r in check(raw_spec, meta)]
    old_spec = _dig(old, "spec") if old is not None else None
    out += _partitions(raw_spec, old_spec if isinstance(old_spec, Mapping) else None)
    try:
        spec = spec_from_json(raw_spec)
    except CodecError as exc:
        message = f"InvalidSpec: {exc}"
        return [*out, Rejection(reason="InvalidSpec", message=message, field=exc.path or "spec")]
    if any(raw_spec.get(k) is not None for k in ("modelRef", "runtimeRef")) and not raw_spec.get(
        "runners"
    ):
        return out  # rendered from the refs: no runner set to check here
    name = meta.get("name") if isinstance(meta.get("name"), str) else ""
    view = InferenceReplica(metadata=ObjectMeta(name=str(name) or "unnamed"), spec=spec)
    out += [
        Rejection(reason=e.partition(": ")[0], message=e, field="spec")
        for e in validate_replica(view)
    ]
    return out


# ---------------------------------------------------------------------------- name collisions

_COMPONENT_SUFFIXES: Final = ("-engine", "-decoder", "-router")


def colliding_service_names(name: str) -> tuple[str, ...]:
    """The InferenceService names whose projected replicas a standalone replica called
    ``name`` would share names with: ``name`` itself, and ``name`` less an ``-engine``,
    ``-decoder`` or ``-router`` suffix (OME's guide "Run a standalone InferenceReplica",
    ome-projects/ome-docs@8c764098, "What the webhook rejects")."""
    stems = [name[: -len(s)] for s in _COMPONENT_SUFFIXES if name.endswith(s) and name != s]
    return (name, *stems)


def name_collision(name: str, existing: Sequence[str]) -> Rejection | None:
    """``NameCollidesWithInferenceService`` when an InferenceService in ``existing`` (the
    ones of ``colliding_service_names`` that exist) would collide with ``name``."""
    hits = [n for n in colliding_service_names(name) if n in existing]
    if not hits:
        return None
    isvc = hits[0]
    why = ("it is that InferenceService's name" if isvc == name
           else f"it is the name of InferenceService {isvc!r}'s projected replica")
    return reject(
        "NameCollidesWithInferenceService", "metadata.name",
        f"InferenceReplica name {name!r} collides with InferenceService {isvc!r}: {why}, so "
        "their pods and Services would share names; choose another name")


# ---------------------------------------------------------------------------- annotations


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    raw = _dig(obj, "metadata", "annotations")
    return raw if isinstance(raw, Mapping) else {}


def validate_replica_annotations(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None = None, *, projected: bool = False
) -> list[Rejection]:
    """Every reason to refuse the annotations of an InferenceReplica write.

    ``InvalidReleaseHeldRevision``: an empty ``ome.io/release-held-revision`` (the manager
    never consumes it, so it would sit there doing nothing). ``InvalidMigrationRequest``: a
    malformed migration request on a standalone replica (``projected`` skips it: those
    come from the InferenceService, checked there). Unchanged values pass on update.
    """
    now, before = _annotations(obj), _annotations(old)
    out: list[Rejection] = []
    release = now.get(ANNOTATION_RELEASE_HELD)
    if (
        release is not None
        and not release.strip()
        and before.get(ANNOTATION_RELEASE_HELD) != release
    ):
        out.append(
            reject(
                "InvalidReleaseHeldRevision",
                f"metadata.annotations[{ANNOTATION_RELEASE_HELD}]",
                f"{ANNOTATION_RELEASE_HELD} is empty: set it to the name of a held revision "
                "or its hash (8 characters or more), as `kubectl ome instance release-held` "
                "does; an empty value is never acted on",
            )
        )
    if not projected:
        component = _dig(obj, "spec", "component")
        name = component if isinstance(component, str) else "engine"
        target = MigrationTarget(modes={name: "OMENative"}, implied=name, kind="InferenceReplica")
        out += migration_rejections(now, before if old is not None else None, target)
    return out


# ---------------------------------------------------------------------------- warnings


def replica_warnings(
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None = None,
    stored_revisions: Sequence[str] | None = None,
) -> list[Rejection]:
    """What admits an InferenceReplica with a warning (``Rejection.warning``).

    ``TooManyInstances``: ``replicas`` above ``maxDecodedInstances``.
    ``PartitionAboveReplicas``: an unchanged partition now above ``replicas``.
    ``RollbackRevisionNotFound``: a new ``pacing.rollbackToRevision`` that is neither the
    name nor the hash of one of ``stored_revisions`` (the replica's ControllerRevisions;
    None when the caller could not list them, which skips the check).
    """
    spec = _mapping(obj.get("spec"))
    old_spec = _mapping(_dig(old, "spec")) if old is not None else None
    out: list[Rejection] = []
    replicas = _replicas(spec)
    if replicas is not None and replicas > MAX_DECODED_INSTANCES:
        out.append(too_many_instances("spec.replicas", replicas))
    for keys in _PARTITIONS:
        value, path = _dig(spec, *keys), "spec." + ".".join(keys)
        if (
            isinstance(value, int)
            and replicas is not None
            and value > replicas
            and (old_spec is not None and _dig(old_spec, *keys) == value)
        ):
            out.append(
                warn(
                    "PartitionAboveReplicas",
                    path,
                    f"{path} is {value}, above spec.replicas ({replicas}): no Instance is "
                    "updated until the partition is lowered",
                )
            )
    rollback = _rollback_warning(spec, old_spec, stored_revisions)
    if rollback is not None:
        out.append(rollback)
    return out


def too_many_instances(path: str, count: int) -> Rejection:
    """The ``TooManyInstances`` warning for a replica count above the decode limit."""
    return warn(
        "TooManyInstances",
        path,
        f"{path} is {count}, above maxDecodedInstances ({MAX_DECODED_INSTANCES:,}): the "
        f"manager decodes the Instance status of at most {MAX_DECODED_INSTANCES:,} Instances "
        "per InferenceReplica; keep the count at or below it",
    )


def _rollback_warning(
    spec: Mapping[str, Any],
    old_spec: Mapping[str, Any] | None,
    stored: Sequence[str] | None,
) -> Rejection | None:
    value = _dig(spec, "pacing", "rollbackToRevision")
    if not isinstance(value, str) or not value or stored is None:
        return None
    if old_spec is not None and _dig(old_spec, "pacing", "rollbackToRevision") == value:
        return None
    if any(value in (name, hash_of(name)) for name in stored):
        return None
    known = ", ".join(sorted(stored)) or "none yet"
    return warn(
        "RollbackRevisionNotFound",
        "spec.pacing.rollbackToRevision",
        f"spec.pacing.rollbackToRevision {value!r} names no stored revision (by name or "
        "hash); the manager keeps the spec's revision until it does. Stored: "
        f"{known}",
    )
