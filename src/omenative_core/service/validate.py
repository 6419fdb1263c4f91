"""Admission checks for InferenceServices and standalone InferenceReplicas, OME's reasons.

``validate_isvc(new, old)`` returns every ``Rejection`` (reason, message, field path); an
empty list admits the object. Each message starts with its reason, as OME's webhook
messages do, so it reads on its own in ``kubectl apply`` output. Rules:

* ``InvalidDeploymentModeCombination``: the engine's and decoder's modes, as the
  InferenceService itself declares them (component annotation, else
  ``spec.deploymentMode``; runtimes do not count), differ while either is OMENative.
* ``InvalidLeaderWorkerPairing``: ``LeaderRequiresWorker``, ``WorkerRequiresLeader``,
  ``WorkerSizeMustBePositive`` on the engine or decoder (merged with the runtime when one
  is given, so ``leader: {}`` over a runtime's worker is fine).
* ``InvalidReadyPolicy``: ``lifecycle.readyPolicy: None`` on a multi-pod OMENative
  component; ratcheted, so an update keeps a value the old object already had.
* ``InvalidScaleToZero``: ``minReplicas: 0`` on a component without its own
  ``autoscaler.class: KEDA`` (or the ISVC's ``ome.io/autoscalerClass: keda``).
* ``InvalidReplicaBounds``: negative counts, or ``minReplicas`` above ``maxReplicas``.
* ``InvalidLifecycle``: a lifecycle enum value OME does not know.
* ``InvalidPodDisruptionBudget``: ``podDisruptionBudget`` with both ``minAvailable`` and
  ``maxUnavailable``, or a value that is neither a count >= 0 nor ``"N%"`` (0-100).
* ``InvalidMigrationRequest``: a malformed ``ome.io/migration-request-v1-<uuid>``
  annotation ("migration request ..."); unchanged requests pass on update.

``validate_standalone_replica(obj)`` checks a user-written InferenceReplica.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from attrs import frozen

from omenative_core.codec import CodecError, spec_from_json
from omenative_core.model.spec import InferenceReplica, ObjectMeta
from omenative_core.model.timefmt import parse_time
from omenative_core.policy import STRATEGIES
from omenative_core.render import validate_replica
from omenative_core.service.merge import effective_component
from omenative_core.service.model import InferenceService, ServingRuntime
from omenative_core.service.modes import MODE_OMENATIVE, declared_mode, explain_mode
from omenative_core.service.render import ANNOTATION_AUTOSCALER_CLASS, ANNOTATION_MIGRATION_PREFIX

__all__ = [
    "MAX_HINT_NODES",
    "MIGRATION_FIELDS",
    "Rejection",
    "validate_isvc",
    "validate_standalone_replica",
]

MAX_HINT_NODES: Final = 8
"""Most ``hint_target_nodes`` a migration request may name."""

MIGRATION_FIELDS: Final = (
    "schemaVersion",
    "component",
    "instance",
    "from_node",
    "hint_target_nodes",
    "reason",
    "requested_at",
    "requested_by",
)
"""The fields of a migration request's JSON value."""

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")
_LIFECYCLE_ENUMS: Final = {
    "restartPolicy": ("None", "RecreateInstanceOnPodRestart"),
    "readyPolicy": ("AllPodReady", "None"),
}
_MIGRATION_MODES: Final = ("Auto", "Surge", "Never")
_PAIRING: Final = "InvalidLeaderWorkerPairing"


@frozen
class Rejection:
    """Why admission refuses an object: OME's reason, a message that starts with it, and
    the JSON path of the offending field. ``group`` is the umbrella reason, when there is
    one (``InvalidLeaderWorkerPairing``)."""

    reason: str
    message: str
    field: str
    group: str | None = None

    def __str__(self) -> str:
        return self.message


def _reject(reason: str, field: str, text: str, group: str | None = None) -> Rejection:
    head = f"{group}: {reason}" if group else reason
    return Rejection(reason=reason, message=f"{head}: {text}", field=field, group=group)


