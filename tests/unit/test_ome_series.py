"""OME's ``ome_omenative_*`` series: names, labels and values as OME's dashboards read them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sim_helpers import engine_manifest

from omenative_controller.observability import Metrics
from omenative_controller.ome_series import condemned_pods, first_ready
from omenative_controller.pass_context import PassContext
from omenative_core.model import LifecycleConfig
from omenative_core.model.status import InferenceReplicaStatus, InstanceOperation, InstanceStatus
from omenative_core.planner import plan
from omenative_core.rollout.phases import Failure as F
from omenative_core.rollout.phases import GroupPhase as G
from omenative_sim.world import ClusterSpec, World

COLUMNAR = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": {}}


def ctx(status: dict[str, Any] | None, observed: Any = None) -> PassContext:
    raw: dict[str, Any] = {"metadata": {"name": "chat-engine", "namespace": "demo",
                                        "labels": {"ome.io/inferenceservice": "chat"}},
                           "spec": {"component": "engine"}}
    if status is not None:
        raw["status"] = status
    return PassContext(key="demo/chat-engine", namespace="demo", name="chat-engine", raw=raw,
                       observed_status=observed)


def body(status: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"component": "engine"}, "status": status}


def row(index: int, pods: int, *, deleting: bool = False) -> InstanceStatus:
    op = InstanceOperation(id=f"op-{index}", type="Delete") if deleting else None
    return InstanceStatus(index=index, pod_count=pods, operation=op)


def status(*rows: InstanceStatus) -> InferenceReplicaStatus:
    return InferenceReplicaStatus(instances=tuple(rows))


def test_a_committed_write_in_another_encoding_counts_one_conversion_with_omes_labels() -> None:
    m = Metrics()
    c = ctx(COLUMNAR, status())
    label = m.ome.status_write(c, body({"instanceStatuses": []}), 1234)
    assert label == "dense_v1"
    m.ome.status_committed(c, body({"instanceStatuses": []}), label, status())
    assert m.sample("ome_omenative_ir_status_conversions_total",
                    {"from": "columnar_v2", "to": "dense_v1"}) == 1
    for result in ("attempt", "committed"):
        assert m.sample("ome_omenative_ir_status_writes_total",
                        {"encoding": "dense_v1", "result": result}) == 1
    assert m.sample("ome_omenative_ir_status_bytes", {
        "namespace": "demo", "name": "chat-engine", "component": "engine",
        "encoding": "dense_v1"}) == 1234
    # our own series are untouched by OME's
    assert m.sample("omenative_status_bytes") == 0


def test_a_write_in_the_stored_encoding_or_a_first_write_converts_nothing() -> None:
    m = Metrics()
    for stored in ({"instanceStatuses": []}, None):
        c = ctx(stored, status())
        label = m.ome.status_write(c, body({}), 10)
        m.ome.status_committed(c, body({}), label, status())
    assert m.sample("ome_omenative_ir_status_conversions_total") == 0
    assert m.sample("ome_omenative_ir_status_writes_total", {"result": "committed"}) == 2


def test_the_bytes_series_follows_the_encoding_and_goes_with_the_replica() -> None:
    m = Metrics()
    c = ctx(None)
    m.ome.status_write(c, body({}), 10)
    m.ome.status_write(c, body(COLUMNAR), 20)
    assert m.sample("ome_omenative_ir_status_bytes", {"encoding": "dense_v1"}) == 0
    assert m.sample("ome_omenative_ir_status_bytes", {"encoding": "columnar_v2"}) == 20
    m.ome.scale_down("demo", "chat-engine", "chat", "engine", active_pods=3, wave_pods=3)
    m.forget_status_bytes("demo", "chat-engine")
    names = {s.name for f in m.registry.collect() for s in f.samples}
    assert "ome_omenative_ir_status_bytes" not in names
    assert "ome_omenative_scale_down_active_pods" not in names


def test_a_scale_down_wave_is_the_pods_of_the_instances_newly_condemned() -> None:
    before = status(row(0, 2), row(1, 2), row(2, 2))
    after = status(row(0, 2), row(1, 2, deleting=True), row(2, 2, deleting=True))
    assert condemned_pods(before, after) == (4, 4)
    # the next pass: the same two still leaving (one pod gone) make no new wave
    later = status(row(0, 2), row(1, 1, deleting=True), row(2, 2, deleting=True))
    assert condemned_pods(after, later) == (3, 0)
    # an Instance whose pods are already gone still costs one, as in OME
    assert condemned_pods(before, status(row(0, 2), row(1, 0, deleting=True))) == (0, 1)


def test_scale_down_series_carry_omes_labels_and_never_defer() -> None:
    m = Metrics()
    before = status(row(0, 4), row(1, 4))
    c = ctx({"instanceStatuses": []}, before)
    label = m.ome.status_write(c, body({}), 10)
    m.ome.status_committed(c, body({}), label, status(row(0, 4), row(1, 4, deleting=True)))
    ident = {"namespace": "demo", "isvc": "chat", "component": "engine"}
    assert m.sample("ome_omenative_scale_down_active_pods", ident) == 4
    assert m.sample("ome_omenative_scale_down_deferred_instances", ident) == 0
    assert m.sample("ome_omenative_scale_down_batch_pods_count", {"component": "engine"}) == 1
    assert m.sample("ome_omenative_scale_down_batch_pods_sum", {"component": "engine"}) == 4
    assert m.sample("ome_omenative_scale_down_oversized_batch_total") == 0


def test_group_transitions_count_phase_changes_only() -> None:
    m = Metrics()
    m.ome.group_transitions("demo", "chat", [(0, "Promoting", "Failed"), (1, "Stable", "Stable")])
    assert m.sample("ome_omenative_rollout_group_transition_total", {
        "namespace": "demo", "isvc": "chat", "group": "0", "from": "Promoting",
        "to": "Failed"}) == 1
    assert m.sample("ome_omenative_rollout_group_transition_total") == 1


def test_codec_errors_count_by_omes_reason() -> None:
    m = Metrics()
    m.ome.codec_error("cardinality_limit")
    assert m.sample("ome_omenative_ir_status_codec_errors_total",
                    {"reason": "cardinality_limit"}) == 1


# ---------------------------------------------------------------- OME's last four families

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def clocked(m: Metrics, seconds: list[float]) -> None:
    """The series' clock reads ``T0 + seconds[0]`` (a test moves it by changing the list)."""
    m.ome.clock = lambda: T0 + timedelta(seconds=seconds[0])


