"""The InferenceReplica planner: ``plan(snapshot) -> Plan``.

Theory of operation:

1. Everything the planner remembers lives in the status it returns. Each pass reads the
   previous status and the observed world and advances each Instance's open operation by
   at most one step; it never depends on which event woke it.
2. An Instance is a status row plus the pods labelled with its index. The pods an
   operation expects are named deterministically (``{prefix}-{index}-{runner}-{ordinal}``)
   and carry the revision hash and incarnation, so "which pods belong to this attempt"
   is a pure function of the row.
3. Nothing is deleted while it serves: a pod's ``ome.io/serving`` gate goes False first,
   and it is deleted only once the EndpointSlices stop routing to it (a pod the kubelet
   already lost is the exception).
4. Destructive actions are preceded by ``UpdateStatus`` even when the status did not
   change: the write carries the observed resourceVersion, so a plan made from a stale
   view fails before it deletes anything.
5. The order of a pass: revisions, annotations, advance every open operation, then start
   new work (rebuilds, scale, updates, migrations) within the budgets, then the status.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from attrs import evolve

from omenative_core.conditions import build_conditions
from omenative_core.failures import CRASH_REASONS, REVISION_FAULT_REASONS, Failure
from omenative_core.labels import (
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_REVISION_HASH,
    LABEL_RUNNER,
)
from omenative_core.model.observed import PodView, Snapshot
from omenative_core.model.plan import (
    Action,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeletePod,
    DeletePodGroup,
    DeleteRevision,
    Event,
    PatchPodImages,
    Plan,
    RecordAudit,
    RemoveAnnotations,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.spec import Runner
from omenative_core.model.status import (
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
    MigrationStatus,
    RolloutHold,
)
from omenative_core.model.timefmt import format_duration, format_time, to_second
from omenative_core.policy import RECREATE_ON_RESTART, BudgetError, Policy, resolve_policy
from omenative_core.render import (
    instance_slots,
    is_multi_pod,
    pod_group_name,
    pod_name,
    pods_per_instance,
    render_headless_service,
    render_pod,
    render_pod_group,
    schedule_timeout_seconds,
    validate_replica,
)
from omenative_core.retry import RetryBook
from omenative_core.revisions import (
    hash_of,
    next_revision_number,
    revision_body,
    revision_hash,
    revision_name,
    revisions_to_prune,
    runners_from_revision,
)

__all__ = [
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_RELEASE_HELD",
    "ANNOTATION_RESET",
    "FINALIZER",
    "plan",
]

FINALIZER = "ome.io/ir-teardown"
"""Held on every InferenceReplica until its Instances have drained and gone."""

ANNOTATION_RELEASE_HELD = "ome.io/release-held-revision"
"""``<revision name | hash>``: release a held revision for another try."""

ANNOTATION_RESET = "ome.io/reset-instances"
"""``all`` or ``i,j,...``: rebuild those Failed Instances now (consumed once)."""

ANNOTATION_MIGRATION_PREFIX = "ome.io/migration-request-v1-"
"""A migration request; the rest of the key is the request's UUID."""

_ACTIVE_MIGRATION_PHASES = ("SurgePending", "SurgeReady", "Draining")
_TERMINAL_MIGRATION_PHASES = ("Completed", "Failed", "Rejected", "Relocated")
_AUDIT_SUFFIX = "-ome-migration-audit"
LABEL_RESTART_BASELINE = "internal.ome.io/in-place-restarts"
"""Container restarts an in-place image change caused (they are not crashes)."""


def plan(snapshot: Snapshot) -> Plan:
    """Compute the next step for one InferenceReplica from what is observed."""
    return _Planner(snapshot).run()


def _pod_index(pod: PodView) -> int | None:
    raw = pod.labels.get(LABEL_INSTANCE_INDEX)
    if raw is None or not raw.isdigit():
        return None
    return int(raw)


def _pod_incarnation(pod: PodView) -> int:
    raw = pod.labels.get(LABEL_INCARNATION, "")
    return int(raw) if raw.isdigit() else 0


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


