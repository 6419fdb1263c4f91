"""What depends on the nodes: a missing spread key, a gang the cluster cannot hold.

Nodes come and go, so none of this is a rejection: the pods are still created (they stay
Pending until the cluster changes) and the replica says why, at once, with a condition
and a Warning Event that name the key or the numbers. Each condition turns False (with a
Normal Event) when the nodes change so that the problem is gone.

- ``TopologyKeyMissing``: ``topologySpread: Required`` on a key that no Ready,
  schedulable node carries (``DoNotSchedule`` keeps every anchor pod Pending).
- ``InsufficientCapacity``: ``GangExceedsCapacity`` when one pod needs more
  ``nvidia.com/gpu`` than the largest Ready node has, or the gang more than all Ready
  nodes together, or (``topologyKey``: one domain per gang) more than the largest domain
  once its pods are reported unschedulable; ``InsufficientFreeCapacity`` when it would
  fit the cluster but the scheduler cannot place its pods in what is free now.

Only Ready, schedulable nodes count. With none observed, or (for capacity) a node whose
GPUs are unknown, the pass cannot tell: a condition keeps what it last said.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from omenative_core.gpus import GPU_RESOURCE, gpu_quantity
from omenative_core.model.observed import NodeView
from omenative_core.model.spec import JSON, Runner
from omenative_core.render import instance_slots
from omenative_core.steps.state import PassState
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.totals import usable
from omenative_core.steps.verdicts import unschedulable_now

__all__ = [
    "CAPACITY_CONDITION",
    "TOPOLOGY_CONDITION",
    "UsableNodes",
    "check_nodes",
    "pod_gpus",
    "usable_nodes",
]

TOPOLOGY_CONDITION = "TopologyKeyMissing"
"""Condition type: the Required spread key is on no Ready, schedulable node."""

CAPACITY_CONDITION = "InsufficientCapacity"
"""Condition type: an Instance's gang does not fit the cluster (total or free now)."""


def pod_gpus(template: JSON) -> int:
    """GPUs one pod of a runner template asks for: requests (else limits), over containers."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    total = 0
    for c in containers if isinstance(containers, list) else ():
        res = c.get("resources") if isinstance(c, dict) else None
        res = res if isinstance(res, dict) else {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        value = requests.get(GPU_RESOURCE) if isinstance(requests, dict) else None
        if value is None and isinstance(limits, dict):
            value = limits.get(GPU_RESOURCE)
        total += gpu_quantity(value)
    return total


NodeFacts = tuple[bool, bool, bool, int, int]
"""What the pass reads of the nodes: any usable (Ready, schedulable), the spread key on
one of them, every usable node's GPUs known, the most GPUs on one, all of them together."""


class UsableNodes:
    """What every pass reads of the Ready, schedulable nodes, whatever its replica: whether
    there is one, whether each one's GPUs are known, the most GPUs on one and all of them
    together (0 unless known), and (``carries``) whether one carries a label key."""

    __slots__ = ("_keys", "_nodes", "any", "known", "largest", "together")

    def __init__(self, nodes: Iterable[NodeView]) -> None:
        kept = tuple(n for n in nodes if n.ready is True and not n.unschedulable)
        known = all(n.gpus is not None for n in kept)
        self.any = bool(kept)
        self.known = known
        self.largest = max((n.gpus or 0 for n in kept), default=0) if known else 0
        self.together = sum(n.gpus or 0 for n in kept) if known else 0
        self._nodes = kept
        self._keys: dict[str, bool] = {}  # label key -> carried (asked by few replicas)

    def carries(self, key: str) -> bool:
        """Whether one of them carries the label ``key`` (read once per key)."""
        got = self._keys.get(key)
        if got is None:
            got = self._keys[key] = any(key in n.labels for n in self._nodes)
        return got