def test_group_phases_count_every_committed_pass_and_failures_count_each_entry() -> None:
    m = Metrics()
    at = [0.0]
    clocked(m, at)
    passes: list[list[tuple[int, str, str, str]]] = [
        [(0, G.PENDING, G.CANARYING, F.NONE), (1, G.STABLE, G.STABLE, F.NONE)],
        [(0, G.CANARYING, G.CANARYING, F.NONE), (1, G.STABLE, G.STABLE, F.NONE)],
        [(0, G.CANARYING, G.FAILED, F.READY_TIMEOUT), (1, G.STABLE, G.STABLE, F.NONE)],
        [(0, G.FAILED, G.FAILED, F.READY_TIMEOUT), (1, G.STABLE, G.STABLE, F.NONE)],
    ]
    for moves in passes:
        m.ome.rollout_groups("demo", "chat", moves)
        at[0] += 30
    phase = "ome_omenative_rollout_group_phase_total"
    assert m.sample(phase, {"group": "0", "phase": "Canarying"}) == 2
    assert m.sample(phase, {"group": "0", "phase": "Failed"}) == 2
    assert m.sample(phase, {"namespace": "demo", "isvc": "chat", "group": "1",
                            "phase": "Stable"}) == 4
    # one entry into Failed, however many passes stay there; the reason is the group's failure
    assert m.sample("ome_omenative_rollout_group_failure_total") == 1
    assert m.sample("ome_omenative_rollout_group_failure_total", {
        "namespace": "demo", "isvc": "chat", "group": "0", "reason": "ReadyTimeout"}) == 1
    # Canarying was entered at t=0 and left at t=60
    dwell = "ome_omenative_rollout_phase_duration_seconds"
    assert m.sample(dwell + "_count", {"phase": "Canarying"}) == 1
    assert m.sample(dwell + "_sum", {"phase": "Canarying"}) == 60
    assert m.sample(dwell + "_bucket", {"phase": "Canarying", "le": "64.0"}) == 1
    assert m.sample(dwell + "_bucket", {"phase": "Canarying", "le": "32.0"}) == 0
    # Pending was entered before this manager looked: its dwell is unknown, not observed
    assert m.sample(dwell + "_count", {"phase": "Pending"}) == 0