# ---------------------------------------------------------------------------- ISVC rules


def _mode_combination(new: InferenceService) -> list[Rejection]:
    if new.component("engine") is None or new.component("decoder") is None:
        return []
    engine, decoder = declared_mode(new, "engine"), declared_mode(new, "decoder")
    if engine == decoder or MODE_OMENATIVE not in (engine, decoder):
        return []
    return [
        _reject(
            "InvalidDeploymentModeCombination",
            "spec.decoder",
            f'engine deploymentMode="{engine}" does not match decoder deploymentMode="{decoder}"; '
            "when either is OMENative, both must use the same value",
        )
    ]


def _pairing(new: InferenceService, runtime: ServingRuntime | None) -> list[Rejection]:
    out: list[Rejection] = []
    for c in ("engine", "decoder"):
        if new.component(c) is None:
            continue
        merged = effective_component(new, runtime, c)
        if merged is None:
            continue
        leader, worker = merged.leader, merged.worker
        if leader is not None and worker is None:
            out.append(
                _reject(
                    "LeaderRequiresWorker",
                    f"spec.{c}.leader",
                    f"{c}: a leader is set but no worker",
                    _PAIRING,
                )
            )
        if worker is not None and leader is None:
            out.append(
                _reject(
                    "WorkerRequiresLeader",
                    f"spec.{c}.worker",
                    f"{c}: a worker is set but no leader",
                    _PAIRING,
                )
            )
        if worker is not None and worker.size is not None and worker.size < 1:
            out.append(
                _reject(
                    "WorkerSizeMustBePositive",
                    f"spec.{c}.worker.size",
                    f"{c}: worker.size is {worker.size}; it must be >= 1",
                    _PAIRING,
                )
            )
    return out


def _ready_none(isvc: InferenceService, runtime: ServingRuntime | None, c: str) -> bool:
    merged = effective_component(isvc, runtime, c)
    lc = merged.lifecycle if merged is not None else None
    return lc is not None and lc.get("readyPolicy") == "None"


def _ready_policy(
    new: InferenceService, old: InferenceService | None, runtime: ServingRuntime | None
) -> list[Rejection]:
    out: list[Rejection] = []
    for c in ("engine", "decoder"):
        if new.component(c) is None or not _ready_none(new, runtime, c):
            continue
        merged = effective_component(new, runtime, c)
        assert merged is not None
        if merged.leader is None and merged.worker is None:
            continue
        if explain_mode(new, runtime, c).mode != MODE_OMENATIVE:
            continue
        if old is not None and _ready_none(old, runtime, c):
            continue  # ratcheted: the old object already had it
        out.append(
            _reject(
                "InvalidReadyPolicy",
                f"spec.{c}.lifecycle.readyPolicy",
                f"{c}.lifecycle.readyPolicy=None is not allowed on a multi-pod OMENative "
                "component: an Instance serves only when all its pods are ready; use "
                "AllPodReady or leave it unset",
            )
        )
    return out


def _replicas(new: InferenceService) -> list[Rejection]:
    out: list[Rejection] = []
    legacy_keda = new.annotations.get(ANNOTATION_AUTOSCALER_CLASS, "").lower() == "keda"
    for c in new.declared_components:
        comp = new.component(c)
        assert comp is not None
        low, high = comp.min_replicas, comp.max_replicas
        if low is not None and low < 0:
            out.append(
                _reject(
                    "InvalidReplicaBounds",
                    f"spec.{c}.minReplicas",
                    f"{c}.minReplicas={low} cannot be less than 0",
                )
            )
        if high is not None and high < 0:
            out.append(
                _reject(
                    "InvalidReplicaBounds",
                    f"spec.{c}.maxReplicas",
                    f"{c}.maxReplicas={high} cannot be less than 0",
                )
            )
        if low is not None and high is not None and high > 0 and low > high:
            out.append(
                _reject(
                    "InvalidReplicaBounds",
                    f"spec.{c}.minReplicas",
                    f"{c}.minReplicas={low} must be <= maxReplicas={high}",
                )
            )
        if low == 0:
            autoscaler = comp.autoscaler or {}
            klass = autoscaler.get("class")
            if not legacy_keda and not (isinstance(klass, str) and klass.lower() == "keda"):
                out.append(
                    _reject(
                        "InvalidScaleToZero",
                        f"spec.{c}.minReplicas",
                        f"{c}.minReplicas=0 requires KEDA autoscaling (set spec.{c}.autoscaler."
                        f"class=KEDA or the {ANNOTATION_AUTOSCALER_CLASS}=keda annotation); "
                        "Serverless mode no longer auto-promotes scale-to-zero",
                    )
                )
    return out


