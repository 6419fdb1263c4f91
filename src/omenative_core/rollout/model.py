"""Rollout groups: the ``spec.rollout`` types, the persisted rollout state and their codecs.

``parse_rollout`` reads an InferenceService's ``spec.rollout`` JSON into frozen attrs types.
It is lenient about *values* (an unknown operator, a capacity of ``"3"``, a failureLimit of
0 all parse) so that ``validate_rollout`` can reject them with OME's reasons; it only fails
on JSON of the wrong shape (``InvalidRolloutSpec``) and on durations that are not Go
durations (``InvalidDuration``), collecting every problem with its JSON path.

``RolloutState`` is what the controller must remember between passes (design: level
triggered, so it lives in status): the pinned plan and its token, and per group the phase,
the current step, when it was entered and became ready, the analysis so far, the stable,
canary and rejected revision of every member, and the last hold. ``state_to_json`` /
``state_from_json`` are its codec; timestamps have second precision so a state written and
read back is equal to the one decided.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from attrs import field, frozen

from omenative_core.model.spec import COMPONENTS, IntOrStr
from omenative_core.model.status import RolloutHold
from omenative_core.model.timefmt import (
    DurationError,
    format_duration,
    format_time,
    parse_duration,
    parse_time,
)
from omenative_core.revisions import canonical_json

__all__ = [
    "ANALYSIS_OPERATORS",
    "GROUP_ORDERINGS",
    "ON_INCONCLUSIVE",
    "PHASES",
    "Analysis",
    "AnalysisRound",
    "AnalysisState",
    "CanaryStep",
    "GroupBlueGreen",
    "GroupCanary",
    "GroupRollingUpdate",
    "GroupState",
    "MaintainRatio",
    "Metric",
    "Pause",
    "Problem",
    "PrometheusSource",
    "RolloutConfig",
    "RolloutGroup",
    "RolloutSpec",
    "RolloutSpecError",
    "RolloutState",
    "RolloutStateError",
    "canary_capacity",
    "parse_rollout",
    "plan_token",
    "rollout_to_json",
    "state_from_json",
    "state_to_json",
]

PHASES = (
    "Pending",
    "Canarying",
    "Paused",
    "Promoting",
    "Stable",
    "Failed",
    "RollingBack",
    "RolledBack",
)
"""Rollout group phases, as OME names them (blueGreen and rollingUpdate groups use the
same set: they are ``Promoting`` while they roll)."""

ANALYSIS_OPERATORS = ("LT", "LTE", "GT", "GTE")
"""Comparison operators of an analysis metric: the metric value OP threshold must hold."""

ON_INCONCLUSIVE = ("Hold", "Rollback", "RollbackOnStall")
"""What an inconclusive analysis round does."""

GROUP_ORDERINGS = ("Sequential", "Concurrent")
"""Accepted ``groupOrdering`` values (Sequential is the default)."""

PLAN_TOKEN_PREFIX = "rp1:"


# --------------------------------------------------------------------------------------------
# problems


@frozen(kw_only=True)
class Problem:
    """One thing wrong with a rollout spec: OME's reason, a message and the JSON path."""

    reason: str
    message: str
    path: str


class RolloutSpecError(ValueError):
    """``spec.rollout`` JSON that does not fit the types; ``problems`` lists every issue."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0] if self.problems else Problem(reason="", message="", path="")
        super().__init__(f"{first.path}: {first.message}" if self.problems else "invalid")


class RolloutStateError(ValueError):
    """A persisted rollout state that cannot be read; the message names the JSON path."""


# --------------------------------------------------------------------------------------------
# spec types


@frozen(kw_only=True)
class Metric:
    """One Prometheus query of an analysis: passes when ``value OPERATOR threshold``."""

    name: str
    query: str
    operator: str
    threshold: float

    def passes(self, value: float) -> bool:
        """Whether ``value`` satisfies the metric (an unknown operator never passes)."""
        if self.operator == "LT":
            return value < self.threshold
        if self.operator == "LTE":
            return value <= self.threshold
        if self.operator == "GT":
            return value > self.threshold
        if self.operator == "GTE":
            return value >= self.threshold
        return False


@frozen(kw_only=True)
class Analysis:
    """A step's analysis: rounds of every metric, ``interval`` apart after ``initialDelay``."""

    interval: timedelta | None = None
    initial_delay: timedelta | None = None
    failure_limit: int | None = None
    on_inconclusive: str | None = None
    metrics: tuple[Metric, ...] = ()

    @property
    def effective_interval(self) -> timedelta:
        """``interval``, 1m when unset (omenative's default; OME's is not documented)."""
        return self.interval if self.interval and self.interval > timedelta(0) else _MINUTE

    @property
    def effective_failure_limit(self) -> int:
        """``failureLimit``, 1 when unset."""
        return self.failure_limit if self.failure_limit is not None else 1

    @property
    def effective_on_inconclusive(self) -> str:
        """``onInconclusive``, ``Hold`` when unset."""
        return self.on_inconclusive or "Hold"


