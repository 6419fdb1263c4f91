"""The moves of an open Update operation, one function per step (``lifecycle.MOVES``).

SurgeThenDrain, multi-pod (a whole replacement gang at a new index):
``gang_surge_target`` (the replacement's bring-up) and, on the source row,
``gang_surge`` (wait until the replacement is available) then ``gang_drain`` (gate off,
unrouted, delete; the replacement's operation then ends: a recorded hand-off).

SurgeThenDrain, single pod (the other ``activeOrdinal`` slot in place): ``surge`` then
``surge_drain``. RecreatePod: ``recreate_drain`` then ``recreate_create``. In place:
``in_place`` (patch images, then wait Ready). Updates wait while ``spec.paused``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from attrs import evolve

from omenative_core.labels import LABEL_REVISION_HASH, LABEL_RUNNER
from omenative_core.model.plan import PatchPodImages, SetServingGate
from omenative_core.model.spec import Runner
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.phases import Outcome, Phase, Step
from omenative_core.revisions import hash_of
from omenative_core.steps.bringup import bring_up
from omenative_core.steps.native_gang import delete_pod_group
from omenative_core.steps.outcomes import (
    abandon_surge,
    fail_row,
    record_failure,
    settle_ready,
    termination,
)
from omenative_core.steps.pods import drain
from omenative_core.steps.repair import LABEL_RESTART_BASELINE
from omenative_core.steps.state import Continue, MoveResult
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.teardown import condemn

__all__ = [
    "cancel_surge",
    "gang_drain",
    "gang_surge",
    "gang_surge_target",
    "images_only",
    "in_place",
    "recreate_create",
    "recreate_drain",
    "surge",
    "surge_drain",
    "unknown_step",
]


def _updating(row: InstanceStatus, op: InstanceOperation) -> InstanceStatus:
    return evolve(row, phase=Phase.UPDATING, operation=op)


# ---------------------------------------------------------------------- gang surge


def gang_surge_target(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/GangSurgeTarget: this row is the replacement being built."""
    target = op.target_revision
    outcome, op, failure = bring_up(st, row, op, target, row.active_ordinal, paused_applies=True)
    if outcome == Outcome.FAILED and failure is not None:
        return abandon_surge(st, row, target, failure)
    if outcome != Outcome.READY:
        return evolve(row, phase=Phase.CREATING, operation=op)
    st.book.succeed(target)
    since = st.view.ready_stamp(row)
    if op.replaces is None or op.replaces not in st.rows:
        return evolve(
            row,
            phase=Phase.READY,
            operation=None,
            running_revision=target,
            target_revision=target,
            ready_since=since,
        )
    # serving; the operation stays open until the source has drained
    return evolve(
        row,
        phase=Phase.READY,
        ready_since=since,
        running_revision=target,
        operation=evolve(op, waiting=None, deadline=None),
    )