def _lifecycle(new: InferenceService) -> list[Rejection]:
    out: list[Rejection] = []
    for c in new.declared_components:
        comp = new.component(c)
        lc = comp.lifecycle if comp is not None else None
        if lc is None:
            continue
        for key, allowed in _LIFECYCLE_ENUMS.items():
            value = lc.get(key)
            if value is not None and value not in allowed:
                out.append(
                    _reject(
                        "InvalidLifecycle",
                        f"spec.{c}.lifecycle.{key}",
                        f"{c}.lifecycle.{key}={value!r} is not one of {', '.join(allowed)}",
                    )
                )
        strategy = lc.get("updateStrategy")
        kind = strategy.get("type") if isinstance(strategy, Mapping) else None
        if kind is not None and kind not in STRATEGIES:
            out.append(
                _reject(
                    "InvalidLifecycle",
                    f"spec.{c}.lifecycle.updateStrategy.type",
                    f"{c}.lifecycle.updateStrategy.type={kind!r} is not one of "
                    f"{', '.join(STRATEGIES)}",
                )
            )
        policy = lc.get("migrationPolicy")
        mode = policy.get("mode") if isinstance(policy, Mapping) else None
        if mode is not None and mode not in _MIGRATION_MODES:
            out.append(
                _reject(
                    "InvalidLifecycle",
                    f"spec.{c}.lifecycle.migrationPolicy.mode",
                    f"{c}.lifecycle.migrationPolicy.mode={mode!r} is not one of "
                    f"{', '.join(_MIGRATION_MODES)}",
                )
            )
    return out


