"""Runtime and service merged per field, the service winning; pod templates; lifecycle.

``merge_json`` is a small strategic merge: objects merge key by key, lists of named
objects (containers, volumes, env, volumeMounts, ports, ...) merge item by item on their
merge key, every other list and every scalar is replaced by the service's value, and a
``null`` or absent value in the service keeps the runtime's. So ``leader: {}`` in the
service keeps the runtime's leader, and a service ``env`` entry replaces only the runtime
entry of the same name.

The pod templates of a component (``component_runners``) are built from the merged
component: its pod spec fields, with the ``runner`` container merged into the container
named ``ome-container`` (or the first container), then for a multi-pod component the
``leader`` / ``worker`` pod spec and runner merged over that. Templates hold only what the
user and the runtime wrote (and the ``kueue.x-k8s.io/queue-name`` label): replica counts,
lifecycle settings and scaling never enter them, so they never start a rollout, while any
runtime change (an image, an argument) is a new revision.

Lifecycle precedence is per field: the service's ``lifecycle``, then the runtime's
``*Config.lifecycle``, then the operator's per-component deploy defaults
(``merge_lifecycle``); the cluster ``lifecycle`` entry and OME's fixed fallbacks come after
(``effective_lifecycle``; on the InferenceReplica the core applies them at plan time).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from attrs import evolve, field, frozen

from omenative_core.codec import from_json
from omenative_core.labels import LABEL_KUEUE_QUEUE
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import (
    InPlaceUpdateStrategy,
    IntOrStr,
    LifecycleSpec,
    MigrationPolicy,
    RollingUpdate,
    Runner,
    UpdateStrategy,
)
from omenative_core.service.model import ComponentSpec, InferenceService, ServingRuntime
from omenative_core.service.modes import ANNOTATION_DEPLOYMENT_MODE

__all__ = [
    "CHART_UPDATE_STRATEGY",
    "LABEL_KUEUE_QUEUE",
    "MAIN_CONTAINER",
    "MERGE_KEYS",
    "OperatorDefaults",
    "component_runners",
    "effective_component",
    "effective_lifecycle",
    "merge_component",
    "merge_json",
    "merge_lifecycle",
    "merge_runner",
]

MAIN_CONTAINER: Final = "ome-container"
"""The name of the model-serving container a ``runner`` override goes into."""

MERGE_KEYS: Final = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
}
"""Lists that merge item by item, and the key that matches items (Kubernetes' patch keys)."""

CHART_UPDATE_STRATEGY: Final = UpdateStrategy(
    type="SurgeThenDrain",
    rolling_update=RollingUpdate(max_surge="25%", max_unavailable="25%"),
)
"""The ome-resources chart's ``ome.controller.updateStrategy.<component>``."""

_SURGE_READERS = ("SurgeThenDrain",)
_UNAVAILABLE_READERS = ("RecreatePod", "InPlaceIfPossible", "InPlaceOnly")


@frozen(kw_only=True)
class OperatorDefaults:
    """The operator's per-component deploy defaults (below the runtime, above the cluster
    ``lifecycle`` entry): ``updateStrategy`` per component and ``deploy.minReadySeconds``."""

    update_strategy: Mapping[str, UpdateStrategy | None] = field(
        factory=lambda: dict.fromkeys(("engine", "decoder", "router"), CHART_UPDATE_STRATEGY)
    )
    min_ready_seconds: int | None = None


# ---------------------------------------------------------------------------- JSON merge


def _copy(value: Any) -> Any:
    return copy.deepcopy(value)


def _merge_list(key: str, base: list[Any], override: list[Any]) -> list[Any]:
    merge_key = MERGE_KEYS.get(key)

    def keyed(items: list[Any]) -> bool:
        return all(isinstance(i, Mapping) and i.get(merge_key) is not None for i in items)

    if merge_key is None or not keyed(base) or not keyed(override):
        return [_copy(i) for i in override]
    out = [_copy(i) for i in base]
    where = {i[merge_key]: n for n, i in enumerate(out)}
    for item in override:
        n = where.get(item[merge_key])
        if n is None:
            where[item[merge_key]] = len(out)
            out.append(_copy(item))
        else:
            out[n] = merge_json(out[n], item)
    return out


def merge_json(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged over ``base`` (both unchanged; the result is a fresh copy)."""
    out: dict[str, Any] = {k: _copy(v) for k, v in base.items()}
    for key, value in override.items():
        if value is None:
            continue
        old = out.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = merge_json(old, value)
        elif isinstance(value, list) and isinstance(old, list):
            out[key] = _merge_list(key, old, value)
        else:
            out[key] = _copy(value)
    return out


def merge_component(
    service: ComponentSpec | None, runtime: ComponentSpec | None
) -> ComponentSpec | None:
    """The runtime's ``*Config`` with the service's component merged over it."""
    if service is None and runtime is None:
        return None
    if runtime is None:
        assert service is not None
        return ComponentSpec(_copy(dict(service.raw)))
    if service is None:
        return ComponentSpec(_copy(dict(runtime.raw)))
    return ComponentSpec(merge_json(runtime.raw, service.raw))


def effective_component(
    isvc: InferenceService, runtime: ServingRuntime | None, component: str
) -> ComponentSpec | None:
    """The merged view of ``component``: runtime ``*Config`` under ``spec.<component>``."""
    config = runtime.config(component) if runtime is not None else None
    return merge_component(isvc.component(component), config)


# ---------------------------------------------------------------------------- templates


def merge_runner(pod_spec: Mapping[str, Any], runner: Mapping[str, Any] | None) -> dict[str, Any]:
    """``pod_spec`` with the ``runner`` container merged into its main container.

    A named runner goes into the container of that name; an unnamed one into
    ``ome-container``, else the first container. With no match it becomes the first
    container (named ``ome-container`` when unnamed).
    """
    pod: dict[str, Any] = {k: _copy(v) for k, v in pod_spec.items()}
    if not runner:
        return pod
    containers = [c for c in pod.get("containers") or [] if isinstance(c, Mapping)]
    name = runner.get("name")
    index = None
    if isinstance(name, str) and name:
        index = next((i for i, c in enumerate(containers) if c.get("name") == name), None)
    else:
        index = next(
            (i for i, c in enumerate(containers) if c.get("name") == MAIN_CONTAINER),
            0 if containers else None,
        )
        name = containers[index].get("name") if index is not None else MAIN_CONTAINER
    body = {**runner, "name": name}
    if index is None:
        containers.insert(0, _copy(body))
    else:
        containers[index] = merge_json(containers[index], body)
    pod["containers"] = containers
    return pod


def _template(
    pod: dict[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(sorted(labels.items()))
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    template: dict[str, Any] = {"spec": pod}
    if metadata:
        template = {"metadata": metadata, "spec": pod}
    return template


def component_runners(
    isvc: InferenceService,
    runtime: ServingRuntime | None,
    component: str,
    merged: ComponentSpec,
    *,
    multi_pod: bool,
) -> tuple[Runner, ...]:
    """The runners of ``component``: ``leader`` + ``worker`` when ``multi_pod``, else one
    ``default`` runner. ``merged`` is ``effective_component(...)``."""
    base = merged.pod_spec
    if runtime is not None:
        if runtime.scheduler_name and not base.get("schedulerName"):
            base["schedulerName"] = runtime.scheduler_name
        if component in ("engine", "decoder") and runtime.node_selector:
            own = base.get("nodeSelector")
            base["nodeSelector"] = {
                **runtime.node_selector,
                **(own if isinstance(own, Mapping) else {}),
            }
    labels = merged.labels
    queue = isvc.labels.get(LABEL_KUEUE_QUEUE)
    if queue is not None and LABEL_KUEUE_QUEUE not in labels:
        labels[LABEL_KUEUE_QUEUE] = queue
    annotations = {k: v for k, v in merged.annotations.items() if k != ANNOTATION_DEPLOYMENT_MODE}

    if not multi_pod:
        pod = merge_runner(base, merged.runner)
        return (Runner(name="default", size=1, template=_template(pod, labels, annotations)),)

    runners: list[Runner] = []
    for role_name in ("leader", "worker"):
        role = merged.leader if role_name == "leader" else merged.worker
        pod = dict(base)
        runner = merged.runner
        if role is not None:
            pod = merge_json(pod, role.pod_spec)
            if role.runner is not None:
                runner = merge_json(runner or {}, role.runner)
        pod = merge_runner(pod, runner)
        size = 1
        if role_name == "worker":
            size = role.size if role is not None and role.size is not None else 1
        runners.append(
            Runner(name=role_name, size=size, template=_template(pod, labels, annotations))
        )
    return tuple(runners)


# ---------------------------------------------------------------------------- lifecycle


def _lifecycle_empty(lc: LifecycleSpec) -> bool:
    return lc == LifecycleSpec()


def merge_lifecycle(
    service: Mapping[str, Any] | None,
    runtime: Mapping[str, Any] | None,
    *,
    component: str,
    operator: OperatorDefaults | None = None,
) -> LifecycleSpec | None:
    """Per-field precedence: service, then runtime, then the operator's deploy defaults.

    The operator's ``updateStrategy`` fills the type when neither sets one, and then only
    the budget the chosen strategy reads (``maxSurge`` for SurgeThenDrain,
    ``maxUnavailable`` for RecreatePod and the in-place strategies). None when nothing is
    set anywhere.
    """
    merged = merge_json(runtime or {}, service or {})
    lc = from_json(merged, LifecycleSpec, path=f"spec.{component}.lifecycle")
    if operator is not None:
        default = operator.update_strategy.get(component)
        if default is not None:
            strategy = lc.update_strategy or UpdateStrategy()
            kind = strategy.type or default.type
            rolling = strategy.rolling_update or RollingUpdate()
            dflt = default.rolling_update or RollingUpdate()
            if kind in _SURGE_READERS and rolling.max_surge is None:
                rolling = evolve(rolling, max_surge=dflt.max_surge)
            if kind in _UNAVAILABLE_READERS and rolling.max_unavailable is None:
                rolling = evolve(rolling, max_unavailable=dflt.max_unavailable)
            strategy = evolve(
                strategy,
                type=kind,
                rolling_update=None if rolling == RollingUpdate() else rolling,
            )
            lc = evolve(lc, update_strategy=strategy)
        if lc.min_ready_seconds is None and operator.min_ready_seconds is not None:
            lc = evolve(lc, min_ready_seconds=operator.min_ready_seconds)
    return None if _lifecycle_empty(lc) else lc


def effective_lifecycle(
    lc: LifecycleSpec | None, config: LifecycleConfig, *, multi_pod: bool
) -> LifecycleSpec:
    """Every lifecycle field filled in: ``lc`` (service > runtime > operator), then the
    cluster ``lifecycle`` entry, then OME's fixed fallbacks (whole-Instance restarts and
    all-pods-ready for multi-pod, ``None`` for single pods; SurgeThenDrain; 25% budgets;
    migration ``Auto``). ``instanceReadyTimeout`` of ``0s`` counts as unset; None at the
    end means no deadline."""
    lc = lc or LifecycleSpec()
    strategy = lc.update_strategy or UpdateStrategy()
    rolling = strategy.rolling_update or RollingUpdate()
    in_place = strategy.in_place_update_strategy or InPlaceUpdateStrategy()
    surge: IntOrStr = rolling.max_surge if rolling.max_surge is not None else "25%"
    unavailable: IntOrStr = (
        rolling.max_unavailable if rolling.max_unavailable is not None else "25%"
    )
    timeout = lc.instance_ready_timeout
    if timeout is None or timeout <= timedelta(0):
        timeout = config.instance_ready_timeout
    return LifecycleSpec(
        restart_policy=lc.restart_policy
        or ("RecreateInstanceOnPodRestart" if multi_pod else "None"),
        update_strategy=UpdateStrategy(
            type=strategy.type or "SurgeThenDrain",
            rolling_update=RollingUpdate(
                partition=rolling.partition if rolling.partition is not None else 0,
                max_surge=surge,
                max_unavailable=unavailable,
            ),
            in_place_update_strategy=InPlaceUpdateStrategy(
                grace_period_seconds=in_place.grace_period_seconds,
                mark_not_ready_during_lifecycle=(
                    True
                    if in_place.mark_not_ready_during_lifecycle is None
                    else in_place.mark_not_ready_during_lifecycle
                ),
            ),
        ),
        ready_policy=lc.ready_policy or ("AllPodReady" if multi_pod else "None"),
        instance_ready_timeout=timeout if timeout and timeout > timedelta(0) else None,
        min_ready_seconds=lc.min_ready_seconds if lc.min_ready_seconds is not None else 0,
        migration_policy=MigrationPolicy(
            mode=(lc.migration_policy.mode if lc.migration_policy else None) or "Auto"
        ),
    )
