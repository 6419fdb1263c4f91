"""Admission checks for ``spec.rollout``, with OME's webhook reasons.

``validate_rollout`` returns every rejection and warning at once (a webhook shows them all);
an empty list, or warnings only, means admit. Reasons are OME's (ome-facts section 7) except
``InvalidRolloutSpec``, which stands for what OME's CRD schema and CEL rules reject before
its webhook runs (wrong JSON types, more than three groups, two progressions in a group, a
tolerance outside 0-100, an unknown ``groupOrdering``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from attrs import frozen

from omenative_core.model.spec import COMPONENTS, IntOrStr
from omenative_core.model.timefmt import DurationError, parse_duration
from omenative_core.rollout.model import (
    ANALYSIS_OPERATORS,
    GROUP_ORDERINGS,
    ON_INCONCLUSIVE,
    RolloutConfig,
    RolloutGroup,
    RolloutSpec,
    RolloutSpecError,
    parse_rollout,
)

__all__ = [
    "ANNOTATION_READY_TIMEOUT",
    "MAX_CANARY_STEPS",
    "MAX_GROUPS",
    "Rejection",
    "errors",
    "validate_rollout",
    "warnings",
]

ANNOTATION_READY_TIMEOUT = "ome.io/rollout-ready-timeout"
"""ISVC annotation overriding a canary's ``readyTimeout``."""

MAX_GROUPS = 3
"""``spec.rollout.groups`` maxItems."""

MAX_CANARY_STEPS = 20
"""Most steps a canary may have."""

MAX_METRICS = 10
"""Most metrics an analysis may have."""

_TOKEN = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")
_DIGITS = re.compile(r"^-?[0-9]+$")
_MIN_READY_TIMEOUT = timedelta(minutes=1)


@frozen(kw_only=True)
class Rejection:
    """One admission finding: OME's reason, a message, the JSON path; ``warning`` admits."""

    reason: str
    message: str
    path: str
    warning: bool = False


def errors(found: list[Rejection]) -> list[Rejection]:
    """The findings that deny admission."""
    return [r for r in found if not r.warning]


def warnings(found: list[Rejection]) -> list[Rejection]:
    """The findings that only warn."""
    return [r for r in found if r.warning]


def _as_spec(value: Mapping[str, Any] | RolloutSpec | None, path: str) -> RolloutSpec:
    if isinstance(value, RolloutSpec):
        return value
    return parse_rollout(value, path=path)


