"""The InferenceService blocks of the ``inferenceservice-config`` ConfigMap.

Besides ``lifecycle`` (``omenative_core.model.config``), OME's ConfigMap carries JSON blocks
that shape what the InferenceService layer renders and how rollout groups run, each read
with the meaning OME's binary gives it (ome-projects/ome@4ff3b6e3,
``pkg/controller/v1beta1/controllerconfig/configmap.go``):

- ``deploy``: ``defaultDeploymentMode`` (OME accepts only ``RawDeployment``: the mode of a
  component nothing else decides), ``replicas`` (``defaultMinReplicas``,
  ``defaultMaxReplicas.{engine,decoder,router}``), ``minReadySeconds``, ``updateStrategy``
  per component; ``terminationGracePeriodSeconds`` is checked (> 0) and not applied.
- ``podDisruptionBudget``: ``rawDeployment`` / ``omeNative`` with ``maxUnavailable`` or
  ``minAvailable``; ``null`` means no budget unless the component sets one.
- ``coordination``: ``defaultRatioTolerancePercent`` (0-100; absent: no drift bound),
  ``trafficWeightDeadbandPercent`` (0-100).
- ``rollout``: ``defaultReadyTimeout`` (a duration; ``""``: the 15m fallback),
  ``maxPinnedPlanBytes`` (0: uncapped).
- ``podMonitor`` and ``omenativeStatus`` (``cluster_blocks``); ``metricProviders`` (else the
  deprecated ``autoscalerPolicy.metricProviders``): AutoscalerPolicy provider bindings.

A ConfigMap key that is neither one of these, ``lifecycle``, nor one of OME's keys omenative
does not use (``OME_UNUSED_KEYS``) is refused naming it, so a typo is caught. A block that
is absent keeps the chart's defaults; a malformed one is a ``ConfigError`` naming the key, so
the manager refuses it (at startup) or keeps the previous settings (on a reload) rather than
guessing. Pure: the ConfigMap's ``data`` in, settings out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from attrs import evolve

from omenative_core.model.config import ConfigError, LifecycleConfig
from omenative_core.model.spec import COMPONENTS, UpdateStrategy
from omenative_core.model.timefmt import DurationError, parse_duration
from omenative_core.rollout.model import RolloutConfig
from omenative_core.service.autoscaler_policy import parse_metric_providers
from omenative_core.service.cluster_blocks import (
    OME_UNUSED_KEYS,
    parse_pod_monitor,
    parse_replica_defaults,
    parse_status_encoding,
    parse_update_strategy,
)
from omenative_core.service.render import PdbPolicy, ServiceConfig

__all__ = ["SERVICE_CONFIG_KEYS", "ignored_ome_keys", "parse_service_config"]

SERVICE_CONFIG_KEYS: Final = ("deploy", "podDisruptionBudget", "coordination", "rollout",
                              "podMonitor", "omenativeStatus", "metricProviders",
                              "autoscalerPolicy")
"""The ConfigMap keys read here (each a JSON object)."""

_LIFECYCLE_KEY: Final = "lifecycle"


def ignored_ome_keys(data: Mapping[str, str]) -> tuple[str, ...]:
    """The keys of ``data`` that are OME's and that omenative does not use, sorted."""
    return tuple(sorted(k for k in data if k in OME_UNUSED_KEYS))


def _unknown_keys(data: Mapping[str, str]) -> None:
    known = {_LIFECYCLE_KEY, *SERVICE_CONFIG_KEYS, *OME_UNUSED_KEYS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"inferenceservice-config: unknown key(s) {', '.join(unknown)} (neither OME nor "
            "omenative reads them)")


def _block(data: Mapping[str, str], key: str, allowed: set[str]) -> Mapping[str, Any] | None:
    text = data.get(key)
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{key}: unable to parse json: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected an object, got {value!r}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(f"{key}: unknown key(s) {', '.join(unknown)}")
    return value


