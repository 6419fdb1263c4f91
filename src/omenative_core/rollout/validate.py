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

from omenative_core.model.spec import COMPONENTS, IntOrStr
from omenative_core.model.timefmt import DurationError, parse_duration
from omenative_core.rollout.findings import Findings, Rejection, errors, warnings
from omenative_core.rollout.model import (
    GROUP_ORDERINGS,
    RolloutConfig,
    RolloutGroup,
    RolloutSpec,
    RolloutSpecError,
    parse_rollout,
)
from omenative_core.rollout.phases import GroupOrdering, Progression
from omenative_core.rollout.validate_canary import MAX_CANARY_STEPS, check_canary

__all__ = [
    "ANNOTATION_READY_TIMEOUT",
    "BUDGET_RULE",
    "MAX_CANARY_STEPS",
    "MAX_GROUPS",
    "Rejection",
    "budget_problem",
    "errors",
    "validate_rollout",
    "warnings",
]

ANNOTATION_READY_TIMEOUT = "ome.io/rollout-ready-timeout"
"""ISVC annotation overriding a canary's ``readyTimeout``."""

MAX_GROUPS = 3
"""``spec.rollout.groups`` maxItems."""

_TOKEN = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")
_DIGITS = re.compile(r"^-?[0-9]+$")
_MIN_READY_TIMEOUT = timedelta(minutes=1)

BUDGET_RULE = "use a count >= 0 such as 1, or a whole percentage from 0% to 100% such as '25%'"
"""What a ``maxSurge`` / ``maxUnavailable`` may be, in words, for every message about one."""