class _Checks:
    def __init__(self, root: str) -> None:
        self.root = root
        self.out: list[Rejection] = []

    def reject(self, reason: str, path: str, message: str) -> None:
        self.out.append(Rejection(reason=reason, message=message, path=path))

    def warn(self, reason: str, path: str, message: str) -> None:
        self.out.append(Rejection(reason=reason, message=message, path=path, warning=True))

    # ------------------------------------------------------------------ budgets

    def budget(self, value: IntOrStr | None, path: str) -> int | None:
        """The budget as a count (percent as its number) or None when invalid/unset."""
        if value is None:
            return None
        if isinstance(value, int):
            if value < 0:
                self.reject(
                    "InvalidRollingUpdateInteger",
                    path,
                    f"{value} is negative: use a count >= 0 or a percentage",
                )
                return None
            return value
        text = value.strip()
        if _PERCENT.match(text):
            pct = int(text[:-1])
            if pct > 100:
                self.reject("InvalidRollingUpdatePercent", path, f"{value!r} is above 100%")
                return None
            return pct
        if _DIGITS.match(text):
            self.reject(
                "InvalidRollingUpdateInteger",
                path,
                f"{value!r} is a quoted number: write {text} unquoted, or {text}%",
            )
            return None
        self.reject(
            "InvalidRollingUpdatePercent",
            path,
            f"{value!r} is neither a count nor a whole percentage such as '25%'",
        )
        return None

    # ------------------------------------------------------------------ canary

    def capacity(self, value: IntOrStr, path: str) -> tuple[str, int] | None:
        if isinstance(value, int):
            if value < 0:
                self.reject("CanaryInvalid", path, f"capacity {value} is negative")
                return None
            return ("count", value)
        text = value.strip()
        if _PERCENT.match(text):
            pct = int(text[:-1])
            if pct > 100:
                self.reject("CanaryInvalid", path, f"capacity {value!r} is above 100%")
                return None
            return ("percent", pct)
        if _DIGITS.match(text):
            self.reject(
                "CanaryInvalid",
                path,
                f"capacity {value!r} is a quoted number: write {text} for a count "
                f"or '{text}%' for a share",
            )
            return None
        self.reject(
            "CanaryInvalid",
            path,
            f"capacity {value!r} is neither a count nor a percentage such as '25%'",
        )
        return None

    def canary(self, group: RolloutGroup, path: str) -> None:
        canary = group.canary
        assert canary is not None
        steps = canary.steps
        sp = f"{path}.canary.steps"
        if not steps:
            self.reject("CanaryInvalid", sp, "a canary needs at least one step")
            return
        if len(steps) > MAX_CANARY_STEPS:
            self.reject(
                "CanaryInvalid", sp, f"{len(steps)} steps: a canary has at most {MAX_CANARY_STEPS}"
            )
        last_cap: tuple[str, int] | None = None
        last_traffic: int | None = None
        any_traffic = False
        for i, step in enumerate(steps):
            p = f"{sp}[{i}]"
            cap = self.capacity(step.capacity, f"{p}.capacity")
            if (
                cap is not None
                and last_cap is not None
                and cap[0] == last_cap[0]
                and cap[1] < last_cap[1]
            ):
                self.reject(
                    "CanaryInvalid",
                    f"{p}.capacity",
                    f"capacity {step.capacity!r} is below the previous step's: "
                    "Instances never leave the canary before the end",
                )
            if cap is not None:
                last_cap = cap
            if step.traffic is not None:
                any_traffic = True
                if not 0 <= step.traffic <= 100:
                    self.reject(
                        "CanaryInvalid", f"{p}.traffic", f"traffic {step.traffic} is outside 0-100"
                    )
                elif last_traffic is not None and step.traffic < last_traffic:
                    self.reject(
                        "CanaryInvalid",
                        f"{p}.traffic",
                        f"traffic {step.traffic} is below the previous step's "
                        f"{last_traffic}: traffic never decreases",
                    )
                last_traffic = step.traffic
            if (
                step.pause is not None
                and step.pause.duration is not None
                and step.pause.duration < timedelta(0)
            ):
                self.reject("InvalidDuration", f"{p}.pause.duration", "must not be negative")
            if step.analysis is not None:
                self.analysis(step, f"{p}.analysis")
        final = steps[-1]
        if not (isinstance(final.capacity, str) and final.capacity.strip() == "100%"):
            self.reject(
                "CanaryInvalid",
                f"{sp}[{len(steps) - 1}].capacity",
                f"the last step's capacity is {final.capacity!r}: it must be '100%'",
            )
        if any_traffic and final.traffic != 100:
            self.reject(
                "CanaryInvalid",
                f"{sp}[{len(steps) - 1}].traffic",
                f"the last step's traffic is {final.traffic}: it must be 100",
            )
        if canary.ready_timeout is not None and canary.ready_timeout <= timedelta(0):
            self.reject("InvalidDuration", f"{path}.canary.readyTimeout", "must be positive")
        if canary.scale_down_delay_seconds is not None and canary.scale_down_delay_seconds < 0:
            self.reject(
                "CanaryInvalid", f"{path}.canary.scaleDownDelaySeconds", "must not be negative"
            )
        elif canary.scale_down_delay_seconds is not None:
            self.warn(
                "FieldIgnored",
                f"{path}.canary.scaleDownDelaySeconds",
                "omenative does not implement it: an old Instance is deleted once it is "
                "drained and unrouted (its pods get their terminationGracePeriodSeconds)",
            )
        prom = canary.prometheus
        if prom is not None and prom.provider_ref and not prom.server_address:
            self.warn(
                "FieldIgnored",
                f"{path}.canary.prometheus.providerRef",
                "omenative does not resolve providerRef: every analysis round will error; "
                "set serverAddress",
            )

    def analysis(self, step: Any, path: str) -> None:
        a = step.analysis
        if a.failure_limit is not None and a.failure_limit < 1:
            self.reject(
                "AnalysisInvalid",
                f"{path}.failureLimit",
                f"failureLimit {a.failure_limit} must be at least 1",
            )
        if not 1 <= len(a.metrics) <= MAX_METRICS:
            self.reject(
                "AnalysisInvalid",
                f"{path}.metrics",
                f"{len(a.metrics)} metrics: an analysis has 1 to {MAX_METRICS}",
            )
        if a.on_inconclusive is not None and a.on_inconclusive not in ON_INCONCLUSIVE:
            self.reject(
                "AnalysisInvalid",
                f"{path}.onInconclusive",
                f"onInconclusive {a.on_inconclusive!r} is not one of {', '.join(ON_INCONCLUSIVE)}",
            )
        if a.interval is not None and a.interval <= timedelta(0):
            self.reject("InvalidDuration", f"{path}.interval", "must be positive")
        if a.initial_delay is not None and a.initial_delay < timedelta(0):
            self.reject("InvalidDuration", f"{path}.initialDelay", "must not be negative")
        names: set[str] = set()
        for j, m in enumerate(a.metrics):
            mp = f"{path}.metrics[{j}]"
            if not m.name:
                self.reject("AnalysisInvalid", f"{mp}.name", "a metric needs a name")
            elif m.name in names:
                self.reject("AnalysisInvalid", f"{mp}.name", f"metric {m.name!r} is repeated")
            names.add(m.name)
            if not m.query.strip():
                self.reject("AnalysisInvalid", f"{mp}.query", "a metric needs a query")
            if m.operator not in ANALYSIS_OPERATORS:
                self.reject(
                    "AnalysisInvalid",
                    f"{mp}.operator",
                    f"operator {m.operator!r} is not one of {', '.join(ANALYSIS_OPERATORS)}",
                )


