"""Run a scenario: the real planner against the world, recording a timeline.

The loop, at each simulated instant ``t``:

1. the world runs its events due by ``t``; the scenario's events due by ``t`` apply, in
   time order and, at the same time, in file order (so events at 0s come before the first
   plan);
2. settle: snapshot, ``plan()``, apply; again while the plan is not empty and changed the
   world (a plan whose every action was a no-op wakes nobody, as with the real shell). At
   most ``max_plans_per_instant`` plans run at one instant; past that the run notes it and
   moves one second on;
3. record a timeline sample when a reported field changed (and always at 0s and ``until``);
4. move to the earliest of: the world's next event, the next scenario event, a requeue the
   planner asked for (requeues accumulate, as in controller-runtime's work queue), and
   ``until``.

``start: converged`` runs the same loop first, from an empty world with the replica as
given, until the replica converges (at most ``CONVERGE_LIMIT_SECONDS``), unrecorded; the
recorded clock then starts at 0.

A run is converged when, after the last scenario event, every Instance is Ready on the
update revision at the desired count (``status.instances``, and in the world: exactly the
desired pods, all Ready, none terminating), the status is for the current generation, and
no later plan acts on the world until ``until`` (a status-only write, such as the end of
a restart series ten minutes after the Instance became Ready, does not move it).
"""

from __future__ import annotations

import heapq
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple

from attrs import frozen

from omenative_core.codec import CodecError
from omenative_core.labels import LABEL_INSTANCE_INDEX, LABEL_POD_ORDINAL, LABEL_RUNNER
from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import Event, Plan, UpdateStatus
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.model.timefmt import format_duration
from omenative_core.planner import plan
from omenative_core.policy import BudgetError, resolve_policy
from omenative_core.render import pods_per_instance
from omenative_sim.scenario import FailPod, Migrate, Scenario, ScenarioError, ScenarioEvent
from omenative_sim.world import SimPod, World, WorldError

__all__ = [
    "CONVERGE_LIMIT_SECONDS",
    "MIGRATION_ANNOTATION_PREFIX",
    "Planner",
    "SimResult",
    "migration_request_uuid",
    "run_scenario",
]

Planner = Callable[[Snapshot], Plan]
"""What the runner calls: ``omenative_core.planner.plan`` unless a test passes another."""

CONVERGE_LIMIT_SECONDS = 24 * 3600.0
"""How long ``start: converged`` may take to reach its starting point."""

MIGRATION_ANNOTATION_PREFIX = "ome.io/migration-request-v1-"
"""The replica annotation a ``migrate`` event adds, followed by the request's UUID."""

_EPS = 1e-9
_UUID_NAMESPACE = uuid.UUID("5f0c7a52-3c39-4d6e-9a0c-6f6d656e6174")  # fixed: "omenat" tail


def migration_request_uuid(seed: int, event_index: int) -> str:
    """The request UUID of the ``migrate`` event at ``events[event_index]``, for a seed."""
    return str(uuid.uuid5(_UUID_NAMESPACE, f"omenative-simulate/{seed}/{event_index}"))


def _default_planner() -> Planner:
    return plan


def _num(value: float) -> int | float:
    rounded = round(value, 3)
    return int(rounded) if float(rounded).is_integer() else rounded


def _desired(world: World) -> int:
    replicas = world.replica.spec.replicas
    return 1 if replicas is None else replicas


def _surge_ceiling(world: World) -> int:
    """The most Instances the planner may run at once now: desired + the resolved maxSurge
    (the policy the planner resolves; the desired count alone when the budget is invalid)."""
    spec = world.replica.spec
    try:
        policy = resolve_policy(spec, world.config,
                                multi_pod=pods_per_instance(spec.runners) > 1)
    except BudgetError:
        return _desired(world)
    return policy.desired + policy.max_surge


