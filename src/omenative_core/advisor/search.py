"""Which Instance moves help: emptying unsound nodes, and room for a pending gang.

Theory of operation:

1. Every move is replacement-first (an omenative migration): the replacement must fit
   *now*, while the Instance it replaces still holds its GPUs. The advisor proves that on
   a what-if model (``Capacity``, with an undo journal) before it recommends anything, and
   keeps the moves it recommends there, so later recommendations account for earlier ones.
2. Unsound nodes first: each Ready Instance on a NotReady node, a node with a bad-GPU
   condition (``UnhealthyNode``) or a cordoned node (``Cordoned``) is moved elsewhere when
   its replacement fits.
3. Then each pending gang (largest first): if it fits already, it waits for something
   else and the advisor says so. Otherwise, for each topology domain it may use, its pods
   are placed one by one (largest first, best fit); a pod that fits nowhere gets the node
   that the fewest movable Instances would free for it, and those Instances' replacements
   are placed elsewhere (outside the gang's domain when they fit there, never on the
   gang's nodes). The domain needing the fewest moves
   wins; more than ``max_moves_per_gang`` moves is no answer.
4. What never moves: an Instance that is not Ready, of a replica whose migration policy is
   ``Never``, of a replica with a migration in flight, or past the audit caps (in flight
   at once, started per window). Moves of one replica run one after another, never at once.

No clock, no I/O, no randomness; ties are broken by name, so the same view gives the same
advice.
"""

from __future__ import annotations

from omenative_core.advisor.capacity import Capacity, node_is_sound
from omenative_core.advisor.model import (
    REASONS,
    Advice,
    AdvisorConfig,
    Benefit,
    ClusterView,
    Cost,
    InstanceKey,
    PendingGang,
    Recommendation,
    ReplicaView,
)

__all__ = ["advise"]

_NODE_TRIES = 8
"""Candidate nodes tried per pod of a pending gang before that domain is given up."""


class _Budget:
    """Who may move: the rules of point 4, with the moves planned so far."""

    def __init__(self, replicas: dict[tuple[str, str], ReplicaView],
                 config: AdvisorConfig) -> None:
        self.replicas = replicas
        self.config = config
        self.planned: dict[tuple[str, str], int] = {}
        self.moved: set[InstanceKey] = set()

    def copy(self) -> _Budget:
        other = _Budget(self.replicas, self.config)
        other.planned = dict(self.planned)
        other.moved = set(self.moved)
        return other

    def refusal(self, key: InstanceKey) -> str | None:
        """None when ``key`` may move now, else why not, in words."""
        replica = self.replicas.get((key.namespace, key.replica))
        audit = self.config.audit
        planned = self.planned.get((key.namespace, key.replica), 0)
        if replica is None:
            reason = "not an Instance of a known InferenceReplica"
        elif key in self.moved:
            reason = "already moved by this advice"
        elif replica.migration_never:
            reason = "its migration policy is Never"
        elif key.index not in replica.ready:
            reason = "it is not Ready (only serving Instances move)"
        elif replica.migrations_in_flight > 0:
            reason = "a migration of its replica is in flight"
        elif audit is None:
            reason = ("lifecycle.audit is not configured: the manager would keep the "
                      "migration waiting in Accepted")
        elif audit.max_in_flight_migrations <= 0 or audit.max_migrations_per_window <= 0:
            reason = "the audit caps allow no migrations (lifecycle.audit)"
        elif replica.migrations_in_window + planned >= audit.max_migrations_per_window:
            reason = (f"its replica reached the cap of {audit.max_migrations_per_window} "
                      f"migrations per window (lifecycle.audit)")
        else:
            return None
        return reason

    def take(self, key: InstanceKey) -> None:
        rkey = (key.namespace, key.replica)
        self.planned[rkey] = self.planned.get(rkey, 0) + 1
        self.moved.add(key)


class _Move:
    """One planned move on the what-if model."""

    __slots__ = ("from_nodes", "key", "taken", "target_domain")

    def __init__(self, key: InstanceKey, from_nodes: tuple[str, ...],
                 taken: dict[str, int], target_domain: str | None) -> None:
        self.key = key
        self.from_nodes = from_nodes
        self.taken = taken
        self.target_domain = target_domain


def _move(cap: Capacity, budget: _Budget, key: InstanceKey,
          avoid: frozenset[str]) -> _Move | None:
    """Place ``key``'s replacement (the original still held), then release the original."""
    replica = budget.replicas[(key.namespace, key.replica)]
    placed = cap.place_in_one_domain(tuple(cap.pod_gpus[key]), replica.topology_key,
                                     avoid | frozenset(cap.held.get(key, {})))
    if placed is None:
        return None
    domain, taken = placed
    from_nodes = tuple(sorted(cap.release(key)))
    cap.occupy(key, taken)
    budget.take(key)
    return _Move(key, from_nodes, taken, domain)