def _budget_ok(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    if isinstance(value, str) and _PERCENT.match(value):
        return int(value[:-1]) <= 100
    return False


def _pdb(new: InferenceService) -> list[Rejection]:
    out: list[Rejection] = []
    for c in new.declared_components:
        comp = new.component(c)
        pdb = comp.pod_disruption_budget if comp is not None else None
        if pdb is None:
            continue
        low, high = pdb.get("minAvailable"), pdb.get("maxUnavailable")
        path = f"spec.{c}.podDisruptionBudget"
        if low is not None and high is not None:
            out.append(
                _reject(
                    "InvalidPodDisruptionBudget",
                    path,
                    f"{c}.podDisruptionBudget sets both minAvailable and "
                    "maxUnavailable; set only one",
                )
            )
        for key, value in (("minAvailable", low), ("maxUnavailable", high)):
            if value is not None and not _budget_ok(value):
                out.append(
                    _reject(
                        "InvalidPodDisruptionBudget",
                        f"{path}.{key}",
                        f"{c}.podDisruptionBudget.{key}={value!r} is neither a "
                        "count >= 0 nor a percentage 'N%' from 0% to 100%",
                    )
                )
    return out


def _migration_problem(
    new: InferenceService, runtime: ServingRuntime | None, key: str, value: str
) -> str | None:
    uuid = key[len(ANNOTATION_MIGRATION_PREFIX) :]
    if not _UUID.match(uuid):
        return f"the key must end in a UUID, got {uuid!r}"
    try:
        req: Any = json.loads(value)
    except ValueError as exc:
        return f"the value is not JSON ({exc})"
    if not isinstance(req, Mapping):
        return "the value must be a JSON object"
    unknown = sorted(set(req) - set(MIGRATION_FIELDS))
    if unknown:
        return f"unknown field(s) {', '.join(unknown)}; known: {', '.join(MIGRATION_FIELDS)}"
    if req.get("schemaVersion") != "v1":
        return f'schemaVersion must be "v1", got {req.get("schemaVersion")!r}'
    component = req.get("component")
    if component not in new.declared_components:
        return (
            f"component {component!r} is not a component of this InferenceService "
            f"({', '.join(new.declared_components) or 'none'})"
        )
    mode = explain_mode(new, runtime, component).mode
    if mode != MODE_OMENATIVE:
        return f"component {component} runs as {mode}; only OMENative Instances migrate"
    instance = req.get("instance")
    if isinstance(instance, bool) or not isinstance(instance, int) or instance < 0:
        return f"instance must be an integer >= 0, got {instance!r}"
    for name in ("from_node", "reason", "requested_by"):
        if name in req and not isinstance(req[name], str):
            return f"{name} must be a string, got {req[name]!r}"
    if "from_node" in req and not req["from_node"]:
        return "from_node must not be empty"
    hints = req.get("hint_target_nodes", [])
    if not isinstance(hints, list) or not all(isinstance(h, str) and h for h in hints):
        return f"hint_target_nodes must be a list of node names, got {hints!r}"
    if len(hints) > MAX_HINT_NODES:
        return f"hint_target_nodes names {len(hints)} nodes; at most {MAX_HINT_NODES}"
    if "requested_at" in req:
        try:
            parse_time(req["requested_at"])
        except (ValueError, TypeError):
            return f"requested_at must be an RFC 3339 time, got {req['requested_at']!r}"
    return None


def _migrations(
    new: InferenceService, old: InferenceService | None, runtime: ServingRuntime | None
) -> list[Rejection]:
    out: list[Rejection] = []
    before = old.annotations if old is not None else {}
    for key, value in sorted(new.annotations.items()):
        if not key.startswith(ANNOTATION_MIGRATION_PREFIX) or before.get(key) == value:
            continue
        problem = _migration_problem(new, runtime, key, value)
        if problem is not None:
            out.append(
                Rejection(
                    reason="InvalidMigrationRequest",
                    message=f"InvalidMigrationRequest: migration request {key}: {problem}",
                    field=f"metadata.annotations[{key}]",
                )
            )
    return out


def validate_isvc(
    new: InferenceService,
    old: InferenceService | None = None,
    *,
    runtime: ServingRuntime | None = None,
) -> list[Rejection]:
    """Every reason to refuse ``new`` (an update when ``old`` is given); [] admits it.

    ``runtime``: the runtime ``new`` uses, when the webhook has it. Leader/worker pairing,
    ``readyPolicy`` and migration checks then see the merged component; the mode
    combination rule never reads the runtime (OME's webhook does not).
    """
    return [
        *_mode_combination(new),
        *_pairing(new, runtime),
        *_ready_policy(new, old, runtime),
        *_replicas(new),
        *_lifecycle(new),
        *_pdb(new),
        *_migrations(new, old, runtime),
    ]


# ---------------------------------------------------------------------------- standalone IR


def validate_standalone_replica(obj: Mapping[str, Any]) -> list[Rejection]:
    """Every reason to refuse a user-written InferenceReplica (JSON as submitted).

    Rejected: ``parentRef`` without an InferenceService owner reference of that name
    (``ParentRefWithoutOwner``), the controller-only placement fields
    (``ControllerOnlyField``), an HPA or KEDA ``autoscaler.class``
    (``AutoscalerClassNotAllowed``), ``lifecycle.minReadySeconds``
    (``LifecycleMinReadySecondsNotAllowed``; use ``spec.minReadySeconds``), runners together
    with ``modelRef`` / ``runtimeRef`` (``RunnersWithRefs``), a pinned ``runtimeRef``
    (``PinnedRuntimeRef``), and whatever the core's ``validate_replica`` finds (reason as
    it names it). Migration requests on a standalone replica are allowed (an omenative
    extension). Name collisions with an ISVC's objects need the cluster: the shell checks.
    """
    out: list[Rejection] = []
    raw_spec = obj.get("spec")
    if not isinstance(raw_spec, Mapping):
        return [_reject("InvalidSpec", "spec", "spec must be an object")]
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    for key in ("placementExecution", "placementReplicaLimit"):
        if raw_spec.get(key) is not None:
            out.append(
                _reject(
                    "ControllerOnlyField",
                    f"spec.{key}",
                    f"spec.{key} is set only by the controller",
                )
            )
    parent = raw_spec.get("parentRef")
    if isinstance(parent, Mapping):
        owners = (
            meta.get("ownerReferences") if isinstance(meta.get("ownerReferences"), list) else []
        )
        assert isinstance(owners, list)
        owned = any(
            isinstance(o, Mapping)
            and o.get("kind") == "InferenceService"
            and o.get("name") == parent.get("name")
            for o in owners
        )
        if not owned:
            out.append(
                _reject(
                    "ParentRefWithoutOwner",
                    "spec.parentRef",
                    f"spec.parentRef names {parent.get('name')!r} but the "
                    "InferenceReplica has no owner reference to that "
                    "InferenceService",
                )
            )
    autoscaler = raw_spec.get("autoscaler")
    klass = autoscaler.get("class") if isinstance(autoscaler, Mapping) else None
    if isinstance(klass, str) and klass.lower() in ("hpa", "keda"):
        out.append(
            _reject(
                "AutoscalerClassNotAllowed",
                "spec.autoscaler.class",
                f"autoscaler class {klass} is not allowed on a standalone "
                "InferenceReplica; scale it through its scale subresource",
            )
        )
    lifecycle = raw_spec.get("lifecycle")
    if isinstance(lifecycle, Mapping) and lifecycle.get("minReadySeconds") is not None:
        out.append(
            _reject(
                "LifecycleMinReadySecondsNotAllowed",
                "spec.lifecycle.minReadySeconds",
                "spec.lifecycle.minReadySeconds is not read on an "
                "InferenceReplica; set spec.minReadySeconds",
            )
        )
    refs = [k for k in ("modelRef", "runtimeRef") if raw_spec.get(k) is not None]
    runners = raw_spec.get("runners")
    if refs and runners:
        out.append(
            _reject(
                "RunnersWithRefs",
                "spec.runners",
                f"spec.runners cannot be combined with spec.{' or spec.'.join(refs)}",
            )
        )
    runtime_ref = raw_spec.get("runtimeRef")
    if isinstance(runtime_ref, Mapping) and (
        runtime_ref.get("autoSync") is False or runtime_ref.get("revision") is not None
    ):
        out.append(
            _reject(
                "PinnedRuntimeRef",
                "spec.runtimeRef",
                "a pinned runtimeRef (autoSync: false or a revision) is not "
                "allowed; the InferenceReplica follows the live runtime",
            )
        )
    try:
        spec = spec_from_json(raw_spec)
    except CodecError as exc:
        out.append(
            Rejection(reason="InvalidSpec", message=f"InvalidSpec: {exc}", field=exc.path or "spec")
        )
        return out
    if refs and not runners:
        return out  # rendered from the refs: no runner set to check here
    name = meta.get("name") if isinstance(meta.get("name"), str) else ""
    view = InferenceReplica(metadata=ObjectMeta(name=str(name) or "unnamed"), spec=spec)
    for error in validate_replica(view):
        out.append(Rejection(reason=error.partition(": ")[0], message=error, field="spec"))
    return out
