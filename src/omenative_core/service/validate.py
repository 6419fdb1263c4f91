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
* OME's autoscaler reasons (``AutoscalerClassUnknown``, ``KedaTriggersRequired``, ...):
  ``validate_autoscaler.py``.
* ``InvalidLifecycle``: a lifecycle enum value OME does not know.
* ``InvalidPodDisruptionBudget``: ``podDisruptionBudget`` with both ``minAvailable`` and
  ``maxUnavailable``, or a value that is neither a count >= 0 nor ``"N%"`` (0-100).
* ``InvalidMigrationRequest``: a malformed ``ome.io/migration-request-v1-<uuid>``
  annotation ("migration request ..." with OME's ``MigrationRequestRejected`` or
  ``UnsupportedSchemaVersion``; ``migration_request.py``, shared with the InferenceReplica
  path); unchanged requests pass on update.
* ``InvalidRollingUpdateInteger`` / ``InvalidRollingUpdatePercent``: a component's
  ``lifecycle.updateStrategy.rollingUpdate.maxSurge`` / ``maxUnavailable`` that is neither
  a count >= 0 nor a whole percentage up to 100% (the rule of rollout groups).
* ``PartitionAboveReplicas`` (``validate_isvc_partitions``, admission only): a new or
  changed ``rollingUpdate.partition`` above the most replicas the component asks for.

``isvc_warnings(new, old)`` lists what only warns (no runtime named, replica bounds above
``maxDecodedInstances``). ``validate_standalone_replica`` (``validate_replica.py``, re-exported
here) checks a user-written InferenceReplica.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from omenative_core.policy import STRATEGIES
from omenative_core.rollout.validate import budget_problem
from omenative_core.service.merge import effective_component
from omenative_core.service.migration_request import (
    MAX_HINT_NODES,
    MIGRATION_FIELDS,
    MigrationTarget,
    migration_rejections,
)
from omenative_core.service.model import InferenceService, ServingRuntime
from omenative_core.service.modes import MODE_OMENATIVE, declared_mode, explain_mode
from omenative_core.service.rejection import Rejection, warn
from omenative_core.service.rejection import reject as _reject
from omenative_core.service.render import ANNOTATION_AUTOSCALER_CLASS
from omenative_core.service.runtime_pin import revision_form_rejections
from omenative_core.service.validate_autoscaler import autoscaler_rejections
from omenative_core.service.validate_replica import (
    MAX_DECODED_INSTANCES,
    partition_rejections,
    too_many_instances,
    validate_standalone_replica,
)

__all__ = [
    "MAX_HINT_NODES",
    "MIGRATION_FIELDS",
    "Rejection",
    "isvc_warnings",
    "validate_isvc",
    "validate_isvc_partitions",
    "validate_standalone_replica",
]

_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")
_LIFECYCLE_ENUMS: Final = {
    "restartPolicy": ("None", "RecreateInstanceOnPodRestart"),
    "readyPolicy": ("AllPodReady", "None"),
}
_MIGRATION_MODES: Final = ("Auto", "Surge", "Never")
_PAIRING: Final = "InvalidLeaderWorkerPairing"


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
        where = ".".join(p for p in (c, comp.pdb_path) if p) if comp is not None else c
        if low is not None and high is not None:
            out.append(
                _reject(
                    "InvalidPodDisruptionBudget",
                    f"spec.{where}",
                    f"{where} sets both minAvailable and maxUnavailable; set only one",
                )
            )
        for key, value in (("minAvailable", low), ("maxUnavailable", high)):
            if value is not None and not _budget_ok(value):
                out.append(
                    _reject(
                        "InvalidPodDisruptionBudget",
                        f"spec.{where}.{key}",
                        f"{where}.{key}={value!r} is neither a "
                        "count >= 0 nor a percentage 'N%' from 0% to 100%",
                    )
                )
    return out


def _migrations(
    new: InferenceService, old: InferenceService | None, runtime: ServingRuntime | None
) -> list[Rejection]:
    target = MigrationTarget(
        modes={c: explain_mode(new, runtime, c).mode for c in new.declared_components}
    )
    return migration_rejections(new.annotations, old.annotations if old else None, target)


