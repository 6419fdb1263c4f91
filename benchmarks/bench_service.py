"""InferenceService and rollout-layer benchmarks (``make bench``, after the planner's).

1. ``render_service`` for one InferenceService with an engine (leader + worker), a decoder
   and a router of N Instances each, and ``service_status`` for it with the three live
   InferenceReplicas whose status has N Instance rows each. Beside them, for context, the
   shell's decode of those three InferenceReplicas from JSON (``replica_from_json``): it is
   not part of the pure layer, but both controllers pay it on every pass.
2. ``member_view`` (engine + decoder) and ``decide`` for a canary group of engine + decoder
   with N Instances per member, in three states: at rest (Stable), at the start of a run (a
   new revision appears) and mid-run (step 2 of 3: a quarter of the Instances Ready on the
   canary, an eighth surging to it).

N = 10, 100, 1,000 and 10,000. All inputs are built (and checked) first; then every cell is
timed round-robin, one sample of every row and size before the next, so a change in the
machine's load hits all sizes alike. Each figure is the median of ``REPEAT`` samples, each
looping the call until it has run for at least ``MIN_SAMPLE``. The ratio between
consecutive sizes is printed for the time and for the number of Python function calls
(counted with ``sys.setprofile``), which is free of timing noise: linear work shows ~10x
per 10x size, work independent of N ~1x.

Timing lives here, never in pass/fail tests; the asserts only keep the inputs honest.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from attrs import evolve
from callcount import function_calls
from tiny import pick

from omenative_controller.decoded import ReplicaDecoder
from omenative_core.model.spec import InferenceReplica, ObjectMeta
from omenative_core.model.status import InferenceReplicaStatus, InstanceOperation, InstanceStatus
from omenative_core.rollout import (
    MemberView,
    RolloutDecision,
    RolloutSpec,
    RolloutState,
    canary_capacity,
    decide,
    member_view,
    parse_rollout,
    validate_rollout,
)
from omenative_core.service import (
    CRD_POD_GROUP,
    InferenceService,
    ServicePlan,
    isvc_from_json,
    render_service,
    service_status,
)
from omenative_core.status.wire import replica_from_json, replica_to_json

SIZES = pick((10, 100, 1000, 10000), (10, 20))
COMPONENTS = ("engine", "decoder", "router")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: seconds per sample; short calls are looped until a sample is this long
MIN_SAMPLE = pick(0.05, 0.001)
REPEAT = pick(9, 1)

# --------------------------------------------------------------------------------- measuring


def _loops(fn: Callable[[], object]) -> int:
    """Calls of ``fn`` per sample so that one sample takes at least ``MIN_SAMPLE``."""
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        took = time.perf_counter() - t0
        if took >= MIN_SAMPLE:
            return loops
        loops *= 2 if took * 4 >= MIN_SAMPLE else 8


def _sample(fn: Callable[[], object], loops: int) -> float:
    t0 = time.perf_counter()
    for _ in range(loops):
        fn()
    return (time.perf_counter() - t0) / loops


class Table:
    """Rows of (label, per-size median time and calls); printed with consecutive ratios."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.fns: dict[str, dict[int, Callable[[], object]]] = {}
        self.rows: dict[str, dict[int, tuple[float, int]]] = {}

    def add(self, label: str, n: int, fn: Callable[[], object]) -> None:
        self.fns.setdefault(label, {})[n] = fn

    def print(self) -> None:
        sizes = [n for n in SIZES if all(n in r for r in self.rows.values())]
        steps = list(itertools.pairwise(sizes))
        ratios = [f"{_short(b)}/{_short(a)}" for a, b in steps]
        width = max(len(label) for label in self.rows)
        print(f"\n== {self.title} ==")
        pad = " " * (width + 1 + 11 * len(sizes))
        tops = f"{pad}  {'time ratio':^{8 * len(steps)}}  {'calls ratio':^{8 * len(steps)}}"
        print(tops.rstrip())
        print(
            f"{'':<{width}} "
            + "".join(f"{f'N={n:,}':>11}" for n in sizes)
            + "  "
            + "".join(f"{r:>8}" for r in ratios)
            + "  "
            + "".join(f"{r:>8}" for r in ratios)
        )
        for label, by_n in self.rows.items():
            print(
                f"{label:<{width}} "
                + "".join(f"{_ms(by_n[n][0]):>11}" for n in sizes)
                + "  "
                + "".join(f"{by_n[b][0] / by_n[a][0]:>7.1f}x" for a, b in steps)
                + "  "
                + "".join(f"{by_n[b][1] / by_n[a][1]:>7.2f}x" for a, b in steps)
            )
        print(f"function calls at N={sizes[-1]:,}:")
        for label, by_n in self.rows.items():
            print(f"  {label:<{width}} {by_n[sizes[-1]][1]:>9,}")
        sys.stdout.flush()


