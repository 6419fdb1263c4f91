"""Bring-up, restart and repair: Create and Restart operations, settled rows' health, rebuilds.

- ``create``: a Create operation (ScaleUp, Rebuild, Repair, MigrationSurge) brings its
  attempt up; a replacement that fails is abandoned, any other attempt fails the row.
- ``restart_drain`` / ``restart_create``: a whole-Instance restart drains every pod of
  the incarnation, then brings the next incarnation up.
- ``settled``: a row with no operation is checked each pass. Under
  ``RecreateInstanceOnPodRestart`` (multi-pod) a lost pod or restarted container opens a
  Restart; a crash loop past ``stuckPodGracePeriod`` does so under either policy, paced by
  ``maxUnavailable`` (``RepairHeld``). Under ``None`` only the lost pods are replaced.
- ``rebuilds``: Failed or Pending members get a new attempt when their RetryBlock allows.

Restarts and lost-pod replacements are spaced out (``omenative_core.restarts``): each one
is counted in the row's restart series and in its Event, the new pods wait the series'
backoff, and ``maxRestarts`` within the window make the Instance Failed
(``RestartLimitExceeded``) instead of restarted again.
"""

from __future__ import annotations

from attrs import evolve

from omenative_core import restarts
from omenative_core.failures import CRASH_REASONS
from omenative_core.labels import LABEL_INCARNATION
from omenative_core.model.observed import PodView
from omenative_core.model.plan import SetServingGate
from omenative_core.model.status import InstanceOperation, InstanceStatus, InstanceTermination
from omenative_core.model.timefmt import format_duration
from omenative_core.phases import OpType, Outcome, Phase, Step, Strategy, Waiting
from omenative_core.policy import RECREATE_ON_RESTART
from omenative_core.steps import steady
from omenative_core.steps.bringup import bring_up, park
from omenative_core.steps.native_gang import delete_pod_group
from omenative_core.steps.outcomes import abandon_surge, fail_row, relocation, settle_ready
from omenative_core.steps.pods import drain
from omenative_core.steps.state import Continue, MoveResult, PassState
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.verdicts import was_steady

__all__ = [
    "LABEL_RESTART_BASELINE",
    "create",
    "rebuilds",
    "restart_create",
    "restart_drain",
    "settled",
]

LABEL_RESTART_BASELINE = "internal.ome.io/in-place-restarts"
"""Container restarts an in-place image change caused (they are not crashes)."""


# ---------------------------------------------------------------------- moves