def gang_surge(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/GangSurge: this row is the source, waiting for its replacement to serve."""
    surge_row = st.rows.get(op.surge_index) if op.surge_index is not None else None
    if (
        surge_row is None
        or surge_row.operation is None
        or surge_row.operation.replaces != row.index
    ):
        return evolve(row, operation=None, phase=st.steady_phase(row))
    if surge_row.phase == Phase.READY and st.view.available(surge_row):
        moved = evolve(op, step=Step.DRAIN, last_progress_at=st.view.now)
        return Continue(evolve(row, operation=moved))
    if surge_row.phase == Phase.READY and surge_row.ready_since is not None:
        st.wake.append(surge_row.ready_since + st.view.policy.min_ready)
    return _updating(row, op)


def gang_drain(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/Drain of a SurgeThenDrain source: drain it; the replacement takes over."""
    if st.view.policy.paused:
        return _updating(row, op)
    gone = drain(st, st.pods_of(row.index), "Replaced")
    if not (gone and delete_pod_group(st, row.index, row.incarnation)):
        return _updating(row, op)
    surge_row = st.rows.get(op.surge_index) if op.surge_index is not None else None
    if surge_row is not None and surge_row.operation is not None:
        st.hand_off(row.index, evolve(surge_row, operation=None), "source drained: surge done")
    return None


# ---------------------------------------------------------------------- single-pod surge


def surge(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/Surge: bring the new revision up in the row's other ordinal slot."""
    target = op.target_revision
    surge_slot = 1 - row.active_ordinal
    outcome, op, failure = bring_up(
        st, evolve(row, incarnation=row.incarnation), op, target, surge_slot, paused_applies=True
    )
    if outcome == Outcome.FAILED and failure is not None:
        record_failure(st, target, failure)
        _drain_surge_slot(st, row, target, "SurgeFailed")
        st.warn(
            "SurgeAbandoned",
            f"surge pod for Instance {row.index} failed: {failure.reason}",
            row.index,
        )
        return evolve(
            row,
            operation=None,
            phase=st.steady_phase(row),
            last_failure=termination(st, failure),
        )
    if outcome != Outcome.READY:
        return _updating(row, op)
    st.book.succeed(target)
    op = evolve(op, step=Step.SURGE_DRAIN, last_progress_at=st.view.now, deadline=None)
    return Continue(evolve(row, operation=op))


def _drain_surge_slot(st: StepPass, row: InstanceStatus, target: str, reason: str) -> None:
    """Drain the pods of a single-pod surge attempt (the row's other ordinal slot)."""
    expected = st.view.expected(row.index, target, row.incarnation, 1 - row.active_ordinal) or {}
    drain(
        st,
        [
            p
            for p in st.pods_of(row.index)
            if p.name in expected and st.matches(p, target, row.incarnation)
        ],
        reason,
    )


def cancel_surge(st: StepPass, row: InstanceStatus) -> None:
    """Cancel the surge a source is building (a scale-down left no room for it).

    The replacement (a gang at its own index, or the other ordinal slot of a single pod)
    drains and goes; the source's operation ends and it keeps serving. No failure is
    recorded: the revision did nothing wrong.
    """
    op = row.operation
    if op is None:
        return
    if op.step == Step.GANG_SURGE and op.surge_index is not None:
        surge_row = st.rows.get(op.surge_index)
        if surge_row is not None:
            condemn(st, surge_row, op.target_revision, "SurgeCancelled")
    elif op.step == Step.SURGE:
        _drain_surge_slot(st, row, op.target_revision, "SurgeCancelled")
    st.rows[row.index] = evolve(row, operation=None, phase=st.steady_phase(row))


def surge_drain(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/SurgeDrain: the surge pod serves; drain the old one, then swap slots."""
    if st.view.policy.paused:
        return _updating(row, op)
    old = st.view.expected(row.index, row.running_revision, row.incarnation, row.active_ordinal)
    old_pods = [p for p in st.pods_of(row.index) if old is not None and p.name in old]
    if not drain(st, old_pods, "Replaced"):
        return _updating(row, op)
    return evolve(
        row,
        phase=Phase.READY,
        operation=None,
        active_ordinal=1 - row.active_ordinal,
        running_revision=op.target_revision,
        target_revision=op.target_revision,
        ready_since=st.view.ready_stamp(row),
    )


# ---------------------------------------------------------------------- RecreatePod


def recreate_drain(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/Drain under RecreatePod: drain and delete, then go on at the next incarnation."""
    if st.view.policy.paused:
        return _updating(row, op)
    if not drain(st, st.pods_of(row.index), "RecreatePod"):
        return _updating(row, op)
    row = evolve(row, incarnation=row.incarnation + 1, active_ordinal=0)
    op = evolve(op, step=Step.CREATE_PODS, deadline=None, last_progress_at=st.view.now)
    return Continue(evolve(row, operation=op))


def recreate_create(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/CreatePods: bring the new incarnation up on the target revision."""
    target = op.target_revision
    outcome, op, failure = bring_up(st, row, op, target, 0, paused_applies=True)
    if outcome == Outcome.READY:
        return settle_ready(st, row, target)
    if outcome == Outcome.FAILED and failure is not None:
        return fail_row(st, row, target, failure)
    return _updating(row, op)


def unknown_step(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """An Update at a step this version does not know: close it; the next pass decides."""
    del op
    return evolve(row, operation=None, phase=st.steady_phase(row))


# ---------------------------------------------------------------------- in place


def in_place(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Update/InPlace: patch the pods' images (gate off first), then wait for Ready."""
    target = op.target_revision
    runners = st.view.runners(target)
    pods = [p for p in st.pods_of(row.index) if not p.terminating]
    if runners is None:
        return evolve(row, operation=None)
    pending = [p for p in pods if p.labels.get(LABEL_REVISION_HASH) != hash_of(target)]
    if pending:
        if st.view.policy.paused:
            return _updating(row, op)
        _patch_images(st, pending, {r.name: r for r in runners}, target)
        st.poll = True
        return _updating(row, op)
    updated = evolve(row, running_revision=target)
    outcome, op, failure = bring_up(
        st, updated, op, target, row.active_ordinal, paused_applies=False
    )
    if outcome == Outcome.READY:
        return settle_ready(st, updated, target)
    if outcome == Outcome.FAILED and failure is not None:
        return fail_row(st, updated, target, failure)
    return _updating(updated, op)


def _patch_images(
    st: StepPass, pending: list[Any], by_runner: dict[str, Runner], target: str
) -> None:
    gated = [p for p in pending if p.serving_gate] if st.view.policy.mark_not_ready_in_place else []
    if gated:  # the whole gang leaves rotation before any pod of it changes (gang integrity)
        for pod in gated:
            st.out.add(SetServingGate(name=pod.name, uid=pod.uid, value=False))
        return
    for pod in pending:
        runner = by_runner.get(pod.labels.get(LABEL_RUNNER, ""))
        if runner is None:
            continue
        images = _images(runner)
        changed = sum(1 for c in pod.containers if c.name in images and c.image != images[c.name])
        baseline = sum(c.restart_count for c in pod.containers) + changed
        st.out.add(
            PatchPodImages(
                name=pod.name,
                uid=pod.uid,
                images=images,
                labels={
                    LABEL_REVISION_HASH: hash_of(target),
                    LABEL_RESTART_BASELINE: str(baseline),
                },
            )
        )


def images_only(old: Sequence[Runner] | None, new: Sequence[Runner] | None) -> bool:
    """Whether two revisions differ in container images only (in place is possible)."""
    if old is None or new is None:
        return False
    return _strip_images(old) == _strip_images(new)


def _strip_images(runners: Sequence[Runner]) -> list[Any]:
    """Runner templates with container images removed: equal means image-only change."""
    out: list[Any] = []
    for r in sorted(runners, key=lambda r: r.name):
        tpl = json.loads(json.dumps(r.template, sort_keys=True))
        for c in tpl.get("spec", {}).get("containers", []) or []:
            c.pop("image", None)
        out.append([r.name, r.size, tpl])
    return out


def _images(runner: Runner) -> dict[str, str]:
    containers = runner.template.get("spec", {}).get("containers", []) or []
    return {str(c.get("name")): str(c.get("image", "")) for c in containers}