def measure(tables: list[Table]) -> None:
    """Time every registered call, round-robin: sample ``r`` of every row and size is taken
    before sample ``r + 1`` of any, so a change in machine load hits all sizes alike."""
    cells = [
        (t, label, n, fn) for t in tables for label, by_n in t.fns.items() for n, fn in by_n.items()
    ]
    loops = [_loops(fn) for _, _, _, fn in cells]
    samples: list[list[float]] = [[] for _ in cells]
    gc.collect()
    gc.freeze()  # the inputs leave GC tracking, as in a warmed-up controller
    try:
        for _ in range(REPEAT):
            for i, (_, _, _, fn) in enumerate(cells):
                samples[i].append(_sample(fn, loops[i]))
    finally:
        gc.unfreeze()
    for i, (t, label, n, fn) in enumerate(cells):
        t.rows.setdefault(label, {})[n] = (statistics.median(samples[i]), function_calls(fn))


def _short(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def _ms(seconds: float) -> str:
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1000:.2f} ms"


# --------------------------------------------------------------------------------- inputs


def _isvc(n: int, rollout: Mapping[str, Any] | None = None) -> InferenceService:
    def component(image: str, **extra: Any) -> dict[str, Any]:
        return {"minReplicas": n, "maxReplicas": n, "runner": {"image": image}, **extra}

    spec: dict[str, Any] = {
        "deploymentMode": "OMENative",
        "engine": component("engine:1", leader={}, worker={"size": 1}),
        "decoder": component("decoder:1"),
        "router": component("router:1"),
    }
    if rollout is not None:
        spec["rollout"] = rollout
    return isvc_from_json(
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "chat", "namespace": "prod", "uid": "isvc-uid", "generation": 1},
            "spec": spec,
        }
    )


def _ready(index: int, revision: str, pods: int) -> InstanceStatus:
    return InstanceStatus(
        index=index,
        phase="Ready",
        running_revision=revision,
        target_revision=revision,
        pod_count=pods,
        serving_pod_count=pods,
        available_pod_count=pods,
        admitted=True,
        ready_since=T0,
    )


def _surging(index: int, old: str, new: str, pods: int) -> InstanceStatus:
    """An Instance updating from ``old`` to ``new`` by surge, still serving on ``old``."""
    return InstanceStatus(
        index=index,
        phase="Updating",
        running_revision=old,
        target_revision=new,
        pod_count=pods + (1 if pods == 1 else 0),  # a single-pod Instance surges in its slot
        serving_pod_count=pods,
        available_pod_count=pods,
        admitted=True,
        ready_since=T0,
        operation=InstanceOperation(
            id=f"update-{index}",
            type="Update",
            step="Surge",
            target_revision=new,
            strategy="SurgeThenDrain",
        ),
    )


def _status(
    n: int, pods: int, old: str, new: str = "", on_new: int = 0, surging: int = 0
) -> InferenceReplicaStatus:
    """N rows: the first ``n - on_new - surging`` Ready on ``old``, then ``surging`` rows
    surging to ``new``, then ``on_new`` Ready on ``new`` (the planner moves the highest
    indexes first)."""
    new = new or old
    keep = n - on_new - surging
    rows = [
        _ready(i, old, pods)
        if i < keep
        else _surging(i, old, new, pods)
        if i < keep + surging
        else _ready(i, new, pods)
        for i in range(n)
    ]
    return InferenceReplicaStatus(
        observed_generation=1,
        replicas=n,
        ready_replicas=n,
        serving_replicas=n,
        available_replicas=n,
        updated_replicas=on_new if new != old else n,
        updated_ready_replicas=on_new if new != old else n,
        current_revision=old,
        update_revision=new,
        instances=tuple(rows),
    )


def _live(
    plan: ServicePlan, component: str, status: InferenceReplicaStatus | None
) -> InferenceReplica:
    cp = plan.component(component)
    assert cp is not None and cp.replica is not None
    ir = replica_from_json(cp.replica)
    return InferenceReplica(
        metadata=ObjectMeta(name=ir.metadata.name, namespace=ir.metadata.namespace, uid="ir"),
        spec=ir.spec,
        status=status,
    )


def _revision(plan: ServicePlan, component: str) -> str:
    cp = plan.component(component)
    assert cp is not None and cp.revision_hash
    return f"{plan.isvc}-{component}-{cp.revision_hash}"


