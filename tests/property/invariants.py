"""The lifecycle invariants of design.md, one named function each.

Each takes the snapshot a plan was made from and the plan (and, where needed, the world
history) and raises AssertionError with a message naming the Instance and what broke, so
a failing property test reads as the invariant's name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from omenative_core.labels import (
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_POD_ORDINAL,
    LABEL_REVISION_HASH,
    LABEL_RUNNER,
)
from omenative_core.model import (
    CreatePod,
    DeletePod,
    PatchPodImages,
    Plan,
    PodView,
    SetServingGate,
    Snapshot,
)
from omenative_core.planner import plan as make_plan
from omenative_core.policy import desired_instances, resolve_policy
from omenative_core.revisions import hash_of

NEW_WORK_REASONS = frozenset(
    {
        "ScaleUp",
        "GangSurge",
        "SurgeThenDrain",
        "RecreatePod",
        "InPlaceUpdate",
        "MigrationSurge",
        "Migration",
    }
)


def _index(pod: PodView) -> int | None:
    raw = pod.labels.get(LABEL_INSTANCE_INDEX, "")
    return int(raw) if raw.isdigit() else None


def _pods_by_index(snap: Snapshot) -> dict[int, list[PodView]]:
    out: dict[int, list[PodView]] = defaultdict(list)
    for pod in snap.pods:
        idx = _index(pod)
        if idx is not None:
            out[idx].append(pod)
    return out


def _single_pod(snap: Snapshot) -> bool:
    return len(snap.replica.spec.runners) == 1


def _no_patch_while_serving(snap: Snapshot, plan: Plan, by_index: dict[int, list[PodView]],
                            pods_by_name: dict[str, PodView]) -> None:
    """With ``markNotReadyDuringLifecycle`` (the default), no pod of a gang is patched in
    place while any pod of it still serves: the gang leaves rotation as a whole first."""
    spec = snap.replica.spec
    if _single_pod(snap) or not resolve_policy(
            spec, snap.config, multi_pod=True).mark_not_ready_in_place:
        return
    for action in plan.actions:
        if isinstance(action, PatchPodImages):
            idx = _index(pods_by_name[action.name])
            serving = [p.name for p in by_index.get(idx, ()) if idx is not None
                       and p.serving_gate and not p.terminating]
            assert not serving, (
                f"gang_integrity: {action.name} patched in place while {serving} serve")


def gang_integrity(snap: Snapshot, plan: Plan) -> None:
    """1. An Instance's live pods share one revision and incarnation (single-pod surge slot
    aside), and the serving gate goes True only when every pod of the Instance is ready.

    An in-place update patches a gang's pods one request each, so a manager that dies in
    the middle leaves them on two revisions of one incarnation; that is allowed only while
    none of them serves (the gang left rotation as a whole before the first patch)."""
    by_index = _pods_by_index(snap)
    if not _single_pod(snap):
        for idx, pods in by_index.items():
            live = [p for p in pods if not p.terminating and p.phase not in ("Failed",)]
            keys = {
                (p.labels.get(LABEL_REVISION_HASH), p.labels.get(LABEL_INCARNATION)) for p in live
            }
            if len(keys) > 1 and len({inc for _, inc in keys}) == 1:  # in place, cut short
                assert not any(p.serving_gate for p in live), (
                    f"gang_integrity: Instance {idx} serves on {sorted(map(str, keys))}")
                continue
            assert len(keys) <= 1, f"gang_integrity: Instance {idx} mixes {sorted(map(str, keys))}"
    pods_by_name = {p.name: p for p in snap.pods}
    _no_patch_while_serving(snap, plan, by_index, pods_by_name)
    for action in plan.actions:
        if isinstance(action, SetServingGate) and action.value:
            pod = pods_by_name[action.name]
            idx = _index(pod)
            assert idx is not None
            mates = [
                p
                for p in by_index[idx]
                if p.labels.get(LABEL_REVISION_HASH) == pod.labels.get(LABEL_REVISION_HASH)
                and p.labels.get(LABEL_INCARNATION) == pod.labels.get(LABEL_INCARNATION)
                and not p.terminating
            ]
            runners = snap.replica.spec.runners
            want = sum(r.size for r in runners) if len(runners) > 1 else 1
            if len(runners) > 1:
                assert len(mates) >= want, (
                    f"gang_integrity: gate True on {pod.name} with {len(mates)}/{want} pods"
                )
            assert all(p.containers_ready for p in mates), (
                f"gang_integrity: gate True on {pod.name} while a pod of Instance {idx} "
                "is not ready"
            )


def identity(snap: Snapshot, plan: Plan) -> None:
    """2. No two rows share an index; a delete never hits a newer pod of the same name."""
    indexes = [r.index for r in plan.status.instances]
    assert len(indexes) == len(set(indexes)), f"identity: duplicate index in {indexes}"
    uids = {p.name: p.uid for p in snap.pods}
    for action in plan.actions:
        if isinstance(action, DeletePod):
            assert action.uid, f"identity: delete of {action.name} without a UID precondition"
            if action.name in uids:
                assert uids[action.name] == action.uid, (
                    f"identity: delete of {action.name} names uid {action.uid}, "
                    f"observed {uids[action.name]}"
                )


def surge_ceiling(snap: Snapshot, plan: Plan, max_surge: int) -> None:
    """4. Live Instances never exceed desired + maxSurge (+ migrations in flight)."""
    spec = snap.replica.spec
    desired = desired_instances(spec.replicas)
    rows = plan.status.instances
    members = [
        r
        for r in rows
        if r.operation is None or (r.operation.type != "Delete" and r.operation.replaces is None)
    ]
    surges = [
        r
        for r in rows
        if r.operation is not None
        and r.operation.replaces is not None
        and r.operation.type == "Update"
    ]
    migrating = [
        r
        for r in rows
        if r.operation is not None
        and r.operation.replaces is not None
        and r.operation.type == "Create"
    ]
    in_flight = sum(
        1 for m in plan.status.migrations if m.phase in ("SurgePending", "SurgeReady", "Draining")
    )
    assert len(members) <= desired, f"surge_ceiling: {len(members)} members > desired {desired}"
    assert len(surges) <= max_surge, f"surge_ceiling: {len(surges)} surges > maxSurge {max_surge}"
    assert len(migrating) <= in_flight, (
        f"surge_ceiling: {len(migrating)} migration surges > {in_flight} migrations in flight"
    )


def instances_holding_pods(snap: Snapshot) -> int:
    """Instances' worth of pods the world holds: a gang's pods count once per index, a
    single-pod Instance's each (its surge slot is an Instance's worth of GPUs). Pods on a
    node that is not Ready hold nothing the scheduler can use and are left out."""
    live = [p for p in snap.pods if not p.node_name
            or (snap.nodes.get(p.node_name) is not None
                and snap.nodes[p.node_name].ready is True)]
    if _single_pod(snap):
        return len(live)
    return len({_index(p) for p in live})


def migrations_in_flight(snap: Snapshot) -> int:
    """Migrations whose replacement is being built, serves, or whose source drains."""
    status = snap.replica.status
    return sum(
        1 for m in (status.migrations if status else ())
        if m.phase in ("SurgePending", "SurgeReady", "Draining")
    )


def pod_ceiling(after: Snapshot, desired: int, max_surge: int, migrations: int) -> None:
    """4'. Counted from the world's pods (not from status rows): Instances holding pods
    never exceed ``desired`` + maxSurge + ``migrations`` in flight, where ``desired`` is
    the larger of the counts before and after a scale change and ``migrations`` counts
    those whose pods may still drain (condemned Instances drain while the new count
    applies)."""
    holding = instances_holding_pods(after)
    assert holding <= desired + max_surge + migrations, (
        f"pod_ceiling: {holding} Instances hold pods > desired {desired} + maxSurge "
        f"{max_surge} + {migrations} migration(s) in flight")


def drain_before_delete(snap: Snapshot, plan: Plan) -> None:
    """5. No pod is deleted while its serving gate is True (unless lost or force-deleted)."""
    pods = {p.name: p for p in snap.pods}
    for action in plan.actions:
        if not isinstance(action, DeletePod):
            continue
        pod = pods.get(action.name)
        if pod is None or pod.uid != action.uid:
            continue
        node = snap.nodes.get(pod.node_name or "")
        lost = pod.phase in ("Failed", "Succeeded") or (
            pod.node_name is not None and (node is None or node.ready is not True)
        )
        if action.force or lost:
            continue
        assert not pod.serving_gate, f"drain_before_delete: {pod.name} deleted with gate True"
        assert pod.name not in snap.routed_pods, (
            f"drain_before_delete: {pod.name} deleted while still routed"
        )


def holds(snap: Snapshot, plan: Plan) -> None:
    """6. A held revision gets no new pods until released or replaced."""
    status = snap.replica.status
    if status is None:
        return
    held = {b.target_revision for b in status.retry_blocks if b.state == "Held"}
    release = snap.replica.metadata.annotations.get("ome.io/release-held-revision")
    for action in plan.actions:
        if isinstance(action, CreatePod):
            rev_hash = action.body["metadata"]["labels"][LABEL_REVISION_HASH]
            for name in held:
                if hash_of(name) == rev_hash and not release:
                    raise AssertionError(f"holds: pod {action.name} created for held {name}")


def deadlines(snap: Snapshot, plan: Plan) -> None:
    """7. No operation outlives its deadline: an attempt past it is Failed in this plan."""
    now = snap.now.replace(microsecond=0)
    for row in plan.status.instances:
        op = row.operation
        if op is not None and op.deadline is not None:
            assert op.deadline > now, (
                f"deadlines: Instance {row.index} op {op.type}/{op.step} past its deadline "
                f"{op.deadline} at {now}"
            )


def pause(snap: Snapshot, plan: Plan) -> None:
    """8. While paused no Create, Update or Migrate starts; Freeze also stops repair."""
    spec = snap.replica.spec
    if not spec.paused:
        return
    before = {
        r.index: r.operation.id
        for r in (snap.replica.status.instances if snap.replica.status else ())
        if r.operation is not None
    }
    for row in plan.status.instances:
        op = row.operation
        if op is None or before.get(row.index) == op.id:
            continue
        assert op.reason not in NEW_WORK_REASONS, (
            f"pause: Instance {row.index} started {op.type} ({op.reason}) while paused"
        )
        if spec.pause_mode == "Freeze":
            assert op.type != "Restart", f"pause: Instance {row.index} restarted under Freeze"


def migration(snap: Snapshot, plan: Plan) -> None:
    """9. A migration's source drains only once its replacement serves; caps hold."""
    rows = {r.index: r for r in plan.status.instances}
    before = {
        m.request_uuid: m.phase
        for m in (snap.replica.status.migrations if snap.replica.status else ())
    }
    active = 0
    for m in plan.status.migrations:
        if m.phase in ("SurgePending", "SurgeReady", "Draining"):
            active += 1
        if m.phase == "Draining" and before.get(m.request_uuid) != "Draining":
            surge = rows.get(m.surge_instance) if m.surge_instance is not None else None
            assert surge is not None and surge.phase == "Ready", (
                f"migration: {m.request_uuid} drains Instance {m.source_instance} before its "
                f"replacement {m.surge_instance} is Ready"
            )
    audit = snap.config.audit
    if audit is not None:
        assert active <= audit.max_in_flight_migrations, (
            f"migration: {active} in flight > cap {audit.max_in_flight_migrations}"
        )


