"""The InferenceService blocks of the ``inferenceservice-config`` ConfigMap.

Besides ``lifecycle`` (``omenative_core.model.config``), OME's ConfigMap carries JSON blocks
that shape what the InferenceService layer renders and how rollout groups run:

- ``deploy``: operator defaults below the runtime: ``replicas`` (a component's replicas
  when neither the ISVC nor the runtime sets ``minReplicas``), ``minReadySeconds``, and
  ``updateStrategy`` per component (``engine`` / ``decoder`` / ``router``);
  ``terminationGracePeriodSeconds`` is accepted and not used (runtimes set their own).
- ``podDisruptionBudget``: ``rawDeployment`` / ``omeNative`` with ``maxUnavailable`` or
  ``minAvailable``; ``null`` means no budget unless the component sets one.
- ``coordination``: ``defaultRatioTolerancePercent`` (0-100),
  ``trafficWeightDeadbandPercent`` (0-100).
- ``rollout``: ``defaultReadyTimeout`` (a duration), ``maxPinnedPlanBytes``.

A block that is absent keeps the chart's defaults; a malformed one is a ``ConfigError``
naming the key, so the manager refuses it (at startup) or keeps the previous settings (on
a reload) rather than guessing. Pure: the ConfigMap's ``data`` in, settings out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from attrs import evolve

from omenative_core.codec import CodecError, from_json
from omenative_core.model.config import ConfigError, LifecycleConfig
from omenative_core.model.spec import COMPONENTS, UpdateStrategy
from omenative_core.model.timefmt import DurationError, parse_duration
from omenative_core.rollout.model import RolloutConfig
from omenative_core.service.render import PdbPolicy, ServiceConfig

__all__ = ["SERVICE_CONFIG_KEYS", "parse_service_config"]

SERVICE_CONFIG_KEYS: Final = ("deploy", "podDisruptionBudget", "coordination", "rollout")
"""The ConfigMap keys read here (each a JSON object)."""


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
    if "replicas" in block:
        out = evolve(out, default_min_replicas=_int("deploy.replicas", block["replicas"], 0))
    if "minReadySeconds" in block:
        value = block["minReadySeconds"]
        operator = evolve(
            operator,
            min_ready_seconds=None if value is None else _int("deploy.minReadySeconds", value, 0),
        )
    if "updateStrategy" in block:
        strategies = block["updateStrategy"]
        if not isinstance(strategies, Mapping) or set(strategies) - set(COMPONENTS):
            raise ConfigError(
                "deploy.updateStrategy: expected an object keyed by "
                f"{', '.join(COMPONENTS)}, got {strategies!r}"
            )
        merged: dict[str, UpdateStrategy | None] = dict(operator.update_strategy)
        for component, value in strategies.items():
            try:
                merged[component] = (
                    None
                    if value is None
                    else from_json(value, UpdateStrategy, path=f"deploy.updateStrategy.{component}")
                )
            except CodecError as exc:
                raise ConfigError(str(exc)) from exc
        operator = evolve(operator, update_strategy=merged)
    return evolve(out, operator=operator)


def _rollout(
    coordination: Mapping[str, Any] | None, rollout: Mapping[str, Any] | None, base: RolloutConfig
) -> RolloutConfig:
    out = base
    if coordination is not None:
        if "defaultRatioTolerancePercent" in coordination:
            out = evolve(
                out,
                default_ratio_tolerance=_int(
                    "coordination.defaultRatioTolerancePercent",
                    coordination["defaultRatioTolerancePercent"],
                    0,
                    100,
                ),
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
        if "defaultReadyTimeout" in rollout:
            try:
                timeout = parse_duration(rollout["defaultReadyTimeout"])
            except DurationError as exc:
                raise ConfigError(f"rollout.defaultReadyTimeout: {exc}") from exc
            out = evolve(out, default_ready_timeout=timeout)
        if "maxPinnedPlanBytes" in rollout:
            out = evolve(
                out,
                max_pinned_plan_bytes=_int(
                    "rollout.maxPinnedPlanBytes", rollout["maxPinnedPlanBytes"], 1
                ),
            )
    return out


def parse_service_config(
    data: Mapping[str, str], lifecycle: LifecycleConfig | None = None
) -> ServiceConfig:
    """The settings of ``data`` (a ConfigMap's ``data``) over the chart defaults, with
    ``lifecycle`` (parsed separately) carried along."""
    deploy = _block(
        data,
        "deploy",
        {"replicas", "minReadySeconds", "updateStrategy", "terminationGracePeriodSeconds"},
    )
    pdb = _block(data, "podDisruptionBudget", {"rawDeployment", "omeNative"})
    coordination = _block(
        data, "coordination", {"defaultRatioTolerancePercent", "trafficWeightDeadbandPercent"}
    )
    rollout = _block(data, "rollout", {"defaultReadyTimeout", "maxPinnedPlanBytes"})
    config = ServiceConfig(lifecycle=lifecycle or LifecycleConfig())
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
    return evolve(config, rollout=_rollout(coordination, rollout, config.rollout))