class _Planner:
    """One planning pass (mutable scratch state; the result is immutable)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.now = to_second(snap.now)
        self.ir = snap.replica
        self.spec = self.ir.spec
        self.prefix = self.ir.prefix
        self.prev: InferenceReplicaStatus = self.ir.status or InferenceReplicaStatus()
        self.config = snap.config
        self.rows: dict[int, InstanceStatus] = {}
        self.pods_by_index: dict[int, list[PodView]] = defaultdict(list)
        self.pods_by_name: dict[str, PodView] = {}
        self.a_meta_first: list[Action] = []
        self.a_revisions: list[Action] = []
        self.a_objects: list[Action] = []
        self.a_podgroups: list[Action] = []
        self.a_creates: list[Action] = []
        self.a_gates: list[Action] = []
        self.a_patches: list[Action] = []
        self.a_deletes: list[Action] = []
        self.a_podgroup_deletes: list[Action] = []
        self.a_revision_deletes: list[Action] = []
        self.a_meta_last: list[Action] = []
        self.events: list[Event] = []
        self.wake: list[datetime] = []
        self.audit: list[dict[str, Any]] = []
        self.hold: RolloutHold | None = None
        self.errors_by_name = {e.name: e for e in snap.create_errors}
        self.extra_conditions: dict[str, tuple[str, str, str]] = {}
        self.poll = False
        self._used_indexes: set[int] | None = None
        self._shapes: dict[str, tuple[tuple[Any, ...], tuple[Runner, ...], bool]] = {}
        self._free_cursor = 0

    # ------------------------------------------------------------------ entry

    def run(self) -> Plan:
        invalid = validate_replica(self.ir)
        runners = self.spec.runners
        if not invalid:
            try:
                self.policy: Policy = resolve_policy(
                    self.spec, self.config, multi_pod=is_multi_pod(runners)
                )
            except BudgetError as exc:
                invalid = (f"InvalidBudget: {exc}",)
        if invalid:
            return self._invalid_plan(invalid)
        self._revisions()
        self._group_pods()
        self._load_rows()
        self.book = RetryBook(self.prev.retry_blocks, self.config.update_retry)
        self.migrations: dict[str, MigrationStatus] = {
            m.request_uuid: m for m in self.prev.migrations
        }
        if self.ir.metadata.deletion_timestamp is not None:
            self._teardown()
        else:
            if FINALIZER not in self.ir.metadata.finalizers:
                self.a_meta_first.append(SetFinalizer(present=True))
            if self.spec.parent_ref is None and not self.snap.headless_service_exists:
                self.a_objects.append(CreateObject(body=render_headless_service(self.ir)))
            self._annotations()
            for index in sorted(self.rows):
                self._advance(index)
            self._cleanup_orphan_pod_groups()
            self._progress_migrations()
            self._rebuilds()
            self._scale()
            self._progress_migrations()  # a scale-down may have condemned a source
            self._updates()
            self._migrations()
            self.book.keep_only(self._targeted_revisions())
        self._prune_revisions()
        return self._finish()

    # ------------------------------------------------------------------ revisions

    def _revisions(self) -> None:
        spec = self.spec
        self.revision_views = {r.name: r for r in self.snap.revisions}
        self.runners_by_rev: dict[str, tuple[Runner, ...]] = {}
        self.pairing_by_rev: dict[str, str | None] = {}
        for view in self.snap.revisions:
            try:
                self.runners_by_rev[view.name] = runners_from_revision(view)
                self.pairing_by_rev[view.name] = view.data.get("pairingProtocol")
            except ValueError:
                continue
        collision = self.prev.collision_count
        spec_hash = revision_hash(spec.runners, spec.pairing_protocol, collision)
        spec_rev = revision_name(self.prefix, spec_hash)
        existing = self.revision_views.get(spec_rev)
        if existing is not None and spec_rev in self.runners_by_rev:
            stored = self.runners_by_rev[spec_rev]
            if revision_hash(stored, self.pairing_by_rev.get(spec_rev), collision) != spec_hash:
                collision = (collision or 0) + 1
                spec_hash = revision_hash(spec.runners, spec.pairing_protocol, collision)
                spec_rev = revision_name(self.prefix, spec_hash)
        self.collision_count = collision
        self.spec_revision = spec_rev
        self.runners_by_rev[spec_rev] = spec.runners
        self.pairing_by_rev[spec_rev] = spec.pairing_protocol
        if spec_rev not in self.revision_views:
            self.a_revisions.append(
                CreateRevision(
                    body=revision_body(
                        self.ir,
                        spec.runners,
                        spec.pairing_protocol,
                        spec_hash,
                        next_revision_number(self.snap.revisions),
                    )
                )
            )
        target = spec_rev
        rollback = spec.pacing.rollback_to_revision if spec.pacing else None
        if rollback:
            name = rollback if rollback in self.runners_by_rev else None
            if name is None:
                for candidate in self.runners_by_rev:
                    if hash_of(candidate) == rollback:
                        name = candidate
            if name is not None:
                target = name
            else:
                self.extra_conditions["FailedUpdate"] = (
                    "True",
                    "RollbackRevisionNotFound",
                    f"pacing.rollbackToRevision {rollback!r} names no stored revision",
                )
        self.target = target

    def _runners(self, revision: str) -> tuple[Runner, ...] | None:
        return self.runners_by_rev.get(revision)

    # ------------------------------------------------------------------ pods and rows

    def _group_pods(self) -> None:
        for pod in self.snap.pods:
            index = _pod_index(pod)
            if index is None:
                continue
            self.pods_by_index[index].append(pod)
            self.pods_by_name[pod.name] = pod

    def _load_rows(self) -> None:
        for row in self.prev.instances:
            self.rows[row.index] = row
        for index, pods in self.pods_by_index.items():
            if index in self.rows:
                continue
            # pods with no row (status lost or never written): adopt, never delete blindly
            live = [p for p in pods if not p.terminating] or pods
            inc = max(_pod_incarnation(p) for p in live) or 1
            rev_hash = live[0].labels.get(LABEL_REVISION_HASH, "")
            self.rows[index] = InstanceStatus(
                index=index,
                incarnation=inc,
                phase="Pending",
                running_revision=revision_name(self.prefix, rev_hash) if rev_hash else "",
                target_revision=revision_name(self.prefix, rev_hash) if rev_hash else "",
                active_ordinal=0,
            )

    def _expected(
        self, index: int, revision: str, incarnation: int, slot_ordinal: int
    ) -> dict[str, tuple[Any, tuple[Runner, ...]]] | None:
        """Pod name -> (slot, runners) of one attempt of Instance ``index``."""
        shape = self._shapes.get(revision)
        if shape is None:
            runners = self._runners(revision)
            if runners is None:
                return None
            shape = (instance_slots(runners), runners, is_multi_pod(runners))
            self._shapes[revision] = shape
        slots, runners, multi = shape
        return {
            pod_name(self.prefix, index, slot.runner, slot.ordinal if multi else slot_ordinal): (
                slot,
                runners,
            )
            for slot in slots
        }

    def _matches(self, pod: PodView, revision: str, incarnation: int) -> bool:
        return (
            pod.labels.get(LABEL_REVISION_HASH) == hash_of(revision)
            and _pod_incarnation(pod) == incarnation
        )

    def _node_lost(self, pod: PodView) -> bool:
        if not pod.node_name:
            return False
        node = self.snap.nodes.get(pod.node_name)
        return node is None or node.ready is not True

    # ------------------------------------------------------------------ pod primitives

    def _create_pod(
        self,
        row: InstanceStatus,
        name: str,
        slot: Any,
        runners: tuple[Runner, ...],
        revision: str,
        slot_ordinal: int,
        op: InstanceOperation | None,
    ) -> None:
        body = render_pod(
            self.ir,
            runners=runners,
            revision_hash=hash_of(revision),
            index=row.index,
            incarnation=row.incarnation,
            slot=slot,
            ordinal_slot=slot_ordinal,
            replicas=self.policy.desired,
            use_pod_group=self._use_pod_group(runners),
            avoid_node=op.from_node if op else None,
            prefer_nodes=op.hint_target_nodes if op else (),
            pairing_protocol=self.pairing_by_rev.get(revision),
        )
        if body["metadata"]["name"] != name:  # pragma: no cover - render/planner mismatch
            raise AssertionError(f"rendered pod {body['metadata']['name']} != expected {name}")
        self.a_creates.append(CreatePod(body=body))

    def _use_pod_group(self, runners: Sequence[Runner]) -> bool:
        return self.snap.pod_group_crd and is_multi_pod(runners)

    def _drain(self, pods: Iterable[PodView], reason: str) -> bool:
        """Take pods out of rotation, then delete them; True once none is left."""
        done = True
        for pod in pods:
            done = False
            if pod.terminating:
                self._maybe_force_delete(pod)
                continue
            lost = pod.phase in ("Failed", "Succeeded") or self._node_lost(pod)
            if pod.serving_gate and not lost:
                self.a_gates.append(SetServingGate(name=pod.name, uid=pod.uid, value=False))
                self.poll = True
                continue
            if pod.name in self.snap.routed_pods and not lost:
                self.poll = True
                continue
            self.a_deletes.append(DeletePod(name=pod.name, uid=pod.uid, reason=reason))
        return done

    def _maybe_force_delete(self, pod: PodView) -> None:
        fd = self.config.force_delete
        self.poll = True
        if fd is None or pod.deletion_timestamp is None or not pod.node_name:
            return
        node = self.snap.nodes.get(pod.node_name)
        if node is None or node.ready is True:
            return
        since = node.not_ready_since
        overdue = pod.deletion_timestamp + fd.overdue_slack
        if since is None:
            return
        unreachable_at = since + fd.node_unreachable_threshold
        due = max(overdue, unreachable_at)
        if self.now >= due:
            self.a_deletes.append(
                DeletePod(name=pod.name, uid=pod.uid, force=True, reason="ForceDeleteUnreachable")
            )
            self.audit.append(
                {
                    "requestUUID": f"force-delete-{pod.uid}",
                    "component": self.spec.component,
                    "sourceInstance": _pod_index(pod),
                    "phase": "Completed",
                    "reason": "NodeUnreachable",
                    "fromNode": pod.node_name,
                    "startedAt": format_time(self.now),
                    "completedAt": format_time(self.now),
                    "outcome": "force-delete-unreachable",
                }
            )
            self.events.append(
                Event(
                    type="Warning",
                    reason="PodForceDeleted",
                    message=f"force-deleted {pod.name} stuck Terminating on unreachable "
                    f"node {pod.node_name}",
                    instance=_pod_index(pod),
                )
            )
        else:
            self.wake.append(due)

    def _delete_pod_group(self, index: int) -> bool:
        name = pod_group_name(self.prefix, index)
        pg = self.snap.pod_groups.get(name)
        if pg is None:
            return True
        if not pg.deleting:
            self.a_podgroup_deletes.append(DeletePodGroup(name=name, uid=pg.uid))
        self.poll = True
        return False

    # ------------------------------------------------------------------ bring-up

    def _bring_up(
        self,
        row: InstanceStatus,
        op: InstanceOperation,
        revision: str,
        slot_ordinal: int,
        *,
        paused_applies: bool,
    ) -> tuple[str, InstanceOperation, Failure | None]:
        """Drive one attempt's pods towards all Ready.

        Returns ``("ready"|"progress"|"failed", op, failure)``; ``op`` carries the updated
        deadline and waiting reason.
        """
        index = row.index
        expected = self._expected(index, revision, row.incarnation, slot_ordinal)
        if expected is None:
            return (
                "failed",
                op,
                Failure(
                    reason="RevisionNotFound",
                    message=f"revision {revision} is not stored; cannot render its pods",
                ),
            )
        runners = next(iter(expected.values()))[1]
        multi = is_multi_pod(runners)
        pods = {p.name: p for p in self.pods_by_index.get(index, ()) if p.name in expected}
        waiting: str | None = None
        failure: Failure | None = None
        stuck_grace = self.config.stuck_pod_grace_period

        if self._use_pod_group(runners):
            pg_name = pod_group_name(self.prefix, index)
            pg = self.snap.pod_groups.get(pg_name)
            if pg is not None and pg.deleting:
                waiting = "PodGroupTerminating"
            elif pg is None:
                self.a_podgroups.append(
                    CreatePodGroup(
                        body=render_pod_group(
                            self.ir,
                            index=index,
                            min_member=pods_per_instance(runners),
                            schedule_timeout_seconds=schedule_timeout_seconds(
                                self.policy.ready_timeout,
                                self.config.gang_schedule_timeout.min,
                                self.config.gang_schedule_timeout.max,
                            ),
                        )
                    )
                )
        if waiting is None and paused_applies and self.policy.paused:
            waiting = "Paused"

        all_ready = True
        all_containers_ready = True
        admitted = True
        unschedulable = False
        for name, (slot, _) in expected.items():
            pod = pods.get(name)
            if pod is not None and not self._matches(pod, revision, row.incarnation):
                # a pod of another attempt holds this name: it must go first
                self._drain([pod], "StalePod")
                all_ready = all_containers_ready = False
                continue
            if pod is None:
                all_ready = all_containers_ready = False
                err = self.errors_by_name.get(name)
                if err is not None and err.reason in ("Invalid", "InvalidPodSpec"):
                    failure = failure or Failure(
                        reason="InvalidPodSpec", message=err.message, pod_name=name
                    )
                    continue
                if err is not None and err.reason in ("QuotaExceeded", "Forbidden"):
                    waiting = waiting or "QuotaExceeded"
                if waiting in ("Paused", "PodGroupTerminating"):
                    continue
                self._create_pod(row, name, slot, runners, revision, slot_ordinal, op)
                continue
            if pod.terminating:
                all_ready = all_containers_ready = False
                self._maybe_force_delete(pod)
                continue
            if pod.phase in ("Failed", "Succeeded"):
                # terminal pods during bring-up are recycled until the deadline
                all_ready = all_containers_ready = False
                self.a_deletes.append(DeletePod(name=pod.name, uid=pod.uid, reason="TerminalPod"))
                self.events.append(
                    Event(
                        type="Normal",
                        reason="TerminalPodRecycled",
                        message=f"pod {pod.name} ended {pod.phase}; recreating it",
                        instance=index,
                    )
                )
                continue
            if pod.scheduling_gates:
                admitted = False
                waiting = waiting or "QuotaExceeded"
            if pod.unschedulable:
                unschedulable = True
            if self._node_lost(pod):
                waiting = waiting or "NodeUnknown"
            for c in pod.containers:
                reason = c.waiting_reason
                if reason in REVISION_FAULT_REASONS or reason in CRASH_REASONS:
                    age_from = pod.creation_timestamp or op.started_at or self.now
                    if reason == "InvalidImageName":
                        failure = failure or self._pod_failure(pod, c.name, reason, c)
                    elif stuck_grace is not None:
                        due = age_from + stuck_grace
                        if self.now >= due:
                            failure = failure or self._pod_failure(pod, c.name, reason, c)
                        else:
                            self.wake.append(due)
            if not pod.containers_ready:
                all_ready = all_containers_ready = False
            elif not pod.ready:
                all_ready = False

        if unschedulable:
            waiting = waiting or "Unschedulable"
            since = op.unschedulable_since or self.now
            op = evolve(op, unschedulable_since=since)
            grace = self.config.unschedulable_grace_period
            if grace is not None:
                if self.now >= since + grace:
                    failure = failure or Failure(
                        reason="Unschedulable",
                        message=f"pods of Instance {index} could not be scheduled for "
                        f"{int(grace.total_seconds())}s",
                    )
                else:
                    self.wake.append(since + grace)
        elif op.unschedulable_since is not None:
            op = evolve(op, unschedulable_since=None)

        if failure is not None:
            return "failed", op, failure

        if all_containers_ready and len(pods) == len(expected):
            for pod in pods.values():
                if not pod.serving_gate:
                    self.a_gates.append(SetServingGate(name=pod.name, uid=pod.uid, value=True))
            if all_ready:
                return "ready", evolve(op, waiting=None), None

        # deadline: parked while waiting on something outside the revision
        timeout = self.policy.ready_timeout
        if waiting is not None and waiting != "SourceUnrouted":
            op = evolve(op, waiting=waiting, deadline=None)
        else:
            op = evolve(op, waiting=None)
            if timeout is not None:
                deadline = op.deadline
                if deadline is None:
                    deadline = self.now + timeout
                    op = evolve(op, deadline=deadline)
                if self.now >= deadline:
                    return (
                        "failed",
                        op,
                        Failure(
                            reason="DeadlineExceeded",
                            message=f"Instance {index} was not ready within "
                            f"{int(timeout.total_seconds())}s",
                        ),
                    )
                self.wake.append(deadline)
        if not admitted:
            op = evolve(op, waiting=op.waiting or "QuotaExceeded")
        self.poll = True
        del multi
        return "progress", op, None

    def _pod_failure(self, pod: PodView, container: str, reason: str, c: Any) -> Failure:
        return Failure(
            reason=reason,
            message=c.waiting_message or f"container {container} of {pod.name}: {reason}",
            pod_name=pod.name,
            container_name=container,
            exit_code=c.terminated_exit_code,
            node=pod.node_name,
        )

    # ------------------------------------------------------------------ operations

    def _op(self, type_: str, step: str, target: str, reason: str, **kw: Any) -> InstanceOperation:
        return InstanceOperation(
            id=f"{type_.lower()}-{target.rsplit('-', 1)[-1]}-{format_time(self.now)}",
            type=type_,
            step=step,
            started_at=self.now,
            last_progress_at=self.now,
            target_revision=target,
            reason=reason,
            **kw,
        )

    def _record_failure(self, revision: str, failure: Failure) -> None:
        """Count a failed attempt against its revision's RetryBlock (and say so if Held)."""
        block = self.book.fail(revision, failure, self.now)
        if block.state == "Held" and revision in self.book.held_now:
            self.book.held_now.remove(revision)
            self.events.append(
                Event(
                    type="Warning",
                    reason="RetryHeld",
                    message=f"revision {revision} is held after {block.attempts_started} "
                    f"attempt(s): {failure.reason}",
                )
            )
        if block.next_retry_at is not None:
            self.wake.append(block.next_retry_at)

    def _fail_row(
        self, row: InstanceStatus, revision: str, failure: Failure, *, delete_pods: bool = True
    ) -> InstanceStatus:
        self._record_failure(revision, failure)
        self._maybe_relocate(row, failure)
        if delete_pods:
            self._drain(self.pods_by_index.get(row.index, ()), "AttemptFailed")
        self.events.append(
            Event(
                type="Warning",
                reason="InstanceFailed",
                message=f"Instance {row.index} failed on {revision}: {failure.reason}"
                + (f": {failure.message}" if failure.message else ""),
                instance=row.index,
            )
        )
        return evolve(
            row,
            phase="Failed",
            operation=None,
            ready_since=None,
            last_failure=InstanceTermination(
                pod_name=failure.pod_name,
                container_name=failure.container_name,
                reason=failure.reason,
                exit_code=failure.exit_code,
                message=failure.message[:1024],
                time=self.now,
            ),
        )

    def _maybe_relocate(self, row: InstanceStatus, failure: Failure) -> None:
        """A failed attempt that sat on one node, not the revision's fault, moves off it."""
        auto = self.config.auto_migrate
        if auto is None or failure.revision_fault or self.policy.migration_mode == "Never":
            return
        nodes = {
            p.node_name
            for p in self.pods_by_index.get(row.index, ())
            if p.node_name and not p.terminating
        }
        if len(nodes) != 1:
            return
        node = next(iter(nodes))
        past = [
            m
            for m in self.migrations.values()
            if m.trigger == "Auto" and m.source_instance == row.index
        ]
        if len(past) >= auto.max_attempts:
            self.events.append(
                Event(
                    type="Warning",
                    reason="AutoMigrationCapReached",
                    message=f"Instance {row.index} failed on {node} again; relocation budget "
                    f"({auto.max_attempts}) is spent",
                    instance=row.index,
                )
            )
            return
        uuid = f"relocate-{row.index}-{row.incarnation}-{format_time(self.now)}"
        self.migrations[uuid] = MigrationStatus(
            request_uuid=uuid,
            trigger="Auto",
            source_instance=row.index,
            from_node=node,
            phase="Relocated",
            attempt=len(past) + 1,
            reason=failure.reason,
            message=f"rebuilding off {node}",
            started_at=self.now,
        )
        self.events.append(
            Event(
                type="Normal",
                reason="AutoMigrationTriggered",
                message=f"Instance {row.index} failed with all pods on {node} "
                f"({failure.reason}); rebuilding it elsewhere",
                instance=row.index,
            )
        )

    def _relocation(self, index: int) -> MigrationStatus | None:
        """The open relocation record of an Instance, if any."""
        for m in self.migrations.values():
            if m.trigger == "Auto" and m.source_instance == index and m.succeeded is None:
                return m
        return None

    def _settle_ready(self, row: InstanceStatus, revision: str) -> InstanceStatus:
        self.book.succeed(revision)
        reloc = self._relocation(row.index)
        if reloc is not None:
            self.migrations[reloc.request_uuid] = evolve(
                reloc, succeeded=True, completed_at=self.now
            )
        ready_since = row.ready_since if row.phase == "Ready" and row.ready_since else self.now
        if (
            row.phase == "Ready"
            and row.operation is None
            and row.running_revision == revision
            and row.target_revision == revision
            and row.ready_since == ready_since
        ):
            return row
        return evolve(
            row,
            phase="Ready",
            operation=None,
            running_revision=revision,
            target_revision=revision,
            ready_since=ready_since,
        )

    def _advance(self, index: int) -> None:
        row = self.rows[index]
        op = row.operation
        if op is None:
            self.rows[index] = self._settled(row)
            return
        handler = {
            "Create": self._advance_create,
            "Restart": self._advance_restart,
            "Update": self._advance_update,
            "Delete": self._advance_delete,
            "Migrate": self._advance_migrate,
        }.get(op.type)
        if handler is None:
            self.rows[index] = evolve(row, operation=None)
            return
        result = handler(row, op)
        if result is None:
            del self.rows[index]
        else:
            self.rows[index] = result

    def _advance_create(self, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus | None:
        revision = op.target_revision
        if self.policy.freeze and op.reason == "Repair":
            return evolve(row, operation=evolve(op, waiting="Paused", deadline=None))
        outcome, op, failure = self._bring_up(
            row, op, revision, row.active_ordinal, paused_applies=op.reason != "Repair"
        )
        if outcome == "ready":
            settled = self._settle_ready(row, revision)
            if op.replaces is not None and op.replaces in self.rows:
                # a migration surge keeps its operation until the source has drained
                return evolve(settled, operation=evolve(op, waiting=None, deadline=None))
            return settled
        if outcome == "failed" and failure is not None:
            if op.replaces is not None:
                return self._abandon_surge(row, revision, failure)
            return self._fail_row(row, revision, failure)
        phase = "Restarting" if op.reason == "Repair" else "Creating"
        return evolve(row, phase=phase, operation=op, target_revision=revision)

    def _advance_restart(self, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus | None:
        if self.policy.freeze:
            return evolve(row, operation=evolve(op, waiting="Paused", deadline=None))
        if op.step == "Drain":
            old = [
                p
                for p in self.pods_by_index.get(row.index, ())
                if _pod_incarnation(p) < row.incarnation + 1
            ]
            if not self._drain(old, "InstanceRestart"):
                return evolve(row, phase="Restarting", operation=op)
            row = evolve(row, incarnation=row.incarnation + 1)
            op = evolve(op, step="CreatePods", deadline=None, last_progress_at=self.now)
        outcome, op, failure = self._bring_up(
            row, op, op.target_revision, row.active_ordinal, paused_applies=False
        )
        if outcome == "ready":
            return self._settle_ready(row, op.target_revision)
        if outcome == "failed" and failure is not None:
            return self._fail_row(row, op.target_revision, failure)
        return evolve(row, phase="Restarting", operation=op)

    def _advance_delete(self, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus | None:
        pods = self.pods_by_index.get(row.index, ())
        gone = self._drain(pods, op.reason or "ScaleDown")
        if gone and self._delete_pod_group(row.index):
            return None
        return evolve(row, phase="Deleting", operation=op)

    def _condemn(self, row: InstanceStatus, revision: str, reason: str) -> None:
        """Open a Delete operation on an Instance (drain, then delete) and take its first step."""
        self.rows[row.index] = evolve(
            row, phase="Deleting", operation=self._op("Delete", "Drain", revision, reason)
        )
        self._advance(row.index)

    def _abandon_surge(
        self, row: InstanceStatus, revision: str, failure: Failure
    ) -> InstanceStatus:
        """A replacement (update or migration surge) failed: remove it, keep the source."""
        op = row.operation
        source = op.replaces if op else None
        if op is not None and op.type == "Update":
            self._record_failure(revision, failure)
        self.events.append(
            Event(
                type="Warning",
                reason="GangSurgeAbandoned",
                message=f"replacement Instance {row.index} for Instance {source} failed: "
                f"{failure.reason}; the source keeps serving",
                instance=source,
            )
        )
        if source is not None and source in self.rows:
            src = self.rows[source]
            if src.operation is not None and src.operation.surge_index == row.index:
                self.rows[source] = evolve(src, operation=None, phase=self._steady_phase(src))
        for m in self.migrations.values():
            if m.surge_instance == row.index and m.phase in _ACTIVE_MIGRATION_PHASES:
                self._end_migration(m, "Failed", failure.reason, failure.message)
        return evolve(
            row,
            phase="Deleting",
            operation=self._op("Delete", "Drain", revision, "SurgeAbandoned"),
            last_failure=InstanceTermination(
                pod_name=failure.pod_name,
                reason=failure.reason,
                message=failure.message[:1024],
                time=self.now,
            ),
        )

    def _steady_phase(self, row: InstanceStatus) -> str:
        return "Ready" if self._all_ready(row) else ("Failed" if row.last_failure else "Pending")

    def _all_ready(self, row: InstanceStatus) -> bool:
        expected = self._expected(
            row.index, row.running_revision, row.incarnation, row.active_ordinal
        )
        if not expected:
            return False
        pods = {p.name: p for p in self.pods_by_index.get(row.index, ())}
        for name in expected:
            pod = pods.get(name)
            if pod is None or not pod.ready or pod.terminating:
                return False
            if not self._matches(pod, row.running_revision, row.incarnation):
                return False
        return True

    # ------------------------------------------------------------------ settled rows

    def _settled(self, row: InstanceStatus) -> InstanceStatus:
        """An Instance with no open operation: check its health, repair if needed."""
        index = row.index
        pods = self.pods_by_index.get(index, ())
        expected = (
            self._expected(index, row.running_revision, row.incarnation, row.active_ordinal)
            if row.running_revision
            else None
        )
        if expected is None:
            # nothing to run (new row, unknown revision): delete strays, stay Pending
            if pods:
                self._drain(pods, "StalePod")
            phase = row.phase if row.phase in ("Failed", "Pending") else "Pending"
            return evolve(row, phase=phase, ready_since=None)
        mine = {
            p.name: p
            for p in pods
            if p.name in expected and self._matches(p, row.running_revision, row.incarnation)
        }
        stray = [p for p in pods if p.name not in mine]
        if stray:
            self._drain(stray, "StalePod")
        if row.phase in ("Failed", "Pending") and not mine:
            return evolve(row, ready_since=None)
        lost: list[str] = []
        restarted = False
        wedged = False
        for name in expected:
            pod = mine.get(name)
            if pod is None or pod.terminating or pod.phase in ("Failed", "Succeeded"):
                lost.append(name)
                continue
            if self._node_lost(pod) and row.phase == "Ready":
                lost.append(name)
                continue
            baseline_raw = pod.labels.get(LABEL_RESTART_BASELINE, "0")
            baseline = int(baseline_raw) if baseline_raw.isdigit() else 0
            if sum(c.restart_count for c in pod.containers) > baseline:
                restarted = True
            for c in pod.containers:
                if c.waiting_reason in CRASH_REASONS:
                    grace = self.config.stuck_pod_grace_period
                    since = pod.creation_timestamp or self.now
                    if grace is not None and self.now >= since + grace:
                        wedged = True
                    elif grace is not None:
                        self.wake.append(since + grace)
        if row.phase == "Failed":
            # a failed restart waits for its pods to become ready, a reset or a new revision
            if not lost and all(p.ready for p in mine.values()):
                return self._settle_ready(row, row.running_revision)
            return row
        whole = self.policy.restart_policy == RECREATE_ON_RESTART and self.policy.multi_pod
        needs_restart = wedged or (whole and (lost or restarted))
        if needs_restart and not self.policy.freeze:
            if wedged and not self._repair_budget_ok(index):
                self.events.append(
                    Event(
                        type="Normal",
                        reason="RepairHeld",
                        message=f"Instance {index} needs a restart; waiting for the "
                        "maxUnavailable budget",
                        instance=index,
                    )
                )
                self.poll = True
                return evolve(row, phase=self._steady_phase(row))
            why = "pod lost" if lost else ("container restarted" if restarted else "crash loop")
            self.events.append(
                Event(
                    type="Normal",
                    reason="InstanceRestart",
                    message=f"restarting Instance {index} whole ({why}) at incarnation "
                    f"{row.incarnation + 1}",
                    instance=index,
                )
            )
            self._drain([p for p in pods if p.name in mine], "InstanceRestart")
            return evolve(
                row,
                phase="Restarting",
                ready_since=None,
                operation=self._op("Restart", "Drain", row.running_revision, why),
            )
        if lost and not self.policy.freeze:
            # restartPolicy None: replace only the lost pods, at the same incarnation
            for name in lost:
                pod = mine.get(name)
                if pod is not None:
                    self._drain([pod], "PodLost")
            if len(lost) == len(expected):
                return evolve(
                    row,
                    phase="Pending",
                    ready_since=None,
                    operation=self._op("Create", "CreatePods", row.running_revision, "Rebuild"),
                )
            return evolve(
                row,
                phase="Restarting",
                operation=self._op("Create", "CreatePods", row.running_revision, "Repair"),
            )
        if all(p.ready for p in mine.values()) and len(mine) == len(expected):
            return self._settle_ready(row, row.running_revision)
        # not all ready (a pod's readiness flapped): gate stays as is, Instance not Ready
        for pod in mine.values():
            if (
                pod.containers_ready
                and not pod.serving_gate
                and all(q.containers_ready for q in mine.values())
            ):
                self.a_gates.append(SetServingGate(name=pod.name, uid=pod.uid, value=True))
        phase = "Ready" if row.phase == "Ready" and not lost else row.phase
        if phase == "Ready" and not all(p.ready for p in mine.values()):
            phase = "Creating" if row.phase != "Ready" else "Ready"
        return row if row.phase == phase else evolve(row, phase=phase)

    def _repair_budget_ok(self, index: int) -> bool:
        unavailable = sum(
            1
            for r in self.rows.values()
            if r.index != index and r.phase != "Ready" and self._is_member(r)
        )
        return unavailable < self.policy.max_unavailable

    # ------------------------------------------------------------------ updates

    def _advance_update(self, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus | None:
        target = op.target_revision
        step = op.step
        if step == "GangSurgeTarget":
            # this row is the replacement being built
            outcome, op, failure = self._bring_up(
                row, op, target, row.active_ordinal, paused_applies=True
            )
            if outcome == "failed" and failure is not None:
                return self._abandon_surge(row, target, failure)
            if outcome == "ready":
                self.book.succeed(target)
                since = row.ready_since or self.now
                source = self.rows.get(op.replaces) if op.replaces is not None else None
                if source is None:
                    return evolve(
                        row,
                        phase="Ready",
                        operation=None,
                        running_revision=target,
                        target_revision=target,
                        ready_since=since,
                    )
                return evolve(
                    row,
                    phase="Ready",
                    ready_since=since,
                    running_revision=target,
                    operation=evolve(op, waiting=None, deadline=None),
                )
            return evolve(row, phase="Creating", operation=op)
        if step == "GangSurge":
            # this row is the source, waiting for its replacement to serve
            surge = self.rows.get(op.surge_index) if op.surge_index is not None else None
            if surge is None or surge.operation is None or surge.operation.replaces != row.index:
                return evolve(row, operation=None, phase=self._steady_phase(row))
            if surge.phase == "Ready" and self._available(surge):
                op = evolve(op, step="Drain", last_progress_at=self.now)
                step = "Drain"
            else:
                if surge.phase == "Ready" and surge.ready_since is not None:
                    self.wake.append(surge.ready_since + self.policy.min_ready)
                return evolve(row, phase="Updating", operation=op)
        if step == "Drain" and op.strategy == "SurgeThenDrain" and op.surge_index is not None:
            if self.policy.paused:
                return evolve(row, phase="Updating", operation=op)
            gone = self._drain(self.pods_by_index.get(row.index, ()), "Replaced")
            if gone and self._delete_pod_group(row.index):
                surge = self.rows.get(op.surge_index)
                if surge is not None and surge.operation is not None:
                    self.rows[op.surge_index] = evolve(surge, operation=None)
                return None
            return evolve(row, phase="Updating", operation=op)
        if step in ("Surge", "SurgeDrain"):
            return self._advance_single_surge(row, op)
        if step == "InPlace":
            return self._advance_in_place(row, op)
        if step == "Drain":
            # RecreatePod: drain and delete, then create at the next incarnation
            if self.policy.paused:
                return evolve(row, phase="Updating", operation=op)
            if not self._drain(self.pods_by_index.get(row.index, ()), "RecreatePod"):
                return evolve(row, phase="Updating", operation=op)
            row = evolve(row, incarnation=row.incarnation + 1, active_ordinal=0)
            op = evolve(op, step="CreatePods", deadline=None, last_progress_at=self.now)
        if op.step == "CreatePods":
            outcome, op, failure = self._bring_up(row, op, target, 0, paused_applies=True)
            if outcome == "ready":
                return self._settle_ready(row, target)
            if outcome == "failed" and failure is not None:
                return self._fail_row(row, target, failure)
            return evolve(row, phase="Updating", operation=op)
        return evolve(row, operation=None, phase=self._steady_phase(row))

    def _advance_single_surge(
        self, row: InstanceStatus, op: InstanceOperation
    ) -> InstanceStatus | None:
        target = op.target_revision
        surge_slot = 1 - row.active_ordinal
        if op.step == "Surge":
            surge_row = evolve(row, incarnation=row.incarnation)
            outcome, op, failure = self._bring_up(
                surge_row, op, target, surge_slot, paused_applies=True
            )
            if outcome == "failed" and failure is not None:
                self._record_failure(target, failure)
                expected = self._expected(row.index, target, row.incarnation, surge_slot) or {}
                self._drain(
                    [
                        p
                        for p in self.pods_by_index.get(row.index, ())
                        if p.name in expected and self._matches(p, target, row.incarnation)
                    ],
                    "SurgeFailed",
                )
                self.events.append(
                    Event(
                        type="Warning",
                        reason="SurgeAbandoned",
                        message=f"surge pod for Instance {row.index} failed: {failure.reason}",
                        instance=row.index,
                    )
                )
                return evolve(
                    row,
                    operation=None,
                    phase=self._steady_phase(row),
                    last_failure=InstanceTermination(
                        pod_name=failure.pod_name,
                        reason=failure.reason,
                        message=failure.message[:1024],
                        time=self.now,
                    ),
                )
            if outcome != "ready":
                return evolve(row, phase="Updating", operation=op)
            self.book.succeed(target)
            op = evolve(op, step="SurgeDrain", last_progress_at=self.now, deadline=None)
        # SurgeDrain: the surge pod serves; drain the old one
        if self.policy.paused:
            return evolve(row, phase="Updating", operation=op)
        old = self._expected(row.index, row.running_revision, row.incarnation, row.active_ordinal)
        old_pods = [
            p for p in self.pods_by_index.get(row.index, ()) if old is not None and p.name in old
        ]
        if not self._drain(old_pods, "Replaced"):
            return evolve(row, phase="Updating", operation=op)
        return evolve(
            row,
            phase="Ready",
            operation=None,
            active_ordinal=surge_slot,
            running_revision=target,
            target_revision=target,
            ready_since=row.ready_since or self.now,
        )

    def _advance_in_place(
        self, row: InstanceStatus, op: InstanceOperation
    ) -> InstanceStatus | None:
        target = op.target_revision
        runners = self._runners(target)
        pods = [p for p in self.pods_by_index.get(row.index, ()) if not p.terminating]
        if runners is None:
            return evolve(row, operation=None)
        by_runner = {r.name: r for r in runners}
        pending = [p for p in pods if p.labels.get(LABEL_REVISION_HASH) != hash_of(target)]
        if pending:
            if self.policy.paused:
                return evolve(row, phase="Updating", operation=op)
            for pod in pending:
                if self.policy.mark_not_ready_in_place and pod.serving_gate:
                    self.a_gates.append(SetServingGate(name=pod.name, uid=pod.uid, value=False))
                    continue
                runner = by_runner.get(pod.labels.get(LABEL_RUNNER, ""))
                if runner is None:
                    continue
                images = _images(runner)
                changed = sum(
                    1 for c in pod.containers if c.name in images and c.image != images[c.name]
                )
                baseline = sum(c.restart_count for c in pod.containers) + changed
                self.a_patches.append(
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
            self.poll = True
            return evolve(row, phase="Updating", operation=op)
        updated = evolve(row, running_revision=target)
        outcome, op, failure = self._bring_up(
            updated, op, target, row.active_ordinal, paused_applies=False
        )
        if outcome == "ready":
            return self._settle_ready(updated, target)
        if outcome == "failed" and failure is not None:
            return self._fail_row(updated, target, failure)
        return evolve(updated, phase="Updating", operation=op)

    def _in_place_possible(self, row: InstanceStatus) -> bool:
        old = self._runners(row.running_revision)
        new = self._runners(self.target)
        if old is None or new is None:
            return False
        return _strip_images(old) == _strip_images(new)

    # ------------------------------------------------------------------ membership

    def _is_surge_target(self, row: InstanceStatus) -> bool:
        op = row.operation
        return op is not None and op.replaces is not None and op.type in ("Update", "Create")

    def _is_member(self, row: InstanceStatus) -> bool:
        op = row.operation
        if op is not None and op.type == "Delete":
            return False
        return not self._is_surge_target(row)

    def _members(self) -> list[InstanceStatus]:
        return [r for r in self.rows.values() if self._is_member(r)]

    def _free_index(self, start: int = 0) -> int:
        """The lowest index at or above ``start`` that no row or pod uses, now reserved."""
        used = self._used_indexes
        if used is None:
            used = self._used_indexes = set(self.rows) | set(self.pods_by_index)
        i = max(start, self._free_cursor) if start <= self._free_cursor else start
        while i in used:
            i += 1
        used.add(i)
        if start <= self._free_cursor:
            self._free_cursor = i + 1
        return i

    def _available(self, row: InstanceStatus) -> bool:
        if row.phase != "Ready" or row.ready_since is None:
            return False
        return self.now >= row.ready_since + self.policy.min_ready

    # ------------------------------------------------------------------ starting work

    def _start_attempt(self, revision: str) -> bool:
        if not self.book.may_start(revision, self.now):
            return False
        self.book.claim(revision)
        return True

    def _rebuilds(self) -> None:
        """Failed or Pending members with no operation get a new attempt when allowed."""
        for index in sorted(self.rows):
            row = self.rows[index]
            if row.operation is not None or row.phase not in ("Failed", "Pending"):
                continue
            if not self._is_member(row):
                continue
            target = self.target
            if index < self.policy.partition and row.running_revision in self.runners_by_rev:
                target = row.running_revision
            pods = self.pods_by_index.get(index)
            if pods:
                if (
                    row.phase == "Failed"
                    and row.running_revision == target
                    and any(not p.terminating for p in pods)
                ):
                    continue  # a failed restart keeps its pods until ready, reset or replaced
                self._drain(pods, "Rebuild")
                self.poll = True
                continue
            if self.policy.paused:
                continue
            if not self._start_attempt(target):
                nxt = self.book.next_retry(target)
                if nxt is not None:
                    self.wake.append(nxt)
                continue
            self.rows[index] = evolve(
                row,
                phase="Creating",
                target_revision=target,
                operation=self._op(
                    "Create",
                    "CreatePods",
                    target,
                    "Rebuild",
                    from_node=reloc.from_node if (reloc := self._relocation(index)) else None,
                ),
            )
            self._advance(index)

    def _scale(self) -> None:
        members = sorted(self._members(), key=lambda r: r.index)
        desired = self.policy.desired
        if len(members) > desired:
            for row in sorted(members, key=lambda r: r.index, reverse=True)[
                : len(members) - desired
            ]:
                op = row.operation
                if op is not None and op.surge_index is not None:
                    surge = self.rows.get(op.surge_index)
                    if surge is not None:
                        self._condemn(surge, self.target, "ScaleDown")
                self.events.append(
                    Event(
                        type="Normal",
                        reason="ScaleDown",
                        message=f"draining Instance {row.index} (replicas {desired})",
                        instance=row.index,
                    )
                )
                self._condemn(row, row.running_revision or self.target, "ScaleDown")
            return
        if self.policy.paused:
            return
        for _ in range(desired - len(members)):
            index = self._free_index()
            revision = self._new_instance_revision(index)
            if not self._start_attempt(revision):
                nxt = self.book.next_retry(revision)
                if nxt is not None:
                    self.wake.append(nxt)
                self._set_hold(
                    "RetryBlock" if self.book.state(revision) != "Held" else "Held",
                    f"revision {revision} is {self.book.state(revision)}",
                )
                return
            self.rows[index] = InstanceStatus(
                index=index,
                incarnation=1,
                phase="Creating",
                target_revision=revision,
                operation=self._op("Create", "CreatePods", revision, "ScaleUp"),
            )
            self._advance(index)

    def _new_instance_revision(self, index: int) -> str:
        """The revision a new Instance at ``index`` starts on.

        Below the partition the N lowest indexes stay on the prior revision, so a scale-up
        during a staged rollout (a canary step) adds prior-revision Instances there rather
        than growing the canary past its step; at or above it, the target.
        """
        current = self.prev.current_revision
        if (
            index < self.policy.partition
            and current
            and current != self.target
            and current in self.runners_by_rev
        ):
            return current
        return self.target

    def _set_hold(self, gate: str, reason: str) -> None:
        if self.hold is None:
            self.hold = RolloutHold(gate=gate, reason=reason, target=self.target)

    def _updates(self) -> None:
        target = self.target
        members = self._members()
        stale = sorted(
            (
                r
                for r in members
                if r.running_revision != target and r.index >= self.policy.partition
            ),
            key=lambda r: r.index,
            reverse=True,
        )
        # Creating attempts pinned to a revision that is no longer the target restart at it
        for row in stale:
            op = row.operation
            if op is not None and op.type == "Create" and op.target_revision != target:
                self._drain(self.pods_by_index.get(row.index, ()), "Retarget")
                self.rows[row.index] = evolve(row, operation=None, phase="Pending")
        candidates = [r for r in stale if r.operation is None and r.phase == "Ready"]
        if not candidates:
            return
        if self.policy.paused:
            self._set_hold("Plan", "rollout paused")
            return
        state = self.book.state(target)
        if state == "Held":
            self._set_hold("Held", f"revision {target} is held: {self.book.blocks[target].reason}")
            return
        strategy = self.policy.strategy
        if strategy in ("InPlaceIfPossible", "InPlaceOnly"):
            possible = [r for r in candidates if self._in_place_possible(r)]
            if strategy == "InPlaceOnly" and len(possible) < len(candidates):
                self.extra_conditions["FailedUpdate"] = (
                    "True",
                    "InPlaceNotPossible",
                    "updateStrategy InPlaceOnly: the new revision changes more than container "
                    "images, so it cannot be applied in place",
                )
                self._set_hold("Plan", "InPlaceOnly cannot apply this revision in place")
                candidates = possible
            budget = self.policy.max_unavailable - self._unavailable()
            for row in candidates:
                if row in possible:
                    if budget <= 0:
                        self._set_hold("Budget", "maxUnavailable reached")
                        break
                    if not self._start_attempt(target):
                        self._hold_retry(target)
                        break
                    budget -= 1
                    self.rows[row.index] = evolve(
                        row,
                        phase="Updating",
                        operation=self._op(
                            "Update", "InPlace", target, "InPlaceUpdate", strategy=strategy
                        ),
                    )
                    self._advance(row.index)
            candidates = [r for r in candidates if r not in possible]
            if strategy == "InPlaceOnly":
                return
            strategy = "SurgeThenDrain"
        if strategy == "RecreatePod":
            budget = self.policy.max_unavailable - self._unavailable()
            for row in candidates:
                if budget <= 0:
                    self._set_hold(
                        "Budget", f"maxUnavailable {self.policy.max_unavailable} reached"
                    )
                    return
                if not self._start_attempt(target):
                    self._hold_retry(target)
                    return
                budget -= 1
                self.rows[row.index] = evolve(
                    row,
                    phase="Updating",
                    ready_since=None,
                    operation=self._op(
                        "Update", "Drain", target, "RecreatePod", strategy="RecreatePod"
                    ),
                )
                self._advance(row.index)
            return
        # SurgeThenDrain
        in_flight = sum(
            1
            for r in self.rows.values()
            if r.operation is not None
            and r.operation.type == "Update"
            and r.operation.step in ("GangSurge", "Surge", "SurgeDrain", "Drain")
            and r.operation.strategy == "SurgeThenDrain"
        )
        room = self.policy.max_surge - in_flight
        for row in candidates:
            if room <= 0:
                stuck = any(
                    r.operation is not None
                    and r.operation.waiting == "Unschedulable"
                    and self._is_surge_target(r)
                    for r in self.rows.values()
                )
                self._set_hold(
                    "Budget",
                    "no room to surge: replacement pods are unschedulable"
                    if stuck
                    else f"maxSurge {self.policy.max_surge} replacement(s) in flight",
                )
                return
            if not self._start_attempt(target):
                self._hold_retry(target)
                return
            room -= 1
            if self.policy.multi_pod or is_multi_pod(self._runners(target) or ()):
                # at or above the partition, so the replacement is not "below" it
                new_index = self._free_index(self.policy.partition)
                self.rows[new_index] = InstanceStatus(
                    index=new_index,
                    incarnation=1,
                    phase="Creating",
                    target_revision=target,
                    operation=self._op(
                        "Update",
                        "GangSurgeTarget",
                        target,
                        "GangSurge",
                        strategy="SurgeThenDrain",
                        replaces=row.index,
                    ),
                )
                self.rows[row.index] = evolve(
                    row,
                    phase="Updating",
                    target_revision=target,
                    operation=self._op(
                        "Update",
                        "GangSurge",
                        target,
                        "SurgeThenDrain",
                        strategy="SurgeThenDrain",
                        surge_index=new_index,
                    ),
                )
                self._advance(new_index)
            else:
                self.rows[row.index] = evolve(
                    row,
                    phase="Updating",
                    target_revision=target,
                    operation=self._op(
                        "Update", "Surge", target, "SurgeThenDrain", strategy="SurgeThenDrain"
                    ),
                )
                self._advance(row.index)

    def _hold_retry(self, target: str) -> None:
        nxt = self.book.next_retry(target)
        if nxt is not None:
            self.wake.append(nxt)
        self._set_hold("RetryBlock", f"revision {target} is backing off after a failure")

    def _unavailable(self) -> int:
        return sum(
            1
            for r in self.rows.values()
            if self._is_member(r)
            and (r.phase != "Ready" or r.operation is not None or not self._available(r))
        )

    # ------------------------------------------------------------------ annotations

    def _annotations(self) -> None:
        ann = self.ir.metadata.annotations
        consumed: list[str] = []
        release = ann.get(ANNOTATION_RELEASE_HELD)
        if release:
            names = (
                [
                    n
                    for n in self.book.blocks
                    if n == release or hash_of(n) == release or hash_of(n).startswith(release)
                ]
                if len(release) >= 8
                else []
            )
            released = [n for n in names if self.book.release(n)]
            if released:
                self.events.append(
                    Event(
                        type="Normal",
                        reason="RetryBlockReleased",
                        message=f"released held revision {', '.join(released)}",
                    )
                )
            else:
                self.events.append(
                    Event(
                        type="Warning",
                        reason="RetryBlockReleaseSkipped",
                        message=f"{ANNOTATION_RELEASE_HELD}={release!r}: no held revision "
                        "by that name or hash",
                    )
                )
            consumed.append(ANNOTATION_RELEASE_HELD)
        reset = ann.get(ANNOTATION_RESET)
        if reset is not None:
            self._reset(reset)
            consumed.append(ANNOTATION_RESET)
        for key, value in sorted(ann.items()):
            if key.startswith(ANNOTATION_MIGRATION_PREFIX):
                self._accept_migration(key[len(ANNOTATION_MIGRATION_PREFIX) :], value)
                consumed.append(key)
        if consumed:
            self.a_meta_last.append(RemoveAnnotations(keys=tuple(consumed)))

    def _reset(self, value: str) -> None:
        if value == "all":
            wanted = sorted(self.rows)
        else:
            try:
                wanted = sorted({int(v) for v in value.split(",")})
            except ValueError:
                self.events.append(
                    Event(
                        type="Warning",
                        reason="InstancesResetRejected",
                        message=f"{ANNOTATION_RESET}={value!r}: expected 'all' or "
                        "comma-separated Instance indexes",
                    )
                )
                return
        done: list[int] = []
        skipped: list[str] = []
        for index in wanted:
            row = self.rows.get(index)
            if row is None:
                skipped.append(f"{index}: no such instance")
                continue
            if row.phase != "Failed":
                skipped.append(f"{index}: Phase={row.phase}")
                continue
            if row.operation is not None and row.operation.type in ("Update", "Migrate", "Delete"):
                skipped.append(f"{index}: owned by {row.operation.type}")
                continue
            self._drain(self.pods_by_index.get(index, ()), "Reset")
            self.rows[index] = evolve(row, phase="Pending", operation=None, last_failure=None)
            block = self.book.blocks.get(row.target_revision or self.target)
            if block is not None and block.state == "Backoff":
                self.book.blocks[block.target_revision] = evolve(block, next_retry_at=self.now)
            done.append(index)
        if done:
            self.events.append(
                Event(
                    type="Normal",
                    reason="InstancesReset",
                    message=f"reset Failed Instance(s) {', '.join(map(str, done))}",
                )
            )
        if skipped or not done:
            self.events.append(
                Event(
                    type="Normal",
                    reason="InstancesResetSkipped",
                    message="; ".join(skipped) or "nothing to reset",
                )
            )

    # ------------------------------------------------------------------ migrations

    def _accept_migration(self, uuid: str, value: str) -> None:
        if uuid in self.migrations:
            return
        try:
            req = json.loads(value)
            if not isinstance(req, Mapping):
                raise ValueError("not an object")
            instance = int(req["instance"])
            hints = tuple(str(h) for h in req.get("hint_target_nodes") or ())
            from_node = req.get("from_node")
        except (ValueError, KeyError, TypeError) as exc:
            self.events.append(
                Event(
                    type="Warning",
                    reason="MigrationRejected",
                    message=f"migration request {uuid}: malformed ({exc})",
                )
            )
            return
        record = MigrationStatus(
            request_uuid=uuid,
            trigger="Manual",
            source_instance=instance,
            from_node=str(from_node) if from_node else None,
            hint_target_nodes=hints,
            phase="Accepted",
            reason=str(req.get("reason", "")),
            requested_by=str(req.get("requested_by", "")),
            started_at=self.now,
            deadline=self.now + self.policy.ready_timeout if self.policy.ready_timeout else None,
        )
        if self.policy.migration_mode == "Never":
            record = evolve(
                record,
                phase="Failed",
                message="MigrationDisabled: lifecycle.migrationPolicy.mode is Never",
                completed_at=self.now,
                succeeded=False,
            )
        elif instance not in self.rows or not self._is_member(self.rows[instance]):
            record = evolve(
                record,
                phase="Failed",
                message=f"no Instance {instance}",
                completed_at=self.now,
                succeeded=False,
            )
        self.migrations[uuid] = record
        self.events.append(
            Event(
                type="Normal",
                reason="MigrationAccepted",
                message=f"migration {uuid} of Instance {instance} is {record.phase}",
                instance=instance,
            )
        )

    def _end_migration(self, m: MigrationStatus, phase: str, reason: str, message: str) -> None:
        done = evolve(
            m,
            phase=phase,
            completed_at=self.now,
            succeeded=phase == "Completed",
            message=message or m.message,
        )
        self.migrations[m.request_uuid] = done
        self.audit.append(
            {
                "requestUUID": m.request_uuid,
                "component": self.spec.component,
                "sourceInstance": m.source_instance,
                "phase": phase,
                "reason": reason or m.reason,
                "fromNode": m.from_node,
                "startedAt": format_time(m.started_at or self.now),
                "completedAt": format_time(self.now),
                "outcome": "succeeded" if phase == "Completed" else "failed",
            }
        )

    def _progress_migrations(self) -> None:
        for m in [m for m in self.migrations.values() if m.phase in _ACTIVE_MIGRATION_PHASES]:
            self._progress_migration(m)

    def _migrations(self) -> None:
        audit = self.config.audit
        accepted = sorted(
            (m for m in self.migrations.values() if m.phase == "Accepted"),
            key=lambda m: (m.started_at or self.now, m.request_uuid),
        )
        if accepted and audit is None:
            self.extra_conditions["MigrationPolicyUnconfigured"] = (
                "True",
                "MigrationCapacityUnconfigured",
                "migration requests wait in Accepted until lifecycle.audit caps are configured",
            )
        if audit is not None and not self.policy.paused:
            in_flight = sum(
                1 for m in self.migrations.values() if m.phase in _ACTIVE_MIGRATION_PHASES
            )
            window_start = self.now - audit.window
            started = sum(
                1
                for m in self.migrations.values()
                if m.allocated_at is not None and m.allocated_at > window_start
            )
            for m in accepted:
                if in_flight >= audit.max_in_flight_migrations:
                    break
                if started >= audit.max_migrations_per_window:
                    break
                source = self.rows.get(m.source_instance)
                if source is None or source.phase != "Ready" or source.operation is not None:
                    if source is None:
                        self._end_migration(
                            m,
                            "Failed",
                            "SourceGone",
                            f"Instance {m.source_instance} no longer exists",
                        )
                    continue
                surge_index = self._free_index()
                self.rows[surge_index] = InstanceStatus(
                    index=surge_index,
                    incarnation=1,
                    phase="Creating",
                    target_revision=source.running_revision,
                    operation=self._op(
                        "Create",
                        "CreatePods",
                        source.running_revision,
                        "MigrationSurge",
                        replaces=source.index,
                        from_node=m.from_node,
                        hint_target_nodes=m.hint_target_nodes,
                        request_uuid=m.request_uuid,
                    ),
                )
                self.rows[source.index] = evolve(
                    source,
                    phase="Migrating",
                    operation=self._op(
                        "Migrate",
                        "CreateSurge",
                        source.running_revision,
                        "Migration",
                        surge_index=surge_index,
                        from_node=m.from_node,
                        hint_target_nodes=m.hint_target_nodes,
                        request_uuid=m.request_uuid,
                    ),
                )
                self.migrations[m.request_uuid] = evolve(
                    m,
                    phase="SurgePending",
                    surge_instance=surge_index,
                    allocated_at=self.now,
                    attempt=m.attempt + 1,
                )
                self._advance(surge_index)
                in_flight += 1
                started += 1
        # prune terminal records older than the window
        window = audit.window if audit is not None else timedelta(hours=1)
        for uuid, m in list(self.migrations.items()):
            if m.phase in _TERMINAL_MIGRATION_PHASES and m.completed_at is not None:
                if self.now >= m.completed_at + window:
                    del self.migrations[uuid]
                else:
                    self.wake.append(m.completed_at + window)

    def _progress_migration(self, m: MigrationStatus) -> None:
        surge = self.rows.get(m.surge_instance) if m.surge_instance is not None else None
        source = self.rows.get(m.source_instance)
        condemned = [
            r
            for r in (source, surge)
            if r is not None and r.operation is not None and r.operation.type == "Delete"
        ]
        if condemned and m.phase != "Draining":
            # scale-down or teardown took the source or its replacement: the move is moot
            for r in (source, surge):
                if r is not None and r not in condemned:
                    if r is surge:
                        self._condemn(r, r.target_revision, "MigrationCancelled")
                    elif r.operation is not None and r.operation.type == "Migrate":
                        self.rows[r.index] = evolve(r, operation=None, phase=self._steady_phase(r))
            self._end_migration(
                m, "Failed", "Cancelled", "the source or its replacement is being removed"
            )
            return
        if m.deadline is not None and self.now >= m.deadline and m.phase == "SurgePending":
            if surge is not None:
                self._condemn(surge, surge.target_revision, "MigrationFailed")
            if source is not None and source.operation is not None:
                self.rows[source.index] = evolve(
                    source, operation=None, phase=self._steady_phase(source)
                )
            self._end_migration(
                m, "Failed", "DeadlineExceeded", "the replacement was not ready before the deadline"
            )
            return
        if m.deadline is not None and m.phase == "SurgePending":
            self.wake.append(m.deadline)
        if surge is None:
            if (
                source is not None
                and source.operation is not None
                and source.operation.type == "Migrate"
            ):
                self.rows[source.index] = evolve(
                    source, operation=None, phase=self._steady_phase(source)
                )
            if m.phase != "Draining":
                self._end_migration(m, "Failed", "SurgeGone", "the replacement went away")
            return
        if source is None:
            if surge.operation is not None:
                self.rows[surge.index] = evolve(surge, operation=None)
            self._end_migration(m, "Completed", m.reason, "")
            return
        if m.phase == "SurgePending" and surge.phase == "Ready":
            m = evolve(m, phase="SurgeReady")
            self.migrations[m.request_uuid] = m
        if m.phase == "SurgeReady" and self._available(surge):
            m = evolve(m, phase="Draining")
            self.migrations[m.request_uuid] = m
            if source.operation is not None:
                self.rows[source.index] = evolve(
                    source,
                    operation=evolve(source.operation, step="Drain"),
                )
                self._advance(source.index)

    def _advance_migrate(self, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus | None:
        if op.step != "Drain" or self.policy.paused:
            return evolve(row, phase="Migrating")
        gone = self._drain(self.pods_by_index.get(row.index, ()), "Migrated")
        if gone and self._delete_pod_group(row.index):
            surge = self.rows.get(op.surge_index) if op.surge_index is not None else None
            if surge is not None and surge.operation is not None:
                self.rows[surge.index] = evolve(surge, operation=None)
            m = self.migrations.get(op.request_uuid or "")
            if m is not None:
                self._end_migration(m, "Completed", m.reason, "")
            return None
        return evolve(row, phase="Migrating", operation=op)

    # ------------------------------------------------------------------ teardown

    def _teardown(self) -> None:
        deleted_at = self.ir.metadata.deletion_timestamp
        for index in sorted(self.rows):
            row = self.rows[index]
            if row.operation is None or row.operation.type != "Delete":
                self._condemn(row, row.running_revision or self.target, "Teardown")
            else:
                self._advance(index)
        leftover_groups = [pg for pg in self.snap.pod_groups.values() if not pg.deleting]
        for pg in leftover_groups:
            self.a_podgroup_deletes.append(DeletePodGroup(name=pg.name, uid=pg.uid))
        clean = not self.rows and not self.snap.pods and not self.snap.pod_groups
        deadline = self.config.teardown.deadline
        overdue = (
            deadline is not None and deleted_at is not None and self.now >= deleted_at + deadline
        )
        if FINALIZER in self.ir.metadata.finalizers:
            if clean or overdue:
                if overdue and not clean:
                    self.events.append(
                        Event(
                            type="Warning",
                            reason="TeardownDeadlineExceeded",
                            message="teardown.deadline passed; releasing the finalizer with "
                            "pods still present",
                        )
                    )
                self.a_meta_last.append(SetFinalizer(present=False))
            elif deadline is not None and deleted_at is not None:
                self.wake.append(deleted_at + deadline)
        self.poll = self.poll or not clean

    def _cleanup_orphan_pod_groups(self) -> None:
        for pg in self.snap.pod_groups.values():
            raw = pg.labels.get(LABEL_INSTANCE_INDEX, "")
            if (
                raw.isdigit()
                and int(raw) not in self.rows
                and not pg.deleting
                and not self.pods_by_index.get(int(raw))
            ):
                self.a_podgroup_deletes.append(DeletePodGroup(name=pg.name, uid=pg.uid))

    def _targeted_revisions(self) -> set[str]:
        revs = {self.target}
        for row in self.rows.values():
            if row.operation is not None:
                revs.add(row.operation.target_revision)
        return revs

    def _prune_revisions(self) -> None:
        live = {self.target, self.spec_revision}
        for row in self.rows.values():
            live.add(row.running_revision)
            live.add(row.target_revision)
        if self.prev.current_revision:
            live.add(self.prev.current_revision)
        for view in revisions_to_prune(
            self.snap.revisions, live, self.policy.revision_history_limit
        ):
            self.a_revision_deletes.append(DeleteRevision(name=view.name, uid=view.uid))

    # ------------------------------------------------------------------ status

    def _invalid_plan(self, reasons: tuple[str, ...]) -> Plan:
        message = "; ".join(reasons)
        reason = reasons[0].split(":", 1)[0] if reasons else "InvalidSpec"
        status = evolve(
            self.prev,
            observed_generation=self.ir.metadata.generation,
            conditions=build_conditions(
                self.prev.conditions,
                {"Ready": ("False", reason, message)},
                self.now,
                self.ir.metadata.generation,
                replace_all=False,
            ),
        )
        actions: tuple[Action, ...] = ()
        events: tuple[Event, ...] = ()
        if status != self.prev:
            actions = (UpdateStatus(status=status),)
            events = (Event(type="Warning", reason=reason, message=message),)
        return Plan(actions=actions, status=status, events=events)

    def _finish(self) -> Plan:
        rows = tuple(self.rows[i] for i in sorted(self.rows))
        rows = tuple(self._counts(r) for r in rows)
        members = [r for r in rows if self._is_member(r)]
        ready = [
            r
            for r in rows
            if r.phase == "Ready" or (r.phase in ("Updating", "Migrating") and self._all_ready(r))
        ]
        serving = [r for r in rows if self._serving(r)]
        available = [r for r in ready if self._available(r)]
        updated = [r for r in rows if r.running_revision == self.target]
        for r in ready:
            if not self._available(r) and r.ready_since is not None:
                self.wake.append(r.ready_since + self.policy.min_ready)
        current = self.prev.current_revision
        if members and all(r.running_revision == self.target for r in members):
            current = self.target
        elif not current or not any(r.running_revision == current for r in rows):
            counts: dict[str, int] = defaultdict(int)
            for r in members:
                if r.running_revision:
                    counts[r.running_revision] += 1
            current = max(sorted(counts), key=lambda k: counts[k]) if counts else self.target
        hold = self.hold
        if hold is not None and self.prev.rollout_hold is not None:
            prev = self.prev.rollout_hold
            if prev.gate == hold.gate and prev.target == hold.target:
                hold = evolve(hold, since=prev.since)
            else:
                hold = evolve(hold, since=self.now)
        elif hold is not None:
            hold = evolve(hold, since=self.now)
        # the Budget gate also covers surges parked on Unschedulable
        if hold is None and any(
            r.operation is not None
            and r.operation.waiting == "Unschedulable"
            and self._is_surge_target(r)
            for r in rows
        ):
            hold = RolloutHold(
                gate="Budget",
                reason="surge pods are unschedulable: no room",
                target=self.target,
                since=(
                    self.prev.rollout_hold.since
                    if self.prev.rollout_hold and self.prev.rollout_hold.gate == "Budget"
                    else self.now
                ),
            )
        desired = self.policy.desired
        conds = self._conditions(rows, members, ready, available, updated)
        status = InferenceReplicaStatus(
            observed_generation=self.ir.metadata.generation,
            replicas=len(rows),
            ready_replicas=len(ready),
            serving_replicas=len(serving),
            available_replicas=len(available),
            updated_replicas=len(updated),
            updated_ready_replicas=sum(1 for r in updated if r.phase == "Ready"),
            current_revision=current,
            update_revision=self.target,
            collision_count=self.collision_count,
            label_selector=f"ome.io/inferencereplica={self.ir.metadata.name}",
            instances=rows,
            retry_blocks=self.book.result(),
            migrations=tuple(self.migrations[k] for k in sorted(self.migrations)),
            conditions=conds,
            traffic=self.prev.traffic,
            coordination_group_ref=self.prev.coordination_group_ref,
            rollout_hold=hold,
        )
        del desired
        if self.audit:
            self.a_meta_last.append(
                RecordAudit(
                    config_map=f"{self.ir.isvc_name}{_AUDIT_SUFFIX}", entries=tuple(self.audit)
                )
            )
        body: list[Action] = [
            *self.a_meta_first,
            *self.a_revisions,
            *self.a_objects,
            *self.a_podgroups,
            *self.a_creates,
            *self.a_gates,
            *self.a_patches,
            *self.a_deletes,
            *self.a_podgroup_deletes,
            *self.a_revision_deletes,
            *self.a_meta_last,
        ]
        body = _dedupe(body)
        destructive = any(
            isinstance(a, DeletePod | DeletePodGroup | PatchPodImages)
            or (isinstance(a, SetServingGate) and not a.value)
            for a in body
        )
        actions: list[Action] = []
        if status != self.prev or destructive:
            actions.append(UpdateStatus(status=status))
        actions.extend(body)
        requeue = self._requeue(bool(actions))
        return Plan(
            actions=tuple(actions), status=status, events=tuple(self.events), requeue_after=requeue
        )

    def _serving(self, row: InstanceStatus) -> bool:
        """In rotation: every pod of the running attempt is ready with its gate True.

        A single-pod Instance mid-surge serves while either of its two slots does.
        """
        pods = [p for p in self.pods_by_index.get(row.index, ()) if not p.terminating]
        if not self.policy.multi_pod:
            return any(p.serving_gate and p.containers_ready for p in pods)
        expected = self._expected(
            row.index, row.running_revision, row.incarnation, row.active_ordinal
        )
        if not expected:
            return False
        by_name = {p.name: p for p in pods}
        return all(
            (pod := by_name.get(name)) is not None
            and pod.serving_gate
            and pod.containers_ready
            and self._matches(pod, row.running_revision, row.incarnation)
            for name in expected
        )

    def _counts(self, row: InstanceStatus) -> InstanceStatus:
        pods = [p for p in self.pods_by_index.get(row.index, ()) if not p.terminating]
        serving = sum(1 for p in pods if p.serving_gate and p.containers_ready)
        available = 0
        if self._available(row):
            available = sum(1 for p in pods if p.ready)
        admitted = bool(pods) and not any(p.scheduling_gates for p in pods)
        ready_since = row.ready_since if row.phase == "Ready" else None
        if (
            row.pod_count == len(pods)
            and row.serving_pod_count == serving
            and row.available_pod_count == available
            and row.admitted == admitted
            and row.ready_since == ready_since
        ):
            return row
        return evolve(
            row,
            pod_count=len(pods),
            serving_pod_count=serving,
            available_pod_count=available,
            admitted=admitted,
            ready_since=ready_since,
        )

    def _conditions(
        self,
        rows: Sequence[InstanceStatus],
        members: Sequence[InstanceStatus],
        ready: Sequence[InstanceStatus],
        available: Sequence[InstanceStatus],
        updated: Sequence[InstanceStatus],
    ) -> tuple[Any, ...]:
        desired = self.policy.desired
        failed = [r for r in members if r.phase == "Failed"]
        ready_members = [r for r in members if r.phase == "Ready"]
        updated_ready = [r for r in updated if r.phase == "Ready" and self._is_member(r)]
        rolling = any(
            r.running_revision and r.running_revision != self.target for r in members
        ) or any(self._is_surge_target(r) for r in rows)
        minimum = max(desired - self.policy.max_unavailable, 0)
        if failed:
            ready_c = ("False", "InstanceFailed", "At least one Instance has Phase=Failed")
        elif (
            self.policy.partition > 0
            and rolling
            and len(updated_ready) + sum(1 for r in members if r.index < self.policy.partition)
            >= len(members)
            and len(members) == desired
            and all(r.phase == "Ready" for r in members)
        ):
            held = sum(1 for r in members if r.running_revision != self.target)
            ready_c = (
                "True",
                "Staged",
                f"Staged at partition {self.policy.partition}: {len(updated_ready)}/"
                f"{len(members)} Instances on {self.target}, {held} held on the prior revision",
            )
        elif rolling:
            ready_c = ("Unknown", "RolloutInProgress", f"rolling out {self.target}")
        elif desired == 0:
            ready_c = ("False", "NoReplicas", "spec.replicas is 0")
        elif len(ready_members) == desired and len(members) == desired:
            ready_c = ("True", "AllInstancesReady", f"{desired}/{desired} Instances Ready")
        elif len(ready_members) >= minimum > 0:
            ready_c = (
                "True",
                "MinimumAvailable",
                f"{len(ready_members)}/{desired} Instances Ready (minimum {minimum})",
            )
        else:
            ready_c = (
                "False",
                "ReplicaCountMismatch",
                f"{len(ready_members)}/{desired} Instances Ready",
            )
        avail_ok = len([r for r in available if self._is_member(r)]) >= max(minimum, 0) and (
            desired == 0 or available
        )
        wanted: dict[str, tuple[str, str, str]] = {
            "Ready": ready_c,
            "Available": (
                ("True", "MinimumAvailable", f"{len(available)} Instance(s) available")
                if avail_ok
                else (
                    "False",
                    "InsufficientAvailable",
                    f"{len(available)}/{desired} Instance(s) available",
                )
            ),
            "Progressing": (
                ("True", "RolloutInProgress", f"moving Instances to {self.target}")
                if rolling or len(members) != desired or any(r.operation for r in rows)
                else ("True", "NewRevisionAvailable", f"all Instances run {self.target}")
            ),
            "RolloutStalled": (
                ("True", "InstancesFailing", f"{len(failed)} Instance(s) Failed")
                if failed
                else ("False", "Progressing", "no Instance is failing")
            ),
            "GangSchedulingUnavailable": (
                (
                    "True",
                    "PodGroupCRDNotInstalled",
                    "the scheduler-plugins PodGroup CRD is not installed; multi-pod Instances "
                    "may schedule partially",
                )
                if self.policy.multi_pod and not self.snap.pod_group_crd
                else (
                    "False",
                    "GangSchedulingAvailable",
                    "PodGroups are used"
                    if self.policy.multi_pod
                    else "single-pod Instances need no gang scheduling",
                )
            ),
            "MigrationPolicyUnconfigured": (
                (
                    "True",
                    "MigrationCapacityUnconfigured",
                    "no lifecycle.audit caps are configured; migration requests wait in Accepted",
                )
                if self.config.audit is None
                else (
                    "False",
                    "MigrationCapacityConfigured",
                    f"at most {self.config.audit.max_in_flight_migrations} in flight, "
                    f"{self.config.audit.max_migrations_per_window} per "
                    f"{int(self.config.audit.window.total_seconds())}s",
                )
            ),
            "InstanceReadyTimeoutUnconfigured": (
                (
                    "False",
                    "InstanceReadyTimeoutConfigured",
                    f"Instance readiness deadline is {_go_duration(self.policy.ready_timeout)}",
                )
                if self.policy.ready_timeout is not None
                else (
                    "True",
                    "InstanceReadyTimeoutUnconfigured",
                    "no instanceReadyTimeout is set; an Instance may wait forever",
                )
            ),
        }
        wanted.update(self.extra_conditions)
        if "FailedUpdate" not in wanted:
            wanted["FailedUpdate"] = ("False", "UpdateAccepted", "the update can proceed")
        return build_conditions(self.prev.conditions, wanted, self.now, self.ir.metadata.generation)

    def _requeue(self, acted: bool) -> timedelta | None:
        times = [t for t in self.wake if t > self.now]
        out: timedelta | None = None
        if times:
            out = min(times) - self.now
        if self.poll or acted:
            op_poll = self.config.requeue.operation
            out = op_poll if out is None else min(out, op_poll)
        return out


def _go_duration(value: timedelta | None) -> str:
    return format_duration(value) if value is not None else "unset"


def _dedupe(actions: list[Action]) -> list[Action]:
    seen: set[tuple[str, str]] = set()
    out: list[Action] = []
    for a in actions:
        key: tuple[str, str] | None = None
        if isinstance(a, CreatePod):
            key = ("CreatePod", a.name)
        elif isinstance(a, DeletePod | SetServingGate | PatchPodImages):
            key = (a.kind, a.name)
        elif isinstance(a, DeletePodGroup):
            key = ("DeletePodGroup", a.name)
        elif isinstance(a, CreatePodGroup):
            key = ("CreatePodGroup", str(a.body["metadata"]["name"]))
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        out.append(a)
    return out