def create(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Create/CreatePods: bring the attempt up at ``op.targetRevision``."""
    revision = op.target_revision
    waits = _repair_waits(st, row, op)
    if waits is not None:
        return waits
    outcome, op, failure = bring_up(
        st, row, op, revision, row.active_ordinal, paused_applies=op.reason != "Repair"
    )
    if outcome == Outcome.READY:
        settled_row = settle_ready(st, row, revision)
        if op.replaces is not None and op.replaces in st.rows:
            # a migration surge keeps its operation until the source has drained
            return evolve(settled_row, operation=evolve(op, waiting=None, deadline=None))
        return settled_row
    if outcome == Outcome.FAILED and failure is not None:
        if op.replaces is not None:
            return abandon_surge(st, row, revision, failure)
        return fail_row(st, row, revision, failure)
    phase = Phase.RESTARTING if op.reason == "Repair" else Phase.CREATING
    return evolve(row, phase=phase, operation=op, target_revision=revision)


def _repair_waits(
    st: StepPass, row: InstanceStatus, op: InstanceOperation
) -> InstanceStatus | None:
    """The row as it waits, when a repair must not bring pods up yet (Freeze, or its
    restart series' backoff), else None."""
    if st.view.policy.freeze and op.reason == "Repair":
        return evolve(row, operation=park(op, Waiting.PAUSED))
    if op.reason in ("Repair", "Rebuild") and _backing_off(st, row, op):
        return row
    return None


def _backing_off(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> bool:
    """Whether the new pods of a restart still wait out its series' backoff (the readiness
    clock stays parked, ``deadline`` empty, until then)."""
    cfg = st.view.policy.restart_backoff
    series = restarts.read(row)
    if cfg is None or series is None or series.ready_since is not None or op.deadline:
        return False
    due = series.last + cfg.delay(series.count)
    if st.view.now >= due:
        return False
    st.wake.append(due)
    return True


def restart_drain(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Restart/Drain: drain every pod of this incarnation, then go on at the next one."""
    if st.view.policy.freeze:
        return evolve(row, operation=park(op, Waiting.PAUSED))
    old = [p for p in st.pods_of(row.index) if p.incarnation < row.incarnation + 1]
    for pod in old:
        if LABEL_INCARNATION not in pod.labels:  # OME refuses these; omenative drains them
            st.warn("FoundOrphan",
                    f"OMENative component={st.view.spec.component} instance={row.index} found "
                    f"orphan pod {pod.name} without {LABEL_INCARNATION}; draining it as an "
                    "older incarnation", row.index)
    if not drain(st, old, "InstanceRestart"):
        return evolve(row, phase=Phase.RESTARTING, operation=op)
    delete_pod_group(st, row.index, row.incarnation)  # the next attempt gets its own
    op = evolve(op, step=Step.CREATE_PODS, deadline=None, last_progress_at=st.view.now)
    return Continue(evolve(row, incarnation=row.incarnation + 1, operation=op))


def restart_create(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Restart/CreatePods: bring the new incarnation up on the running revision."""
    if st.view.policy.freeze:
        return evolve(row, operation=park(op, Waiting.PAUSED))
    if _backing_off(st, row, op):
        return evolve(row, phase=Phase.RESTARTING, operation=op)
    outcome, op, failure = bring_up(
        st, row, op, op.target_revision, row.active_ordinal, paused_applies=False
    )
    if outcome == Outcome.READY:
        st.note("RestartCompleted",
                f"OMENative component={st.view.spec.component} instance={row.index}: restart "
                f"completed (incarnation={row.incarnation})", row.index)
        return settle_ready(st, row, op.target_revision)
    if outcome == Outcome.FAILED and failure is not None:
        return fail_row(st, row, op.target_revision, failure)
    return evolve(row, phase=Phase.RESTARTING, operation=op)


# ---------------------------------------------------------------------- settled rows


def settled(
    st: PassState, row: InstanceStatus, found: steady.Found | None = None
) -> InstanceStatus:
    """An Instance with no open operation: check its health, repair if needed.

    ``found``: the rows of this pass ``steady.find`` found steady, when the caller asked
    for all of them at once (else this row is checked on its own).
    """
    kept = st.cache.kept
    if st.view.fast and ((kept is not None and was_steady(st, row)) or _steady(st, row, found)):
        st.steady_rows[row.index] = row
        if st.book.blocks:
            st.book.succeed(row.running_revision)  # what settle_ready does for a steady row
        return row
    pods = st.pods_of(row.index)
    expected = (
        st.view.expected(row.index, row.running_revision, row.incarnation, row.active_ordinal)
        if row.running_revision
        else None
    )
    if expected is None:
        # nothing to run (new row, unknown revision): delete strays, stay Pending
        if pods:
            drain(st, pods, "StalePod")
        phase = row.phase if row.phase in (Phase.FAILED, Phase.PENDING) else Phase.PENDING
        return evolve(row, phase=phase, ready_since=None)
    mine = {
        p.name: p
        for p in pods
        if p.name in expected and st.matches(p, row.running_revision, row.incarnation)
    }
    stray = [p for p in pods if p.name not in mine]
    if stray:
        drain(st, stray, "StalePod")
    if row.phase in (Phase.FAILED, Phase.PENDING) and not mine:
        return evolve(row, ready_since=None)
    return _judge(st, row, pods, mine, list(expected))


def _steady(st: PassState, row: InstanceStatus, found: steady.Found | None) -> bool:
    """A Ready row whose attempt's pods are all there, Ready and healthy: nothing to do.

    The common case at rest (``steady.find``). It is exactly the case in which the full
    check (strays, ``_health``, ``_judge``, ``settle_ready``) returns the row unchanged and
    only clears its revision's RetryBlock; anything else (a restart, a crash reason, a
    lost node, a relocation record) takes the full check.
    """
    got = found if found is not None else steady.find(st, (row,))
    if got.rows.get(row.index) is not row or st.migrations:
        return False  # the row changed (a hand-off) or a migration opened since ``find``
    st.steady_counts[row.index] = got.counts[row.index]  # steps.status counts from these
    return True


def _judge(
    st: StepPass,
    row: InstanceStatus,
    pods: list[PodView],
    mine: dict[str, PodView],
    expected: list[str],
) -> InstanceStatus:
    """The running attempt's pods say: Ready, restart whole, replace lost pods, or wait."""
    lost, restarted, wedged = _health(st, row, expected, mine)
    if row.phase == Phase.FAILED:
        # a failed restart waits for its pods to become ready, a reset or a new revision
        if not lost and all(p.ready for p in mine.values()):
            return settle_ready(st, row, row.running_revision)
        return row
    whole = st.view.policy.restart_policy == RECREATE_ON_RESTART and st.view.policy.multi_pod
    needs_restart = wedged or (whole and (lost or restarted))
    if needs_restart and not st.view.policy.freeze:
        why = "pod lost" if lost else ("container restarted" if restarted else "crash loop")
        return _restart(st, row, pods, mine, why, wedged=wedged)
    if lost and not st.view.policy.freeze:
        return _replace_lost(st, row, mine, lost, len(expected))
    if all(p.ready for p in mine.values()) and len(mine) == len(expected):
        return settle_ready(st, row, row.running_revision)
    return _flapping(st, row, mine, lost)


def _health(
    st: StepPass, row: InstanceStatus, expected: list[str], mine: dict[str, PodView]
) -> tuple[list[str], bool, bool]:
    """(lost pod names, a container restarted, a container wedged in a crash loop)."""
    lost: list[str] = []
    restarted = False
    wedged = False
    grace = st.view.config.stuck_pod_grace_period
    for name in expected:
        pod = mine.get(name)
        if pod is None or pod.terminating or pod.phase in ("Failed", "Succeeded"):
            lost.append(name)
            continue
        if st.view.node_lost(pod) and row.phase == Phase.READY:
            lost.append(name)
            continue
        baseline_raw = pod.labels.get(LABEL_RESTART_BASELINE, "0")
        baseline = int(baseline_raw) if baseline_raw.isdigit() else 0
        if sum(c.restart_count for c in pod.containers) > baseline:
            restarted = True
        for c in pod.containers:
            if c.waiting_reason in CRASH_REASONS and grace is not None:
                since = pod.creation_timestamp or st.view.now
                if st.view.now >= since + grace:
                    wedged = True
                else:
                    st.wake.append(since + grace)
    return lost, restarted, wedged


def _restart(
    st: StepPass,
    row: InstanceStatus,
    pods: list[PodView],
    mine: dict[str, PodView],
    why: str,
    *,
    wedged: bool,
) -> InstanceStatus:
    """Open a whole-Instance Restart (a wedged one waits for the maxUnavailable budget)."""
    index = row.index
    if not st.may_open():
        st.poll = True  # the restart waits for room in the status budget
        return row
    if wedged and not _repair_budget_ok(st, index):
        st.warn(
            "RepairHeld",
            f"Instance {index} needs a restart; waiting for the maxUnavailable budget",
            index,
        )
        st.poll = True
        return evolve(row, phase=st.steady_phase(row))
    counted = _count_restart(st, row, mine, why)
    if counted is None:
        return _give_up(st, row, mine)
    row, told = counted
    st.warn(
        "RestartTriggered",
        f"OMENative component={st.view.spec.component} instance={index}: restart triggered: "
        f"{why} (incarnation={row.incarnation + 1})" + told,
        index,
    )
    drain(st, [p for p in pods if p.name in mine], "InstanceRestart")
    revision = _restart_revision(st, row)
    if revision != row.running_revision:
        st.start_attempt(revision)  # an attempt of the target, as an Update's would be
    return evolve(
        row,
        phase=Phase.RESTARTING,
        ready_since=None,
        target_revision=revision,
        operation=st.view.op(OpType.RESTART, Step.DRAIN, revision, why),
    )


def _restart_revision(st: StepPass, row: InstanceStatus) -> str:
    """The revision a whole-Instance restart brings up (issue 30 item 4).

    The gang goes down anyway, so when a rollout would replace it next (it is stale, at
    or above the partition, the rollout is not paused, the strategy may replace it, and
    the target is neither held nor backing off) it comes back on the target: one gang
    start instead of a restart at the old revision and a replacement seconds later.
    Otherwise it comes back on the revision it ran.
    """
    target = st.view.target
    if (
        row.running_revision == target
        or target not in st.view.runners_by_rev
        or row.index < st.view.policy.partition
        or st.view.policy.paused
        or st.view.policy.strategy == Strategy.IN_PLACE_ONLY
        or not st.book.may_start(target, st.view.now)
    ):
        return row.running_revision
    return target


def _count_restart(
    st: StepPass, row: InstanceStatus, mine: dict[str, PodView], why: str
) -> tuple[InstanceStatus, str] | None:
    """One more restart of the row's series: (the row recording it, the Event's count
    text), or None when it would pass ``maxRestarts`` within the window."""
    cfg = st.view.policy.restart_backoff
    if cfg is None:
        return row, ""
    series = restarts.read(row)
    if restarts.exhausted(series, cfg, st.view.now):
        return None
    series = restarts.record(series, cfg, st.view.now, _cause(why))
    return restarts.write(row, series), f": {restarts.describe(series, cfg)}"


def _cause(why: str) -> str:
    """The condition reason (CamelCase) of a restart's cause."""
    return "".join(w.capitalize() for w in why.split())


def _give_up(st: StepPass, row: InstanceStatus, mine: dict[str, PodView]) -> InstanceStatus:
    """``maxRestarts`` within the window: Failed, out of rotation, its pods kept (no churn)
    until a reset or a new revision."""
    cfg = st.view.policy.restart_backoff
    series = restarts.read(row)
    times = series.in_window if series is not None else 0
    within = f"{format_duration(cfg.window)} (maxRestarts {cfg.max_restarts})" if cfg else ""
    message = (f"Instance {row.index} restarted {times} times within {within}; it stays "
               "Failed, out of rotation, with its pods until a reset or a new revision")
    st.warn(restarts.LIMIT_REASON, message, row.index)
    for pod in mine.values():
        if pod.serving_gate and not pod.terminating:
            st.out.add(SetServingGate(name=pod.name, uid=pod.uid, value=False))
    return evolve(row, phase=Phase.FAILED, ready_since=None, last_failure=InstanceTermination(
        reason=restarts.LIMIT_REASON, message=message, time=st.view.now))


def _replace_lost(
    st: StepPass,
    row: InstanceStatus,
    mine: dict[str, PodView],
    lost: list[str],
    expected_count: int,
) -> InstanceStatus:
    """restartPolicy None: replace only the lost pods, at the same incarnation."""
    if not st.may_open():
        st.poll = True  # the repair waits for room in the status budget
        return row
    counted = _count_restart(st, row, mine, "pod lost")
    if counted is None:
        return _give_up(st, row, mine)
    row, told = counted
    if told:
        st.note("PodReplaced", f"replacing lost pod(s) of Instance {row.index}{told}", row.index)
    for name in lost:
        pod = mine.get(name)
        if pod is not None:
            drain(st, [pod], "PodLost")
    if len(lost) == expected_count:
        return evolve(
            row,
            phase=Phase.PENDING,
            ready_since=None,
            operation=st.view.op(OpType.CREATE, Step.CREATE_PODS, row.running_revision, "Rebuild"),
        )
    return evolve(
        row,
        phase=Phase.RESTARTING,
        operation=st.view.op(OpType.CREATE, Step.CREATE_PODS, row.running_revision, "Repair"),
    )


def _flapping(
    st: StepPass, row: InstanceStatus, mine: dict[str, PodView], lost: list[str]
) -> InstanceStatus:
    """Not all ready (a pod's readiness flapped): gate stays as is, Instance not Ready."""
    every_container_ready = all(q.containers_ready for q in mine.values())
    for pod in mine.values():
        if pod.containers_ready and not pod.serving_gate and every_container_ready:
            st.out.add(SetServingGate(name=pod.name, uid=pod.uid, value=True))
    phase = Phase.READY if row.phase == Phase.READY and not lost else row.phase
    if phase == Phase.READY and not all(p.ready for p in mine.values()):
        phase = Phase.CREATING if row.phase != Phase.READY else Phase.READY
    return row if row.phase == phase else evolve(row, phase=phase)


def _repair_budget_ok(st: StepPass, index: int) -> bool:
    unavailable = sum(
        1
        for r in st.odd_rows()  # a plain row is Ready
        if r.index != index and r.phase != Phase.READY and st.view.is_member(r)
    )
    return unavailable < st.view.policy.max_unavailable


# ---------------------------------------------------------------------- rebuilds


def rebuilds(st: StepPass) -> None:
    """Failed or Pending members with no operation get a new attempt when allowed.

    Only the rows that may not be plain are read (``steps.totals``): a plain row is Ready.
    A rebuild writes only its own row, so the rows to look at are picked first, in one
    comprehension (a cold pass reads every row here).
    """
    waits = (Phase.FAILED, Phase.PENDING)
    for index in sorted([r.index for r in st.odd_rows() if r.phase in waits]):
        row = st.rows[index]
        if row.operation is not None or row.phase not in waits:
            continue
        if not st.view.is_member(row):
            continue
        target = st.view.target
        if index < st.view.policy.partition and row.running_revision in st.view.runners_by_rev:
            target = row.running_revision
        pods = st.pods_of(index)
        if pods:
            if (
                row.phase == Phase.FAILED
                and row.running_revision == target
                and any(not p.terminating for p in pods)
            ):
                continue  # a failed restart keeps its pods until ready, reset or replaced
            drain(st, pods, "Rebuild")
            st.poll = True
            continue
        if st.view.policy.paused:
            continue
        if not st.may_open():
            st.poll = True
            continue
        if not delete_pod_group(st, index, row.incarnation):
            continue  # a new attempt gets a fresh PodGroup once the old one is gone
        if not st.start_attempt(target):
            nxt = st.book.next_retry(target)
            if nxt is not None:
                st.wake.append(nxt)
            continue
        reloc = relocation(st, index)
        if target != row.running_revision:
            row = restarts.clear(row)  # a new revision starts a new restart series
        st.rows[index] = evolve(
            row,
            phase=Phase.CREATING,
            target_revision=target,
            operation=st.view.op(
                OpType.CREATE,
                Step.CREATE_PODS,
                target,
                "Rebuild",
                from_node=reloc.from_node if reloc else None,
            ),
        )
        st.advance(index)
