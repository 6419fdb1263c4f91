"""The GPU caretaker on generated clusters: every move is allowed, fits, and does its job.

Each generated cluster has 8-GPU nodes in up to two topology domains (some NotReady,
cordoned or flagged by a bad-GPU condition), Instances of a few replicas placed where they
fit, and pending gangs. The checks replay the advice on an independent model of free GPUs
(written here, not the advisor's ``Capacity``), one move after another as the shell runs
them.
"""

from __future__ import annotations

import random
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from omenative_core.advisor import (
    Advice,
    AdvisorConfig,
    ClusterView,
    GpuNode,
    GpuPod,
    InstanceKey,
    PendingGang,
    ReplicaView,
    advise,
)
from omenative_core.model.config import AuditConfig

NS = "ml"
TOPO = "example.com/fabric"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterView, AdvisorConfig]:
    n_nodes = draw(st.integers(2, 10))
    two_domains = draw(st.booleans())
    nodes = []
    for i in range(n_nodes):
        health = draw(st.sampled_from(["ok"] * 6 + ["notready", "cordoned", "badgpu"]))
        nodes.append(GpuNode(
            name=f"n{i:02d}", gpus=8,
            labels={TOPO: f"d{i % 2 if two_domains else 0}"},
            ready=health != "notready", schedulable=health not in ("cordoned", "notready"),
            cordoned=health == "cordoned",
            conditions=frozenset({"Ready"} if health != "notready" else set())
            | ({"GpuFault"} if health == "badgpu" else set()),
        ))
    free = {n.name: n.gpus for n in nodes}
    rng = random.Random(draw(st.integers(0, 2**16)))
    pods, replicas = [], []
    for r in range(draw(st.integers(1, 3))):
        shape = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=2))
        count = draw(st.integers(1, 5))
        placed: list[int] = []
        for index in range(count):
            where = []
            for gpus in shape:
                fits = [n for n in sorted(free) if free[n] >= gpus]
                if not fits:
                    break
                node = rng.choice(fits)
                free[node] -= gpus
                where.append((node, gpus))
            if len(where) < len(shape):
                for node, gpus in where:
                    free[node] += gpus
                continue
            placed.append(index)
            pods += [GpuPod(name=f"r{r}-{index}-{k}", node=node, gpus=gpus,
                            owner=InstanceKey(NS, f"r{r}", index))
                     for k, (node, gpus) in enumerate(where)]
        ready = frozenset(i for i in placed if draw(st.integers(0, 4)) > 0)
        replicas.append(ReplicaView(
            namespace=NS, name=f"r{r}", desired=count, ready=ready,
            migration_never=draw(st.integers(0, 5)) == 0,
            topology_key=TOPO if draw(st.booleans()) else None,
            migrations_in_flight=1 if draw(st.integers(0, 6)) == 0 else 0,
            migrations_in_window=draw(st.integers(0, 3)),
        ))
    pending = tuple(
        PendingGang(namespace=NS, name=f"gang{g}",
                    pod_gpus=tuple(draw(st.lists(st.sampled_from([4, 8]), min_size=1,
                                                  max_size=3))),
                    topology_key=TOPO if draw(st.booleans()) else None)
        for g in range(draw(st.integers(0, 2)))
    )
    config = AdvisorConfig(
        bad_gpu_conditions=("GpuFault",),
        max_moves_per_gang=draw(st.integers(1, 4)),
        audit=AuditConfig(max_in_flight_migrations=draw(st.integers(0, 3)),
                          max_migrations_per_window=draw(st.integers(0, 6))),
    )
    return ClusterView(nodes=tuple(nodes), pods=tuple(pods), replicas=tuple(replicas),
                       pending=pending), config


class Model:
    """Free GPUs per node, and where each Instance's pods are: the replay's own bookkeeping."""

    def __init__(self, view: ClusterView, config: AdvisorConfig) -> None:
        self.nodes = {n.name: n for n in view.nodes}
        self.sound = {
            n.name for n in view.nodes
            if n.ready and n.schedulable and not n.cordoned
            and not (n.conditions & set(config.bad_gpu_conditions))
        }
        self.free = {n.name: n.gpus for n in view.nodes}
        self.pods: dict[InstanceKey, list[tuple[str, int]]] = defaultdict(list)
        for p in view.pods:
            self.free[p.node] -= p.gpus
            if p.owner:
                self.pods[p.owner].append((p.node, p.gpus))

    def fit(self, sizes: list[int], names: list[str]) -> dict[str, int] | None:
        """Any-fit of ``sizes`` onto ``names`` (largest first), without changing the model."""
        free = {n: self.free[n] for n in names if n in self.sound}
        out: dict[str, int] = defaultdict(int)
        for gpus in sorted(sizes, reverse=True):
            fits = sorted((f, n) for n, f in free.items() if f >= gpus)
            if not fits:
                return None
            node = fits[0][1]
            free[node] -= gpus
            out[node] += gpus
        return dict(out)

    def fits_in_one_domain(self, sizes: list[int], key: str | None) -> bool:
        domains: dict[str | None, list[str]] = defaultdict(list)
        for name in self.sound:
            if key is None:
                domains[None].append(name)
            elif key in self.nodes[name].labels:
                domains[self.nodes[name].labels[key]].append(name)
        return any(self.fit(sizes, names) is not None for names in domains.values())