def _rolling_update(isvc: InferenceService | None, c: str) -> Mapping[str, Any]:
    comp = isvc.component(c) if isvc is not None else None
    lc = comp.lifecycle if comp is not None else None
    strategy = lc.get("updateStrategy") if isinstance(lc, Mapping) else None
    rolling = strategy.get("rollingUpdate") if isinstance(strategy, Mapping) else None
    return rolling if isinstance(rolling, Mapping) else {}


def _replica_ceiling(isvc: InferenceService, c: str) -> int:
    """The most Instances a component asks for: its larger replica bound, 1 when unset."""
    comp = isvc.component(c)
    assert comp is not None
    bounds = [b for b in (comp.min_replicas, comp.max_replicas) if b is not None and b > 0]
    return max(bounds, default=1)


def _component_budgets(new: InferenceService) -> list[Rejection]:
    out: list[Rejection] = []
    for c in new.declared_components:
        rolling, path = _rolling_update(new, c), f"spec.{c}.lifecycle.updateStrategy.rollingUpdate"
        for key in ("maxSurge", "maxUnavailable"):
            problem = budget_problem(rolling.get(key), f"{path}.{key}")
            if problem is not None:
                out.append(_reject(problem[0], f"{path}.{key}", problem[1]))
    return out


def validate_isvc_partitions(
    new: InferenceService, old: InferenceService | None = None
) -> list[Rejection]:
    """``PartitionAboveReplicas`` for a new or changed component partition above the most
    replicas the component asks for.

    Admission only (the webhook calls it beside ``validate_isvc``): the service controller,
    which has no old object, must not block a component whose partition a lowered replica
    bound left above it; that is harmless (no Instance is updated) and only warned.
    """
    out: list[Rejection] = []
    for c in new.declared_components:
        path = f"spec.{c}.lifecycle.updateStrategy.rollingUpdate.partition"
        before = _rolling_update(old, c).get("partition") if old is not None else None
        out += partition_rejections(
            [(path, _rolling_update(new, c).get("partition"), before)],
            _replica_ceiling(new, c),
            f"the most replicas spec.{c} asks for (minReplicas/maxReplicas)",
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
        *revision_form_rejections(new),
        *_pairing(new, runtime),
        *_ready_policy(new, old, runtime),
        *_replicas(new),
        *autoscaler_rejections(new),
        *_lifecycle(new),
        *_pdb(new),
        *_migrations(new, old, runtime),
        *_component_budgets(new),
    ]


def isvc_warnings(new: InferenceService, old: InferenceService | None = None) -> list[Rejection]:
    """What admits ``new`` with a warning (each ``Rejection.warning``).

    ``RuntimeNotNamed``: ``spec.runtime`` names no runtime and ``spec.model`` no model
    to select one from (OME selects a runtime from the model), so components without
    containers of their own cannot be rendered. ``TooManyInstances``: a replica bound above
    ``maxDecodedInstances``. ``PartitionAboveReplicas``: an unchanged partition that a
    lowered replica bound left above it.
    """
    out: list[Rejection] = []
    if new.runtime_ref is None and new.model_name is None:
        out.append(
            warn(
                "RuntimeNotNamed",
                "spec.runtime",
                "spec.runtime names no runtime and spec.model names no model to select "
                "one for: set spec.runtime.name to a ServingRuntime or "
                "ClusterServingRuntime, or spec.model.name to a BaseModel or "
                "ClusterBaseModel (a component without containers of its own cannot be "
                "rendered)",
            )
        )
    for c in new.declared_components:
        comp = new.component(c)
        assert comp is not None
        for key, count in (("minReplicas", comp.min_replicas), ("maxReplicas", comp.max_replicas)):
            if count is not None and count > MAX_DECODED_INSTANCES:
                out.append(too_many_instances(f"spec.{c}.{key}", count))
        out += _kept_partition(new, old, c)
    return out


def _kept_partition(new: InferenceService, old: InferenceService | None, c: str) -> list[Rejection]:
    if old is None:
        return []
    partition = _rolling_update(new, c).get("partition")
    ceiling = _replica_ceiling(new, c)
    if not isinstance(partition, int) or partition <= ceiling:
        return []
    if _rolling_update(old, c).get("partition") != partition:
        return []  # a changed partition is refused by validate_isvc
    path = f"spec.{c}.lifecycle.updateStrategy.rollingUpdate.partition"
    return [
        warn(
            "PartitionAboveReplicas",
            path,
            f"{path} is {partition}, above the most replicas spec.{c} asks for ({ceiling}): "
            "no Instance is updated until the partition is lowered",
        )
    ]