def budget_problem(value: object, field: str) -> tuple[str, str] | None:
    """Why a ``maxSurge`` / ``maxUnavailable`` value is refused: (OME's reason, a message
    naming ``field`` and the rule); None when it is unset or valid.

    Valid, as in a Deployment: an integer >= 0, or a whole percentage "0%" to "100%". The
    same rule holds for rollout groups, InferenceService components and InferenceReplicas.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        found = _count_problem(value)
    else:
        found = _text_problem(value)
    return None if found is None else (found[0], f"{field} is {found[1]}")


def _count_problem(value: int) -> tuple[str, str] | None:
    if value >= 0:
        return None
    return "InvalidRollingUpdateInteger", f"{value}, a negative count; {BUDGET_RULE}"


def _text_problem(value: object) -> tuple[str, str] | None:
    text = value.strip() if isinstance(value, str) else None
    if text is not None and _PERCENT.match(text):
        if int(text[:-1]) <= 100:
            return None
        return "InvalidRollingUpdatePercent", f"{value!r}, above 100%; {BUDGET_RULE}"
    if text is not None and _DIGITS.match(text):
        return (
            "InvalidRollingUpdateInteger",
            f"{value!r}, a quoted number: write {text} unquoted for a count, "
            f"or '{text}%' for a percentage",
        )
    return (
        "InvalidRollingUpdatePercent",
        f"{value!r}, neither a count nor a percentage; {BUDGET_RULE}",
    )


def _as_spec(value: Mapping[str, Any] | RolloutSpec | None, path: str) -> RolloutSpec:
    if isinstance(value, RolloutSpec):
        return value
    return parse_rollout(value, path=path)


def _budget(c: Findings, value: IntOrStr | None, path: str, name: str) -> int | None:
    """The budget as a count (a percentage as its number); None when unset or refused."""
    problem = budget_problem(value, name)
    if problem is not None:
        c.reject(problem[0], path, problem[1])
        return None
    if value is None or isinstance(value, int):
        return value
    return int(value.strip()[:-1])


class _Pass:
    """One ``validate_rollout`` call: the parsed specs, the declared components, findings."""

    def __init__(
        self,
        new: RolloutSpec,
        old: RolloutSpec | None,
        declared: dict[str, bool] | None,
        path: str,
    ) -> None:
        self.c = Findings()
        self.new = new
        self.old = old
        self.declared = declared
        self.path = path
        self.gp = f"{path}.groups"
        self.seen: dict[str, int] = {}
        self.canary_groups: list[int] = []

    # ------------------------------------------------------------------ whole spec

    def top(self) -> None:
        new, c = self.new, self.c
        if len(new.groups) > MAX_GROUPS:
            c.reject(
                "InvalidRolloutSpec",
                self.gp,
                f"{len(new.groups)} groups: spec.rollout has at most {MAX_GROUPS}",
            )
        protocol = new.pairing_protocol
        if protocol is not None and (len(protocol) > 63 or not _TOKEN.match(protocol)):
            c.reject(
                "InvalidRolloutSpec",
                f"{self.path}.pairingProtocol",
                f"pairingProtocol {protocol!r} must be at most 63 characters of "
                "letters, digits, '-', '_' or '.', starting and ending alphanumeric",
            )

    # ------------------------------------------------------------------ one group

    def group(self, i: int, group: RolloutGroup) -> None:
        p = f"{self.gp}[{i}]"
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
            self.c.reject(
                "InvalidRolloutSpec",
                p,
                f"a group sets at most one of canary, blueGreen, rollingUpdate "
                f"(found {', '.join(progressions)})",
            )
        if group.canary is not None:
            self.canary_groups.append(i)
        self.members(i, group, p)
        self.unsupported(group, p, bool(progressions))
        if group.maintain_ratio is not None:
            self.maintain_ratio(group, p)
        if group.rolling_update is not None:
            self.rolling_update(group, p)
        if group.canary is not None:
            check_canary(self.c, group, p)
            self.canary_unit(group, p)

    def members(self, i: int, group: RolloutGroup, p: str) -> None:
        if not group.components:
            self.c.reject(
                "InvalidComponentInCoordinationGroup",
                f"{p}.components",
                "a group names 1 to 3 components",
            )
        for j, comp in enumerate(group.components):
            self.member(i, comp, f"{p}.components[{j}]", group.canary is not None)

    def member(self, i: int, comp: str, cp: str, is_canary: bool) -> None:
        c = self.c
        if comp not in COMPONENTS:
            c.reject(
                "InvalidComponentInCoordinationGroup",
                cp,
                f"{comp!r} is not a component (router, engine or decoder)",
            )
            return
        if comp in self.seen:
            c.reject(
                "DuplicateComponentInCoordinationGroups",
                cp,
                f"{comp} is already in group {self.seen[comp]}",
            )
            return
        self.seen[comp] = i
        if self.declared is None:
            return
        if comp not in self.declared:
            c.reject("OrphanCoordinationGroup", cp, f"the InferenceService declares no {comp}")
        elif not self.declared[comp]:
            c.reject(
                "CanaryRequiresOMENative" if is_canary else "CoordinationRequiresOMENative",
                cp,
                f"{comp} must declare deploymentMode OMENative (spec.deploymentMode "
                "or its ome.io/deploymentMode annotation) to join a rollout group",
            )

    def unsupported(self, group: RolloutGroup, p: str, has_progression: bool) -> None:
        if group.order:
            self.c.reject(
                "OrderNotHonored",
                f"{p}.order",
                "order is not honored: members of a group roll together; list groups "
                "in the order they should roll instead",
            )
        if group.policy_ref is not None and not has_progression:
            self.c.reject(
                "RolloutPolicyRefUnsupported",
                f"{p}.policyRef",
                "RolloutPolicy references are not supported: set canary, blueGreen or "
                "rollingUpdate inline",
            )

    def maintain_ratio(self, group: RolloutGroup, p: str) -> None:
        assert group.maintain_ratio is not None
        tol = group.maintain_ratio.tolerance
        if group.canary is not None:
            self.c.reject(
                "CanaryInvalid",
                f"{p}.maintainRatio",
                "maintainRatio does not apply to a canary group: the canary's "
                "capacity sets the Instance counts",
            )
        if tol is not None and not 0 <= tol <= 100:
            self.c.reject(
                "InvalidRolloutSpec",
                f"{p}.maintainRatio.tolerance",
                f"tolerance {tol} is outside 0-100",
            )
        elif tol is not None and tol > 50:
            self.c.warn(
                "RatioToleranceTooHigh",
                f"{p}.maintainRatio.tolerance",
                f"tolerance {tol}% barely constrains the ratio",
            )

    def rolling_update(self, group: RolloutGroup, p: str) -> None:
        ru = group.rolling_update
        assert ru is not None
        rp = f"{p}.rollingUpdate"
        surge = _budget(self.c, ru.effective_max_surge, f"{rp}.maxSurge", "maxSurge")
        unavailable = _budget(
            self.c, ru.effective_max_unavailable, f"{rp}.maxUnavailable", "maxUnavailable"
        )
        if surge == 0 and unavailable == 0:
            self.c.reject(
                "ZeroBudgetPacingUnstartable",
                rp,
                "maxSurge and maxUnavailable are both 0: no Instance could ever move",
            )

    def canary_unit(self, group: RolloutGroup, p: str) -> None:
        comps = set(group.components)
        unit = {"engine", "decoder"}
        present = (
            set(self.declared)
            if self.declared is not None
            else {x for g in self.new.groups for x in g.components}
        )
        if unit <= present and len(comps & unit) == 1:
            missing = (unit - comps).pop()
            self.c.reject(
                "CanaryInvalid",
                f"{p}.components",
                f"engine and decoder are one canary unit: add {missing}",
            )

    # ------------------------------------------------------------------ across groups

    def multiple_canaries(self) -> None:
        if len(self.canary_groups) > 1:
            self.c.reject(
                "MultipleCanaryGroups",
                self.gp,
                f"groups {', '.join(map(str, self.canary_groups))} are canaries: at most one "
                "group may be a canary",
            )

    def soak(self) -> None:
        seq = self.new.sequence()
        wait = self.new.sequence_wait()
        for i, group in enumerate(self.new.groups):
            if group.soak is None:
                continue
            sp = f"{self.gp}[{i}].soak"
            if i not in seq:
                self.c.reject(
                    "SoakNotHonored",
                    sp,
                    "soak is only waited between the single-component blueGreen groups of a "
                    "sequence (two or more)",
                )
            elif i == seq[-1] and group.soak > wait:
                self.c.reject(
                    "SoakNotHonored",
                    sp,
                    "the last group of a sequence is never waited on: its soak is ignored",
                )

    def ordering(self) -> None:
        groups, seq = self.new.groups, self.new.sequence()
        ordering = self.new.group_ordering
        where = f"{self.path}.groupOrdering"
        if ordering is not None and ordering not in GROUP_ORDERINGS:
            self.c.reject(
                "InvalidRolloutSpec",
                where,
                f"groupOrdering {ordering!r} is not Sequential or Concurrent",
            )
        elif ordering == GroupOrdering.CONCURRENT and seq:
            self.c.reject(
                "GroupOrderingNotHonored",
                where,
                "Concurrent is not honored: single-component blueGreen groups roll one at a time",
            )
        elif ordering == GroupOrdering.SEQUENTIAL and len(groups) > 1 and len(seq) != len(groups):
            others = [str(i) for i in range(len(groups)) if i not in seq]
            self.c.reject(
                "GroupOrderingNotHonored",
                where,
                f"Sequential is not honored for groups {', '.join(others)}: only "
                "single-component blueGreen groups roll one at a time",
            )

    def pairing_change(self) -> None:
        old, new = self.old, self.new
        if old is None or not old.pairing_protocol or not new.pairing_protocol:
            return
        if old.pairing_protocol == new.pairing_protocol:
            return
        coordinated = any(
            {"engine", "decoder"} <= set(g.components)
            and g.progression != Progression.ROLLING_UPDATE
            for g in new.groups
        )
        if not coordinated:
            self.c.reject(
                "PairingProtocolChangeUncoordinated",
                f"{self.path}.pairingProtocol",
                f"changing the pairing protocol from {old.pairing_protocol!r} to "
                f"{new.pairing_protocol!r} needs one blueGreen or canary group with "
                "engine and decoder",
            )

    def lockstep(self, budgets: _Budgets, old_budgets: _Budgets) -> None:
        for i, group in enumerate(self.new.groups):
            if group.rolling_update is None or len(group.components) < 2:
                continue
            members = [m for m in group.components if m in budgets]
            changed = [m for m in members if budgets.get(m) != old_budgets.get(m)]
            if not changed:
                continue
            values = {budgets[m] for m in members}
            if len(changed) != len(members) or len(values) != 1:
                self.c.reject(
                    "RollingUpdateLockstepViolation",
                    f"{self.gp}[{i}]",
                    f"the rolling-update budgets of {', '.join(changed)} changed alone: "
                    f"edit {', '.join(members)} together, to the same values",
                )

    def ready_timeouts(
        self,
        annotations: Mapping[str, str],
        instance_ready_timeout: timedelta | None,
        cfg: RolloutConfig,
    ) -> None:
        note_path = f"metadata.annotations[{ANNOTATION_READY_TIMEOUT}]"
        note = annotations.get(ANNOTATION_READY_TIMEOUT)
        note_timeout: timedelta | None = None
        if note is not None:
            try:
                note_timeout = parse_duration(note)
            except DurationError as exc:
                self.c.reject("InvalidDuration", note_path, str(exc))
        for i in self.canary_groups:
            canary = self.new.groups[i].canary
            assert canary is not None
            timeout = note_timeout or canary.ready_timeout or cfg.default_ready_timeout
            where = note_path if note_timeout else f"{self.gp}[{i}].canary.readyTimeout"
            if timeout < _MIN_READY_TIMEOUT:
                self.c.warn(
                    "RolloutTimeoutTooShort",
                    where,
                    f"a canary step has {timeout} to become ready: shorter than a minute",
                )
            elif instance_ready_timeout is not None and timeout < instance_ready_timeout:
                self.c.warn(
                    "RolloutTimeoutTooShort",
                    where,
                    f"the canary readyTimeout {timeout} is shorter than the Instances' own "
                    f"readiness deadline {instance_ready_timeout}: a slow start fails the "
                    "canary before the Instance",
                )


_Budgets = Mapping[str, tuple[IntOrStr | None, IntOrStr | None]]


def validate_rollout(
    spec: Mapping[str, Any] | RolloutSpec | None,
    old_spec: Mapping[str, Any] | RolloutSpec | None = None,
    declared_omenative: Mapping[str, bool] | None = None,
    *,
    annotations: Mapping[str, str] | None = None,
    component_budgets: _Budgets | None = None,
    old_component_budgets: _Budgets | None = None,
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
    try:
        new = _as_spec(spec, path)
    except RolloutSpecError as exc:
        return [Rejection(reason=p.reason, message=p.message, path=p.path) for p in exc.problems]
    old: RolloutSpec | None
    try:
        old = None if old_spec is None else _as_spec(old_spec, path)
    except RolloutSpecError:
        old = None  # the stored object was admitted by an older rule set; judge the new one
    run = _Pass(
        new, old, dict(declared_omenative) if declared_omenative is not None else None, path
    )
    run.top()
    for i, group in enumerate(new.groups):
        run.group(i, group)
    run.multiple_canaries()
    run.soak()
    run.ordering()
    run.pairing_change()
    if component_budgets is not None and old_component_budgets is not None:
        run.lockstep(component_budgets, old_component_budgets)
    run.ready_timeouts(annotations or {}, instance_ready_timeout, config or RolloutConfig())
    return run.c.out