def _int(path: str, value: object, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ConfigError(f"{path}: expected an integer {bound}, got {value!r}")
    return value


def _pdb(path: str, value: object) -> PdbPolicy | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - {"maxUnavailable", "minAvailable"}:
        raise ConfigError(f"{path}: expected {{maxUnavailable}} or {{minAvailable}}, got {value!r}")
    chosen = [k for k in ("maxUnavailable", "minAvailable") if value.get(k) is not None]
    if len(chosen) != 1:
        raise ConfigError(f"{path}: set exactly one of maxUnavailable and minAvailable")
    amount = value[chosen[0]]
    ok = (isinstance(amount, int) and not isinstance(amount, bool) and amount >= 0) or (
        isinstance(amount, str) and amount.endswith("%") and amount[:-1].isdigit()
    )
    if not ok:
        raise ConfigError(f'{path}.{chosen[0]}: expected a count or "N%", got {amount!r}')
    if chosen[0] == "maxUnavailable":
        return PdbPolicy(max_unavailable=amount)
    return PdbPolicy(min_available=amount)


def _deploy(block: Mapping[str, Any], base: ServiceConfig) -> ServiceConfig:
    operator = base.operator
    out = base
    mode = block.get("defaultDeploymentMode")
    if mode is not None and mode != "RawDeployment":
        raise ConfigError(
            f"deploy.defaultDeploymentMode: {mode!r} is not supported; the supported default "
            "mode is RawDeployment (a component's OMENative mode comes from the "
            "InferenceService, the runtime or its leader/worker shape)")
    if "replicas" in block:
        replicas = parse_replica_defaults(block["replicas"])
        out = evolve(
            out,
            default_min_replicas=(
                replicas.min_replicas if replicas.min_replicas is not None else 1),
            default_max_replicas=dict(replicas.max_replicas),
        )
    grace = block.get("terminationGracePeriodSeconds")
    if grace is not None:
        _int("deploy.terminationGracePeriodSeconds", grace, 1)
    if "minReadySeconds" in block:
        value = block["minReadySeconds"]
        operator = evolve(
            operator,
            min_ready_seconds=None if value is None else _int("deploy.minReadySeconds", value, 0),
        )
    if "updateStrategy" in block:
        strategies = block["updateStrategy"]
        if strategies is None:
            strategies = {}
        if not isinstance(strategies, Mapping) or set(strategies) - set(COMPONENTS):
            raise ConfigError(
                "deploy.updateStrategy: expected an object keyed by "
                f"{', '.join(COMPONENTS)}, got {strategies!r}"
            )
        # OME: an absent component entry is unconfigured, the component keeps its own
        merged: dict[str, UpdateStrategy | None] = dict.fromkeys(COMPONENTS)
        for component, value in strategies.items():
            merged[component] = parse_update_strategy(component, value)
        operator = evolve(operator, update_strategy=merged)
    return evolve(out, operator=operator)


def _rollout(
    coordination: Mapping[str, Any] | None, rollout: Mapping[str, Any] | None, base: RolloutConfig
) -> RolloutConfig:
    out = base
    if coordination is not None:
        tolerance = coordination.get("defaultRatioTolerancePercent")
        out = evolve(  # OME: absent means unconfigured, a group then has no drift bound
            out,
            default_ratio_tolerance=None if tolerance is None else _int(
                "coordination.defaultRatioTolerancePercent", tolerance, 0, 100),
        )
        if "trafficWeightDeadbandPercent" in coordination:
            out = evolve(
                out,
                traffic_deadband=_int(
                    "coordination.trafficWeightDeadbandPercent",
                    coordination["trafficWeightDeadbandPercent"],
                    0,
                    100,
                ),
            )
    if rollout is not None:
        if rollout.get("defaultReadyTimeout") not in (None, ""):  # "": the 15m fallback
            try:
                timeout = parse_duration(rollout["defaultReadyTimeout"])
            except DurationError as exc:
                raise ConfigError(f"rollout.defaultReadyTimeout: {exc}") from exc
            out = evolve(out, default_ready_timeout=timeout)
        if "maxPinnedPlanBytes" in rollout:
            out = evolve(
                out,
                max_pinned_plan_bytes=_int(  # 0: uncapped
                    "rollout.maxPinnedPlanBytes", rollout["maxPinnedPlanBytes"], 0
                ),
            )
    return out


def _monitoring(data: Mapping[str, str], config: ServiceConfig) -> ServiceConfig:
    monitor = _json(data, "podMonitor")
    if monitor is not _ABSENT:
        config = evolve(config, pod_monitor=parse_pod_monitor(monitor))
    status = _json(data, "omenativeStatus")
    if status is not _ABSENT:
        chosen = parse_status_encoding(status)
        lifecycle = evolve(config.lifecycle, instance_status_encoding=chosen.encoding)
        if chosen.max_decoded_instances is not None:
            lifecycle = evolve(lifecycle, max_decoded_instances=chosen.max_decoded_instances)
        config = evolve(config, lifecycle=lifecycle)
    return config


_ABSENT: Final = object()


def _json(data: Mapping[str, str], key: str) -> Any:
    text = data.get(key)
    if text is None or not text.strip():
        return _ABSENT
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{key}: unable to parse json: {exc}") from exc


def parse_service_config(
    data: Mapping[str, str], lifecycle: LifecycleConfig | None = None
) -> ServiceConfig:
    """The settings of ``data`` (a ConfigMap's ``data``) over the chart defaults, with
    ``lifecycle`` (parsed separately) carried along; ``omenativeStatus`` sets its status
    encoding."""
    _unknown_keys(data)
    deploy = _block(
        data,
        "deploy",
        {"defaultDeploymentMode", "replicas", "minReadySeconds", "updateStrategy",
         "terminationGracePeriodSeconds"},
    )
    pdb = _block(data, "podDisruptionBudget", {"rawDeployment", "omeNative"})
    coordination = _block(
        data, "coordination", {"defaultRatioTolerancePercent", "trafficWeightDeadbandPercent"}
    )
    rollout = _block(data, "rollout", {"defaultReadyTimeout", "maxPinnedPlanBytes"})
    config = _monitoring(data, ServiceConfig(lifecycle=lifecycle or LifecycleConfig()))
    if deploy is not None:
        config = _deploy(deploy, config)
    if pdb is not None:
        if "omeNative" in pdb:
            config = evolve(
                config, pdb_omenative=_pdb("podDisruptionBudget.omeNative", pdb["omeNative"])
            )
        if "rawDeployment" in pdb:
            config = evolve(
                config,
                pdb_raw_deployment=_pdb("podDisruptionBudget.rawDeployment", pdb["rawDeployment"]),
            )
    return evolve(config, rollout=_rollout(coordination, rollout, config.rollout),
                  metric_providers=parse_metric_providers(_present(data, "metricProviders"),
                                                          _present(data, "autoscalerPolicy")))


def _present(data: Mapping[str, str], key: str) -> object:
    """``data[key]`` parsed, None when absent (OME's provider blocks are not checked key by
    key: they hold settings omenative does not read)."""
    value = _json(data, key)
    return None if value is _ABSENT else value

