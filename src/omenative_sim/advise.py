"""Simulate the GPU caretaker: advise on a shared cluster, then carry the moves out.

An ``advise`` scenario (``docs/simulate.md``) describes nodes and several
InferenceReplicas on them. Each replica gets a :class:`World` and all worlds share one set
of nodes, as in the service simulator. The run:

1. Start: each replica in turn is brought up (on the nodes its ``startOn`` names, else on
   any sound node) until its Instances serve or the start time runs out; a gang that
   cannot be placed stays pending.
2. Advise: the advisor (``omenative_core.advisor.advise``) reads the cluster through
   ``cluster_view_from_json``, the same reading ``kubectl ome advise`` makes.
3. Move: like ``kubectl ome advise --apply``, the first recommended move of the first
   advice's groups becomes a migration request annotation
   (``ome.io/migration-request-v1-<uuid>``) on its replica; the real planner carries it out
   in the simulator; when it ends the advisor is asked again; and so on.
4. After: the worlds run on until quiet, so a gang that now fits is placed.

The serving count of every replica is sampled after every plan and every event, so the
result can say the lowest each replica reached while the moves ran.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from attrs import frozen

from omenative_controller.cli.advise_output import advice_json
from omenative_controller.cli.ome_output import ANNOTATION_MIGRATION_PREFIX
from omenative_controller.migration_requests import move_request
from omenative_core.advisor import (
    Advice,
    AdvisorConfig,
    ClusterView,
    Recommendation,
    advise,
    cluster_view_from_json,
)
from omenative_core.codec import to_json
from omenative_core.labels import LABEL_INSTANCE_INDEX
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import JSON
from omenative_core.model.status import MigrationStatus
from omenative_core.planner import plan
from omenative_sim.scenario import (
    ScenarioError,
    _check_replica,
    _cluster,
    _duration,
    _int,
    _keys,
    _lifecycle,
    _obj,
    _show,
    _str,
    load_yaml,
)
from omenative_sim.world import ClusterSpec, World

__all__ = [
    "BAD_GPU_CONDITION",
    "AdviseResult",
    "AdviseScenario",
    "AdviseWorld",
    "MoveOutcome",
    "SimReplica",
    "is_advise_scenario",
    "parse_advise_scenario",
    "run_advise_scenario",
]

BAD_GPU_CONDITION = "GPUUnhealthy"
"""The node condition an ``unhealthyNodes`` entry sets True (the advisor is told it is bad)."""

_TOP_KEYS = ("description", "advise", "cluster", "unhealthyNodes", "lifecycle", "replicas",
             "maxMoves", "startSeconds", "moveTimeout")
_REPLICA_KEYS = ("replica", "startOn")
_TERMINAL = ("Completed", "Failed", "Cancelled", "Aborted")
_MAX_PLANS = 50


@frozen(kw_only=True)
class SimReplica:
    """One InferenceReplica of the scenario and the nodes its pods start on (any if empty)."""

    manifest: JSON
    start_on: tuple[str, ...] = ()


@frozen(kw_only=True)
class AdviseScenario:
    """A parsed ``advise`` scenario: nodes, unhealthy ones, replicas and the limits."""

    description: str
    cluster: ClusterSpec
    unhealthy: tuple[str, ...]
    replicas: tuple[SimReplica, ...]
    lifecycle: LifecycleConfig
    max_moves: int = 8
    start_seconds: float = 600.0
    move_timeout: float = 3600.0


@frozen(kw_only=True)
class MoveOutcome:
    """One move carried out: what was recommended, its request, how it ended and when."""

    recommendation: Recommendation
    request_uuid: str
    phase: str
    started_at: float
    ended_at: float
    to_nodes: tuple[str, ...]


@frozen(kw_only=True)
class AdviseResult:
    """Before and after the moves: the advice, the moves, gangs and serving floors."""

    before: Advice
    after: Advice
    moves: tuple[MoveOutcome, ...]
    pending_before: tuple[str, ...]
    pending_after: tuple[str, ...]
    unhealthy: tuple[str, ...]
    unhealthy_pods_after: Mapping[str, int]
    nodes_after: Mapping[str, tuple[str, ...]]
    layout_before: tuple[JSON, ...]
    layout_after: tuple[JSON, ...]
    desired: Mapping[str, int]
    serving_before: Mapping[str, int]
    serving_after: Mapping[str, int]
    min_serving: Mapping[str, int]
    ended_at: float
    notes: tuple[str, ...]

    def placed(self) -> tuple[str, ...]:
        """The gangs pending before the moves that are no longer pending after them."""
        return tuple(g for g in self.pending_before if g not in self.pending_after)

    def to_json(self) -> dict[str, Any]:
        """The result as one JSON object (``omenative advise --json``)."""
        return {
            "before": advice_json(self.before),
            "moves": [_move_json(m) for m in self.moves],
            "after": advice_json(self.after),
            "pendingBefore": list(self.pending_before),
            "pendingAfter": list(self.pending_after),
            "placed": list(self.placed()),
            "unhealthyNodes": list(self.unhealthy),
            "podsOnUnhealthyNodesAfter": dict(self.unhealthy_pods_after),
            "nodesAfter": {name: list(nodes) for name, nodes in self.nodes_after.items()},
            "layoutBefore": list(self.layout_before),
            "layoutAfter": list(self.layout_after),
            "replicas": {
                name: {"desired": self.desired[name], "servingBefore": self.serving_before[name],
                       "servingAfter": self.serving_after[name],
                       "lowestServing": self.min_serving[name]}
                for name in self.desired
            },
            "endedAtSeconds": self.ended_at,
            "notes": list(self.notes),
        }


def _move_json(m: MoveOutcome) -> dict[str, Any]:
    return {"recommendation": to_json(m.recommendation), "requestUuid": m.request_uuid,
            "phase": m.phase, "startedAtSeconds": m.started_at, "endedAtSeconds": m.ended_at,
            "toNodes": list(m.to_nodes)}


# ---------------------------------------------------------------------------- parsing


def is_advise_scenario(raw: object) -> bool:
    """True for a scenario with a ``replicas`` list (several replicas, for the advisor)."""
    return isinstance(raw, Mapping) and "replicas" in raw


def _replicas(raw: object, nodes: Sequence[str]) -> tuple[SimReplica, ...]:
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(f"replicas: expected a non-empty list, got {_show(raw)}")
    out: list[SimReplica] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        path = f"replicas[{i}]"
        obj = _obj(path, item)
        _keys(path, obj, _REPLICA_KEYS)
        if "replica" not in obj:
            raise ScenarioError(f"{path}.replica: required (an InferenceReplica)")
        manifest = dict(_check_replica(f"{path}.replica", obj["replica"]))
        name = str((manifest.get("metadata") or {}).get("name"))
        if name in seen:
            raise ScenarioError(f"{path}.replica.metadata.name: {name!r} is used twice")
        seen.add(name)
        start = _node_list(f"{path}.startOn", obj.get("startOn", []), nodes)
        out.append(SimReplica(manifest=manifest, start_on=start))
    return tuple(out)


def _node_list(path: str, raw: object, nodes: Sequence[str]) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        raise ScenarioError(f"{path}: expected a list of node names, got {_show(raw)}")
    for j, name in enumerate(raw):
        if _str(f"{path}[{j}]", name) not in nodes:
            raise ScenarioError(f"{path}[{j}]: no node {name!r} (nodes are node-0.."
                                f"node-{len(nodes) - 1})")
    return tuple(raw)


def parse_advise_scenario(source: str | Mapping[str, Any]) -> AdviseScenario:
    """Parse an ``advise`` scenario; ScenarioError names the key path and the rule."""
    top = _obj("scenario", load_yaml(source) if isinstance(source, str) else source)
    _keys("", top, _TOP_KEYS)
    if "cluster" not in top:
        raise ScenarioError("cluster: required (at least cluster.nodes)")
    cluster = _cluster(top["cluster"])
    nodes = cluster.node_names()
    description = top.get("description") or ""
    if not isinstance(description, str):
        raise ScenarioError(f"description: expected a string, got {_show(description)}")
    return AdviseScenario(
        description=description,
        cluster=cluster,
        unhealthy=_node_list("unhealthyNodes", top.get("unhealthyNodes", []), nodes),
        replicas=_replicas(top.get("replicas"), nodes),
        lifecycle=_lifecycle(top.get("lifecycle")),
        max_moves=_int("maxMoves", top.get("maxMoves", 8), minimum=1),
        start_seconds=_duration("startSeconds", top.get("startSeconds", "10m")),
        move_timeout=_duration("moveTimeout", top.get("moveTimeout", "1h")),
    )


# ---------------------------------------------------------------------------- the world


class AdviseWorld:
    """The worlds of several InferenceReplicas on one set of shared nodes."""

    def __init__(self, scenario: AdviseScenario, seed: int = 0) -> None:
        self.scenario = scenario
        self.seed = seed
        self.worlds: dict[str, World] = {}
        self.requeue: float | None = None
        self.min_serving: dict[str, int] = {}
        self.tracking = False
        self.rng = random.Random(seed)

    # -- time and planning

    @property
    def now(self) -> float:
        """Seconds since the start (all worlds share one clock)."""
        return max((w.now for w in self.worlds.values()), default=0.0)

    def add(self, manifest: JSON) -> World:
        """A new replica's world on the shared nodes, at the shared time."""
        world = World(self.scenario.cluster, dict(manifest), config=self.scenario.lifecycle,
                      seed=self.seed + len(self.worlds))
        if self.worlds:
            first = next(iter(self.worlds.values()))
            world.nodes = first.nodes
            world.now = first.now
        else:
            for name in self.scenario.unhealthy:
                world.nodes[name].cordoned = True
        self.worlds[str(manifest["metadata"]["name"])] = world
        return world

    def serving(self, name: str) -> int:
        """The serving Instances of one replica, as its status says."""
        st = self.worlds[name].status
        return st.serving_replicas if st is not None else 0

    def _sample(self) -> None:
        if not self.tracking:
            return
        for name in self.worlds:
            s = self.serving(name)
            self.min_serving[name] = min(self.min_serving.get(name, s), s)

    def settle(self) -> None:
        """Plan every replica until nothing changes at this instant."""
        for _ in range(_MAX_PLANS):
            changed = False
            for w in self.worlds.values():
                for _ in range(_MAX_PLANS):
                    p = plan(w.snapshot())
                    if p.requeue_after is not None:
                        t = w.now + p.requeue_after.total_seconds()
                        self.requeue = t if self.requeue is None else min(self.requeue, t)
                    if not p.actions:
                        break
                    w.apply(p)
                    changed = True
                    self._sample()
            if not changed:
                return

    def step(self, limit: float) -> bool:
        """Settle, then move to the next thing that happens before ``limit`` (False: none)."""
        self.settle()
        self._sample()
        times = [t for w in self.worlds.values() if (t := w.next_event_time()) is not None]
        if self.requeue is not None and self.requeue > self.now:
            times.append(self.requeue)
        upcoming = [t for t in times if t > self.now]
        if not upcoming or min(upcoming) > limit:
            return False
        t = min(upcoming)
        if self.requeue is not None and self.requeue <= t:
            self.requeue = None
        for w in self.worlds.values():
            w.advance(t)
        for w in self.worlds.values():
            w.reschedule()  # another world may have freed GPUs on a shared node
        return True

    def run_until(self, limit: float, done: Any = None) -> None:
        """Step until ``done()`` is true, nothing more happens, or ``limit`` is reached."""
        while not (done is not None and done()) and self.step(limit):
            pass

    # -- what the advisor reads

    def _node_json(self) -> list[JSON]:
        nodes = next(iter(self.worlds.values())).nodes.values()
        out: list[JSON] = []
        for n in nodes:
            bad = n.name in self.scenario.unhealthy
            conditions = [{"type": "Ready", "status": "True" if n.ready is True else "Unknown"}]
            if bad:
                conditions.append({"type": BAD_GPU_CONDITION, "status": "True"})
            out.append({
                "metadata": {"name": n.name, "labels": dict(n.labels)},
                "spec": {"taints": [{"key": "ome.io/gpu-unhealthy", "effect": "NoSchedule"}]
                         if bad else []},
                "status": {"allocatable": {"nvidia.com/gpu": str(n.capacity)},
                           "conditions": conditions},
            })
        return out

    def _pod_json(self) -> list[JSON]:
        out: list[JSON] = []
        for w in self.worlds.values():
            namespace = w.replica.metadata.namespace
            for pod in w.pods.values():
                meta: dict[str, Any] = {"name": pod.name, "namespace": namespace,
                                        "labels": dict(pod.labels)}
                if pod.deletion_timestamp is not None:
                    meta["deletionTimestamp"] = pod.deletion_timestamp.isoformat()
                spec = dict(pod.body.get("spec") or {})
                spec["nodeName"] = pod.node
                conditions = [] if pod.node is not None else [
                    {"type": "PodScheduled", "status": "False", "reason": pod.sched_reason}]
                out.append({"metadata": meta, "spec": spec,
                            "status": {"phase": pod.phase, "conditions": conditions}})
        return out

    def view(self) -> tuple[ClusterView, tuple[str, ...]]:
        """The advisor's view of the shared cluster now, read as ``kubectl ome advise`` does."""
        replicas = []
        for w in self.worlds.values():
            obj = dict(w.manifest)
            status = w.status_json()
            if status is not None:
                obj["status"] = status
            replicas.append(obj)
        first = next(iter(self.worlds.values()))
        return cluster_view_from_json(self._node_json(), self._pod_json(), replicas,
                                      now=first.time(self.now),
                                      audit=self.scenario.lifecycle.audit)

    def config(self) -> AdvisorConfig:
        """The advisor's configuration: the scenario's bad-GPU condition and audit caps."""
        return AdvisorConfig(bad_gpu_conditions=(BAD_GPU_CONDITION,),
                             audit=self.scenario.lifecycle.audit)

    def advise(self) -> Advice:
        """The advisor's answer now, with the notes of replicas it could not read."""
        view, notes = self.view()
        advice = advise(view, self.config())
        if not notes:
            return advice
        return Advice(recommendations=advice.recommendations, domains=advice.domains,
                      notes=advice.notes + notes)

    def pending(self) -> tuple[str, ...]:
        """The pending gangs the advisor sees, as ``namespace/replica[index]``."""
        view, _ = self.view()
        return tuple(f"{g.namespace}/{g.name}" for g in view.pending)

    def pods_on(self, node: str) -> int:
        """Live pods bound to ``node``, across all replicas."""
        return sum(1 for w in self.worlds.values() for p in w.pods.values() if p.node == node)

    def layout(self) -> tuple[JSON, ...]:
        """Each node's GPUs now: ``name``, ``gpus`` (capacity), ``unhealthy``, ``labels``,
        ``used`` (GPUs per Instance, ``replica[index]``, of its bound pods, terminating ones
        included since they hold their GPUs). What ``omenative advise --plot`` draws."""
        nodes = next(iter(self.worlds.values())).nodes.values()
        used: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
        for name, w in self.worlds.items():
            for pod in w.pods.values():
                if pod.node is None or pod.node not in used:
                    continue
                who = f"{name}[{pod.labels.get(LABEL_INSTANCE_INDEX, '?')}]"
                used[pod.node][who] = used[pod.node].get(who, 0) + pod.gpus
        return tuple({"name": n.name, "gpus": n.capacity,
                      "unhealthy": n.name in self.scenario.unhealthy,
                      "labels": dict(sorted(n.labels.items())),
                      "used": dict(sorted(used[n.name].items()))} for n in nodes)

    def nodes_of(self, name: str) -> tuple[str, ...]:
        """The nodes the live pods of one replica are bound to."""
        return tuple(sorted({str(p.node) for p in self.worlds[name].pods.values()
                             if p.node is not None}))

    # -- moves

    def _migration(self, name: str, request_uuid: str) -> MigrationStatus | None:
        st = self.worlds[name].status
        for m in st.migrations if st is not None else ():
            if m.request_uuid == request_uuid:
                return m
        return None

    def _migration_phase(self, name: str, request_uuid: str) -> str | None:
        m = self._migration(name, request_uuid)
        return None if m is None else m.phase

    def _instance_nodes(self, name: str, index: int) -> tuple[str, ...]:
        w = self.worlds[name]
        return tuple(sorted({str(p.node) for p in w.pods.values()
                             if p.node is not None and p.deletion_timestamp is None
                             and p.labels.get(LABEL_INSTANCE_INDEX) == str(index)}))

    def request(self, rec: Recommendation, requested_at: datetime) -> str:
        """Write the migration request annotation for one move; its request UUID."""
        w = self.worlds[rec.instance.replica]
        request_uuid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        value = move_request(rec, component=str(w.replica.spec.component or ""),
                             tool="omenative advise", requested_by="omenative-advise",
                             requested_at=requested_at)
        w.set_annotation(ANNOTATION_MIGRATION_PREFIX + request_uuid, value)
        return request_uuid

    def move(self, rec: Recommendation) -> MoveOutcome:
        """Request one move and run the worlds until its migration ends (or times out)."""
        started = self.now
        first = next(iter(self.worlds.values()))
        request_uuid = self.request(rec, first.time(started))
        name = rec.instance.replica

        def ended() -> bool:
            return self._migration_phase(name, request_uuid) in _TERMINAL

        self.run_until(started + self.scenario.move_timeout, ended)
        record = self._migration(name, request_uuid)
        phase = "NotAccepted" if record is None else record.phase
        surge = rec.instance.index if record is None or record.surge_instance is None \
            else record.surge_instance
        if phase not in _TERMINAL:
            phase = f"{phase} (not finished by {self.scenario.move_timeout:g}s)"
        return MoveOutcome(recommendation=rec, request_uuid=request_uuid, phase=phase,
                           started_at=started, ended_at=self.now,
                           to_nodes=self._instance_nodes(name, surge))