@frozen(kw_only=True)
class Pause:
    """A step's pause: timed when ``duration`` is set, manual (``pause: {}``) otherwise."""

    duration: timedelta | None = None


@frozen(kw_only=True)
class CanaryStep:
    """One canary step: how many Instances run the canary, and the gate to pass."""

    capacity: IntOrStr
    traffic: int | None = None
    pause: Pause | None = None
    analysis: Analysis | None = None

    @property
    def gate(self) -> str:
        """``Analysis`` > ``Pause`` (timed) > ``Manual`` > ``Immediate``, OME's order."""
        if self.analysis is not None:
            return "Analysis"
        if self.pause is not None and self.pause.duration is not None:
            return "Pause"
        if self.pause is not None:
            return "Manual"
        return "Immediate"


@frozen(kw_only=True)
class PrometheusSource:
    """Where the shell runs analysis queries (omenative reads, never calls it)."""

    provider_ref: str | None = None
    server_address: str | None = None
    auth_ref: str | None = None
    headers: Mapping[str, str] = field(factory=dict)


@frozen(kw_only=True)
class GroupCanary:
    """A canary progression: ordered steps, the last at 100%."""

    steps: tuple[CanaryStep, ...] = ()
    prometheus: PrometheusSource | None = None
    scale_down_delay_seconds: int | None = None
    ready_timeout: timedelta | None = None


@frozen(kw_only=True)
class GroupBlueGreen:
    """A blue-green progression: each member updates at most 25% (rounded up) per step."""


@frozen(kw_only=True)
class GroupRollingUpdate:
    """A rolling progression with group-wide budgets (25% each by default)."""

    max_surge: IntOrStr | None = None
    max_unavailable: IntOrStr | None = None

    @property
    def effective_max_surge(self) -> IntOrStr:
        """``maxSurge``, ``25%`` when unset."""
        return self.max_surge if self.max_surge is not None else "25%"

    @property
    def effective_max_unavailable(self) -> IntOrStr:
        """``maxUnavailable``, ``25%`` when unset."""
        return self.max_unavailable if self.max_unavailable is not None else "25%"


@frozen(kw_only=True)
class MaintainRatio:
    """Keep ready engine:decoder within ``tolerance`` percent of the target ratio."""

    tolerance: int | None = None


@frozen(kw_only=True)
class RolloutGroup:
    """Components that roll together, and how."""

    components: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    canary: GroupCanary | None = None
    blue_green: GroupBlueGreen | None = None
    rolling_update: GroupRollingUpdate | None = None
    policy_ref: str | None = None
    soak: timedelta | None = None
    maintain_ratio: MaintainRatio | None = None

    @property
    def progression(self) -> str:
        """``canary``, ``rollingUpdate`` or ``blueGreen`` (none set means blueGreen)."""
        if self.canary is not None:
            return "canary"
        if self.rolling_update is not None:
            return "rollingUpdate"
        return "blueGreen"


@frozen(kw_only=True)
class RolloutSpec:
    """``spec.rollout``: up to three ordered groups, the pairing token, the group ordering."""

    groups: tuple[RolloutGroup, ...] = ()
    pairing_protocol: str | None = None
    group_ordering: str | None = None

    @property
    def ordering(self) -> str:
        """``groupOrdering``, ``Sequential`` when unset."""
        return self.group_ordering or "Sequential"

    def group_of(self, component: str) -> int | None:
        """The index of the (first) group naming ``component``."""
        for i, group in enumerate(self.groups):
            if component in group.components:
                return i
        return None

    def sequence(self) -> tuple[int, ...]:
        """Indexes of the single-component blueGreen groups, when two or more: they roll
        one at a time, in list order."""
        seq = tuple(
            i
            for i, g in enumerate(self.groups)
            if len(g.components) == 1 and g.progression == "blueGreen"
        )
        return seq if len(seq) >= 2 else ()

    def sequence_wait(self) -> timedelta:
        """The wait between two groups of the sequence: the longest soak but the last's."""
        seq = self.sequence()
        soaks = [self.groups[i].soak for i in seq[:-1]]
        return max((s for s in soaks if s is not None), default=timedelta(0))


_MINUTE = timedelta(minutes=1)