def _pods(plan: ServicePlan, component: str) -> int:
    cp = plan.component(component)
    assert cp is not None
    return 2 if cp.multi_pod else 1


# --------------------------------------------------------------------------------- 1. service


def bench_service(table: Table, n: int) -> None:
    isvc = _isvc(n)
    crds = [CRD_POD_GROUP]
    plan = render_service(isvc, [], crds)
    assert [c.component for c in plan.components] == list(COMPONENTS)
    assert all(c.mode == "OMENative" and not c.blocked and c.replicas == n for c in plan.components)
    assert _pods(plan, "engine") == 2 and _pods(plan, "decoder") == 1
    assert render_service(isvc, [], crds) == plan  # deterministic
    live = {c: _live(plan, c, _status(n, _pods(plan, c), _revision(plan, c))) for c in COMPONENTS}
    first = service_status(isvc, plan, live, T0)
    # the steady pass: the ISVC carries the status written last pass
    again = isvc_from_json({**isvc.raw, "status": first})
    out = service_status(again, plan, live, T0 + timedelta(minutes=1))
    assert out == first, "an unchanged world must write an identical status"
    for c in COMPONENTS:
        lc = out["components"][c]["lifecycle"]
        assert lc["replicas"] == lc["readyReplicas"] == lc["servingReplicas"] == n, (c, lc)
    conds = {c["type"]: (c["status"], c["reason"]) for c in out["conditions"]}
    assert conds == {
        "EngineReady": ("True", "Ready"),
        "DecoderReady": ("True", "Ready"),
        "RouterReady": ("True", "Ready"),
        "Ready": ("True", "Ready"),
    }, conds
    wire = {c: replica_to_json(ir) for c, ir in live.items()}
    assert all(replica_from_json(w).status == live[c].status for c, w in wire.items())

    table.add("render_service (3 components)", n, lambda: render_service(isvc, [], crds))
    table.add("service_status (3 live IRs)", n, lambda: service_status(again, plan, live, T0))
    table.add(
        "[context] replica_from_json x3",
        n,
        lambda: [replica_from_json(w) for w in wire.values()],
    )
    # what the shell pays per pass for replicas that did not change: a cache hit
    for c, w in wire.items():
        w["metadata"] = {**w["metadata"], "uid": f"uid-{c}", "resourceVersion": "1"}
    decoder = ReplicaDecoder()
    assert all(decoder.decode(w).status == live[c].status for c, w in wire.items())
    table.add(
        "[shell] ReplicaDecoder x3, unchanged",
        n,
        lambda: [decoder.decode(w) for w in wire.values()],
    )
    assert decoder.decodes == len(wire), "an unchanged replica is decoded once"


# --------------------------------------------------------------------------------- 2. rollout

ROLLOUT = {
    "groups": [
        {
            "components": ["engine", "decoder"],
            "canary": {
                "steps": [
                    {"capacity": "25%", "traffic": 25},
                    {"capacity": "50%", "traffic": 50, "pause": {}},
                    {"capacity": "100%", "traffic": 100},
                ]
            },
        }
    ]
}
MEMBERS = ("engine", "decoder")


class _Group:
    """The engine + decoder members of one canary group, with N Instances each."""

    def __init__(self, n: int) -> None:
        self.n = n
        old, new = _isvc(n, ROLLOUT), _isvc(n, ROLLOUT)
        new = isvc_from_json(
            {
                **new.raw,
                "spec": {
                    **new.raw["spec"],
                    "engine": {**new.raw["spec"]["engine"], "runner": {"image": "engine:2"}},
                    "decoder": {**new.raw["spec"]["decoder"], "runner": {"image": "decoder:2"}},
                },
            }
        )
        self.plan_old = render_service(old, [], [CRD_POD_GROUP])
        self.plan_new = render_service(new, [], [CRD_POD_GROUP])
        self.spec: RolloutSpec = parse_rollout(ROLLOUT)
        problems = validate_rollout(self.spec)
        assert all(p.warning for p in problems), problems
        self.old = {c: _revision(self.plan_old, c) for c in MEMBERS}
        self.spec_new = {c: _live(self.plan_new, c, None).spec for c in MEMBERS}
        self.new = {c: _revision(self.plan_new, c) for c in MEMBERS}
        assert all(self.old[c] != self.new[c] for c in MEMBERS)

    def replicas(self, on_new: int = 0, surging: int = 0) -> dict[str, InferenceReplica]:
        """Live InferenceReplicas: spec on the new revision when anything moves."""
        moving = on_new or surging
        plan = self.plan_new if moving else self.plan_old
        return {
            c: _live(
                plan,
                c,
                _status(self.n, _pods(plan, c), self.old[c], self.new[c], on_new, surging),
            )
            for c in MEMBERS
        }

    def views(
        self, replicas: Mapping[str, InferenceReplica], revisions: Mapping[str, str]
    ) -> dict[str, MemberView]:
        return {c: member_view(replicas[c], revisions[c]) for c in MEMBERS}

    def decide(
        self, state: RolloutState | None, views: Mapping[str, MemberView], now: datetime = T0
    ) -> RolloutDecision:
        return decide(self.spec, state, views, now)


