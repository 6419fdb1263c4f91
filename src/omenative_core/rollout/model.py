"""Rollout groups: ``spec.rollout`` JSON to types and back, and the plan token.

``parse_rollout`` reads an InferenceService's ``spec.rollout`` JSON into the frozen attrs
types of ``spec``. It is lenient about *values* (an unknown operator, a capacity of ``"3"``,
a failureLimit of 0 all parse) so that ``validate_rollout`` can reject them with OME's
reasons; it only fails on JSON of the wrong shape (``InvalidRolloutSpec``) and on durations
that are not Go durations (``InvalidDuration``), collecting every problem with its JSON path.
``rollout_to_json`` writes the normal form back; ``plan_token`` hashes it.

The types themselves live in ``spec`` (re-exported here for existing imports); the
persisted run state and its codec in ``state``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from omenative_core.model.spec import IntOrStr
from omenative_core.model.timefmt import DurationError, format_duration, parse_duration
from omenative_core.revisions import canonical_json
from omenative_core.rollout.spec import (
    ANALYSIS_OPERATORS,
    GROUP_ORDERINGS,
    ON_INCONCLUSIVE,
    Analysis,
    CanaryStep,
    GroupBlueGreen,
    GroupCanary,
    GroupRollingUpdate,
    MaintainRatio,
    Metric,
    Pause,
    Problem,
    PrometheusSource,
    RolloutConfig,
    RolloutGroup,
    RolloutSpec,
    RolloutSpecError,
)

# rollout/validate.py and service/cluster_config.py import the spec names below from here
__all__ = [
    "ANALYSIS_OPERATORS",
    "GROUP_ORDERINGS",
    "ON_INCONCLUSIVE",
    "RolloutConfig",
    "RolloutGroup",
    "RolloutSpec",
    "RolloutSpecError",
    "parse_rollout",
    "plan_token",
    "rollout_to_json",
]

PLAN_TOKEN_PREFIX = "rp1:"
"""The version prefix of a plan token."""


# --------------------------------------------------------------------------------------------
# parsing


class _Parser:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def bad(self, path: str, message: str, reason: str = "InvalidRolloutSpec") -> None:
        self.problems.append(Problem(reason=reason, message=message, path=path))

    def obj(self, value: object, path: str) -> Mapping[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.bad(path, f"expected an object, got {show_value(value)}")
            return None
        return value

    def items(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            self.bad(path, f"expected a list, got {show_value(value)}")
            return []
        return list(value)

    def text(self, value: object, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.bad(path, f"expected a string, got {show_value(value)}")
            return None
        return value

    def integer(self, value: object, path: str, reason: str = "InvalidRolloutSpec") -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.bad(path, f"expected an integer, got {show_value(value)}", reason)
            return None
        if isinstance(value, float) and not value.is_integer():
            self.bad(path, f"expected an integer, got {show_value(value)}", reason)
            return None
        return int(value)

    def int_or_str(self, value: object, path: str, reason: str) -> IntOrStr | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | str):
            self.bad(
                path,
                f"expected an integer or a string such as '25%', got {show_value(value)}",
                reason,
            )
            return None
        return value

    def duration(self, value: object, path: str) -> timedelta | None:
        if value is None:
            return None
        try:
            return parse_duration(value)
        except DurationError as exc:
            self.bad(path, str(exc), "InvalidDuration")
            return None

    def ref_name(self, value: object, path: str) -> str | None:
        if value is None:
            return None
        if isinstance(value, str):
            return value
        data = self.obj(value, path)
        if data is None:
            return None
        return self.text(data.get("name"), f"{path}.name") or ""

    # ---------------------------------------------------------------- the types

    def metric(self, value: object, path: str) -> Metric | None:
        data = self.obj(value, path)
        if data is None:
            return None
        threshold_raw = data.get("threshold")
        threshold = math.nan
        if isinstance(threshold_raw, int | float) and not isinstance(threshold_raw, bool):
            threshold = float(threshold_raw)
        elif isinstance(threshold_raw, str):
            try:
                threshold = float(threshold_raw)
            except ValueError:
                self.bad(
                    f"{path}.threshold",
                    f"threshold {threshold_raw!r} is not a number",
                    "AnalysisInvalid",
                )
        elif threshold_raw is None:
            self.bad(f"{path}.threshold", "threshold is required", "AnalysisInvalid")
        else:
            self.bad(
                f"{path}.threshold",
                f"threshold {show_value(threshold_raw)} is not a number",
                "AnalysisInvalid",
            )
        return Metric(
            name=self.text(data.get("name"), f"{path}.name") or "",
            query=self.text(data.get("query"), f"{path}.query") or "",
            operator=self.text(data.get("operator"), f"{path}.operator") or "",
            threshold=threshold,
        )

    def analysis(self, value: object, path: str) -> Analysis | None:
        data = self.obj(value, path)
        if data is None:
            return None
        metrics = tuple(
            m
            for i, raw in enumerate(self.items(data.get("metrics"), f"{path}.metrics"))
            if (m := self.metric(raw, f"{path}.metrics[{i}]")) is not None
        )
        return Analysis(
            interval=self.duration(data.get("interval"), f"{path}.interval"),
            initial_delay=self.duration(data.get("initialDelay"), f"{path}.initialDelay"),
            failure_limit=self.integer(
                data.get("failureLimit"), f"{path}.failureLimit", "AnalysisInvalid"
            ),
            on_inconclusive=self.text(data.get("onInconclusive"), f"{path}.onInconclusive"),
            metrics=metrics,
        )

    def step(self, value: object, path: str) -> CanaryStep | None:
        data = self.obj(value, path)
        if data is None:
            return None
        capacity = self.int_or_str(data.get("capacity"), f"{path}.capacity", "CanaryInvalid")
        if "capacity" not in data:
            self.bad(f"{path}.capacity", "capacity is required", "CanaryInvalid")
        pause: Pause | None = None
        if "pause" in data and data["pause"] is not None:
            pause_data = self.obj(data["pause"], f"{path}.pause")
            if pause_data is not None:
                pause = Pause(
                    duration=self.duration(pause_data.get("duration"), f"{path}.pause.duration")
                )
        return CanaryStep(
            capacity=capacity if capacity is not None else "100%",
            traffic=self.integer(data.get("traffic"), f"{path}.traffic", "CanaryInvalid"),
            pause=pause,
            analysis=self.analysis(data.get("analysis"), f"{path}.analysis"),
        )

    def canary(self, value: object, path: str) -> GroupCanary | None:
        data = self.obj(value, path)
        if data is None:
            return None
        steps = tuple(
            s
            for i, raw in enumerate(self.items(data.get("steps"), f"{path}.steps"))
            if (s := self.step(raw, f"{path}.steps[{i}]")) is not None
        )
        prom: PrometheusSource | None = None
        prom_data = self.obj(data.get("prometheus"), f"{path}.prometheus")
        if prom_data is not None:
            headers_raw = self.obj(prom_data.get("headers"), f"{path}.prometheus.headers") or {}
            prom = PrometheusSource(
                provider_ref=self.ref_name(
                    prom_data.get("providerRef"), f"{path}.prometheus.providerRef"
                ),
                server_address=self.text(
                    prom_data.get("serverAddress"), f"{path}.prometheus.serverAddress"
                ),
                auth_ref=self.ref_name(prom_data.get("authRef"), f"{path}.prometheus.authRef"),
                headers={str(k): str(v) for k, v in headers_raw.items()},
            )
        return GroupCanary(
            steps=steps,
            prometheus=prom,
            scale_down_delay_seconds=self.integer(
                data.get("scaleDownDelaySeconds"), f"{path}.scaleDownDelaySeconds"
            ),
            ready_timeout=self.duration(data.get("readyTimeout"), f"{path}.readyTimeout"),
        )

    def group(self, value: object, path: str) -> RolloutGroup | None:
        data = self.obj(value, path)
        if data is None:
            self.bad(path, "a group must be an object")
            return None
        components = tuple(
            c
            for i, raw in enumerate(self.items(data.get("components"), f"{path}.components"))
            if (c := self.text(raw, f"{path}.components[{i}]")) is not None
        )
        order = tuple(str(o) for o in self.items(data.get("order"), f"{path}.order"))
        blue_green = None
        if (
            data.get("blueGreen") is not None
            and self.obj(data["blueGreen"], f"{path}.blueGreen") is not None
        ):
            blue_green = GroupBlueGreen()
        rolling: GroupRollingUpdate | None = None
        ru = self.obj(data.get("rollingUpdate"), f"{path}.rollingUpdate")
        if ru is not None:
            rolling = GroupRollingUpdate(
                max_surge=self.int_or_str(
                    ru.get("maxSurge"),
                    f"{path}.rollingUpdate.maxSurge",
                    "InvalidRollingUpdatePercent",
                ),
                max_unavailable=self.int_or_str(
                    ru.get("maxUnavailable"),
                    f"{path}.rollingUpdate.maxUnavailable",
                    "InvalidRollingUpdatePercent",
                ),
            )
        ratio: MaintainRatio | None = None
        mr = self.obj(data.get("maintainRatio"), f"{path}.maintainRatio")
        if mr is not None:
            ratio = MaintainRatio(
                tolerance=self.integer(mr.get("tolerance"), f"{path}.maintainRatio.tolerance")
            )
        return RolloutGroup(
            components=components,
            order=order,
            canary=self.canary(data.get("canary"), f"{path}.canary"),
            blue_green=blue_green,
            rolling_update=rolling,
            policy_ref=self.ref_name(data.get("policyRef"), f"{path}.policyRef"),
            soak=self.duration(data.get("soak"), f"{path}.soak"),
            maintain_ratio=ratio,
        )


def parse_rollout(obj: object, *, path: str = "spec.rollout") -> RolloutSpec:
    """Parse ``spec.rollout`` JSON (None means no rollout groups).

    Raises ``RolloutSpecError`` listing every shape problem (reason ``InvalidRolloutSpec``)
    and every bad duration (``InvalidDuration``); value checks are ``validate_rollout``'s.
    A group that sets two progressions keeps both here, so validation can reject it.
    """
    if obj is None:
        return RolloutSpec()
    p = _Parser()
    data = p.obj(obj, path)
    if data is None:
        raise RolloutSpecError(p.problems)
    groups = tuple(
        g
        for i, raw in enumerate(p.items(data.get("groups"), f"{path}.groups"))
        if (g := p.group(raw, f"{path}.groups[{i}]")) is not None
    )
    spec = RolloutSpec(
        groups=groups,
        pairing_protocol=p.text(data.get("pairingProtocol"), f"{path}.pairingProtocol"),
        group_ordering=p.text(data.get("groupOrdering"), f"{path}.groupOrdering"),
    )
    if p.problems:
        raise RolloutSpecError(p.problems)
    return spec


def show_value(value: object) -> str:
    """``value`` for an error message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------