def determinism(snap: Snapshot, plan: Plan) -> None:
    """12. The same snapshot always gives the same plan."""
    again = make_plan(snap)
    assert again == plan, "determinism: two plans of one snapshot differ"


def quiescent(snap: Snapshot, plan: Plan) -> None:
    """At rest the plan is empty and the status equals the one observed."""
    assert not plan.actions, f"quiescent: actions at rest: {[a.kind for a in plan.actions]}"
    assert plan.status == snap.replica.status, "quiescent: status changed at rest"


def converged(snap: Snapshot, plan: Plan) -> None:
    """11. Every Instance Ready on the update revision at the desired count; plan empty."""
    spec = snap.replica.spec
    desired = desired_instances(spec.replicas)
    status = plan.status
    rows = status.instances
    assert len(rows) == desired, f"converged: {len(rows)} Instances, desired {desired}"
    for row in rows:
        assert row.phase == "Ready", f"converged: Instance {row.index} is {row.phase}"
        assert row.running_revision == status.update_revision, (
            f"converged: Instance {row.index} runs {row.running_revision}, "
            f"target {status.update_revision}"
        )
    quiescent(snap, plan)


def serving_floor(samples: Sequence[tuple[float, int]], desired: int, since: float) -> None:
    """3. During a SurgeThenDrain rollout with room to surge, serving never drops."""
    for t, serving in samples:
        if t >= since:
            assert serving >= desired, f"surge_then_drain: {serving} serving at t={t}s < {desired}"


