"""The core + world simulator under random spec edits, faults, stale views and time.

Each rule changes the world or runs the controller loop; after every plan the step
invariants of ``invariants.py`` are checked, and at the end faults stop and the replica
must converge (invariant 11) and stay quiet.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from attrs import evolve
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from omenative_controller.coalesce import status_may_wait
from omenative_core.model import LifecycleConfig, Plan, Snapshot, UpdateStatus
from omenative_core.model.config import ForceDeleteConfig, UpdateRetry
from omenative_core.model.spec import InferenceReplicaSpec
from omenative_core.planner import plan as make_plan
from omenative_core.policy import desired_instances, resolve_policy
from omenative_core.status.wire import replica_from_json
from omenative_sim.world import ClusterSpec, World
from tests.property.invariants import (
    ALL_STEP_INVARIANTS,
    availability_floor,
    converged,
    converged_pods,
    determinism,
    instances_holding_pods,
    migrations_in_flight,
    pod_ceiling,
    pod_slots,
    serving_instances,
    surge_ceiling,
)

GPUS = 2
FAST = LifecycleConfig(
    instance_ready_timeout=timedelta(seconds=120),
    stuck_pod_grace_period=timedelta(seconds=20),
    unschedulable_grace_period=timedelta(seconds=60),
    # without forceDelete, pods on a dead node stay Terminating forever (as in Kubernetes)
    force_delete=ForceDeleteConfig(
        overdue_slack=timedelta(seconds=10),
        node_unreachable_threshold=timedelta(seconds=30),
    ),
    update_retry=UpdateRetry(
        max_attempts=2,
        initial_delay=timedelta(seconds=10),
        max_delay=timedelta(seconds=40),
    ),
)


def replica_json(
    *, multi: bool, size: int, replicas: int, image: str, strategy: str,
    rolling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A small InferenceReplica manifest with GPU-requesting pods."""
    tpl = {
        "spec": {
            "containers": [
                {
                    "name": "ome-container",
                    "image": image,
                    "resources": {"limits": {"nvidia.com/gpu": GPUS}},
                }
            ]
        }
    }
    runners: list[dict[str, Any]] = (
        [{"name": "leader", "template": tpl}, {"name": "worker", "size": size, "template": tpl}]
        if multi
        else [{"name": "default", "template": tpl}]
    )
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {
            "component": "engine",
            "replicas": replicas,
            "runners": runners,
            "lifecycle": {"updateStrategy": {"type": strategy, **(
                {"rollingUpdate": rolling} if rolling else {})}},
        },
    }


MAX_REPLICAS = 6
"""The most replicas a history asks for (issue 31: the hard cases need more than 3)."""
MAX_WORKERS = 4
"""The most workers a gang has: gangs of up to 5 pods."""
SURGES = st.sampled_from([None, 1, 2, "50%", "100%", "10%"])
"""maxSurge values, numbers and percentages (0 is refused with NoSurgeBudget: unit tests)."""
UNAVAILABLES = st.sampled_from([None, 0, 1, 2, "50%", "0%", "34%"])
"""maxUnavailable values, numbers and percentages (0 still lets one Instance go)."""