def _allowed(d: RolloutDecision) -> dict[str, int]:
    return {c: cd.allowed for c, cd in d.components.items()}


def bench_rollout(table: Table, n: int) -> None:
    g = _Group(n)
    quarter, half = canary_capacity("25%", n), canary_capacity("50%", n)
    # at rest: every Instance Ready on the stable revision
    rest_irs = g.replicas()
    rest_views = g.views(rest_irs, g.old)
    for v in rest_views.values():
        assert sum(v.instances.values()) == sum(v.ready.values()) == n, v
    first = g.decide(None, rest_views)
    stable = first.state
    assert stable.groups[0].phase == "Stable", stable
    rest = g.decide(stable, rest_views, T0 + timedelta(minutes=1))
    assert rest.events == () and rest.state == stable, "at rest: no events, state unchanged"
    assert _allowed(rest) == {"engine": n, "decoder": n}
    assert all(cd.pacing.partition == 0 for cd in rest.components.values())

    # the start of a run: the specs render a new revision, every Instance still on the old
    start_irs = {c: evolve(ir, spec=g.spec_new[c]) for c, ir in rest_irs.items()}
    start_views = g.views(start_irs, g.new)
    start = g.decide(stable, start_views)
    assert [e.reason for e in start.events] == ["RolloutStarted"], start.events
    assert start.state.groups[0].canary == g.new
    assert all(cd.allowed < n for cd in start.components.values()), _allowed(start)

    # mid-run: step 2 of 3 (50%), a quarter Ready on the canary and an eighth surging to it
    pending = start.state
    running = g.decide(pending, start_views, T0 + timedelta(seconds=1))
    moved_irs = g.replicas(on_new=quarter)
    step1 = g.decide(running.state, g.views(moved_irs, g.new), T0 + timedelta(seconds=2))
    assert "RolloutStepAdvanced" in [e.reason for e in step1.events], (step1.events, n)
    assert step1.state.groups[0].step == 1
    mid_irs = g.replicas(on_new=quarter, surging=(half - quarter) // 2)
    mid_views = g.views(mid_irs, g.new)
    for v in mid_views.values():
        assert v.on(g.new[v.component]) == v.ready_on(g.new[v.component]) == quarter, v
        assert sum(v.instances.values()) == n, v
    now = T0 + timedelta(seconds=3)
    mid_first = g.decide(step1.state, mid_views, now)
    mid = g.decide(mid_first.state, mid_views, now)
    assert mid.events == () and mid.state == mid_first.state, "a repeated pass changes nothing"
    gs = mid.state.groups[0]
    assert (gs.phase, gs.step, gs.gate) == ("Canarying", 1, "Capacity"), gs
    assert _allowed(mid) == {"engine": half, "decoder": half}

    table.add("member_view x2, at rest", n, lambda: g.views(rest_irs, g.old))
    table.add("decide, at rest", n, lambda: g.decide(stable, rest_views, T0))
    table.add("member_view x2, run starts", n, lambda: g.views(start_irs, g.new))
    table.add("decide, run starts", n, lambda: g.decide(stable, start_views, T0))
    table.add("member_view x2, mid-run", n, lambda: g.views(mid_irs, g.new))
    table.add("decide, mid-run", n, lambda: g.decide(mid_first.state, mid_views, now))


def main() -> int:
    began = time.perf_counter()
    service = Table("InferenceService layer: engine (leader+worker) + decoder + router, N each")
    rollout = Table("rollout layer: canary group engine + decoder, N Instances per member")
    for n in SIZES:
        t0 = time.perf_counter()
        bench_service(service, n)
        bench_rollout(rollout, n)
        print(f"N={n:,}: inputs built and checked in {time.perf_counter() - t0:.1f}s", flush=True)
    t0 = time.perf_counter()
    measure([service, rollout])
    print(f"measured in {time.perf_counter() - t0:.0f}s ({REPEAT} samples per cell, round-robin)")
    service.print()
    rollout.print()
    print(f"\ntotal {time.perf_counter() - began:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