# ---------------------------------------------------------------------------- the run


def _start(aw: AdviseWorld) -> None:
    """Bring each replica up in turn, on its ``startOn`` nodes (else any sound node)."""
    sc = aw.scenario
    for item in sc.replicas:
        world = aw.add(item.manifest)
        nodes = world.nodes  # the shared nodes
        if item.start_on:
            for n in nodes.values():
                n.cordoned = n.name not in item.start_on
        desired = world.replica.spec.replicas
        want = 1 if desired is None else desired
        name = str(item.manifest["metadata"]["name"])
        aw.run_until(aw.now + sc.start_seconds, lambda name=name, want=want:
                     aw.serving(name) >= want)
        for n in nodes.values():
            n.cordoned = n.name in sc.unhealthy


def run_advise_scenario(scenario: AdviseScenario, *, seed: int = 0) -> AdviseResult:
    """Start the replicas, advise, carry the moves out one by one, and report."""
    aw = AdviseWorld(scenario, seed)
    _start(aw)
    layout_before = aw.layout()
    before = aw.advise()
    pending_before = aw.pending()
    serving_before = {name: aw.serving(name) for name in aw.worlds}
    aw.tracking = True
    aw.min_serving = dict(serving_before)
    moves: list[MoveOutcome] = []
    notes: list[str] = []
    advice = before
    groups = {r.group for r in before.recommendations}
    for _ in range(scenario.max_moves):
        rec = next((r for r in advice.recommendations if r.group in groups), None)
        if rec is None:
            break
        outcome = aw.move(rec)
        moves.append(outcome)
        if outcome.phase != "Completed":
            notes.append(f"migration {outcome.request_uuid} of {rec.instance} ended "
                         f"{outcome.phase}: stopped, as kubectl ome advise --apply does")
            break
        advice = aw.advise()
    else:
        if any(r.group in groups for r in advice.recommendations):
            notes.append(f"stopped after maxMoves={scenario.max_moves} moves")
    aw.run_until(aw.now + scenario.start_seconds)
    return AdviseResult(
        before=before, after=aw.advise(), moves=tuple(moves),
        pending_before=pending_before, pending_after=aw.pending(),
        unhealthy=scenario.unhealthy,
        unhealthy_pods_after={n: aw.pods_on(n) for n in scenario.unhealthy},
        nodes_after={name: aw.nodes_of(name) for name in aw.worlds},
        layout_before=layout_before, layout_after=aw.layout(),
        desired={name: (1 if w.replica.spec.replicas is None else w.replica.spec.replicas)
                 for name, w in aw.worlds.items()},
        serving_before=serving_before,
        serving_after={name: aw.serving(name) for name in aw.worlds},
        min_serving=dict(aw.min_serving), ended_at=aw.now, notes=tuple(notes),
    )