class _LastNodes:
    """The summary of the last node map read, by identity. A snapshot's maps are never
    changed once handed over (``verdicts.kept_map``), and the manager hands every replica
    the same node map until a node changes: thousands of passes then share one reading of
    1,000+ nodes instead of one each. A live view (``MappingProxyType``) is never kept."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        # one tuple, swapped whole: a pass in a worker thread reads a consistent pair
        self.last: tuple[Mapping[str, NodeView], UsableNodes] | None = None


_LAST_NODES = _LastNodes()


def usable_nodes(nodes: Mapping[str, NodeView]) -> UsableNodes:
    """The summary of ``nodes``' Ready, schedulable ones (read once per node map)."""
    last = _LAST_NODES.last
    if last is not None and last[0] is nodes:
        return last[1]
    summary = UsableNodes(nodes.values())
    if not isinstance(nodes, MappingProxyType):
        _LAST_NODES.last = (nodes, summary)
    return summary


def _node_facts(st: PassState) -> NodeFacts:
    """The nodes' facts: the last pass's while its row totals hold (the same nodes and
    spec: ``steps.totals``), else the node map's summary (``usable_nodes``)."""
    kept = usable(st)
    if kept is not None and kept.nodes is not None:
        st.nodes_out = kept.nodes
        return kept.nodes
    nodes = usable_nodes(st.view.snap.nodes)
    key = _spread_key(st)
    facts = (nodes.any, key is None or nodes.carries(key), nodes.known, nodes.largest,
             nodes.together)
    st.nodes_out = facts
    return facts


def _spread_key(st: StepPass) -> str | None:
    if st.view.spec.topology_spread != "Required":
        return None
    return st.view.spec.topology_spread_key or st.view.spec.topology_key


def _topology(st: StepPass, key_present: bool) -> tuple[str, str, str] | None:
    """The condition for a Required spread key no usable node carries (None: fine)."""
    key = _spread_key(st)
    if key is None or key_present:
        return None
    return (
        "True",
        "TopologyKeyMissing",
        f"spec.topologySpreadKey {key!r}: topologySpread is Required, but no Ready, "
        f"schedulable node carries the label {key!r}; the pods are created and stay Pending "
        "until a node has it",
    )


def _gang_words(runners: Sequence[Runner], per_pod: Sequence[tuple[str, int]]) -> str:
    """``a leader+7 workers gang ... 8 per pod`` / ``a single-pod Instance``."""
    total = sum(g for _, g in per_pod)
    if len(per_pod) == 1:
        return f"a single-pod Instance needs {total} {GPU_RESOURCE}"
    workers = next((r.size for r in runners if r.name == "worker"), len(per_pod) - 1)
    noun = "worker" if workers == 1 else "workers"
    sizes = {g for _, g in per_pod}
    leader = per_pod[0][1]
    worker = per_pod[-1][1]
    each = (
        f"{leader} per pod" if len(sizes) == 1 else f"{leader} for the leader, {worker} per worker"
    )
    return f"a leader+{workers} {noun} gang needs {total} {GPU_RESOURCE}, {each}"


def _domain_shortfall(
    st: StepPass, runners: Sequence[Runner], need: int, words: str
) -> tuple[str, str, str] | None:
    """``GangExceedsCapacity`` when ``topologyKey`` keeps a gang in one domain and no
    domain of Ready nodes has the GPUs the gang needs (None: some domain could hold it).

    Read only while some pods are unschedulable, so a steady pass does not scan the
    nodes; the scheduler says so within seconds of the gang's creation.
    """
    key = st.view.spec.topology_key
    if not key or len(runners) < 2:
        return None
    domains: dict[str, int] = {}
    for node in st.view.snap.nodes.values():
        value = node.labels.get(key)
        if node.ready is True and not node.unschedulable and value is not None:
            domains[value] = domains.get(value, 0) + (node.gpus or 0)
    if not domains:
        return None  # no node has the key: TopologyKeyMissing's case (Required) or waits
    best = max(domains.values())
    if need <= best:
        return None
    return (
        "True",
        "GangExceedsCapacity",
        f"{words}; topologyKey {key!r} keeps a gang in one domain, and the largest "
        f"({len(domains)} domain(s) of Ready nodes) has {best}; its pods stay Pending "
        "until a domain grows",
    )


