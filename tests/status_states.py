"""Big statuses for the status-size tests and benchmark (issue 14): built directly, no pods.

``uniform`` is a fleet at rest; ``representative`` a fleet mid-rollout with the row shapes of
the golden ``mixed`` and ``failure-heavy`` cases (OME's own) in stated proportions;
``worst_reachable`` the largest status the operations budget lets the planner reach: the
rows with an entry at random indexes, every field at its longest, as many as the budget's
charges allow (``omenative_core.status.budget``).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from attrs import evolve

from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
    MigrationStatus,
    RetryBlock,
    RolloutHold,
)
from omenative_core.status.budget import (
    ENTRIES_CAPACITY,
    FAILURE_MESSAGE_MAX,
    FAILURE_REASON_MAX,
    FAILURE_ROW_BYTES,
    MIGRATE_ROW_BYTES,
    OPERATION_ROW_BYTES,
    READY_SINCE_ROW_BYTES,
)
from omenative_core.status.indexsets import INT32_MAX

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
T2 = T0 + timedelta(minutes=35)
OLD = "chat-engine-5d8f9c"
NEW = "chat-engine-7b21e4"
NAME = 253  # a Kubernetes object name at its longest


def _ready(index: int, revision: str, pods: int = 2) -> InstanceStatus:
    return InstanceStatus(
        index=index,
        incarnation=1,
        phase="Ready",
        running_revision=revision,
        pod_count=pods,
        serving_pod_count=pods,
        available_pod_count=pods,
        admitted=True,
    )


def _status(
    rows: list[InstanceStatus],
    old: str,
    new: str,
    migrations: tuple[MigrationStatus, ...] = (),
) -> InferenceReplicaStatus:
    n = len(rows)
    ready = sum(1 for r in rows if r.phase == "Ready")
    updated = sum(1 for r in rows if r.running_revision == new)
    return InferenceReplicaStatus(
        observed_generation=4,
        replicas=n,
        ready_replicas=ready,
        serving_replicas=ready,
        available_replicas=sum(1 for r in rows if r.phase == "Ready" and r.ready_since is None),
        updated_replicas=updated,
        updated_ready_replicas=updated,
        current_revision=old,
        update_revision=new,
        label_selector="ome.io/inferenceservice=chat,component=engine",
        instances=tuple(rows),
        migrations=migrations,
        retry_blocks=(RetryBlock(target_revision=new, state="RetryInProgress", attempts_started=3),)
        if old != new
        else (),
        conditions=(
            Condition(type="Ready", status="Unknown", reason="RolloutInProgress",
                      last_transition_time=T0),
        )
        if old != new
        else (Condition(type="Ready", status="True", reason="AllInstancesReady",
                        last_transition_time=T0),),
        rollout_hold=RolloutHold(gate="Budget", reason="maxSurge 25% in use", target=new, since=T1)
        if old != new
        else None,
    )


def uniform(n: int, revision: str = OLD) -> InferenceReplicaStatus:
    """``n`` Ready Instances on one revision, Available: the steady state."""
    return _status([_ready(i, revision) for i in range(n)], revision, revision)


# ------------------------------------------------------------------------ representative


def _surging(index: int) -> InstanceStatus:
    return InstanceStatus(
        index=index, incarnation=2, phase="Updating", running_revision=OLD, target_revision=NEW,
        pod_count=3, serving_pod_count=2, available_pod_count=2, admitted=True,
        operation=InstanceOperation(
            id=f"update-{index}-2", type="Update", step="Surge", started_at=T1,
            last_progress_at=T1, deadline=T2, target_revision=NEW, reason="RevisionRoll",
            strategy="SurgeThenDrain",
        ),
    )


def _creating(index: int) -> InstanceStatus:
    return InstanceStatus(
        index=index, incarnation=1, phase="Creating", target_revision=NEW,
        operation=InstanceOperation(
            id=f"create-{index}-1", type="Create", step="CreatePods", started_at=T1,
            last_progress_at=T1, target_revision=NEW, reason="ScaleUp", waiting="QuotaExceeded",
        ),
    )


def _failed(index: int) -> InstanceStatus:
    return InstanceStatus(
        index=index, incarnation=3, phase="Failed", running_revision=NEW, pod_count=2,
        last_failure=InstanceTermination(
            pod_name=f"chat-engine-{index}-leader-0", container_name="engine",
            reason="OOMKilled", exit_code=137, time=T2,
        ),
    )


def _warming(index: int) -> InstanceStatus:
    return evolve(_ready(index, NEW), incarnation=2, ready_since=T1)


REPRESENTATIVE_MIX = {"surging": 0.02, "creating": 0.005, "failed": 0.01, "warming": 0.03}
"""Shares of the rows with an entry in ``representative`` (the rest are Ready, no entry)."""


def representative(n: int, *, seed: int = 0, ready_since_everywhere: bool = False
                   ) -> InferenceReplicaStatus:
    """A fleet mid-rollout: the top 40% on the new revision, the rest on the old, and
    ``REPRESENTATIVE_MIX`` of the rows (at random indexes) surging, creating, failed or
    inside their ``minReadySeconds`` window. ``ready_since_everywhere`` keeps a
    ``readySince`` on every Ready row, as omenative did before it dropped it once Available.
    """
    rng = random.Random(seed)
    split = n - (n * 2) // 5
    rows = {i: _ready(i, NEW if i >= split else OLD) for i in range(n)}
    makers = {"surging": _surging, "creating": _creating, "failed": _failed, "warming": _warming}
    picked = iter(rng.sample(range(n), sum(int(n * s) for s in REPRESENTATIVE_MIX.values())))
    for kind, share in REPRESENTATIVE_MIX.items():
        for _ in range(int(n * share)):
            i = next(picked)
            rows[i] = makers[kind](i)
    out = [rows[i] for i in range(n)]
    if ready_since_everywhere:
        out = [
            evolve(r, ready_since=r.ready_since or T0)
            if r.phase == "Ready" else r
            for r in out
        ]
    return _status(out, OLD, NEW)


# ------------------------------------------------------------------------ worst reachable


def _long(char: str, n: int = NAME) -> str:
    return char * n


WORST_OLD = "o" * (NAME - 11) + "-5d8f9c7b21"
WORST_NEW = "n" * (NAME - 11) + "-7b21e45d8f"


def _worst_failure(index: int) -> InstanceTermination:
    return InstanceTermination(
        pod_name=_long("p"), container_name=_long("c", 63), reason=_long("r", FAILURE_REASON_MAX),
        exit_code=-(2**31), message="<" * (FAILURE_MESSAGE_MAX // 6), time=T2,
    )


def _worst_op(index: int, *, migrate: bool) -> InstanceOperation:
    moves: dict[str, object] = {}
    if migrate:
        moves = {"from_node": _long("f"), "hint_target_nodes": tuple(_long("h") for _ in range(8)),
                 "request_uuid": f"{index:036d}"}
    return InstanceOperation(  # type: ignore[arg-type]
        id=_long("i", 64 + NAME + 24), type="Migrate" if migrate else "Restart",
        step=_long("s", 64), started_at=T1, last_progress_at=T1, deadline=T2,
        retry_count=INT32_MAX, target_revision=WORST_NEW, reason=_long("r", 64),
        waiting=_long("w", 64), capacity_refused_at=T1, strategy=_long("s", 64),
        surge_index=INT32_MAX, replaces=INT32_MAX, unschedulable_since=T1, **moves,
    )


def worst_reachable(
    n: int,
    *,
    ops: int | None = None,
    migrates: int = 0,
    failed: int = 0,
    seed: int = 0,
) -> InferenceReplicaStatus:
    """The largest status the budget admits: ``ops`` + ``migrates`` open operations, then
    ``failed`` Failed rows, then as many ``readySince`` rows as the rest of the capacity is
    charged for, all at random indexes with every field at its longest (``ops`` None: as
    many as fit after the Migrates and failures)."""
    rng = random.Random(seed)
    room = ENTRIES_CAPACITY - migrates * MIGRATE_ROW_BYTES - failed * FAILURE_ROW_BYTES
    if ops is None:
        ops = max(room, 0) // OPERATION_ROW_BYTES
    room -= ops * OPERATION_ROW_BYTES
    if room < 0:
        raise ValueError("more operations than the budget admits")
    warming = min(room // READY_SINCE_ROW_BYTES, n - ops - migrates - failed)
    split = n - n // 2
    rows = {i: _ready(i, WORST_NEW if i >= split else WORST_OLD) for i in range(n)}
    picked = iter(rng.sample(range(n), ops + migrates + failed + warming))
    migrations = []
    for kind, count in (("op", ops), ("migrate", migrates), ("failed", failed),
                        ("warming", warming)):
        for _ in range(count):
            i = next(picked)
            incarnation = rng.randint(2, 2**40)
            if kind == "warming":
                rows[i] = evolve(rows[i], incarnation=incarnation, ready_since=T1)
                continue
            if kind == "failed":
                rows[i] = InstanceStatus(index=i, incarnation=incarnation, phase="Failed",
                                         running_revision=WORST_NEW, pod_count=1,
                                         last_failure=_worst_failure(i))
                continue
            rows[i] = InstanceStatus(
                index=i, incarnation=incarnation, phase="Migrating" if kind == "migrate"
                else "Restarting", running_revision=WORST_OLD, target_revision=WORST_NEW,
                pod_count=3, serving_pod_count=1, available_pod_count=1, admitted=i % 2 == 0,
                active_ordinal=1, ready_since=T1, last_failure=_worst_failure(i),
                operation=_worst_op(i, migrate=kind == "migrate"),
            )
            if kind == "migrate":
                op = rows[i].operation
                assert op is not None and op.request_uuid is not None
                migrations.append(MigrationStatus(
                    request_uuid=op.request_uuid, trigger="Manual", source_instance=i,
                    surge_instance=INT32_MAX, allocated_at=T1, from_node=op.from_node,
                    hint_target_nodes=op.hint_target_nodes,
                ))
    return _status([rows[i] for i in range(n)], WORST_OLD, WORST_NEW, tuple(migrations))