@frozen(kw_only=True)
class SimResult:
    """The outcome of a run; ``to_json()`` is what ``omenative simulate --json`` prints."""

    seed: int
    until: float
    timeline: tuple[dict[str, Any], ...]
    converged: bool
    converged_at: float | None
    stall: dict[str, Any] | None
    summary: dict[str, Any]
    final: dict[str, Any] | None
    events: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        """One JSON object: timeline, converged, convergedAtSeconds, stall, summary, final, ..."""
        out: dict[str, Any] = {
            "seed": self.seed,
            "untilSeconds": _num(self.until),
            "timeline": list(self.timeline),
            "converged": self.converged,
            "convergedAtSeconds": None if self.converged_at is None else _num(self.converged_at),
        }
        if self.stall is not None:
            out["stall"] = self.stall
        out["summary"] = self.summary
        out["final"] = self.final
        out["events"] = list(self.events)
        out["notes"] = list(self.notes)
        if self.description:
            out["description"] = self.description
        return out


class _Sample(NamedTuple):
    """What the timeline records of the world at one time (an entry when it changes)."""

    replicas: int
    ready: int
    serving: int
    updated: int
    pods: int
    gpus_in_use: int
    desired: int
    surge_ceiling: int

    @classmethod
    def of(cls, world: World) -> _Sample:
        """The world's sample now (zeros for the counters before the first status)."""
        status = world.status
        spec = (_desired(world), _surge_ceiling(world))
        if status is None:
            return cls(0, 0, 0, 0, world.pod_count, world.gpus_in_use, *spec)
        return cls(
            status.replicas,
            status.ready_replicas,
            status.serving_replicas,
            status.updated_replicas,
            world.pod_count,
            world.gpus_in_use,
            *spec,
        )

    def to_json(self) -> dict[str, int]:
        """The timeline entry's counters, as the result JSON names them."""
        return {
            "replicas": self.replicas,
            "readyReplicas": self.ready,
            "servingReplicas": self.serving,
            "updatedReplicas": self.updated,
            "pods": self.pods,
            "gpusInUse": self.gpus_in_use,
            "desiredReplicas": self.desired,
            "surgeCeiling": self.surge_ceiling,
        }