def _capacity(st: PassState, largest: int, together: int) -> tuple[str, str, str] | None:
    """The condition for a gang bigger than the cluster, or than what is free (None: fine)."""
    runners = st.view.runners(st.view.target) or st.view.spec.runners
    try:
        slots = instance_slots(runners)
    except ValueError:
        return None
    by_name = {r.name: r for r in runners}
    per_pod = [(s.runner, pod_gpus(by_name[s.runner].template)) for s in slots]
    need = sum(g for _, g in per_pod)
    if need == 0:
        return None
    words = _gang_words(runners, per_pod)
    if max(g for _, g in per_pod) > largest or need > together:
        return (
            "True",
            "GangExceedsCapacity",
            f"{words}; the largest Ready node has {largest}; all Ready nodes together "
            f"{together}; its pods are created and stay Pending until the cluster grows",
        )
    waiting = sorted(unschedulable_now(st))
    if not waiting:
        return None
    domain = _domain_shortfall(st, runners, need, words)
    if domain is not None:
        return domain
    return (
        "True",
        "InsufficientFreeCapacity",
        f"{words}; it fits the cluster (all Ready nodes together {together}) but not what "
        f"is free now: the scheduler cannot place the pods of Instance(s) "
        f"{_indexes(waiting)}; they stay Pending until GPUs free up",
    )


def _indexes(indexes: Sequence[int], shown: int = 5) -> str:
    """``0, 3, 7`` or ``0, 1, 2, 3, 4 and 12 more`` (a message stays short in a big fleet)."""
    head = ", ".join(map(str, indexes[:shown]))
    rest = len(indexes) - shown
    return f"{head} and {rest} more" if rest > 0 else head


_CLEARED = {
    TOPOLOGY_CONDITION: ("TopologyKeyPresent", "a Ready, schedulable node carries the spread key"),
    CAPACITY_CONDITION: ("CapacityAvailable", "the gang fits the Ready nodes"),
}


def _report(st: StepPass, type_: str, found: tuple[str, str, str] | None) -> None:
    """Set the condition; warn when it turns True or changes, note when it clears."""
    prev = next((c for c in st.view.prev.conditions if c.type == type_), None)
    if found is None:
        if prev is None:
            return  # never raised: the condition stays absent
        reason, message = _CLEARED[type_]
        st.extra_conditions[type_] = ("False", reason, message)
        if prev.status == "True":
            st.note(reason, message)
        return
    st.extra_conditions[type_] = found
    _, reason, message = found
    if prev is None or (prev.status, prev.reason, prev.message) != found:
        st.warn(reason, message)


def _keep(st: StepPass, type_: str) -> None:
    """Carry the previous condition of ``type_`` over unchanged (the nodes cannot tell)."""
    for c in st.view.prev.conditions:
        if c.type == type_:
            st.extra_conditions[type_] = (c.status, c.reason, c.message)


def check_nodes(st: PassState) -> None:
    """Raise or clear ``TopologyKeyMissing`` and ``InsufficientCapacity`` (no action)."""
    any_node, key_present, known, largest, together = _node_facts(st)
    if not any_node:  # no Ready node observed: nothing can be said, keep what was said
        _keep(st, TOPOLOGY_CONDITION)
        _keep(st, CAPACITY_CONDITION)
        return
    topology = _topology(st, key_present)
    _report(st, TOPOLOGY_CONDITION, topology)
    if not known:  # allocatable not reported yet
        _keep(st, CAPACITY_CONDITION)
        return
    # pods kept Pending by a missing key say nothing about free GPUs
    capacity = _capacity(st, largest, together)
    if topology is not None and capacity is not None and capacity[1] != "GangExceedsCapacity":
        capacity = None
    _report(st, CAPACITY_CONDITION, capacity)