ALL_STEP_INVARIANTS = (
    gang_integrity,
    identity,
    drain_before_delete,
    holds,
    deadlines,
    pause,
    migration,
)
"""Checked on every plan the state machine makes."""


# ------------------------------------------------------------------ world (pods) invariants


def _live(pod: PodView) -> bool:
    """Running or about to: not terminating and not finished."""
    return not pod.terminating and pod.phase not in ("Failed", "Succeeded")


def _slot(pod: PodView) -> tuple[str, str]:
    """The role slot a pod's labels name: (runner, ordinal)."""
    return pod.labels.get(LABEL_RUNNER, "?"), pod.labels.get(LABEL_POD_ORDINAL, "?")


def allowed_slots(multi: bool, size: int) -> frozenset[tuple[str, str]]:
    """The role slots an Instance may fill: leader 0 and worker 0..size-1 for a gang; for a
    single pod ``default`` 0 and 1 (its surge alternates the two ordinals by design)."""
    if multi:
        return frozenset({("leader", "0"), *(("worker", str(k)) for k in range(size))})
    return frozenset({("default", "0"), ("default", "1")})


def pod_slots(after: Snapshot, multi: bool, size: int) -> None:
    """13. Counted from the world's pods by their labels (not their names): an Instance
    has at most one live, non-terminating pod per role slot, only slots its shape has, and
    a single-pod Instance serves from two pods (ordinals 0 and 1) only while its row has
    an Update open (the surge hands over); otherwise one of the two is leaving (its
    serving gate off)."""
    allowed = allowed_slots(multi, size)
    status = after.replica.status
    rows = {r.index: r for r in (status.instances if status else ())}
    by_slot: dict[int, dict[tuple[str, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    gated: set[str] = set()
    for pod in after.pods:
        idx = _index(pod)
        if idx is None or not _live(pod):
            continue
        slot = _slot(pod)
        assert slot in allowed, (
            f"pod_slots: {pod.name} fills slot {slot} of Instance {idx}, not one of "
            f"{sorted(allowed)}")
        by_slot[idx][slot].append(pod.name)
        if pod.serving_gate:
            gated.add(pod.name)
    for idx, slots in by_slot.items():
        for slot, names in slots.items():
            assert len(names) == 1, (
                f"pod_slots: Instance {idx} has {len(names)} live pods in slot {slot}: "
                f"{sorted(names)}")
        serving = sorted(n for names in slots.values() for n in names if n in gated)
        if not multi and len(serving) == 2:
            row = rows.get(idx)
            op = row.operation if row is not None else None
            assert op is not None and op.type == "Update", (
                f"pod_slots: single-pod Instance {idx} serves from two pods with no Update "
                f"open: {serving}")


def serving_instances(after: Snapshot, multi: bool, size: int) -> int:
    """Instances serving, counted from pods: every slot of the Instance's shape has a live
    pod in rotation (serving gate and containers ready); a single pod's either ordinal."""
    rotating: dict[int, set[tuple[str, str]]] = defaultdict(set)
    for pod in after.pods:
        idx = _index(pod)
        if idx is not None and _live(pod) and pod.in_rotation:
            rotating[idx].add(_slot(pod))
    if not multi:
        return len(rotating)
    whole = allowed_slots(multi, size)
    return sum(1 for slots in rotating.values() if slots >= whole)


def availability_floor(after: Snapshot, multi: bool, size: int, floor: int) -> None:
    """14. In steps without injected faults, from a settled replica: Instances serving
    (counted from pods) never drop below the floor the strategy promises (``desired -
    maxUnavailable``; SurgeThenDrain with room never drops below ``desired``)."""
    serving = serving_instances(after, multi, size)
    assert serving >= floor, (
        f"availability_floor: {serving} Instances serve < the floor {floor}")


def converged_pods(snap: Snapshot, multi: bool, size: int) -> None:
    """11'. A converged replica has exactly the pods its spec implies, counted from the
    world: each row's Instance has one live pod per slot of its shape (a single pod's
    active ordinal), on the update revision and the row's incarnation, and nothing else."""
    status = snap.replica.status
    assert status is not None, "converged_pods: no status"
    want: dict[tuple[int, str, str], tuple[str, str]] = {}
    rev_hash = hash_of(status.update_revision)
    for row in status.instances:
        slots = (
            allowed_slots(multi, size) if multi else {("default", str(row.active_ordinal))}
        )
        for runner, ordinal in slots:
            want[(row.index, runner, ordinal)] = (rev_hash, str(row.incarnation))
    have: dict[tuple[int, str, str], tuple[str, str]] = {}
    for pod in snap.pods:
        idx = _index(pod)
        assert idx is not None and _live(pod), f"converged_pods: {pod.name} is not live"
        key = (idx, *_slot(pod))
        assert key not in have, f"converged_pods: two pods in slot {key}"
        have[key] = (pod.labels.get(LABEL_REVISION_HASH, ""), pod.labels.get(LABEL_INCARNATION, ""))
    assert set(have) == set(want), (
        f"converged_pods: pods fill {sorted(have)}, the spec implies {sorted(want)}")
    assert have == want, "converged_pods: a pod's revision or incarnation is not its row's"