class _Run:
    """One run's loop state (private: ``run_scenario`` is the interface)."""

    def __init__(self, scenario: Scenario, seed: int, planner: Planner, max_plans: int) -> None:
        self.scenario = scenario
        self.seed = seed
        self.planner = planner
        self.max_plans = max_plans
        self.world = World(scenario.cluster, scenario.replica, config=scenario.lifecycle, seed=seed)
        self.offset = 0.0
        self.recording = False
        self.requeues: list[float] = []
        self.events: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self._noted: set[str] = set()
        self.timeline: list[dict[str, Any]] = []
        self._last_key: _Sample | None = None
        # convergence and summary
        self.converged_from: float | None = None
        self.last_event_at = max((e.at for e in scenario.events), default=0.0)
        self.peak_pods = 0
        self.peak_gpus = 0
        self.all_served_at: float | None = None
        self.min_serving: int | None = None
        self.rollouts: list[dict[str, Any]] = []
        self.update_revision = ""

    # ---------------------------------------------------------------- helpers

    def rel(self, t: float) -> float:
        return t - self.offset

    def note(self, text: str, *, once: str | None = None) -> None:
        if not self.recording:
            return
        if once is not None:
            if once in self._noted:
                return
            self._noted.add(once)
        self.notes.append(text)

    def settle(self, t: float) -> tuple[bool, bool]:
        """Plan and apply until the plan is empty; (any non-empty plan, settled)."""
        world = self.world
        nonempty = False
        seen: set[tuple[str, str, str, int | None]] = set()
        for _ in range(self.max_plans):
            snap = world.snapshot(t)
            plan = self.planner(snap)
            if self.recording:
                for ev in plan.events:
                    self._record_event(t, ev, seen)
            if plan.requeue_after is not None:
                delay = plan.requeue_after.total_seconds()
                if delay <= 0:
                    self.note(
                        f"t={_num(self.rel(t))}s: the planner asked to requeue after "
                        f"{delay}s; treated as 1s",
                        once="requeue<=0",
                    )
                    delay = 1.0
                heapq.heappush(self.requeues, t + delay)
            if plan.empty:
                return nonempty, True
            # a status-only write (the end of a restart series, a readySince dropped) is
            # bookkeeping: a replica whose Instances and pods stayed converged through it
            # converged when they did, not when its status was last written
            nonempty = nonempty or any(not isinstance(a, UpdateStatus) for a in plan.actions)
            before = world.version
            result = world.apply(plan, t)
            if result.error is not None:  # the shell stops the plan and backs off
                self.note(
                    f"t={_num(self.rel(t))}s: the API refused an action: {result.error}",
                    once=f"err:{result.error}",
                )
                heapq.heappush(self.requeues, t + 1.0)
                return nonempty, True
            if world.version == before:
                kinds = sorted({a.kind for a in plan.actions})
                self.note(
                    f"t={_num(self.rel(t))}s: a plan of {len(plan.actions)} action(s) "
                    f"({', '.join(kinds)}) changed nothing (first time; the planner is not "
                    "quiescent here)",
                    once=f"noop:{','.join(kinds)}",
                )
                return nonempty, True
        self.note(
            f"t={_num(self.rel(t))}s: the planner did not settle after {self.max_plans} "
            "plans at one instant; moving one second on"
        )
        return nonempty, False

    def _record_event(
        self, t: float, ev: Event, seen: set[tuple[str, str, str, int | None]]
    ) -> None:
        key = (ev.type, ev.reason, ev.message, ev.instance)
        if key in seen:
            return
        seen.add(key)
        self.events.append(
            {
                "t": _num(self.rel(t)),
                "source": "planner",
                "type": ev.type,
                "reason": ev.reason,
                "message": ev.message,
                "instance": ev.instance,
            }
        )

    def world_converged(self) -> bool:
        world = self.world
        status = world.status
        if status is None or not status.update_revision:
            return False
        replica = world.replica
        if status.observed_generation != replica.metadata.generation:
            return False
        desired = _desired(world)
        rows = status.instances
        if len(rows) != desired:
            return False
        if any(r.phase != "Ready" or r.running_revision != status.update_revision for r in rows):
            return False
        if world.pod_count != desired * pods_per_instance(replica.spec.runners):
            return False
        return all(p.ready and not p.terminating for p in world.pods.values())

    def next_time(
        self, t: float, until: float, pending: list[ScenarioEvent], settled: bool
    ) -> float:
        candidates = [until]
        world_next = self.world.next_event_time()
        if world_next is not None:
            candidates.append(world_next)
        if pending:
            candidates.append(self.offset + pending[0].at)
        while self.requeues and self.requeues[0] <= t + _EPS:
            heapq.heappop(self.requeues)
        if self.requeues:
            candidates.append(self.requeues[0])
        if not settled:
            candidates.append(t + 1.0)
        nxt = min(candidates)
        return nxt if nxt > t + _EPS else t + 1.0

    # ---------------------------------------------------------------- scenario events

    def apply_event(self, ev: ScenarioEvent, t: float) -> None:
        world = self.world
        path = f"{ev.path}.{ev.kind}"
        message: str
        try:
            if ev.kind == "patch":
                world.patch_replica(ev.value, t)
                message = f"merge patch: {_patch_summary(ev.value)}"
            elif ev.kind == "failPod":
                pod = self._find_pod(ev, ev.value)
                world.fail_pod(pod.name, t)
                message = f"pod {pod.name}: main container exited 1 (Error)"
            elif ev.kind == "failNode":
                world.fail_node(ev.value, t)
                message = f"node {ev.value} stops heartbeating"
            elif ev.kind == "badImage":
                world.add_bad_image(ev.value, t)
                message = f"pulls of {ev.value} fail from now on"
            else:
                message = self._migrate(ev, ev.value, t)
        except (CodecError, WorldError) as exc:
            raise ScenarioError(f"{path}: {exc}") from None
        self.events.append(
            {
                "t": _num(self.rel(t)),
                "source": "scenario",
                "type": "Scenario",
                "reason": ev.kind,
                "message": message,
                "instance": getattr(ev.value, "instance", None),
            }
        )

    def _find_pod(self, ev: ScenarioEvent, target: FailPod) -> SimPod:
        world = self.world
        runners = [r.name for r in world.replica.spec.runners]
        runner = target.runner or ("default" if "default" in runners else "leader")
        found: list[SimPod] = []
        for pod in world.pods.values():
            labels = pod.labels
            if labels.get(LABEL_INSTANCE_INDEX) != str(target.instance):
                continue
            if labels.get(LABEL_RUNNER) != runner:
                continue
            if target.ordinal is not None and labels.get(LABEL_POD_ORDINAL) != str(target.ordinal):
                continue
            found.append(pod)
        found.sort(key=lambda p: (p.terminating or p.failed, p.rank()))
        if not found:
            ordinal = "" if target.ordinal is None else f" ordinal {target.ordinal}"
            raise ScenarioError(
                f"{ev.path}.failPod: no pod of instance {target.instance} runner {runner}"
                f"{ordinal} exists at {_num(ev.at)}s"
            )
        return found[0]

    def _migrate(self, ev: ScenarioEvent, req: Migrate, t: float) -> str:
        world = self.world
        status = world.status
        indexes = {r.index for r in status.instances} if status is not None else set()
        if req.instance not in indexes:
            raise ScenarioError(
                f"{ev.path}.migrate.instance: no Instance {req.instance} exists at "
                f"{_num(ev.at)}s (there are {', '.join(map(str, sorted(indexes))) or 'none'})"
            )
        request_uuid = migration_request_uuid(self.seed, ev.index)
        value: dict[str, Any] = {"schemaVersion": "v1", "instance": req.instance}
        if req.from_node is not None:
            value["from_node"] = req.from_node
        value["hint_target_nodes"] = list(req.hint_target_nodes)
        value["reason"] = "simulated"
        value["requested_by"] = "omenative-simulate"
        world.set_annotation(
            MIGRATION_ANNOTATION_PREFIX + request_uuid, json.dumps(value, separators=(",", ":")), t
        )
        return f"migration request {request_uuid} for instance {req.instance}"

    # ---------------------------------------------------------------- recording

    def record(self, t: float, nonempty: bool, settled: bool, *, force: bool = False) -> None:
        """Record the world at ``t``: the timeline, peaks, serving, rollouts, convergence."""
        world = self.world
        status: InferenceReplicaStatus | None = world.status
        rt = self.rel(t)
        sample = _Sample.of(world)
        self.peak_pods = max(self.peak_pods, sample.pods)
        self.peak_gpus = max(self.peak_gpus, sample.gpus_in_use)
        if force or sample != self._last_key:
            self._timeline_entry(rt, sample)
        desired = _desired(world)
        self._track_serving(rt, desired, sample.serving)
        self._track_rollouts(rt, status, desired)
        # convergence
        ok = settled and self.world_converged()
        if rt + _EPS < self.last_event_at or not ok:
            self.converged_from = None
        elif self.converged_from is None or nonempty:
            self.converged_from = rt

    def _timeline_entry(self, rt: float, sample: _Sample) -> None:
        """Add ``sample`` to the timeline (replacing an entry of the same second)."""
        entry: dict[str, Any] = {"t": _num(rt), **sample.to_json()}
        if self.timeline and self.timeline[-1]["t"] == entry["t"]:
            self.timeline[-1] = entry
        else:
            self.timeline.append(entry)
        self._last_key = sample

    def _track_serving(self, rt: float, desired: int, serving: int) -> None:
        """When every desired Instance first served, and the fewest serving since."""
        if self.all_served_at is None and desired > 0 and serving >= desired:
            self.all_served_at = rt
        if self.all_served_at is not None:
            self.min_serving = (
                serving if self.min_serving is None else min(self.min_serving, serving)
            )

    def _track_rollouts(
        self, rt: float, status: InferenceReplicaStatus | None, desired: int
    ) -> None:
        """Rollouts: a change of updateRevision until updated == desired and all Ready."""
        revision = status.update_revision if status else ""
        if revision != self.update_revision:
            if self.rollouts and self.rollouts[-1]["completedAtSeconds"] is None:
                self.rollouts[-1]["supersededAtSeconds"] = _num(rt)
            self.rollouts.append(
                {
                    "fromRevision": self.update_revision or None,
                    "toRevision": revision,
                    "startedAtSeconds": _num(rt),
                    "completedAtSeconds": None,
                    "durationSeconds": None,
                }
            )
            self.update_revision = revision
        if status is not None and self.rollouts:
            current = self.rollouts[-1]
            if (
                current["completedAtSeconds"] is None
                and "supersededAtSeconds" not in current
                and status.updated_replicas == desired
                and status.ready_replicas == desired
                and status.replicas == desired
            ):
                current["completedAtSeconds"] = _num(rt)
                current["durationSeconds"] = _num(rt - float(current["startedAtSeconds"]))

    # ---------------------------------------------------------------- loops

    def converge_first(self) -> None:
        """``start: converged``: run unrecorded from an empty world until converged."""
        t = 0.0
        while t <= CONVERGE_LIMIT_SECONDS:
            self.world.advance(t)
            _, settled = self.settle(t)
            if settled and self.world_converged():
                self.offset = t
                return
            t = self.next_time(t, CONVERGE_LIMIT_SECONDS + 1.0, [], settled)
        status = self.world.status
        stall = _stall(status)
        raise ScenarioError(
            "start: converged: the replica as given did not converge within "
            f"{format_duration_s(CONVERGE_LIMIT_SECONDS)} of simulated time "
            f"({stall['gate']}: {stall['reason']})"
        )

    def run(self) -> SimResult:
        if self.scenario.start == "converged":
            self.converge_first()
            status = self.world.status
            self.update_revision = status.update_revision if status is not None else ""
        self.recording = True
        pending = list(self.scenario.ordered_events())
        until = self.offset + self.scenario.until
        t = self.offset
        while True:
            self.world.advance(t)
            while pending and self.offset + pending[0].at <= t + _EPS:
                self.apply_event(pending.pop(0), t)
            nonempty, settled = self.settle(t)
            at_end = t >= until - _EPS
            self.record(t, nonempty, settled, force=(t == self.offset) or at_end)
            if at_end:
                break
            t = min(self.next_time(t, until, pending, settled), until)
        return self.result(until)

    def result(self, until: float) -> SimResult:
        world = self.world
        converged = self.converged_from is not None
        stall = None if converged else _stall(world.status)
        summary = {
            "desiredReplicas": _desired(world),
            "peakPods": self.peak_pods,
            "peakGpus": self.peak_gpus,
            "minServingReplicas": self.min_serving,
            "allServedAtSeconds": None if self.all_served_at is None else _num(self.all_served_at),
            "rollouts": self.rollouts,
        }
        notes = [
            *self.notes,
            *(f"t={_num(self.rel(at))}s: {text}" for at, text in world.notes if at >= self.offset),
        ]
        return SimResult(
            seed=self.seed,
            until=self.scenario.until,
            timeline=tuple(self.timeline),
            converged=converged,
            converged_at=self.converged_from,
            stall=stall,
            summary=summary,
            final=world.status_json(),
            events=tuple(self.events),
            notes=tuple(notes),
            description=self.scenario.description,
        )