class _Advisor:
    def __init__(self, view: ClusterView, config: AdvisorConfig) -> None:
        self.view = view
        self.config = config
        self.cap = Capacity(view, config.bad_gpu_conditions)
        self.budget = _Budget({(r.namespace, r.name): r for r in view.replicas}, config)
        self.recommendations: list[Recommendation] = []
        self.notes: list[str] = []
        #: Instances left on an unsound node for want of room (and that node): the next
        #: answer moves them into the first room that opens
        self.stuck: list[tuple[InstanceKey, str]] = []

    def _gang_key(self) -> str | None:
        keys = sorted({g.topology_key for g in self.view.pending if g.topology_key})
        return keys[0] if keys else None

    def _metrics(self) -> tuple[int, int]:
        return self.cap.free_whole_nodes(), self.cap.largest_placeable_gang(self._gang_key())

    def _emit(self, moves: list[_Move], reason: str, group: str, gang: str | None,
              before: tuple[int, int], after: tuple[int, int]) -> None:
        benefit = Benefit(
            pending_gang=gang,
            free_whole_nodes_before=before[0],
            free_whole_nodes_after=after[0],
            largest_placeable_gang_before=before[1],
            largest_placeable_gang_after=after[1],
        )
        surge = sum(sum(m.taken.values()) for m in moves)
        cost = Cost(instances_moved=len(moves), surge_gpus=surge)
        for step, m in enumerate(moves, start=1):
            self.recommendations.append(Recommendation(
                instance=m.key, reason=reason, group=group, step=step,
                from_nodes=m.from_nodes, target_nodes=tuple(sorted(m.taken)),
                target_domain=m.target_domain, gpus=sum(m.taken.values()),
                benefit=benefit, cost=cost,
            ))

    # ---------------------------------------------------------------- unsound nodes

    def empty_unsound_nodes(self) -> None:
        unsound = [(node_is_sound(n, self.config.bad_gpu_conditions), n) for n in self.view.nodes]
        for reason, node in sorted(((r, n) for r, n in unsound if r is not None),
                                   key=lambda rn: (REASONS.index(rn[0]), rn[1].name)):
            for key in self.cap.instances_on(node.name):
                refusal = self.budget.refusal(key)
                if refusal is not None:
                    self.notes.append(f"{key} on {reason} node {node.name} stays: {refusal}")
                    continue
                before = self._metrics()
                move = _move(self.cap, self.budget, key, frozenset({node.name}))
                if move is None:
                    self.notes.append(f"{key} on {reason} node {node.name} stays: "
                                      f"no room for its replacement anywhere now")
                    self.stuck.append((key, node.name))
                    continue
                self._emit([move], reason, f"empty {node.name}", None, before, self._metrics())

    # ---------------------------------------------------------------- pending gangs

    def _free_node_for(self, budget: _Budget, gpus: int, names: list[str],
                       gang_nodes: set[str]) -> tuple[str, _Budget, list[_Move]] | None:
        """Make room for one pod on the node among ``names`` that the fewest moves free.

        On success ``self.cap`` holds the moves and the budget after them is returned; on
        failure ``self.cap`` is as it was.
        """
        cap = self.cap
        options = []
        for n in names:
            if n in gang_nodes or cap.nodes[n].gpus < gpus:
                continue
            need, movers = gpus - cap.free[n], []
            chosen = budget.copy()  # each mover counts against its replica's caps
            for key in cap.instances_on(n):
                if need <= 0:
                    break
                if chosen.refusal(key) is None:
                    chosen.take(key)
                    movers.append(key)
                    need -= cap.held[key][n]
            if need <= 0:
                options.append((len(movers), sum(cap.held[k][n] for k in movers), n, movers))
        for _, _, n, movers in sorted(options)[:_NODE_TRIES]:
            mark, trial_budget, moves = cap.mark(), budget.copy(), []
            for key in movers:
                # out of the gang's domain when possible, so the room is not refilled
                m = (_move(cap, trial_budget, key, frozenset(names))
                     or _move(cap, trial_budget, key, frozenset(gang_nodes | {n})))
                if m is None:
                    cap.rollback(mark)
                    break
                moves.append(m)
            else:
                return n, trial_budget, moves
        return None

    def _room_in_domain(self, gang: PendingGang, names: list[str]
                        ) -> tuple[_Budget, list[_Move], dict[str, int]] | None:
        """Moves that make room for ``gang`` among ``names``, applied with the gang placed.

        The last item is where the gang's pods went (taken from the free map, so later
        gangs do not count the same room twice). On failure ``self.cap`` is unchanged.
        """
        cap, budget, moves = self.cap, self.budget.copy(), []
        mark = cap.mark()
        gang_nodes: dict[str, int] = {}
        for gpus in sorted(gang.pod_gpus, reverse=True):
            taken = cap.place([gpus], names)
            if taken is None:
                freed = self._free_node_for(budget, gpus, names, set(gang_nodes))
                taken = None if freed is None else cap.place([gpus], [freed[0]])
                if freed is None or taken is None:
                    cap.rollback(mark)
                    return None
                _, budget, more = freed
                moves.extend(more)
            for n, g in taken.items():
                gang_nodes[n] = gang_nodes.get(n, 0) + g
            if len(moves) > self.config.max_moves_per_gang:
                cap.rollback(mark)
                return None
        return budget, moves, gang_nodes

    def _fewest_moves_domain(self, gang: PendingGang) -> list[str] | None:
        """The domain whose room costs the fewest moves (tried and undone), or None."""
        best: tuple[int, list[str]] | None = None
        for names in self.cap.domains(gang.topology_key).values():
            mark = self.cap.mark()
            found = self._room_in_domain(gang, names)
            self.cap.rollback(mark)
            if found is not None and (best is None or len(found[1]) < best[0]):
                best = (len(found[1]), names)
        return None if best is None else best[1]

    def _room_goes_to_stuck(self, gang_nodes: dict[str, int]) -> InstanceKey | None:
        """An Instance stuck on an unsound node that the room a gang's moves free (before
        the gang takes it) would fit, or None.

        The advisor is asked again after each move, and each answer empties unsound nodes
        first: such an Instance would take the room, and the gang this answer named would
        stay pending after all (a generated cluster found it: the second move never came).
        The capacity is as it was on return.
        """
        mark = self.cap.mark()
        try:
            for n, g in gang_nodes.items():
                self.cap.take(n, -g)
            for key, node in self.stuck:
                if _move(self.cap, self.budget.copy(), key, frozenset({node})) is not None:
                    return key
            return None
        finally:
            self.cap.rollback(mark)

    def place_pending(self) -> None:
        gangs = sorted(self.view.pending, key=lambda g: (-sum(g.pod_gpus), g.namespace, g.name))
        for gang in gangs:
            label = f"{gang.namespace}/{gang.name}"
            mark = self.cap.mark()
            fits = self.cap.place_in_one_domain(gang.pod_gpus, gang.topology_key)
            self.cap.rollback(mark)
            if fits is not None:
                self.notes.append(f"pending gang {label} fits as the cluster is: "
                                  f"it waits for something else (quota, scheduler), not GPUs")
                continue
            names = self._fewest_moves_domain(gang)
            before = self._metrics()
            planned = self.cap.mark()
            found = None if names is None else self._room_in_domain(gang, names)
            if found is None:
                self.notes.append(
                    f"pending gang {label} ({'+'.join(map(str, gang.pod_gpus))} GPUs): no set "
                    f"of at most {self.config.max_moves_per_gang} allowed moves places it")
                continue
            stuck = self._room_goes_to_stuck(found[2])
            if stuck is not None:
                self.cap.rollback(planned)
                self.notes.append(
                    f"pending gang {label}: the room its moves would free goes first to "
                    f"{stuck}, which waits on an unsound node for room; nothing is moved for "
                    f"the gang")
                continue
            self.budget, moves, gang_nodes = found
            before_mark = self.cap.mark()
            for n, g in gang_nodes.items():  # the room the moves made, before the gang takes it
                self.cap.take(n, -g)
            after = self._metrics()
            self.cap.rollback(before_mark)
            self._emit(moves, "Fragmentation", f"place {label}", label, before, after)


def advise(view: ClusterView, config: AdvisorConfig | None = None) -> Advice:
    """Rank the Instance moves that empty unsound nodes and let pending gangs place.

    Pure: the same view and config always give the same advice. ``Advice.notes`` says why
    nothing (or not more) is recommended: no GPU nodes, a ``Never`` policy, caps reached,
    no room for a replacement.
    """
    config = config or AdvisorConfig()
    advisor = _Advisor(view, config)
    key = advisor._gang_key()
    domains = tuple(advisor.cap.report(key))
    if not advisor.cap.usable:
        return Advice(recommendations=(), domains=domains,
                      notes=("no schedulable GPU nodes: nothing to place or move",))
    advisor.empty_unsound_nodes()
    advisor.place_pending()
    if not advisor.recommendations and not advisor.notes:
        advisor.notes.append("no unsound node holds an Instance and no gang is pending: "
                             "nothing to do")
    # planned in rank order (UnhealthyNode, Cordoned, Fragmentation; then node or gang), and
    # kept in it: each move counts on the room the ones before it made or took
    return Advice(recommendations=tuple(advisor.recommendations), domains=domains,
                  notes=tuple(advisor.notes))
