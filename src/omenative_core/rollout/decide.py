"""``decide``: one pass of the rollout-group controller, from observations to a decision.

Theory of operation:

1. Inputs are data: the ISVC's ``spec.rollout`` (parsed), the state persisted last pass,
   one ``MemberView`` per component (its InferenceReplica summarised), ``now``, the analysis
   measurements the shell took for the queries asked last pass, the ISVC's annotations and
   the cluster config. Nothing is read from anywhere else; the same inputs give the same
   decision.
2. The only lever on an InferenceReplica is its pacing: ``partition = desired - allowed``
   (the planner keeps the lowest ``partition`` indexes on their revision, so ``allowed``
   Instances move to the new one), ``rollbackToRevision`` to send everything back, and for
   rollingUpdate groups the budgets. The shell writes them in the same spec write that
   carries a new template, so no member starts rolling on its own.
3. A run starts when a member's revision differs from its stable revision. The plan (the
   rollout spec) is pinned when the run starts; later edits wait for the run to end or for
   ``ome.io/rollout-repin``.
4. A group advances one step per pass, and only when every member has the current step's
   Instances ready on the new revision and the step's gate is open. A held member, a member
   with failed Instances, a ratio that would leave its tolerance, or a pairing that would
   break stops the whole group, never one member.
5. Everything to remember is in the returned ``RolloutState``; events are emitted on
   transitions only, so a repeated pass emits nothing new.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from attrs import evolve, field, frozen

from omenative_core.model.spec import InferenceReplica, IntOrStr, Pacing, RollingUpdate
from omenative_core.model.status import (
    InferenceReplicaStatus,
    InstanceStatus,
    RolloutHold,
    TrafficTarget,
)
from omenative_core.model.timefmt import DurationError, parse_duration, to_second
from omenative_core.policy import BudgetError, resolve_budget
from omenative_core.render import is_multi_pod
from omenative_core.revisions import canonical_json, hash_of
from omenative_core.rollout.model import (
    Analysis,
    AnalysisRound,
    AnalysisState,
    GroupState,
    RolloutConfig,
    RolloutGroup,
    RolloutSpec,
    RolloutState,
    canary_capacity,
    plan_token,
    rollout_to_json,
)
from omenative_core.rollout.services import traffic_revision_name
from omenative_core.rollout.validate import ANNOTATION_READY_TIMEOUT

__all__ = [
    "ANNOTATION_OVERRIDE_ANALYSIS",
    "ANNOTATION_PAUSED",
    "ANNOTATION_PROMOTE",
    "ANNOTATION_REPIN",
    "ANNOTATION_ROLLBACK",
    "AnalysisMeasurement",
    "AnalysisQuery",
    "ComponentDecision",
    "MemberView",
    "RolloutDecision",
    "RolloutEvent",
    "decide",
    "member_view",
    "step_allowance",
]

ANNOTATION_PROMOTE = "ome.io/rollout-promote"
"""Pass a manual gate one step: the value is the canary revision hash (>= 6 characters)."""

ANNOTATION_OVERRIDE_ANALYSIS = "ome.io/rollout-override-analysis"
"""omenative's spelling of ``promote --override-analysis``: with a promote, passes an
analysis gate too."""

ANNOTATION_ROLLBACK = "ome.io/rollout-rollback"
"""``"true"``: send every member back to its stable revision."""

ANNOTATION_REPIN = "ome.io/rollout-repin"
"""``rp1:<12 hex>`` (the current plan's token) or ``now``: move the run to the current plan."""

ANNOTATION_PAUSED = "ome.io/rollout-paused"
"""``"true"`` or ``freeze``: no step advances (timed gates keep aging)."""

_PROMOTE_VALUE = re.compile(r"^[a-z0-9]{6,}$")
_REPIN_VALUE = re.compile(r"^rp1:[0-9a-f]{12}$")
_AUTO_ROLLBACK = ("AnalysisFailed", "AnalysisInconclusive", "AnalysisStalled", "ReadyTimeout")
_CLOCK_HOLDS = ("Plan", "Ratio", "Sequential", "Pairing")
_HISTORY = 10
_NO_DIP = ("SurgeThenDrain", "InPlaceIfPossible", "InPlaceOnly")


# --------------------------------------------------------------------------------------------
# inputs


@frozen(kw_only=True)
class MemberView:
    """One component's InferenceReplica, summarised for the rollout.

    ``revision`` is the revision the member's spec renders now (the latest; the shell
    computes it before writing the spec). ``instances`` / ``ready`` / ``serving`` count
    Instances per running revision. ``held``: the latest revision is Held by its RetryBlock;
    ``failed``: an Instance of the latest revision is Failed. ``pairing`` maps revisions to
    their pairing token. ``strategy`` and the budgets are the member's own update strategy.
    ``traffic`` is the traffic last recorded on it (for the deadband).
    """

    component: str
    desired: int
    revision: str
    current_revision: str = ""
    update_revision: str = ""
    instances: Mapping[str, int] = field(factory=dict)
    ready: Mapping[str, int] = field(factory=dict)
    serving: Mapping[str, int] = field(factory=dict)
    held: bool = False
    failed: bool = False
    pairing: Mapping[str, str | None] = field(factory=dict)
    strategy: str = "SurgeThenDrain"
    max_surge: IntOrStr | None = None
    max_unavailable: IntOrStr | None = None
    traffic: tuple[TrafficTarget, ...] = ()

    @property
    def pairing_token(self) -> str | None:
        """The pairing token of the latest revision."""
        return self.pairing.get(self.revision)

    def on(self, revision: str) -> int:
        """Instances running ``revision`` (any phase)."""
        return self.instances.get(revision, 0)

    def ready_on(self, revision: str) -> int:
        """Ready Instances running ``revision``."""
        return self.ready.get(revision, 0)

    @property
    def total_ready(self) -> int:
        """Ready Instances of every revision."""
        return sum(self.ready.values())

    def token(self, revision: str) -> str | None:
        """The pairing token of ``revision`` (None when unknown or unset)."""
        return self.pairing.get(revision)

    def ready_by_token(self) -> dict[str | None, int]:
        """Ready Instances per pairing token."""
        out: dict[str | None, int] = {}
        for rev, n in self.ready.items():
            if n > 0:
                tok = self.token(rev)
                out[tok] = out.get(tok, 0) + n
        return out


@frozen(kw_only=True)
class AnalysisMeasurement:
    """The shell's answer to one ``AnalysisQuery``: the value, or None with an error."""

    id: str
    value: float | None = None
    error: str = ""


# --------------------------------------------------------------------------------------------
# outputs


@frozen(kw_only=True)
class AnalysisQuery:
    """A Prometheus query to run now; feed the result back as an ``AnalysisMeasurement``
    with the same ``id`` (ids are stable, so a query asked twice is the same query)."""

    id: str
    group: int
    step: int
    round: int
    metric: str
    query: str
    operator: str
    threshold: float


@frozen(kw_only=True)
class RolloutEvent:
    """A Kubernetes Event for the InferenceService, and for the InferenceReplica of each of
    ``components`` (the members of the group it is about; none for run-wide events)."""

    type: str
    reason: str
    message: str
    components: tuple[str, ...] = ()


@frozen(kw_only=True)
class ComponentDecision:
    """What to write on one member's InferenceReplica, and what to report for it."""

    component: str
    group: int
    phase: str
    allowed: int
    pacing: Pacing
    rolling_update: RollingUpdate | None = None
    traffic: tuple[TrafficTarget, ...] = ()
    hold: RolloutHold | None = None
    coordination_group_ref: str = ""


@frozen(kw_only=True)
class RolloutDecision:
    """One pass's decision: per-member writes, the state to persist, events, annotations to
    remove, analysis queries to run now, and when to look again (None: on change only)."""

    components: Mapping[str, ComponentDecision]
    state: RolloutState
    events: tuple[RolloutEvent, ...] = ()
    remove_annotations: tuple[str, ...] = ()
    queries: tuple[AnalysisQuery, ...] = ()
    requeue_after: timedelta | None = None
    plan_token: str = ""

    @property
    def drifted(self) -> bool:
        """The spec's plan differs from the pinned one (a repin would move the run)."""
        return bool(self.state.plan_token) and self.state.plan_token != self.plan_token


# --------------------------------------------------------------------------------------------
# helpers


def _budget(value: IntOrStr | None, default: IntOrStr, desired: int) -> int:
    try:
        return resolve_budget(value if value is not None else default, desired)
    except BudgetError:
        return resolve_budget(default, desired)


def _batch(group: RolloutGroup, view: MemberView) -> int:
    """Instances a blueGreen / rollingUpdate step adds for one member."""
    desired = view.desired
    if desired <= 0:
        return 1
    ru = group.rolling_update
    if ru is not None:
        if view.strategy == "SurgeThenDrain":
            n = _budget(ru.max_surge, "25%", desired)
        else:
            n = _budget(ru.max_unavailable, "25%", desired)
        return max(n, 1)
    return max(math.ceil(desired / 4), 1)


def step_allowance(group: RolloutGroup, step: int, view: MemberView) -> int:
    """Instances of ``view`` allowed on the new revision at ``step`` (0-based) of ``group``:
    the canary step's capacity, or ``(step + 1)`` blueGreen/rollingUpdate batches."""
    if step < 0:
        return 0
    if group.canary is not None:
        steps = group.canary.steps
        if not steps:
            return view.desired
        return canary_capacity(steps[min(step, len(steps) - 1)].capacity, view.desired)
    return min(view.desired, (step + 1) * _batch(group, view))


def _last_step(group: RolloutGroup, views: Sequence[MemberView]) -> int:
    if group.canary is not None:
        return max(len(group.canary.steps) - 1, 0)
    steps = [math.ceil(v.desired / _batch(group, v)) - 1 for v in views if v.desired > 0]
    return max(steps, default=0)


def _dip_budget(group: RolloutGroup, view: MemberView) -> int:
    if group.rolling_update is not None:
        value: IntOrStr | None = group.rolling_update.max_unavailable
    else:
        value = view.max_unavailable
    return max(_budget(value, "25%", view.desired), 1)


def _percentages(weights: Mapping[str, int]) -> dict[str, int]:
    """Integer percentages of ``weights`` summing to 100 (largest remainder, by name)."""
    total = sum(weights.values())
    if total <= 0:
        return dict.fromkeys(weights, 0)
    exact = {k: 100 * w / total for k, w in weights.items()}
    out = {k: math.floor(v) for k, v in exact.items()}
    rest = 100 - sum(out.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[:rest]:
        out[k] += 1
    return out


def _changes_token(view: MemberView, old: str, new: str) -> bool:
    """``old`` and ``new`` carry two different non-empty pairing tokens (as in OME, only a
    change between two tokens is coordinated; an unknown token is no evidence of one)."""
    a, b = view.token(old), view.token(new)
    return bool(a) and bool(b) and a != b


def _group_label(gs: GroupState) -> str:
    return f"group {gs.index} ({'+'.join(gs.components)})"


def _slot_surge(row: InstanceStatus) -> bool:
    """The row is a SurgeThenDrain update of a single-pod Instance in its other slot."""
    op = row.operation
    return (
        row.phase == "Updating"
        and op is not None
        and op.type == "Update"
        and op.step in ("Surge", "SurgeDrain")
    )


def member_view(
    replica: InferenceReplica,
    revision: str,
    *,
    pairing: Mapping[str, str | None] | None = None,
    traffic: tuple[TrafficTarget, ...] | None = None,
) -> MemberView:
    """Summarise an ``InferenceReplica`` (spec and last status) as a ``MemberView``.

    ``revision`` is the revision its spec renders; ``pairing`` maps revision names to
    pairing tokens (by default only ``revision`` → ``spec.pairingProtocol``).
    """
    spec = replica.spec
    status = replica.status if isinstance(replica.status, InferenceReplicaStatus) else None
    desired = 1 if spec.replicas is None else max(spec.replicas, 0)
    instances: dict[str, int] = {}
    ready: dict[str, int] = {}
    serving: dict[str, int] = {}
    held = failed = False
    single_pod = not is_multi_pod(spec.runners)  # a gang surges at a new index instead
    if status is not None:
        for row in status.instances:
            rev = row.running_revision or row.target_revision
            if not rev:
                continue
            instances[rev] = instances.get(rev, 0) + 1
            all_up = row.pod_count > 0 and row.serving_pod_count >= row.pod_count
            if single_pod and _slot_surge(row):
                # a single-pod Instance brings its replacement up in its other slot: the
                # row counts both pods, and one serving pod is the whole Instance serving
                # (the old one until the replacement serves, then the replacement), still
                # on the running revision until the old pod is gone
                all_up = 0 < row.pod_count <= 2 * row.serving_pod_count
            if row.running_revision and (
                row.phase == "Ready" or (row.phase in ("Updating", "Migrating") and all_up)
            ):
                ready[row.running_revision] = ready.get(row.running_revision, 0) + 1
            if row.running_revision and all_up:
                serving[row.running_revision] = serving.get(row.running_revision, 0) + 1
            if row.phase == "Failed" and revision in (row.running_revision, row.target_revision):
                failed = True
        held = any(b.target_revision == revision and b.state == "Held" for b in status.retry_blocks)
    lc = spec.lifecycle
    us = lc.update_strategy if lc else None
    ru = us.rolling_update if us else None
    return MemberView(
        component=spec.component,
        desired=desired,
        revision=revision,
        current_revision=status.current_revision if status else "",
        update_revision=status.update_revision if status else "",
        instances=instances,
        ready=ready,
        serving=serving,
        held=held,
        failed=failed,
        pairing=dict(pairing) if pairing is not None else {revision: spec.pairing_protocol},
        strategy=(us.type if us and us.type else "SurgeThenDrain"),
        max_surge=ru.max_surge if ru else None,
        max_unavailable=ru.max_unavailable if ru else None,
        traffic=traffic if traffic is not None else (status.traffic if status else ()),
    )


# --------------------------------------------------------------------------------------------
# the decider


class _Decider:
    def __init__(
        self,
        spec: RolloutSpec,
        state: RolloutState | None,
        members: Mapping[str, MemberView],
        now: datetime,
        results: Sequence[AnalysisMeasurement],
        annotations: Mapping[str, str],
        config: RolloutConfig,
    ) -> None:
        self.spec = spec
        self.state = state or RolloutState()
        self.members = members
        self.now = to_second(now)
        self.results = {m.id: m for m in results}
        self.annotations = annotations
        self.config = config
        self.token = plan_token(spec)
        self.plan_json = rollout_to_json(spec)
        self.plan_bytes = len(canonical_json(self.plan_json))
        self.too_big = self.plan_bytes > config.max_pinned_plan_bytes
        self.events: list[RolloutEvent] = []
        self.remove: list[str] = []
        self.queries: list[AnalysisQuery] = []
        self.timers: list[datetime] = []
        self.again = False
        self.allowed: dict[str, int] = {}
        self.groups: list[GroupState] = []
        self.pinned = spec
        self.pinned_token = self.token
        raw = annotations.get(ANNOTATION_PAUSED, "")
        self.paused = raw.lower() in ("true", "freeze")
        self.rollback_requested = annotations.get(ANNOTATION_ROLLBACK) == "true"
        self.promote: tuple[int, bool] | None = None
        self.promote_used = False
        self.prev_holds: dict[int, RolloutHold | None] = {}

    # ---------------------------------------------------------------- small helpers

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(RolloutEvent(type=type_, reason=reason, message=message))

    def group_event(self, gs: GroupState, type_: str, reason: str, message: str) -> None:
        self.events.append(
            RolloutEvent(type=type_, reason=reason, message=message, components=gs.components)
        )

    def drop(self, key: str) -> None:
        if key in self.annotations and key not in self.remove:
            self.remove.append(key)

    def hold(self, gs: GroupState, gate: str, reason: str) -> GroupState:
        """Set the group's rollout hold; ``since`` survives while gate and target stay."""
        target = ",".join(gs.canary[c] for c in gs.components if c in gs.canary)
        since = self.now
        prev = self.prev_holds.get(gs.index)
        if prev is not None and prev.gate == gate and prev.target == target and prev.since:
            since = prev.since
        clock = self.now if gate in _CLOCK_HOLDS else gs.ready_clock
        return evolve(
            gs,
            hold=RolloutHold(gate=gate, reason=reason, target=target, since=since),
            ready_clock=clock,
        )

    def views(self, gs: GroupState) -> dict[str, MemberView]:
        return {c: self.members[c] for c in gs.components if c in self.members}

    def running_phase(self, group: RolloutGroup, step: int, views: Sequence[MemberView]) -> str:
        if group.canary is not None and step < _last_step(group, views):
            return "Canarying"
        return "Promoting"

    def ready_timeout(self, group: RolloutGroup) -> timedelta:
        raw = self.annotations.get(ANNOTATION_READY_TIMEOUT)
        if raw is not None:
            try:
                value = parse_duration(raw)
                if value > timedelta(0):
                    return value
            except DurationError:
                pass
        if group.canary is not None and group.canary.ready_timeout:
            return group.canary.ready_timeout
        return self.config.default_ready_timeout

    def initial_stable(self, component: str) -> str:
        view = self.members.get(component)
        if view is None:
            return ""
        return view.current_revision or view.revision

    # ---------------------------------------------------------------- pinning

    def fresh_groups(self, spec: RolloutSpec, old: Sequence[GroupState]) -> list[GroupState]:
        """Group states for ``spec`` carrying each component's stable/rejected revisions."""
        stable: dict[str, str] = {}
        rejected: dict[str, str] = {}
        for g in old:
            stable.update(g.stable)
            rejected.update(g.rejected)
        out = []
        for i, group in enumerate(spec.groups):
            comps = tuple(group.components)
            st = {c: stable.get(c) or self.initial_stable(c) for c in comps}
            rj = {c: rejected[c] for c in comps if c in rejected}
            same = next(
                (g for g in old if g.components == comps and g.progression == group.progression),
                None,
            )
            if same is not None and not same.active:
                out.append(evolve(same, index=i, stable=st, rejected=rj))
                continue
            out.append(
                GroupState(
                    index=i,
                    components=comps,
                    progression=group.progression,
                    phase="RolledBack" if rj else "Stable",
                    stable=st,
                    rejected=rj,
                )
            )
        return out

    def pin(self) -> None:
        st = self.state
        if st.plan_token and st.active and st.plan:
            self.pinned = st.pinned
            self.pinned_token = st.plan_token
            self.groups = list(st.groups)
            return
        # idle (or first pass): the current plan applies
        self.pinned = self.spec
        self.pinned_token = self.token
        if st.plan_token == self.token and len(st.groups) == len(self.spec.groups):
            self.groups = list(st.groups)
        else:
            self.groups = self.fresh_groups(self.spec, st.groups)

    def refit(self, spec: RolloutSpec, old: Sequence[GroupState]) -> list[GroupState]:
        """Move an active run onto ``spec``: same-shaped groups keep their progress, others
        re-enter at the first step that covers what already runs the new revision."""
        per: dict[str, GroupState] = {c: g for g in old for c in g.components}
        out = []
        for i, group in enumerate(spec.groups):
            comps = tuple(group.components)
            same = next((g for g in old if g.components == comps), None)
            if (
                same is not None
                and same.progression == group.progression
                and (
                    group.canary is None
                    or self.pinned.groups[min(same.index, len(self.pinned.groups) - 1)].canary
                    == group.canary
                )
            ):
                out.append(evolve(same, index=i))
                continue
            stable = {
                c: per[c].stable.get(c, "") if c in per else self.initial_stable(c) for c in comps
            }
            stable = {c: s or self.initial_stable(c) for c, s in stable.items()}
            canary = {c: per[c].canary[c] for c in comps if c in per and c in per[c].canary}
            rejected = {c: per[c].rejected[c] for c in comps if c in per and c in per[c].rejected}
            gs = GroupState(
                index=i,
                components=comps,
                progression=group.progression,
                stable=stable,
                canary=canary,
                rejected=rejected,
            )
            if not canary:
                out.append(evolve(gs, phase="RolledBack" if rejected else "Stable"))
                continue
            if all(per[c].phase == "Pending" for c in comps if c in per):
                out.append(evolve(gs, phase="Pending"))
                continue
            views = [self.members[c] for c in canary if c in self.members]
            last = _last_step(group, views)
            step = next(
                (
                    s
                    for s in range(last + 1)
                    if all(step_allowance(group, s, v) >= v.on(canary[v.component]) for v in views)
                ),
                last,
            )
            out.append(
                evolve(
                    gs,
                    phase=self.running_phase(group, step, views),
                    step=step,
                    step_entered_at=self.now,
                    ready_clock=self.now,
                )
            )
        return out

    def repin(self) -> None:
        value = self.annotations.get(ANNOTATION_REPIN)
        if value is None:
            return
        self.drop(ANNOTATION_REPIN)

        def reject(why: str) -> None:
            self.event("Warning", "RolloutRepinRejected", f"repin {value!r} rejected: {why}")

        if self.rollback_requested or any(
            g.phase in ("RollingBack",) or (g.phase == "Failed" and g.failure in _AUTO_ROLLBACK)
            for g in self.groups
        ):
            reject("a rollback is in progress")
            return
        if value != "now" and not _REPIN_VALUE.match(value):
            reject("expected rp1:<12 hex digits> or now")
            return
        if value not in ("now", self.token):
            reject(f"the current plan is {self.token}")
            return
        if self.pinned_token == self.token:
            reject(f"the run already follows {self.token}")
            return
        if self.too_big:
            reject(
                f"the plan is {self.plan_bytes} bytes, above the "
                f"{self.config.max_pinned_plan_bytes}-byte limit for a pinned plan"
            )
            return
        missing = [c for g in self.groups for c in g.canary if self.spec.group_of(c) is None]
        if missing:
            reject(f"{', '.join(missing)} would leave every group mid-run")
            return
        old_token = self.pinned_token
        self.groups = self.refit(self.spec, self.groups)
        self.pinned = self.spec
        self.pinned_token = self.token
        self.again = True
        self.event(
            "Normal", "RolloutPlanRepinned", f"the run moved from plan {old_token} to {self.token}"
        )

    # ---------------------------------------------------------------- verbs

    def rollback_verb(self) -> None:
        if not self.rollback_requested:
            return
        if any(
            g.phase in ("RollingBack", "RolledBack") and g.failure == "Rollback"
            for g in self.groups
        ):
            return  # already acted on; it stays until a new revision appears
        active = [g for g in self.groups if g.canary and g.phase not in ("Stable",)]
        if active:
            for gs in active:
                i = self.groups.index(gs)
                self.groups[i] = self.start_rollback(
                    gs, "Rollback", f"requested by {ANNOTATION_ROLLBACK}"
                )
            return
        if any(g.phase in ("RollingBack", "RolledBack") for g in self.groups):
            return
        self.drop(ANNOTATION_ROLLBACK)
        self.event(
            "Warning", "RolloutRollbackRejected", "rollback rejected: no rollout is in progress"
        )

    def parse_promote(self) -> None:
        value = self.annotations.get(ANNOTATION_PROMOTE)
        if value is None:
            return

        def reject(why: str) -> None:
            self.drop(ANNOTATION_PROMOTE)
            self.drop(ANNOTATION_OVERRIDE_ANALYSIS)
            self.event("Warning", "RolloutPromoteRejected", f"promote {value!r} rejected: {why}")

        if self.rollback_requested:
            reject("a rollback is in progress")
            return
        if not _PROMOTE_VALUE.match(value):
            reject("expected the canary revision hash (at least 6 lowercase letters or digits)")
            return
        for i, gs in enumerate(self.groups):
            if gs.phase not in ("Pending", "Canarying", "Paused", "Promoting"):
                continue
            if any(hash_of(rev).startswith(value) for rev in gs.canary.values()):
                override = self.annotations.get(ANNOTATION_OVERRIDE_ANALYSIS) == "true"
                self.promote = (i, override)
                return
        running = sorted(hash_of(r) for g in self.groups for r in g.canary.values())
        reject(
            "no rollout in progress has that revision"
            + (f" (in progress: {', '.join(running)})" if running else "")
        )

    def use_promote(self, gs: GroupState, reason: str | None) -> bool:
        """Consume the promote aimed at ``gs``; emit RolloutPromoted when it passed a gate."""
        if self.promote is None or self.promote[0] != gs.index or self.promote_used:
            return False
        self.promote_used = True
        self.drop(ANNOTATION_PROMOTE)
        self.drop(ANNOTATION_OVERRIDE_ANALYSIS)
        if reason is not None:
            self.group_event(
                gs, "Normal", "RolloutPromoted", f"{_group_label(gs)}: promoted past {reason}"
            )
        return True

    def promote_for(self, gs: GroupState) -> tuple[bool, bool]:
        """(a promote names this group, it overrides analysis)."""
        if self.promote is None or self.promote[0] != gs.index or self.promote_used:
            return (False, False)
        return (True, self.promote[1])

    # ---------------------------------------------------------------- rollback

    def start_rollback(self, gs: GroupState, failure: str, why: str) -> GroupState:
        rejected = dict(gs.rejected)
        rejected.update(gs.canary)
        self.again = True
        self.group_event(
            gs,
            "Warning",
            "RolloutRollingBack",
            f"{_group_label(gs)}: rolling back to "
            f"{', '.join(gs.stable[c] for c in gs.components if c in rejected)} ({why})",
        )
        return evolve(
            gs,
            phase="RollingBack",
            canary={},
            rejected=rejected,
            failure=failure,
            gate="",
            hold=None,
            analysis=None,
            step_ready_at=None,
            pairing_override=None,
        )

    def rolling_back(self, gs: GroupState, views: Mapping[str, MemberView]) -> GroupState:
        done = all(
            views[c].ready_on(gs.stable[c]) >= views[c].desired
            and sum(n for r, n in views[c].instances.items() if r != gs.stable[c]) == 0
            for c in gs.rejected
            if c in views
        )
        if gs.phase == "RollingBack" and done:
            self.group_event(
                gs,
                "Normal",
                "RolloutRolledBack",
                f"{_group_label(gs)}: rolled back; rejected "
                f"{', '.join(sorted(gs.rejected.values()))} (held until a new revision)",
            )
            return evolve(gs, phase="RolledBack", hold=None, gate="")
        if gs.phase == "RolledBack" and not done:
            return evolve(gs, phase="RollingBack", gate="Drain")
        return evolve(gs, gate="" if done else "Drain")

    # ---------------------------------------------------------------- sequence

    def sequence_wait(self, gs: GroupState) -> tuple[str, datetime | None] | None:
        seq = self.pinned.sequence()
        if gs.index not in seq:
            return None
        pos = seq.index(gs.index)
        latest: tuple[datetime, str] | None = None
        for j in seq[:pos]:
            earlier = self.groups[j]
            name = earlier.components[0] if earlier.components else f"group {j}"
            if earlier.phase not in ("Stable", "RolledBack"):
                return (name, None)  # rolling, or stopped by a held member
            if earlier.stable_at is not None and (latest is None or earlier.stable_at > latest[0]):
                latest = (earlier.stable_at, name)
        wait = self.pinned.sequence_wait()
        if latest is not None and wait > timedelta(0) and self.now < latest[0] + wait:
            return (latest[1], latest[0] + wait)
        return None

    # ---------------------------------------------------------------- ratio

    def current_allowance(self, component: str) -> int | None:
        if component in self.allowed:
            return self.allowed[component]
        for gs in self.groups:
            if component in gs.components and gs.canary.get(component):
                group = self.pinned.groups[gs.index]
                view = self.members.get(component)
                if view is None:
                    return None
                if gs.phase == "Pending":
                    return 0
                return step_allowance(group, gs.step, view)
        return None

    def ratio_check(
        self, gs: GroupState, group: RolloutGroup, proposed: Mapping[str, int]
    ) -> str | None:
        """None when advancing to ``proposed`` keeps ready engine:decoder within tolerance."""
        if group.maintain_ratio is None:
            return None
        e, d = self.members.get("engine"), self.members.get("decoder")
        if e is None or d is None or e.desired <= 0 or d.desired <= 0:
            return None
        tol = group.maintain_ratio.tolerance
        tolerance = tol if tol is not None else self.config.default_ratio_tolerance

        def worst(view: MemberView) -> int:
            c = view.component
            canary = None
            for g in self.groups:
                if c in g.components:
                    canary = g.canary.get(c)
            if c in gs.components:
                canary = gs.canary.get(c)
            ready = view.total_ready
            if canary is None or view.strategy in _NO_DIP:
                return ready
            owner = self.pinned.groups[self.pinned.group_of(c) or 0]
            alloc = proposed[c] if c in proposed else (self.current_allowance(c) or 0)
            pending = max(0, alloc - view.on(canary))
            down = max(0, view.on(canary) - view.ready_on(canary))
            headroom = max(0, _dip_budget(owner, view) - down)
            return ready - min(pending, headroom)

        target = e.desired / d.desired
        pe, pd = worst(e), worst(d)
        re_, rd = e.total_ready, d.total_ready
        for x, y in ((pe, rd), (re_, pd)):
            if y <= 0 or abs((x / y) / target - 1) * 100 > tolerance + 1e-9:
                return (
                    f"ready engine:decoder would be {x}:{y}, outside the target "
                    f"{e.desired}:{d.desired} ± {tolerance}%"
                )
        return None

    # ---------------------------------------------------------------- pairing

    def pairing_cap(
        self, gs: GroupState, alloc: dict[str, int]
    ) -> tuple[dict[str, int], str | None, bool]:
        """Lower ``alloc`` so a same-token engine/decoder pair keeps serving.

        Returns the allowances, a hold reason when they were lowered, and whether the hold
        is stuck (no Instance can move without breaking the last pair).
        """
        if not {"engine", "decoder"} <= set(gs.components):
            return alloc, None, False
        e, d = self.members.get("engine"), self.members.get("decoder")
        if e is None or d is None or not (gs.canary.get("engine") or gs.canary.get("decoder")):
            return alloc, None, False
        new_e = gs.canary.get("engine", gs.stable.get("engine", ""))
        new_d = gs.canary.get("decoder", gs.stable.get("decoder", ""))
        old_e, old_d = gs.stable.get("engine", ""), gs.stable.get("decoder", "")
        if not (_changes_token(e, old_e, new_e) or _changes_token(d, old_d, new_d)):
            return alloc, None, False
        if gs.pairing_override == gs.step:
            return alloc, None, False
        re_, rd = e.ready_by_token(), d.ready_by_token()
        pairs = sorted((t for t in re_ if rd.get(t, 0) >= 1), key=lambda t: t or "")
        if not pairs:
            return alloc, None, False  # no pair serves now: nothing left to keep
        new_tok = e.token(new_e)
        if new_tok == d.token(new_d) and e.ready_on(new_e) >= 1 and d.ready_on(new_d) >= 1:
            return alloc, None, False  # a new-token pair already serves
        keep = e.token(old_e) if e.token(old_e) in pairs else pairs[0]
        out = dict(alloc)
        for view, new in ((e, new_e), (d, new_d)):
            c = view.component
            if c not in gs.canary or view.token(new) == keep:
                continue
            base = view.ready_on(new) if view.strategy == "SurgeThenDrain" else view.on(new)
            keep_ready = (re_ if c == "engine" else rd).get(keep, 0)
            out[c] = max(0, min(alloc[c], base + keep_ready - 1))
        if out == alloc:
            return alloc, None, False
        moving = any(
            out[c] > self.members[c].on(gs.canary[c])
            or self.members[c].on(gs.canary[c]) > self.members[c].ready_on(gs.canary[c])
            for c in gs.canary
            if c in out
        )
        reason = (
            f"keeping a {keep or 'untokened'} engine/decoder pair serving until a "
            f"{new_tok or 'untokened'} pair is ready"
        )
        return out, reason, not moving

    # ---------------------------------------------------------------- analysis

    def analysis_gate(self, gs: GroupState, group: RolloutGroup) -> tuple[GroupState, str]:
        """Run the step's analysis; returns the group and ``open`` | ``wait`` | ``failed``."""
        assert group.canary is not None
        step = group.canary.steps[gs.step]
        a = step.analysis
        assert a is not None
        ready_at = gs.step_ready_at or self.now
        an = gs.analysis if gs.analysis is not None and gs.analysis.step == gs.step else None
        if an is None:
            an = AnalysisState(step=gs.step, next_at=ready_at + (a.initial_delay or timedelta(0)))
        if an.passed:
            return evolve(gs, analysis=an), "open"
        interval = a.effective_interval
        entered = int((gs.step_entered_at or ready_at).timestamp())

        def qid(round_: int, metric: str) -> str:
            return f"g{gs.index}-s{gs.step}-r{round_}-{entered}-{metric}"

        if an.pending_round is not None:
            n = an.pending_round
            ids = {m.name: qid(n, m.name) for m in a.metrics}
            got = {name: self.results[i] for name, i in ids.items() if i in self.results}
            since = an.pending_since or self.now
            if len(got) == len(ids) or self.now >= since + interval:
                verdicts = []
                details = []
                for m in a.metrics:
                    res = got.get(m.name)
                    if res is None or res.value is None or math.isnan(res.value):
                        verdicts.append("Inconclusive")
                        why = res.error if res is not None and res.error else "no value"
                        details.append(f"{m.name}: {why}")
                    elif m.passes(res.value):
                        verdicts.append("Pass")
                        details.append(f"{m.name}={res.value:g} {m.operator} {m.threshold:g}")
                    else:
                        verdicts.append("Fail")
                        details.append(f"{m.name}={res.value:g} not {m.operator} {m.threshold:g}")
                outcome = (
                    "Fail"
                    if "Fail" in verdicts
                    else "Inconclusive"
                    if "Inconclusive" in verdicts
                    else "Pass"
                )
                detail = "; ".join(details)
                history = (
                    *an.history,
                    AnalysisRound(round=n, at=self.now, outcome=outcome, detail=detail),
                )[-_HISTORY:]
                an = evolve(
                    an,
                    rounds=an.rounds + 1,
                    pending_round=None,
                    pending_since=None,
                    history=history,
                )
                label = f"{_group_label(gs)} step {gs.step + 1} analysis round {n}"
                if outcome == "Pass":
                    an = evolve(an, passed=True, inconclusive=0)
                    self.group_event(
                        gs, "Normal", "CanaryAnalysisPassed", f"{label} passed: {detail}"
                    )
                    return evolve(gs, analysis=an), "open"
                if outcome == "Fail":
                    an = evolve(
                        an, failures=an.failures + 1, inconclusive=0, next_at=self.now + interval
                    )
                    if an.failures >= a.effective_failure_limit:
                        self.group_event(
                            gs,
                            "Warning",
                            "CanaryAnalysisFailed",
                            f"{label} failed ({an.failures}/{a.effective_failure_limit}): {detail}",
                        )
                        return evolve(gs, analysis=an, failure="AnalysisFailed"), "failed"
                    self.group_event(
                        gs,
                        "Warning",
                        "CanaryAnalysisRoundFailed",
                        f"{label} failed ({an.failures}/{a.effective_failure_limit}): {detail}",
                    )
                else:
                    an = evolve(an, inconclusive=an.inconclusive + 1, next_at=self.now + interval)
                    policy = a.effective_on_inconclusive
                    self.group_event(
                        gs,
                        "Warning",
                        "CanaryAnalysisInconclusive",
                        f"{label} inconclusive ({policy}): {detail}",
                    )
                    if policy == "Rollback":
                        return evolve(gs, analysis=an, failure="AnalysisInconclusive"), "failed"
                    if policy == "RollbackOnStall" and an.inconclusive >= a.effective_failure_limit:
                        return evolve(gs, analysis=an, failure="AnalysisStalled"), "failed"
            else:
                self.queries.extend(self.round_queries(gs, a, n, qid))
                self.timers.append(since + interval)
                return evolve(gs, analysis=an), "wait"
        if an.pending_round is None and an.next_at is not None and self.now >= an.next_at:
            n = an.rounds + 1
            an = evolve(an, pending_round=n, pending_since=self.now)
            self.queries.extend(self.round_queries(gs, a, n, qid))
            self.timers.append(self.now + interval)
        elif an.next_at is not None:
            self.timers.append(an.next_at)
        return evolve(gs, analysis=an), "wait"

    def round_queries(
        self, gs: GroupState, a: Analysis, n: int, qid: Callable[[int, str], str]
    ) -> list[AnalysisQuery]:
        """The queries of round ``n``."""
        return [
            AnalysisQuery(
                id=qid(n, m.name),
                group=gs.index,
                step=gs.step,
                round=n,
                metric=m.name,
                query=m.query,
                operator=m.operator,
                threshold=m.threshold,
            )
            for m in a.metrics
        ]

    # ---------------------------------------------------------------- one group

    def progress(self, old: GroupState, group: RolloutGroup) -> GroupState:
        gs = old
        views = self.views(gs)
        missing = [c for c in gs.components if c not in views]
        stable = {c: gs.stable.get(c) or self.initial_stable(c) for c in gs.components}
        stable = {c: s for c, s in stable.items() if s}
        gs = evolve(gs, stable=stable)
        if missing:
            return self.hold(gs, "Plan", f"waiting for the {', '.join(missing)} InferenceReplica")

        # rolling back, or rolled back: until a newer revision appears
        if gs.phase in ("RollingBack", "RolledBack"):
            newer = [
                c
                for c in gs.components
                if views[c].revision not in (gs.stable[c], gs.rejected.get(c, gs.stable[c]))
            ]
            reverted = all(views[c].revision == gs.stable[c] for c in gs.components)
            if not newer and not reverted:
                return self.rolling_back(gs, views)
            self.drop(ANNOTATION_ROLLBACK)
            if reverted:
                self.group_event(
                    gs,
                    "Normal",
                    "RolloutReverted",
                    f"{_group_label(gs)}: the spec is back on the stable revision",
                )
            gs = evolve(gs, phase="Stable", rejected={}, canary={}, failure="", hold=None, gate="")

        # what changed
        canary = dict(gs.canary)
        restart = False
        for c in gs.components:
            target = views[c].revision
            if target == gs.stable[c]:
                if c in canary:
                    restart = True
                canary.pop(c, None)
            elif canary.get(c) != target:
                restart = restart or c in canary
                canary[c] = target
        if not canary:
            if gs.phase != "Stable":
                self.group_event(
                    gs,
                    "Normal",
                    "RolloutAbandoned",
                    f"{_group_label(gs)}: no member has a new revision any more",
                )
            return evolve(
                gs,
                phase="Stable",
                canary={},
                step=0,
                step_entered_at=None,
                step_ready_at=None,
                ready_clock=None,
                analysis=None,
                failure="",
                gate="",
                hold=None,
                pairing_override=None,
            )
        if restart or gs.phase == "Stable":
            self.drop(ANNOTATION_ROLLBACK)  # a new revision: the rollback is over
            if restart:
                self.group_event(
                    gs,
                    "Normal",
                    "RolloutRestarted",
                    f"{_group_label(gs)}: a member moved to a new revision; the run "
                    "starts again from the first step",
                )
            gs = evolve(
                gs,
                phase="Pending",
                canary=canary,
                step=0,
                step_entered_at=None,
                step_ready_at=None,
                ready_clock=None,
                analysis=None,
                failure="",
                gate="",
                pairing_override=None,
            )
        else:
            gs = evolve(gs, canary=canary)
        changed = [views[c] for c in gs.components if c in gs.canary]
        last = _last_step(group, changed)

        # waiting to start
        if gs.phase == "Pending":
            wait = self.sequence_wait(gs)
            if wait is not None:
                name, until = wait
                if until is None:
                    return self.hold(gs, "Sequential", f"Sequential waiting on {name}")
                self.timers.append(until)
                left = until - self.now
                return self.hold(
                    gs, "Sequential", f"Sequential waiting on {name} (soak, {_short(left)} left)"
                )
            if self.too_big:
                return self.hold(
                    gs,
                    "Plan",
                    f"the plan is {self.plan_bytes} bytes, above the "
                    f"{self.config.max_pinned_plan_bytes}-byte pinned-plan limit",
                )
            if self.paused:
                return self.hold(gs, "Plan", "rollout paused")
            proposed = {v.component: step_allowance(group, 0, v) for v in changed}
            why = self.ratio_check(gs, group, proposed)
            if why is not None:
                return self.hold(gs, "Ratio", why)
            self.again = True
            self.group_event(
                gs,
                "Normal",
                "RolloutStarted",
                f"{_group_label(gs)}: rolling out "
                f"{', '.join(gs.canary[c] for c in gs.components if c in gs.canary)} "
                f"({group.progression}, plan {self.pinned_token})",
            )
            gs = evolve(
                gs,
                phase=self.running_phase(group, 0, changed),
                step=0,
                step_entered_at=self.now,
                ready_clock=self.now,
                step_ready_at=None,
                hold=None,
                gate="Capacity",
            )

        # a failure on its way to a rollback
        if gs.phase == "Failed" and gs.failure in _AUTO_ROLLBACK:
            return self.start_rollback(gs, gs.failure, gs.failure)

        # a held or failing member stops the whole group
        held = [c for c in gs.canary if views[c].held]
        if held:
            if gs.phase != "Failed":
                self.group_event(
                    gs,
                    "Warning",
                    "RolloutHeld",
                    f"{_group_label(gs)}: {', '.join(held)} revision "
                    f"{', '.join(gs.canary[c] for c in held)} is held; the group stops",
                )
            gs = evolve(gs, phase="Failed", failure="Held")
            return self.hold(
                gs,
                "Held",
                f"{', '.join(f'{c} revision {gs.canary[c]}' for c in held)} is held",
            )
        if gs.phase == "Failed" and gs.failure == "Held":
            gs = evolve(gs, phase=self.running_phase(group, gs.step, changed), failure="")
        failing = [c for c in gs.canary if views[c].failed]
        if failing:
            return self.timeout_or(
                gs,
                old,
                group,
                self.hold(
                    gs,
                    "RetryBlock",
                    f"{', '.join(failing)} has failed Instances on "
                    f"{', '.join(gs.canary[c] for c in failing)}; the group waits for them",
                ),
            )

        # the current step
        alloc = {v.component: step_allowance(group, gs.step, v) for v in changed}
        reached = all(v.ready_on(gs.canary[v.component]) >= alloc[v.component] for v in changed)
        phase = self.running_phase(group, gs.step, changed)
        if not reached:
            return self.timeout_or(
                gs,
                old,
                group,
                evolve(gs, phase=phase, gate="Capacity", step_ready_at=None, hold=None),
            )
        gs = evolve(gs, step_ready_at=gs.step_ready_at or self.now, ready_clock=self.now, hold=None)
        gate = (
            group.canary.steps[gs.step].gate if group.canary and group.canary.steps else "Immediate"
        )
        named, override = self.promote_for(gs)
        opened = True
        promoted_past: str | None = None
        ready_at = gs.step_ready_at or self.now
        if gate == "Analysis":
            gs, verdict = self.analysis_gate(gs, group)
            if verdict == "failed":
                self.again = True
                return evolve(gs, phase="Failed", gate="Analysis", hold=None)
            if verdict == "wait":
                if named and override:
                    promoted_past = "the analysis gate (analysis overridden)"
                else:
                    opened = False
        elif gate == "Pause":
            assert group.canary is not None
            pause = group.canary.steps[gs.step].pause
            assert pause is not None and pause.duration is not None
            until = ready_at + pause.duration
            if self.now < until:
                opened = False
                self.timers.append(until)
        elif gate == "Manual":
            if named:
                promoted_past = "a manual pause"
            else:
                opened = False
        if not opened:
            return evolve(gs, phase="Canarying" if gate == "Analysis" else "Paused", gate=gate)

        # the gate is open
        if gs.step >= last:
            done = all(
                v.ready_on(gs.canary[v.component]) >= v.desired
                and sum(n for r, n in v.instances.items() if r != gs.canary[v.component]) == 0
                for v in changed
            )
            if promoted_past is not None:
                self.use_promote(gs, promoted_past)
            if not done:
                return evolve(gs, phase="Promoting", gate="Drain")
            self.use_promote(gs, None)
            stable = dict(gs.stable)
            stable.update(gs.canary)
            self.group_event(
                gs,
                "Normal",
                "RolloutGroupStable",
                f"{_group_label(gs)}: stable on "
                f"{', '.join(gs.canary[c] for c in gs.components if c in gs.canary)}",
            )
            self.again = True
            return evolve(
                gs,
                phase="Stable",
                stable=stable,
                canary={},
                step=0,
                step_entered_at=None,
                step_ready_at=None,
                ready_clock=None,
                analysis=None,
                stable_at=self.now,
                failure="",
                gate="",
                hold=None,
                pairing_override=None,
            )
        if self.paused:
            return self.hold(
                evolve(gs, phase="Paused" if gate != "Immediate" else phase, gate=gate),
                "Plan",
                "rollout paused",
            )
        proposed = {v.component: step_allowance(group, gs.step + 1, v) for v in changed}
        why = self.ratio_check(gs, group, proposed)
        if why is not None:
            return self.hold(evolve(gs, phase=phase, gate=gate), "Ratio", why)
        self.use_promote(gs, promoted_past)
        nxt = gs.step + 1
        self.again = True
        self.group_event(
            gs,
            "Normal",
            "RolloutStepAdvanced",
            f"{_group_label(gs)}: step {nxt + 1}/{last + 1} "
            + ", ".join(
                f"{c} {proposed[c]}/{views[c].desired}" for c in gs.components if c in proposed
            ),
        )
        return evolve(
            gs,
            phase=self.running_phase(group, nxt, changed),
            step=nxt,
            step_entered_at=self.now,
            ready_clock=self.now,
            step_ready_at=None,
            analysis=None,
            gate="Capacity",
            hold=None,
            pairing_override=None,
        )

    def timeout_or(
        self, gs: GroupState, old: GroupState, group: RolloutGroup, result: GroupState
    ) -> GroupState:
        """A canary step whose Instances are not ready within readyTimeout fails.

        The clock does not run while the Pairing gate holds part of the step back.
        """
        if group.canary is None:
            return result
        alloc = {c: step_allowance(group, gs.step, self.members[c]) for c in gs.canary}
        if self.pairing_cap(gs, alloc)[1] is not None:
            return evolve(result, ready_clock=self.now)
        clock = result.ready_clock or gs.step_entered_at or self.now
        deadline = clock + self.ready_timeout(group)
        if self.now >= deadline:
            self.again = True
            self.group_event(
                gs,
                "Warning",
                "CanaryReadyTimeout",
                f"{_group_label(gs)}: step {gs.step + 1} was not ready within "
                f"{_short(self.ready_timeout(group))}",
            )
            return evolve(result, phase="Failed", failure="ReadyTimeout", hold=None)
        self.timers.append(deadline)
        return result

    # ---------------------------------------------------------------- decisions

    def allowances(self, gs: GroupState, group: RolloutGroup) -> GroupState:
        """Fill ``self.allowed`` for the group's members; may add the Pairing hold."""
        views = self.views(gs)
        alloc: dict[str, int] = {}
        for c, v in views.items():
            if c not in gs.canary:
                alloc[c] = v.desired
            elif gs.phase == "Pending":
                alloc[c] = 0
            else:
                alloc[c] = step_allowance(group, gs.step, v)
        if gs.phase in ("Canarying", "Paused", "Promoting", "Failed"):
            capped, reason, stuck = self.pairing_cap(gs, alloc)
            if reason is not None:
                named, _ = self.promote_for(gs)
                if stuck and named:
                    self.use_promote(gs, "the Pairing gate (a pairing gap is accepted)")
                    gs = evolve(gs, pairing_override=gs.step)
                else:
                    alloc = capped
                    if gs.hold is None:
                        if stuck:
                            reason += (
                                "; no Instance can move without breaking the last pair: "
                                "promote to accept a gap, or run 2 or more Instances"
                            )
                        gs = self.hold(gs, "Pairing", reason)
        self.allowed.update(alloc)
        return gs

    def traffic(self, gs: GroupState, view: MemberView) -> tuple[TrafficTarget, ...]:
        c = view.component
        stable = gs.stable.get(c, view.revision)
        canary = gs.canary.get(c)
        rejected = gs.rejected.get(c) if gs.phase in ("RollingBack", "RolledBack") else None
        weights = {r: n for r, n in view.ready.items() if n > 0 and r != rejected}
        pct = _percentages(weights) if weights else {}
        if not weights:
            pct = {stable: 100}
        named = [stable]
        if canary and canary != stable:
            named.append(canary)
        if rejected and rejected not in named:
            named.append(rejected)
        others = sorted(r for r, p in pct.items() if p > 0 and r not in named)
        prev = {t.revision_name: t.percent for t in view.traffic}
        out_pct = {r: pct.get(r, 0) for r in (*named, *others)}
        names = {r: traffic_revision_name(r) for r in out_pct}
        band = self.config.traffic_deadband
        if (
            band > 0
            and set(prev) == set(names.values())
            and sum(prev.values()) == 100
            and all(
                abs(prev[names[r]] - p) <= band
                and p not in (0, 100)
                and prev[names[r]] not in (0, 100)
                for r, p in out_pct.items()
            )
        ):
            out_pct = {r: prev[names[r]] for r in out_pct}
        if rejected:
            out_pct[rejected] = 0
        tags = {stable: "stable"}
        if canary:
            tags[canary] = "canary"
        if rejected:
            tags[rejected] = "canary"
        return tuple(
            TrafficTarget(
                revision_name=names[r],
                percent=p,
                tag=tags.get(r),
                latest_revision=r == view.revision,
                pairing_protocol=view.token(r),
            )
            for r, p in out_pct.items()
        )

    def component_decisions(self) -> dict[str, ComponentDecision]:
        out: dict[str, ComponentDecision] = {}
        for gs in self.groups:
            group = self.pinned.groups[gs.index]
            for c in gs.components:
                view = self.members.get(c)
                if view is None:
                    continue
                allowed = self.allowed.get(c, view.desired)
                rollback = None
                if gs.phase in ("RollingBack", "RolledBack") and c in gs.rejected:
                    rollback = gs.stable.get(c)
                    allowed = view.desired
                ru = None
                if group.rolling_update is not None:
                    ru = RollingUpdate(
                        max_surge=group.rolling_update.effective_max_surge,
                        max_unavailable=group.rolling_update.effective_max_unavailable,
                    )
                hold = None
                if gs.hold is not None:
                    hold = evolve(
                        gs.hold, target=gs.canary.get(c) or gs.rejected.get(c) or view.revision
                    )
                out[c] = ComponentDecision(
                    component=c,
                    group=gs.index,
                    phase=gs.phase,
                    allowed=allowed,
                    pacing=Pacing(
                        partition=max(0, view.desired - allowed), rollback_to_revision=rollback
                    ),
                    rolling_update=ru,
                    traffic=self.traffic(gs, view),
                    hold=hold,
                    coordination_group_ref=f"groups[{gs.index}]",
                )
        return out

    # ---------------------------------------------------------------- the pass

    def run(self) -> RolloutDecision:
        self.pin()
        self.repin()
        self.rollback_verb()
        self.parse_promote()
        for i in range(len(self.groups)):
            old = self.groups[i]
            self.prev_holds[old.index] = old.hold
            group = self.pinned.groups[old.index]
            gs = self.progress(old, group)
            gs = self.allowances(gs, group)
            self.groups[i] = gs
        if self.promote is not None and not self.promote_used:
            gs = self.groups[self.promote[0]]
            if gs.phase not in ("Pending", "Canarying", "Paused", "Promoting"):
                self.drop(ANNOTATION_PROMOTE)
                self.drop(ANNOTATION_OVERRIDE_ANALYSIS)
        active = any(g.active for g in self.groups)
        if self.pinned_token == self.token:
            plan = {} if self.too_big else dict(self.plan_json)
        else:
            plan = dict(self.state.plan)
        del active
        state = RolloutState(plan_token=self.pinned_token, plan=plan, groups=tuple(self.groups))
        requeue: timedelta | None = None
        if self.again:
            requeue = timedelta(0)
        elif self.timers:
            requeue = max(min(self.timers) - self.now, timedelta(0))
        seen: set[str] = set()
        queries = []
        for q in self.queries:
            if q.id not in seen:
                seen.add(q.id)
                queries.append(q)
        return RolloutDecision(
            components=self.component_decisions(),
            state=state,
            events=tuple(self.events),
            remove_annotations=tuple(self.remove),
            queries=tuple(queries),
            requeue_after=requeue,
            plan_token=self.token,
        )


def _short(value: timedelta) -> str:
    seconds = max(int(value.total_seconds()), 0)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def decide(
    rollout_spec: RolloutSpec,
    state: RolloutState | None,
    members: Mapping[str, MemberView],
    now: datetime,
    analysis_results: Sequence[AnalysisMeasurement] = (),
    annotations: Mapping[str, str] | None = None,
    config: RolloutConfig | None = None,
) -> RolloutDecision:
    """One pass of the rollout groups of an InferenceService.

    ``rollout_spec`` must have passed ``validate_rollout``. ``state`` is what the last
    decision returned (None on the first pass); ``members`` has a view for every component
    the groups name (a missing one holds its group with gate ``Plan``). ``annotations`` are
    the ISVC's (the promote / rollback / repin / pause verbs and the ready-timeout
    override). Components in no group are not in the decision: they roll on their own.
    """
    return _Decider(
        rollout_spec,
        state,
        members,
        now,
        analysis_results,
        annotations or {},
        config or RolloutConfig(),
    ).run()