def canary_capacity(capacity: IntOrStr, desired: int) -> int:
    """Instances a step puts on the canary: a count (capped at ``desired``) or ``N%`` of
    ``desired`` rounded up. An unreadable value counts as 100%."""
    if desired <= 0:
        return 0
    if isinstance(capacity, bool):
        return desired
    if isinstance(capacity, int):
        return max(0, min(capacity, desired))
    text = capacity.strip()
    if text.endswith("%"):
        try:
            pct = int(text[:-1])
        except ValueError:
            return desired
        return max(0, min(desired, math.ceil(desired * pct / 100)))
    return desired


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
            self.bad(path, f"expected an object, got {_show(value)}")
            return None
        return value

    def items(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            self.bad(path, f"expected a list, got {_show(value)}")
            return []
        return list(value)

    def text(self, value: object, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.bad(path, f"expected a string, got {_show(value)}")
            return None
        return value

    def integer(self, value: object, path: str, reason: str = "InvalidRolloutSpec") -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.bad(path, f"expected an integer, got {_show(value)}", reason)
            return None
        if isinstance(value, float) and not value.is_integer():
            self.bad(path, f"expected an integer, got {_show(value)}", reason)
            return None
        return int(value)

    def int_or_str(self, value: object, path: str, reason: str) -> IntOrStr | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | str):
            self.bad(
                path, f"expected an integer or a string such as '25%', got {_show(value)}", reason
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
                f"threshold {_show(threshold_raw)} is not a number",
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


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------
# spec -> JSON, plan token


def _drop_none(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


def _dur(value: timedelta | None) -> str | None:
    return None if value is None else format_duration(value)


def _metric_json(m: Metric) -> dict[str, Any]:
    threshold: float | int | None = m.threshold
    if isinstance(threshold, float) and math.isnan(threshold):
        threshold = None
    elif isinstance(threshold, float) and threshold.is_integer():
        threshold = int(threshold)
    return _drop_none(
        {"name": m.name, "query": m.query, "operator": m.operator, "threshold": threshold}
    )


def _step_json(s: CanaryStep) -> dict[str, Any]:
    out: dict[str, Any] = {"capacity": s.capacity}
    if s.traffic is not None:
        out["traffic"] = s.traffic
    if s.pause is not None:
        out["pause"] = _drop_none({"duration": _dur(s.pause.duration)})
    if s.analysis is not None:
        a = s.analysis
        out["analysis"] = _drop_none(
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
            canary["prometheus"] = _drop_none(
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
        out["rollingUpdate"] = _drop_none(
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
        out["maintainRatio"] = _drop_none({"tolerance": g.maintain_ratio.tolerance})
    return out


def rollout_to_json(spec: RolloutSpec) -> dict[str, Any]:
    """``spec.rollout`` JSON in a normal form (durations as Go prints them)."""
    return _drop_none(
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


# --------------------------------------------------------------------------------------------
# config


@frozen(kw_only=True)
class RolloutConfig:
    """Cluster settings for rollout groups (OME's chart defaults).

    ``default_ready_timeout``: ``rollout.defaultReadyTimeout``; ``default_ratio_tolerance``:
    ``coordination.defaultRatioTolerancePercent``; ``traffic_deadband``:
    ``coordination.trafficWeightDeadbandPercent``; ``max_pinned_plan_bytes``:
    ``rollout.maxPinnedPlanBytes``.
    """

    default_ready_timeout: timedelta = timedelta(minutes=15)
    default_ratio_tolerance: int = 5
    traffic_deadband: int = 0
    max_pinned_plan_bytes: int = 16384


# --------------------------------------------------------------------------------------------
# state


@frozen(kw_only=True)
class AnalysisRound:
    """One evaluated analysis round: ``Pass``, ``Fail`` or ``Inconclusive``, and why."""

    round: int
    at: datetime
    outcome: str
    detail: str = ""


@frozen(kw_only=True)
class AnalysisState:
    """The analysis of the current step: rounds so far, failures, the round in flight."""

    step: int
    rounds: int = 0
    failures: int = 0
    inconclusive: int = 0
    next_at: datetime | None = None
    pending_round: int | None = None
    pending_since: datetime | None = None
    passed: bool = False
    history: tuple[AnalysisRound, ...] = ()


@frozen(kw_only=True)
class GroupState:
    """One group's progress through the current run.

    ``step`` is 0-based: the canary step, or the blueGreen/rollingUpdate batch (batch ``s``
    allows ``(s+1) * batch`` Instances). ``stable`` / ``canary`` / ``rejected`` map each
    member to a revision name; ``gate`` names the step gate in force (``Capacity``,
    ``Analysis``, ``Pause``, ``Manual``, ``Drain``) and ``hold`` the rollout hold, if any.
    """

    index: int
    components: tuple[str, ...]
    progression: str = "blueGreen"
    phase: str = "Stable"
    step: int = 0
    step_entered_at: datetime | None = None
    step_ready_at: datetime | None = None
    ready_clock: datetime | None = None
    stable: Mapping[str, str] = field(factory=dict)
    canary: Mapping[str, str] = field(factory=dict)
    rejected: Mapping[str, str] = field(factory=dict)
    analysis: AnalysisState | None = None
    stable_at: datetime | None = None
    failure: str = ""
    gate: str = ""
    hold: RolloutHold | None = None
    pairing_override: int | None = None

    @property
    def active(self) -> bool:
        """A run is under way (not settled at Stable or RolledBack)."""
        return self.phase not in ("Stable", "RolledBack")


@frozen(kw_only=True)
class RolloutState:
    """Everything the rollout controller remembers: the pinned plan and every group."""

    plan_token: str = ""
    plan: Mapping[str, Any] = field(factory=dict)
    groups: tuple[GroupState, ...] = ()

    @property
    def pinned(self) -> RolloutSpec:
        """The pinned plan, parsed."""
        return parse_rollout(self.plan) if self.plan else RolloutSpec()

    @property
    def active(self) -> bool:
        """Some group is in a run."""
        return any(g.active for g in self.groups)


def _t(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def _hold_json(h: RolloutHold | None) -> dict[str, Any] | None:
    if h is None:
        return None
    return _drop_none(
        {
            "gate": h.gate,
            "reason": h.reason or None,
            "target": h.target or None,
            "since": _t(h.since),
        }
    )


def _analysis_json(a: AnalysisState | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return _drop_none(
        {
            "step": a.step,
            "rounds": a.rounds or None,
            "failures": a.failures or None,
            "inconclusive": a.inconclusive or None,
            "nextAt": _t(a.next_at),
            "pendingRound": a.pending_round,
            "pendingSince": _t(a.pending_since),
            "passed": a.passed or None,
            "history": [
                _drop_none(
                    {
                        "round": r.round,
                        "at": _t(r.at),
                        "outcome": r.outcome,
                        "detail": r.detail or None,
                    }
                )
                for r in a.history
            ]
            or None,
        }
    )


def _group_state_json(g: GroupState) -> dict[str, Any]:
    return _drop_none(
        {
            "index": g.index,
            "components": list(g.components),
            "progression": g.progression,
            "phase": g.phase,
            "step": g.step,
            "stepEnteredAt": _t(g.step_entered_at),
            "stepReadyAt": _t(g.step_ready_at),
            "readyClock": _t(g.ready_clock),
            "stable": dict(sorted(g.stable.items())) or None,
            "canary": dict(sorted(g.canary.items())) or None,
            "rejected": dict(sorted(g.rejected.items())) or None,
            "analysis": _analysis_json(g.analysis),
            "stableAt": _t(g.stable_at),
            "failure": g.failure or None,
            "gate": g.gate or None,
            "hold": _hold_json(g.hold),
            "pairingOverride": g.pairing_override,
        }
    )


def state_to_json(state: RolloutState) -> dict[str, Any]:
    """The state as compact JSON for ``status`` (omitting empty fields)."""
    return _drop_none(
        {
            "planToken": state.plan_token or None,
            "plan": dict(state.plan) or None,
            "groups": [_group_state_json(g) for g in state.groups] or None,
        }
    )


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, path: str, message: str) -> RolloutStateError:
        return RolloutStateError(f"{path}: {message}")

    def obj(self, value: object, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {_show(value)}")
        return value

    def opt_obj(self, value: object, path: str) -> Mapping[str, Any] | None:
        return None if value is None else self.obj(value, path)

    def integer(self, value: object, path: str, default: int | None = 0) -> int:
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_show(value)}")
        return value

    def opt_int(self, value: object, path: str) -> int | None:
        return None if value is None else self.integer(value, path)

    def text(self, value: object, path: str, default: str = "") -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_show(value)}")
        return value

    def time(self, value: object, path: str) -> datetime | None:
        if value is None:
            return None
        try:
            return parse_time(value)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None

    def str_map(self, value: object, path: str) -> dict[str, str]:
        if value is None:
            return {}
        data = self.obj(value, path)
        return {str(k): self.text(v, f"{path}.{k}") for k, v in data.items()}

    def items(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise self.fail(path, f"expected a list, got {_show(value)}")
        return list(value)


def state_from_json(obj: object, *, path: str = "status.rollout") -> RolloutState:
    """Read a state written by ``state_to_json``; None means no state yet."""
    if obj is None:
        return RolloutState()
    r = _Reader(path)
    data = r.obj(obj, path)
    groups: list[GroupState] = []
    for i, raw in enumerate(r.items(data.get("groups"), f"{path}.groups")):
        gp = f"{path}.groups[{i}]"
        g = r.obj(raw, gp)
        hold_raw = r.opt_obj(g.get("hold"), f"{gp}.hold")
        hold = None
        if hold_raw is not None:
            hold = RolloutHold(
                gate=r.text(hold_raw.get("gate"), f"{gp}.hold.gate"),
                reason=r.text(hold_raw.get("reason"), f"{gp}.hold.reason"),
                target=r.text(hold_raw.get("target"), f"{gp}.hold.target"),
                since=r.time(hold_raw.get("since"), f"{gp}.hold.since"),
            )
        an_raw = r.opt_obj(g.get("analysis"), f"{gp}.analysis")
        analysis = None
        if an_raw is not None:
            ap = f"{gp}.analysis"
            history = []
            for j, hr in enumerate(r.items(an_raw.get("history"), f"{ap}.history")):
                hp = f"{ap}.history[{j}]"
                h = r.obj(hr, hp)
                at = r.time(h.get("at"), f"{hp}.at")
                if at is None:
                    raise r.fail(f"{hp}.at", "required")
                history.append(
                    AnalysisRound(
                        round=r.integer(h.get("round"), f"{hp}.round"),
                        at=at,
                        outcome=r.text(h.get("outcome"), f"{hp}.outcome"),
                        detail=r.text(h.get("detail"), f"{hp}.detail"),
                    )
                )
            analysis = AnalysisState(
                step=r.integer(an_raw.get("step"), f"{ap}.step"),
                rounds=r.integer(an_raw.get("rounds"), f"{ap}.rounds"),
                failures=r.integer(an_raw.get("failures"), f"{ap}.failures"),
                inconclusive=r.integer(an_raw.get("inconclusive"), f"{ap}.inconclusive"),
                next_at=r.time(an_raw.get("nextAt"), f"{ap}.nextAt"),
                pending_round=r.opt_int(an_raw.get("pendingRound"), f"{ap}.pendingRound"),
                pending_since=r.time(an_raw.get("pendingSince"), f"{ap}.pendingSince"),
                passed=bool(an_raw.get("passed", False)),
                history=tuple(history),
            )
        components = tuple(
            r.text(c, f"{gp}.components[{j}]")
            for j, c in enumerate(r.items(g.get("components"), f"{gp}.components"))
        )
        for c in components:
            if c not in COMPONENTS:
                raise r.fail(f"{gp}.components", f"unknown component {c!r}")
        phase = r.text(g.get("phase"), f"{gp}.phase", "Stable")
        if phase not in PHASES:
            raise r.fail(f"{gp}.phase", f"unknown phase {phase!r}")
        groups.append(
            GroupState(
                index=r.integer(g.get("index"), f"{gp}.index", default=i),
                components=components,
                progression=r.text(g.get("progression"), f"{gp}.progression", "blueGreen"),
                phase=phase,
                step=r.integer(g.get("step"), f"{gp}.step"),
                step_entered_at=r.time(g.get("stepEnteredAt"), f"{gp}.stepEnteredAt"),
                step_ready_at=r.time(g.get("stepReadyAt"), f"{gp}.stepReadyAt"),
                ready_clock=r.time(g.get("readyClock"), f"{gp}.readyClock"),
                stable=r.str_map(g.get("stable"), f"{gp}.stable"),
                canary=r.str_map(g.get("canary"), f"{gp}.canary"),
                rejected=r.str_map(g.get("rejected"), f"{gp}.rejected"),
                analysis=analysis,
                stable_at=r.time(g.get("stableAt"), f"{gp}.stableAt"),
                failure=r.text(g.get("failure"), f"{gp}.failure"),
                gate=r.text(g.get("gate"), f"{gp}.gate"),
                hold=hold,
                pairing_override=r.opt_int(g.get("pairingOverride"), f"{gp}.pairingOverride"),
            )
        )
    plan = r.opt_obj(data.get("plan"), f"{path}.plan") or {}
    if plan:
        try:
            parse_rollout(plan, path=f"{path}.plan")
        except RolloutSpecError as exc:
            raise RolloutStateError(str(exc)) from None
    return RolloutState(
        plan_token=r.text(data.get("planToken"), f"{path}.planToken"),
        plan=dict(plan),
        groups=tuple(groups),
    )