def test_a_phase_first_seen_mid_run_is_not_timed_and_a_deleted_isvc_leaves_no_series() -> None:
    m = Metrics()
    at = [0.0]
    clocked(m, at)
    m.ome.rollout_groups("demo", "chat", [(0, G.PROMOTING, G.PROMOTING, F.NONE)])
    at[0] = 90
    m.ome.rollout_groups("demo", "chat", [(0, G.PROMOTING, G.STABLE, F.NONE)])
    m.ome.rollout_groups("demo", "other", [(0, G.STABLE, G.STABLE, F.NONE)])
    assert m.sample("ome_omenative_rollout_phase_duration_seconds_count") == 0
    assert m.sample("ome_omenative_rollout_group_transition_total", {"isvc": "chat"}) == 1
    m.ome.forget_isvc("demo", "chat")
    left = {(s.name, s.labels.get("isvc")) for f in m.registry.collect() for s in f.samples
            if s.name.startswith("ome_omenative_rollout_group") and s.name.endswith("_total")}
    assert left == {("ome_omenative_rollout_group_phase_total", "other")}


IDENT = {"namespace": "demo", "isvc": "chat", "component": "engine"}


def _world(replicas: int = 2, **config: Any) -> World:
    return World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=3,
                             pod_ready_seconds=4.0),
                 engine_manifest(replicas=replicas, workers=1),
                 config=LifecycleConfig(**config))


def test_scale_down_waves_under_a_pod_budget_defer_and_count_oversized_as_ome() -> None:
    # 4 Instances of 2 pods, a budget of 1 pod: each wave admits one Instance alone (over
    # the whole budget: oversized), the others wait for it to go
    world = _world(4, scale_down_pod_batch_size=1)
    m = Metrics()
    _passes(world, m, until=30)
    world.patch_replica({"spec": {"replicas": 1}})
    seen: list[float] = []
    _passes(world, m, until=world.now + 300, seen=seen)
    assert world.status is not None and len(world.status.instances) == 1
    assert seen[0] == 2 and seen[-1] == 0
    assert 1 in seen  # after the first Instance went, one still waited
    assert m.sample("ome_omenative_scale_down_oversized_batch_total",
                    {"component": "engine"}) == 3
    batch = "ome_omenative_scale_down_batch_pods"
    assert m.sample(batch + "_count", {"component": "engine"}) == 3
    assert m.sample(batch + "_sum", {"component": "engine"}) == 6


def _passes(world: World, m: Metrics, until: float,
            seen: list[float] | None = None) -> None:
    """Plan, apply and commit (as the executor reports it) every pass until ``until``;
    ``seen`` gets the deferred-Instances gauge after each."""
    while world.now <= until:
        snap = world.snapshot()
        p = plan(snap)
        c = ctx({"instanceStatuses": []}, snap.replica.status)
        m.ome.planned_wave(c.key, p.scale_down_wave)
        label = m.ome.status_write(c, body({}), 10)
        m.ome.status_committed(c, body({}), label, p.status, pods=lambda _key, s=snap: s.pods)
        if seen is not None:
            seen.append(m.sample("ome_omenative_scale_down_deferred_instances", IDENT))
        if p.actions:
            world.apply(p)
            continue
        nxt = world.next_event_time()
        if nxt is None:
            return
        world.advance(nxt)


def test_pod_create_to_ready_is_observed_once_per_created_instance_from_its_first_pod() -> None:
    world = _world()
    m = Metrics()
    m.ome.clock = lambda: world.time(world.now)
    _passes(world, m, until=60)
    assert world.status is not None
    assert [r.phase for r in world.status.instances] == ["Ready", "Ready"]
    ident = IDENT
    hist = "ome_omenative_pod_create_to_ready_seconds"
    # both Instances' pods were created at t=0 and were Ready 3 + 4 s later
    assert m.sample(hist + "_count", ident) == 2
    assert m.sample(hist + "_sum", ident) == 14
    assert m.sample(hist + "_bucket", {**ident, "le": "8.0"}) == 2
    assert m.sample(hist + "_bucket", {**ident, "le": "4.0"}) == 0
    # later passes (nothing newly Ready) observe nothing more; the ISVC's deletion drops it
    _passes(world, m, until=120)
    assert m.sample(hist + "_count", ident) == 2
    m.ome.forget_isvc("demo", "chat")
    assert hist + "_count" not in {s.name for f in m.registry.collect() for s in f.samples}


def test_first_ready_needs_a_create_that_ends_ready() -> None:
    creating = InstanceStatus(index=0, phase="Creating",
                              operation=InstanceOperation(id="c", type="Create"))
    restarting = InstanceStatus(index=1, phase="Restarting",
                                operation=InstanceOperation(id="r", type="Restart"))
    ready0, ready1 = (InstanceStatus(index=i, phase="Ready") for i in (0, 1))
    assert first_ready(status(creating, restarting), status(ready0, ready1)) == [(0, 1)]
    assert first_ready(status(ready0), status(ready0)) == []
    assert first_ready(None, status(ready0)) == []