def validate_rollout(
    spec: Mapping[str, Any] | RolloutSpec | None,
    old_spec: Mapping[str, Any] | RolloutSpec | None = None,
    declared_omenative: Mapping[str, bool] | None = None,
    *,
    annotations: Mapping[str, str] | None = None,
    component_budgets: Mapping[str, tuple[IntOrStr | None, IntOrStr | None]] | None = None,
    old_component_budgets: Mapping[str, tuple[IntOrStr | None, IntOrStr | None]] | None = None,
    instance_ready_timeout: timedelta | None = None,
    config: RolloutConfig | None = None,
    path: str = "spec.rollout",
) -> list[Rejection]:
    """Check ``spec.rollout`` (raw JSON or parsed) as OME's webhook does.

    ``declared_omenative`` maps every component the InferenceService declares to whether
    OMENative is *declared* for it (``spec.deploymentMode`` or the component's
    ``ome.io/deploymentMode`` annotation; a leader/worker does not count); None skips those
    checks. ``old_spec`` is the rollout before this edit (None on create).
    ``component_budgets`` / ``old_component_budgets`` map components to their own
    ``lifecycle.updateStrategy.rollingUpdate`` ``(maxSurge, maxUnavailable)``, for the
    lockstep rule. ``annotations`` are the ISVC's (for ``ome.io/rollout-ready-timeout``);
    ``instance_ready_timeout`` the members' readiness deadline (for
    ``RolloutTimeoutTooShort``).
    """
    c = _Checks(path)
    cfg = config or RolloutConfig()
    try:
        new = _as_spec(spec, path)
    except RolloutSpecError as exc:
        return [Rejection(reason=p.reason, message=p.message, path=p.path) for p in exc.problems]
    old: RolloutSpec | None
    try:
        old = None if old_spec is None else _as_spec(old_spec, path)
    except RolloutSpecError:
        old = None  # the stored object was admitted by an older rule set; judge the new one

    groups = new.groups
    gp = f"{path}.groups"
    if len(groups) > MAX_GROUPS:
        c.reject(
            "InvalidRolloutSpec", gp, f"{len(groups)} groups: spec.rollout has at most {MAX_GROUPS}"
        )
    if new.pairing_protocol is not None and (
        len(new.pairing_protocol) > 63 or not _TOKEN.match(new.pairing_protocol)
    ):
        c.reject(
            "InvalidRolloutSpec",
            f"{path}.pairingProtocol",
            f"pairingProtocol {new.pairing_protocol!r} must be at most 63 characters of "
            "letters, digits, '-', '_' or '.', starting and ending alphanumeric",
        )

    declared = dict(declared_omenative) if declared_omenative is not None else None
    seen: dict[str, int] = {}
    canary_groups: list[int] = []
    for i, group in enumerate(groups):
        p = f"{gp}[{i}]"
        progressions = [
            name
            for name, value in (
                ("canary", group.canary),
                ("blueGreen", group.blue_green),
                ("rollingUpdate", group.rolling_update),
            )
            if value is not None
        ]
        if len(progressions) > 1:
            c.reject(
                "InvalidRolloutSpec",
                p,
                f"a group sets at most one of canary, blueGreen, rollingUpdate "
                f"(found {', '.join(progressions)})",
            )
        is_canary = group.canary is not None
        if is_canary:
            canary_groups.append(i)
        if not group.components:
            c.reject(
                "InvalidComponentInCoordinationGroup",
                f"{p}.components",
                "a group names 1 to 3 components",
            )
        for j, comp in enumerate(group.components):
            cp = f"{p}.components[{j}]"
            if comp not in COMPONENTS:
                c.reject(
                    "InvalidComponentInCoordinationGroup",
                    cp,
                    f"{comp!r} is not a component (router, engine or decoder)",
                )
                continue
            if comp in seen:
                c.reject(
                    "DuplicateComponentInCoordinationGroups",
                    cp,
                    f"{comp} is already in group {seen[comp]}",
                )
                continue
            seen[comp] = i
            if declared is not None:
                if comp not in declared:
                    c.reject(
                        "OrphanCoordinationGroup", cp, f"the InferenceService declares no {comp}"
                    )
                elif not declared[comp]:
                    c.reject(
                        "CanaryRequiresOMENative" if is_canary else "CoordinationRequiresOMENative",
                        cp,
                        f"{comp} must declare deploymentMode OMENative (spec.deploymentMode "
                        "or its ome.io/deploymentMode annotation) to join a rollout group",
                    )
        if group.order:
            c.reject(
                "OrderNotHonored",
                f"{p}.order",
                "order is not honored: members of a group roll together; list groups "
                "in the order they should roll instead",
            )
        if group.policy_ref is not None and not progressions:
            c.reject(
                "RolloutPolicyRefUnsupported",
                f"{p}.policyRef",
                "RolloutPolicy references are not supported: set canary, blueGreen or "
                "rollingUpdate inline",
            )
        if group.maintain_ratio is not None:
            tol = group.maintain_ratio.tolerance
            if is_canary:
                c.reject(
                    "CanaryInvalid",
                    f"{p}.maintainRatio",
                    "maintainRatio does not apply to a canary group: the canary's "
                    "capacity sets the Instance counts",
                )
            if tol is not None and not 0 <= tol <= 100:
                c.reject(
                    "InvalidRolloutSpec",
                    f"{p}.maintainRatio.tolerance",
                    f"tolerance {tol} is outside 0-100",
                )
            elif tol is not None and tol > 50:
                c.warn(
                    "RatioToleranceTooHigh",
                    f"{p}.maintainRatio.tolerance",
                    f"tolerance {tol}% barely constrains the ratio",
                )
        if group.rolling_update is not None:
            ru = group.rolling_update
            rp = f"{p}.rollingUpdate"
            surge = c.budget(ru.effective_max_surge, f"{rp}.maxSurge")
            unavailable = c.budget(ru.effective_max_unavailable, f"{rp}.maxUnavailable")
            if surge == 0 and unavailable == 0:
                c.reject(
                    "ZeroBudgetPacingUnstartable",
                    rp,
                    "maxSurge and maxUnavailable are both 0: no Instance could ever move",
                )
        if is_canary:
            c.canary(group, p)
            comps = set(group.components)
            unit = {"engine", "decoder"}
            present = (
                set(declared) if declared is not None else {x for g in groups for x in g.components}
            )
            if unit <= present and len(comps & unit) == 1:
                missing = (unit - comps).pop()
                c.reject(
                    "CanaryInvalid",
                    f"{p}.components",
                    f"engine and decoder are one canary unit: add {missing}",
                )
    if len(canary_groups) > 1:
        c.reject(
            "MultipleCanaryGroups",
            gp,
            f"groups {', '.join(map(str, canary_groups))} are canaries: at most one "
            "group may be a canary",
        )

    # soak and ordering
    seq = new.sequence()
    wait = new.sequence_wait()
    for i, group in enumerate(groups):
        if group.soak is None:
            continue
        sp = f"{gp}[{i}].soak"
        if i not in seq:
            c.reject(
                "SoakNotHonored",
                sp,
                "soak is only waited between the single-component blueGreen groups of a "
                "sequence (two or more)",
            )
        elif i == seq[-1] and group.soak > wait:
            c.reject(
                "SoakNotHonored",
                sp,
                "the last group of a sequence is never waited on: its soak is ignored",
            )
    ordering = new.group_ordering
    if ordering is not None and ordering not in GROUP_ORDERINGS:
        c.reject(
            "InvalidRolloutSpec",
            f"{path}.groupOrdering",
            f"groupOrdering {ordering!r} is not Sequential or Concurrent",
        )
    elif ordering == "Concurrent" and seq:
        c.reject(
            "GroupOrderingNotHonored",
            f"{path}.groupOrdering",
            "Concurrent is not honored: single-component blueGreen groups roll one at a time",
        )
    elif ordering == "Sequential" and len(groups) > 1 and len(seq) != len(groups):
        others = [str(i) for i in range(len(groups)) if i not in seq]
        c.reject(
            "GroupOrderingNotHonored",
            f"{path}.groupOrdering",
            f"Sequential is not honored for groups {', '.join(others)}: only "
            "single-component blueGreen groups roll one at a time",
        )

    # pairing protocol change
    if (
        old is not None
        and old.pairing_protocol
        and new.pairing_protocol
        and old.pairing_protocol != new.pairing_protocol
    ):
        coordinated = any(
            {"engine", "decoder"} <= set(g.components) and g.progression != "rollingUpdate"
            for g in groups
        )
        if not coordinated:
            c.reject(
                "PairingProtocolChangeUncoordinated",
                f"{path}.pairingProtocol",
                f"changing the pairing protocol from {old.pairing_protocol!r} to "
                f"{new.pairing_protocol!r} needs one blueGreen or canary group with "
                "engine and decoder",
            )

    # lockstep budgets
    if component_budgets is not None and old_component_budgets is not None:
        for i, group in enumerate(groups):
            if group.rolling_update is None or len(group.components) < 2:
                continue
            members = [m for m in group.components if m in component_budgets]
            changed = [
                m for m in members if component_budgets.get(m) != old_component_budgets.get(m)
            ]
            if not changed:
                continue
            values = {component_budgets[m] for m in members}
            if len(changed) != len(members) or len(values) != 1:
                c.reject(
                    "RollingUpdateLockstepViolation",
                    f"{gp}[{i}]",
                    f"the rolling-update budgets of {', '.join(changed)} changed alone: "
                    f"edit {', '.join(members)} together, to the same values",
                )

    # ready timeout
    note = (annotations or {}).get(ANNOTATION_READY_TIMEOUT)
    note_timeout: timedelta | None = None
    if note is not None:
        try:
            note_timeout = parse_duration(note)
        except DurationError as exc:
            c.reject(
                "InvalidDuration", f"metadata.annotations[{ANNOTATION_READY_TIMEOUT}]", str(exc)
            )
    for i in canary_groups:
        canary = groups[i].canary
        assert canary is not None
        timeout = note_timeout or canary.ready_timeout or cfg.default_ready_timeout
        where = (
            f"metadata.annotations[{ANNOTATION_READY_TIMEOUT}]"
            if note_timeout
            else f"{gp}[{i}].canary.readyTimeout"
        )
        if timeout < _MIN_READY_TIMEOUT:
            c.warn(
                "RolloutTimeoutTooShort",
                where,
                f"a canary step has {timeout} to become ready: shorter than a minute",
            )
        elif instance_ready_timeout is not None and timeout < instance_ready_timeout:
            c.warn(
                "RolloutTimeoutTooShort",
                where,
                f"the canary readyTimeout {timeout} is shorter than the Instances' own "
                f"readiness deadline {instance_ready_timeout}: a slow start fails the "
                "canary before the Instance",
            )
    return c.out