def _patch_summary(patch: Any, prefix: str = "") -> str:
    """``spec.replicas=3, spec.runners=[...]``: the leaves a merge patch sets."""
    parts: list[str] = []
    for key, value in patch.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            parts.append(_patch_summary(value, path + "."))
        elif isinstance(value, list):
            parts.append(f"{path}=[{len(value)} item{'s' if len(value) != 1 else ''}]")
        else:
            text = json.dumps(value)
            parts.append(f"{path}={text if len(text) <= 40 else text[:37] + '...'}")
    return ", ".join(parts)


def format_duration_s(seconds: float) -> str:
    """Seconds as a Go duration (``1h0m0s``)."""
    return format_duration(timedelta(seconds=seconds))


def _stall(status: InferenceReplicaStatus | None) -> dict[str, Any]:
    if status is None:
        return {"gate": "NoStatus", "reason": "the planner wrote no status"}
    hold = status.rollout_hold
    if hold is not None:
        out: dict[str, Any] = {"gate": hold.gate, "reason": hold.reason}
        if hold.target:
            out["target"] = hold.target
        return out
    for cond in status.conditions:
        if cond.type == "Ready":
            return {"gate": "Ready", "reason": cond.reason, "message": cond.message}
    return {"gate": "Unknown", "reason": "not converged and no rolloutHold or Ready condition"}


def run_scenario(
    scenario: Scenario,
    seed: int = 0,
    *,
    planner: Planner | None = None,
    max_plans_per_instant: int = 50,
) -> SimResult:
    """Run ``scenario`` with the real planner (or ``planner``); deterministic for a seed.

    Raises ``ScenarioError`` for an event that names a pod or Instance that does not exist
    when it happens, and for a ``start: converged`` replica that never converges.
    """
    chosen = planner if planner is not None else _default_planner()
    return _Run(scenario, seed, chosen, max_plans_per_instant).run()