# spec -> JSON, plan token


def drop_none(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` without its None entries (unset fields are left out of the JSON)."""
    return {k: v for k, v in value.items() if v is not None}


def _dur(value: timedelta | None) -> str | None:
    return None if value is None else format_duration(value)


def _metric_json(m: Metric) -> dict[str, Any]:
    threshold: float | int | None = m.threshold
    if isinstance(threshold, float) and math.isnan(threshold):
        threshold = None
    elif isinstance(threshold, float) and threshold.is_integer():
        threshold = int(threshold)
    return drop_none(
        {"name": m.name, "query": m.query, "operator": m.operator, "threshold": threshold}
    )


def _step_json(s: CanaryStep) -> dict[str, Any]:
    out: dict[str, Any] = {"capacity": s.capacity}
    if s.traffic is not None:
        out["traffic"] = s.traffic
    if s.pause is not None:
        out["pause"] = drop_none({"duration": _dur(s.pause.duration)})
    if s.analysis is not None:
        a = s.analysis
        out["analysis"] = drop_none(
            {
                "interval": _dur(a.interval),
                "initialDelay": _dur(a.initial_delay),
                "failureLimit": a.failure_limit,
                "onInconclusive": a.on_inconclusive,
                "metrics": [_metric_json(m) for m in a.metrics],
            }
        )
    return out


def _group_json(g: RolloutGroup) -> dict[str, Any]:
    out: dict[str, Any] = {"components": list(g.components)}
    if g.order:
        out["order"] = list(g.order)
    if g.canary is not None:
        c = g.canary
        canary: dict[str, Any] = {"steps": [_step_json(s) for s in c.steps]}
        if c.prometheus is not None:
            p = c.prometheus
            canary["prometheus"] = drop_none(
                {
                    "providerRef": {"name": p.provider_ref} if p.provider_ref else None,
                    "serverAddress": p.server_address,
                    "authRef": {"name": p.auth_ref} if p.auth_ref else None,
                    "headers": dict(p.headers) or None,
                }
            )
        if c.scale_down_delay_seconds is not None:
            canary["scaleDownDelaySeconds"] = c.scale_down_delay_seconds
        if c.ready_timeout is not None:
            canary["readyTimeout"] = format_duration(c.ready_timeout)
        out["canary"] = canary
    if g.blue_green is not None:
        out["blueGreen"] = {}
    if g.rolling_update is not None:
        out["rollingUpdate"] = drop_none(
            {
                "maxSurge": g.rolling_update.max_surge,
                "maxUnavailable": g.rolling_update.max_unavailable,
            }
        )
    if g.policy_ref is not None:
        out["policyRef"] = {"name": g.policy_ref}
    if g.soak is not None:
        out["soak"] = format_duration(g.soak)
    if g.maintain_ratio is not None:
        out["maintainRatio"] = drop_none({"tolerance": g.maintain_ratio.tolerance})
    return out


def rollout_to_json(spec: RolloutSpec) -> dict[str, Any]:
    """``spec.rollout`` JSON in a normal form (durations as Go prints them)."""
    return drop_none(
        {
            "groups": [_group_json(g) for g in spec.groups],
            "pairingProtocol": spec.pairing_protocol,
            "groupOrdering": spec.group_ordering,
        }
    )


def plan_token(spec: RolloutSpec) -> str:
    """The plan's token ``rp1:<12 hex>``: a hash of its normal JSON, so equal plans (``60s``
    and ``1m``) share a token; ``ome.io/rollout-repin`` names it."""
    digest = hashlib.sha256(canonical_json(rollout_to_json(spec)).encode("ascii")).hexdigest()
    return PLAN_TOKEN_PREFIX + digest[:12]