def _check_rules(view: ClusterView, config: AdvisorConfig, advice: Advice) -> None:
    replicas = {(r.namespace, r.name): r for r in view.replicas}
    seen: set[InstanceKey] = set()
    per_replica: dict[str, int] = defaultdict(int)
    for rec in advice.recommendations:
        replica = replicas[(rec.instance.namespace, rec.instance.replica)]
        assert rec.instance not in seen, f"{rec.instance} moved twice"
        seen.add(rec.instance)
        assert rec.instance.index in replica.ready, f"{rec.instance} is not Ready"
        assert not replica.migration_never, f"{rec.instance} has policy Never"
        assert replica.migrations_in_flight == 0, f"{rec.instance}: a migration in flight"
        per_replica[replica.name] += 1
        assert config.audit.max_in_flight_migrations > 0
        assert (replica.migrations_in_window + per_replica[replica.name]
                <= config.audit.max_migrations_per_window), f"{rec.instance}: past the cap"
        assert rec.cost.instances_moved <= max(config.max_moves_per_gang, 1)


def _replay(view: ClusterView, config: AdvisorConfig, advice: Advice) -> None:
    model = Model(view, config)
    replicas = {(r.namespace, r.name): r for r in view.replicas}
    groups: dict[str, list] = defaultdict(list)
    for rec in advice.recommendations:
        groups[rec.group].append(rec)
    for group, recs in groups.items():
        for rec in sorted(recs, key=lambda r: r.step):
            sizes = [g for _, g in model.pods[rec.instance]]
            # the replacement fits on the hinted nodes while the original still holds its GPUs
            taken = model.fit(sizes, list(rec.target_nodes))
            assert taken is not None, f"{group}: {rec.instance}'s replacement does not fit"
            key = replicas[(rec.instance.namespace, rec.instance.replica)].topology_key
            if key:
                assert len({model.nodes[n].labels.get(key) for n in taken}) == 1
            for node, gpus in model.pods[rec.instance]:
                model.free[node] += gpus
            for node, gpus in taken.items():
                model.free[node] -= gpus
            model.pods[rec.instance] = list(taken.items())
            if rec.reason != "Fragmentation":
                bad = group.removeprefix("empty ")
                assert bad not in taken, f"{rec.instance} moved onto the node it leaves"
        gang = next((g for g in view.pending if f"place {g.namespace}/{g.name}" == group), None)
        if gang is not None:
            assert model.fits_in_one_domain(list(gang.pod_gpus), gang.topology_key), (
                f"{group}: the moves do not make room for the gang")
            # the gang takes the room, as the advisor assumed for later gangs
            for node, gpus in (_fit_in_domain(model, gang) or {}).items():
                model.free[node] -= gpus


def _fit_in_domain(model: Model, gang: PendingGang) -> dict[str, int] | None:
    domains: dict[str | None, list[str]] = defaultdict(list)
    for name in sorted(model.sound):
        label = model.nodes[name].labels.get(gang.topology_key) if gang.topology_key else None
        if gang.topology_key is None or label is not None:
            domains[label].append(name)
    for names in domains.values():
        taken = model.fit(list(gang.pod_gpus), names)
        if taken is not None:
            return taken
    return None


@settings(deadline=None)
@given(clusters())
def test_every_move_is_allowed_and_fits_and_does_its_job(case: tuple[ClusterView, AdvisorConfig]
                                                         ) -> None:
    view, config = case
    advice = advise(view, config)
    _check_rules(view, config, advice)
    _replay(view, config, advice)


@settings(deadline=None)
@given(clusters(), st.randoms(use_true_random=False))
def test_same_cluster_in_any_order_gives_the_same_advice(
        case: tuple[ClusterView, AdvisorConfig], rnd: random.Random) -> None:
    view, config = case
    shuffled = ClusterView(
        nodes=tuple(rnd.sample(view.nodes, len(view.nodes))),
        pods=tuple(rnd.sample(view.pods, len(view.pods))),
        replicas=tuple(rnd.sample(view.replicas, len(view.replicas))),
        pending=view.pending,
    )
    assert advise(shuffled, config) == advise(view, config)