def _budgets(spec: InferenceReplicaSpec, desired: int | None = None) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) the planner resolves for ``spec`` (at ``desired``)."""
    if desired is not None:
        spec = evolve(spec, replicas=desired)
    policy = resolve_policy(spec, LifecycleConfig(), multi_pod=len(spec.runners) > 1)
    return policy.max_surge, policy.max_unavailable


def _stamp(world: World) -> str:
    return world.time(world.now).strftime("%Y-%m-%dT%H:%M:%SZ")


class Draws:
    """Stands in for hypothesis' ``data()`` when a found history is replayed rule by rule:
    hands out the values the search drew, in order."""

    def __init__(self, *values: Any) -> None:
        self.values = list(values)

    def draw(self, strategy: Any) -> Any:
        """The next recorded value (``strategy`` is what the search drew it from)."""
        del strategy
        return self.values.pop(0)


SETUP: dict[str, Any] = {
    "multi": st.booleans(),
    "size": st.integers(1, MAX_WORKERS),
    "replicas": st.integers(0, MAX_REPLICAS),
    "strategy": st.sampled_from(["SurgeThenDrain", "RecreatePod", "InPlaceIfPossible"]),
    "spare_nodes": st.integers(0, 2),
    "max_surge": SURGES,
    "max_unavailable": UNAVAILABLES,
    "opening": st.sampled_from(["none", "settle", "rollout", "rollout+scale"]),
    "scale_to": st.integers(0, MAX_REPLICAS),
}
"""What ``LifecycleMachine.setup`` draws (a subclass may draw some differently)."""


class LifecycleMachine(RuleBasedStateMachine):
    """Drives plan() against the simulated world and checks the invariants."""

    steps_seen: list[int] = []  # shared on purpose: every run appends its step count
    """Rule steps each history ran before its teardown (the zero-step distribution)."""

    @initialize(**SETUP)
    def setup(self, multi: bool, size: int, replicas: int, strategy: str, spare_nodes: int,
              max_surge: int | str | None = None, max_unavailable: int | str | None = None,
              opening: str = "none", scale_to: int = 0) -> None:
        self.multi = multi
        self.size = size
        self.strategy = strategy
        self.image_n = 1
        self.steps = 0
        per_instance = (1 + size) if multi else 1
        rolling = {k: v for k, v in (("maxSurge", max_surge),
                                     ("maxUnavailable", max_unavailable)) if v is not None}
        # 4 GPUs/node = 2 pods per node; enough for the Instances the replica may reach
        # (its replicas and any scale, plus its surge) and a few spares
        manifest = replica_json(multi=multi, size=size, replicas=replicas, image="img:1",
                                strategy=strategy, rolling=rolling)
        # the cluster holds twice the most replicas asked for (a surge of 100%) and one
        # more, plus a node's worth (one node may fail) and spares
        self.top = max(replicas, scale_to, 2)
        """The most replicas a scale rule asks for (drawn: up to ``MAX_REPLICAS``)."""
        nodes = (per_instance * (2 * self.top + 1) + 1) // 2 + 1 + spare_nodes
        self.world = World(
            ClusterSpec(
                nodes=nodes, gpus_per_node=2 * GPUS, pod_start_seconds=3, pod_ready_seconds=2
            ),
            manifest,
            config=FAST,
        )
        self.history: list[Snapshot] = []
        self.faults = 0
        self.migrations = 0
        self.node_failed = False
        self.ceiling_desired = desired_instances(replicas)
        """The larger desired count of the scale changes whose condemned may still drain."""
        self.ceiling_migrations = 0
        """The most migrations in flight since then (a condemned surge drains after its
        migration ended)."""
        self.ceiling_surge = self._budgets_at(manifest, self.ceiling_desired)[0]
        """The largest maxSurge since then (a lowered maxSurge leaves the surges opened
        under the old one to finish)."""
        self.floor_armed = False
        """Every step since the replica last settled was fault-free: the availability
        floor applies (``availability_floor``)."""
        self.surge_only = strategy == "SurgeThenDrain"
        """No other strategy was asked for since the floor was armed."""
        self._open(opening, scale_to)

    def _open(self, opening: str, scale_to: int) -> None:
        """The first moves of a history, so a history with no rule steps still tests
        something: the replica settles, or a rollout starts, perhaps with a scale change."""
        if opening == "none":
            return
        self.time_passes(seconds=30)
        if opening in ("rollout", "rollout+scale"):
            self.new_image()
            self.time_passes(seconds=5)
        if opening == "rollout+scale":
            self._set_replicas(scale_to)
            self.reconcile()

    @staticmethod
    def _budgets_at(manifest: dict[str, Any], desired: int) -> tuple[int, int]:
        """(maxSurge, maxUnavailable) the planner resolves for ``manifest`` at ``desired``."""
        spec = replica_from_json(manifest).spec
        return _budgets(spec, desired)

    # ------------------------------------------------------------------ the loop

    def plan(self, snap: Snapshot) -> Plan:
        """The controller's plan of ``snap`` (a subclass may plan incrementally)."""
        return make_plan(snap)

    def _check(self, snap: Snapshot, plan: Plan) -> None:
        for check in ALL_STEP_INVARIANTS:
            check(snap, plan)
        spec = snap.replica.spec
        # surges opened before a scale-down may finish: the design's ceiling takes maxSurge
        # at the larger desired count (issue 30 item 3), as the pod ceiling does
        surge_ceiling(snap, plan, max(_budgets(spec)[0], self.ceiling_surge))

    def _apply(self, snap: Snapshot, plan: Plan, *, limit: int | None = None) -> None:
        world_rv = self.world.replica.metadata.resource_version
        if (
            plan.actions
            and isinstance(plan.actions[0], UpdateStatus)
            and snap.replica.metadata.resource_version != world_rv
        ):
            return  # the status write carries a stale resourceVersion: 409, nothing applied
        self.world.apply(plan, limit=limit)
        self._check_pods()

    def _check_pods(self) -> None:
        """Invariants 4, 13 and 14 counted from the world's pods, after every (partial)
        apply."""
        after = self.world.snapshot()
        spec = after.replica.spec
        pod_slots(after, self.multi, self.size)
        self._check_floor(after)
        flying = migrations_in_flight(after)
        self.ceiling_migrations = max(self.ceiling_migrations, flying)
        self.ceiling_surge = max(self.ceiling_surge, _budgets(spec, self.ceiling_desired)[0])
        pod_ceiling(after, self.ceiling_desired, self.ceiling_surge, self.ceiling_migrations)
        desired = self._replicas()
        surge = _budgets(spec)[0]
        room = desired + surge + flying
        status = after.replica.status
        rows = len(status.instances) if status is not None else 0
        if instances_holding_pods(after) <= room and rows <= room:
            # what the older counts and migrations left has drained, and no row of theirs
            # (a Create not yet condemned, say) is left to bring pods up
            self.ceiling_desired, self.ceiling_migrations = desired, flying
            updating = status is not None and any(
                r.operation is not None and r.operation.type == "Update"
                for r in status.instances)
            if not updating:  # no surge opened under an older maxSurge is left
                self.ceiling_surge = surge

    def _check_floor(self, after: Snapshot) -> None:
        """14. While armed, serving Instances (from pods) stay at the strategy's floor;
        armed again whenever the replica is settled: every row Ready with no operation,
        the desired count serving."""
        desired = self._replicas()
        if self.floor_armed:
            unavailable = _budgets(after.replica.spec)[1]
            floor = desired if self.surge_only else desired - unavailable
            availability_floor(after, self.multi, self.size, floor)
            return
        if self.node_failed:
            return  # its pods look Ready until the node is found lost: never armed again
        status = after.replica.status
        rows = status.instances if status is not None else ()
        if (
            len(rows) == desired
            and all(r.phase == "Ready" and r.operation is None for r in rows)
            and serving_instances(after, self.multi, self.size) >= desired
        ):
            self.floor_armed = True
            self.surge_only = self.strategy == "SurgeThenDrain"

    def _fault(self) -> None:
        """A step that may take Instances down by design (a fault, a scale, a budget
        change): the floor is not promised until the replica settles again."""
        self.floor_armed = False

    def _set_replicas(self, replicas: int) -> None:
        self._fault()
        self.ceiling_desired = max(
            self.ceiling_desired, self._replicas(), desired_instances(replicas))
        self.world.patch_replica({"spec": {"replicas": replicas}})

    def reconcile(self, rounds: int = 12) -> Plan:
        plan = None
        for _ in range(rounds):
            snap = self.world.snapshot()
            plan = self.plan(snap)
            self._check(snap, plan)
            self.history.append(snap)
            del self.history[:-6]
            if not plan.actions:
                break
            self._apply(snap, plan)
        assert plan is not None
        return plan

    @rule(seconds=st.sampled_from([1, 2, 5, 10, 30, 60]))
    def time_passes(self, seconds: int) -> None:
        self.world.advance(self.world.now + seconds)
        self.reconcile()

    @rule()
    def controller_pass(self) -> None:
        self.reconcile(rounds=1)

    @precondition(lambda self: len(self.history) >= 3)
    @rule(back=st.integers(1, 3))
    def stale_view(self, back: int) -> None:
        """The controller plans from a view a few steps old (a lagging cache)."""
        snap = self.history[-back]
        plan = self.plan(snap)
        self._check(snap, plan)
        self._apply(snap, plan)

    @rule(limit=st.integers(0, 3))
    def partial_apply(self, limit: int) -> None:
        """The manager dies after applying only the first actions of a plan."""
        snap = self.world.snapshot()
        plan = self.plan(snap)
        self._check(snap, plan)
        self._apply(snap, plan, limit=limit)

    @rule()
    def held_status_pass(self) -> None:
        """The shell holds a progress-only status (``coalesce.py``) and applies the rest:
        the next pass must pick the work up from the pods alone."""
        snap = self.world.snapshot()
        plan = self.plan(snap)
        self._check(snap, plan)
        if status_may_wait(snap.replica.status, plan.status, plan.actions):
            plan = evolve(plan, actions=tuple(
                a for a in plan.actions if not isinstance(a, UpdateStatus)))
        self._apply(snap, plan)

    # ------------------------------------------------------------------ spec edits

    @rule(replicas=st.integers(0, MAX_REPLICAS))
    def scale(self, replicas: int) -> None:
        self._set_replicas(min(replicas, self.top))

    @rule(max_surge=SURGES, max_unavailable=UNAVAILABLES)
    def set_budgets(self, max_surge: int | str | None, max_unavailable: int | str | None) -> None:
        """Change maxSurge / maxUnavailable (perhaps mid-rollout)."""
        self._fault()
        self.world.patch_replica({"spec": {"lifecycle": {"updateStrategy": {"rollingUpdate": {
            "maxSurge": max_surge, "maxUnavailable": max_unavailable}}}}})

    def _replicas(self) -> int:
        return desired_instances(self.world.replica.spec.replicas)

    def _rolling_out(self) -> bool:
        """Some Instances may still be on the old revision: the update is not finished."""
        status = self.world.status
        return (
            status is not None
            and bool(status.current_revision)
            and status.update_revision != status.current_revision
        )

    def _partly_updated(self) -> bool:
        status = self.world.status
        return status is not None and 0 < status.updated_replicas < status.replicas

    @rule(data=st.data())
    def scale_mid_rollout(self, data: st.DataObject) -> None:
        """Scale (down, issue 15; or up) while some Instances run the new revision and some
        the old.

        With no rollout under way, the replica settles for 30 s, then one starts and runs,
        5 s at a time, for a few seconds or until some Instances are updated and some are
        not. The step invariants then hold the replica to the larger of the old and new
        ``replicas`` + ``maxSurge`` (invariant 4').
        """
        if not self._rolling_out():
            self.world.advance(self.world.now + 30)
            self.reconcile()
            self.new_image()
            self.reconcile()
            early = data.draw(st.booleans())
            for _ in range(data.draw(st.integers(0, 3)) if early else 24):
                if not early and self._partly_updated():
                    break
                self.world.advance(self.world.now + 5)
                self.reconcile()
        other = data.draw(st.integers(0, self.top))
        self._set_replicas(other)
        self.reconcile()

    @rule()
    def new_image(self) -> None:
        self.image_n += 1
        self._set_image(f"img:{self.image_n}")

    def _set_image(self, image: str) -> None:
        tpl = {
            "spec": {
                "containers": [
                    {
                        "name": "ome-container",
                        "image": image,
                        "resources": {"limits": {"nvidia.com/gpu": GPUS}},
                    }
                ]
            }
        }
        runners: list[dict[str, Any]] = (
            [
                {"name": "leader", "template": tpl},
                {"name": "worker", "size": self.size, "template": tpl},
            ]
            if self.multi
            else [{"name": "default", "template": tpl}]
        )
        self.world.patch_replica({"spec": {"runners": runners}})

    @rule(paused=st.booleans(), freeze=st.booleans())
    def pause(self, paused: bool, freeze: bool) -> None:
        self.world.patch_replica(
            {"spec": {"paused": paused, "pauseMode": "Freeze" if freeze else None}}
        )

    # ------------------------------------------------------------------ faults

    @precondition(lambda self: self.faults < 4)
    @rule(data=st.data())
    def fail_pod(self, data: st.DataObject) -> None:
        names = sorted(n for n, p in self.world.pods.items() if not p.terminating)
        if not names:
            return
        self.faults += 1
        self._fault()
        self.world.fail_pod(data.draw(st.sampled_from(names)))

    @precondition(lambda self: self.faults < 2)
    @rule()
    def bad_image(self) -> None:
        self.faults += 1
        self._fault()
        self.image_n += 1
        image = f"img:{self.image_n}"
        self.world.add_bad_image(image)
        self._set_image(image)

    @precondition(lambda self: not self.node_failed)
    @rule(data=st.data())
    def fail_node(self, data: st.DataObject) -> None:
        """One node stops heartbeating (the cluster keeps enough capacity without it)."""
        self.node_failed = True
        self._fault()
        self.world.fail_node(data.draw(st.sampled_from(sorted(self.world.nodes))))

    # ------------------------------------------------------------------ operator verbs

    @rule(strategy=st.sampled_from(["SurgeThenDrain", "RecreatePod", "InPlaceIfPossible"]))
    def change_strategy(self, strategy: str) -> None:
        self.strategy = strategy
        self.surge_only = self.surge_only and strategy == "SurgeThenDrain"
        self.world.patch_replica({"spec": {"lifecycle": {"updateStrategy": {"type": strategy}}}})

    @rule(partition=st.sampled_from([None, 0, 1, 2]))
    def set_partition(self, partition: int | None) -> None:
        self.world.patch_replica({"spec": {"pacing": {"partition": partition}}})

    @rule()
    def release_held(self) -> None:
        status = self.world.status
        held = [
            b.target_revision for b in (status.retry_blocks if status else ()) if b.state == "Held"
        ]
        if held:
            self.world.set_annotation("ome.io/release-held-revision", held[0])

    @rule(which=st.sampled_from(["all", "0", "0,1", "7", "x"]))
    def reset(self, which: str) -> None:
        self.world.set_annotation("ome.io/reset-instances", which)

    @precondition(lambda self: self.migrations < 3)
    @rule(data=st.data())
    def migrate(self, data: st.DataObject) -> None:
        status = self.world.status
        rows = [r.index for r in (status.instances if status else ())]
        if not rows:
            return
        self.migrations += 1
        self._fault()
        index = data.draw(st.sampled_from(rows))
        nodes = sorted(
            {
                p.node
                for p in self.world.pods.values()
                if p.node and p.labels.get("ome.io/instance-index") == str(index)
            }
        )
        request: dict[str, object] = {
            "schemaVersion": "v1",
            "instance": index,
            "hint_target_nodes": [],
            "reason": "test",
            "requested_by": "hyp",
        }
        if nodes:  # admission refuses a null from_node; leave it out instead
            request["from_node"] = nodes[0]
        value = json.dumps(request)
        self.world.set_annotation(
            f"ome.io/migration-request-v1-{self.migrations:08d}-0000-0000-0000-000000000000", value
        )

    # ------------------------------------------------------------------ checks

    @invariant()
    def plans_are_deterministic(self) -> None:
        self.steps += 1  # after the initialization, then after each rule step
        snap = self.world.snapshot()
        determinism(snap, self.plan(snap))

    def teardown(self) -> None:
        """Faults stop, capacity suffices: the replica converges and stays quiet."""
        if not hasattr(self, "world"):
            return
        world = self.world
        world.patch_replica(
            {"spec": {"paused": False, "pauseMode": None, "pacing": {"partition": None}}}
        )

        # a good image (bad ones are never used again) and a released hold
        self.image_n += 1
        self._set_image(f"img:{self.image_n}")
        for _ in range(400):
            plan = self.reconcile(rounds=20)
            nxt = world.next_event_time()
            if not plan.actions and plan.requeue_after is None and nxt is None:
                break
            step = plan.requeue_after.total_seconds() if plan.requeue_after else 5.0
            if nxt is not None:
                step = min(step, max(nxt - world.now, 0.5))
            world.advance(world.now + max(step, 0.5))
        snap = world.snapshot()
        converged(snap, self.plan(snap))
        converged_pods(snap, self.multi, self.size)
        LifecycleMachine.steps_seen.append(max(self.steps - 1, 0))
        # 10. teardown: Instances drain before their pods go; the finalizer goes
        self._fault()  # a deleted replica stops serving by design
        world.patch_replica({"metadata": {"deletionTimestamp": _stamp(world)}})
        for _ in range(200):
            plan = self.reconcile(rounds=20)
            if world.pod_count == 0 and "ome.io/ir-teardown" not in (
                world.manifest["metadata"].get("finalizers") or []
            ):
                break
            world.advance(world.now + 2)
        assert world.pod_count == 0, f"teardown: {world.pod_count} pods left"
        assert "ome.io/ir-teardown" not in (world.manifest["metadata"].get("finalizers") or []), (
            "teardown: the finalizer was not released"
        )


LifecycleMachine.TestCase.settings = settings(
    stateful_step_count=int(__import__("os").environ.get("OMENATIVE_STEPS", "25")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
)
TestLifecycle = LifecycleMachine.TestCase
