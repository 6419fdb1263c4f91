"""A plan's actions cut into runs: what the executor may send at once, and in what order.

The status write goes first (it records what the rest does); the rest keeps the plan's
order, cut into runs of one family: actions of a family touch distinct objects and none
needs another to exist first, so a run's members are sent together (through the
executor's bounded lanes). Cutting is one dict lookup per action: a plan of a big replica
may hold tens of thousands.
"""

from __future__ import annotations

from collections.abc import Sequence

from omenative_controller.pass_context import instance_of
from omenative_core.gang import NATIVE_API_V1BETA1
from omenative_core.model.plan import (
    Action,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeletePod,
    DeletePodGroup,
    PatchPodImages,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)

__all__ = ["action_runs", "bound_creates", "creates_behind", "position", "status_first"]

_NATIVE_GROUP = NATIVE_API_V1BETA1.rpartition("/")[0] + "/"
_FAMILY: dict[type[Action], str] = {
    CreateRevision: "prelude", CreateObject: "prelude",
    **{kind: kind.__name__ for kind in (DeletePod, DeletePodGroup, PatchPodImages)},
    # a gate names a pod that exists (its UID), a create one that does not: never the same
    # pod, so a pass's gates and its next chunk of creates go out together
    SetServingGate: "pods", CreatePod: "pods",
}


def _family(action: Action) -> str:
    """Which run an action may share: actions of one family touch distinct objects and none
    needs another to exist first. The objects a gang's pods lean on go first: the
    finalizer, the revision, the headless Service (kube-scheduler spreads a replica's pods
    by the Services that select them, so a pod created before its Service is placed as if
    it had none), a native Workload and a scheduler-plugins PodGroup (a pod created before
    its PodGroup is scheduled without its gang): a gang's first pass is two round trips,
    the prelude, then its pods. Kubernetes' own PodGroup is a family of its own after the
    prelude: the API server refuses it (403 ``Workload ... not found``) until the Workload
    it names exists. One dict lookup per action: a plan may hold tens of thousands."""
    if type(action) is SetFinalizer:
        return "prelude" if action.present else ""
    if type(action) is CreatePodGroup:
        native = str(action.body.get("apiVersion", "")).startswith(_NATIVE_GROUP)
        return action.kind if native else "prelude"
    return _FAMILY.get(type(action), "")  # "": a run of its own


def action_runs(actions: Sequence[Action]) -> list[tuple[int, tuple[Action, ...]]]:
    """``actions`` cut into runs applied one after another, each with its first position.

    A run is one action, or consecutive actions of one family: a prelude (the finalizer,
    the revision, the headless Service, a Workload, a scheduler-plugins PodGroup:
    idempotent writes that only need the InferenceReplica), Kubernetes' own PodGroups, pod
    creates and serving gates together, a batch of pod deletes or image patches. The plan's
    order between runs is kept. Linear in the actions (a new revision of a big replica
    plans thousands of one family).
    """
    runs: list[tuple[int, list[Action]]] = []
    last = ""
    for i, action in enumerate(actions):
        fam = _family(action)
        if runs and fam and fam == last:
            runs[-1][1].append(action)
        else:
            runs.append((i, [action]))
        last = fam
    return [(i, tuple(run)) for i, run in runs]


def status_first(actions: Sequence[Action]) -> tuple[Action, ...]:
    """The status write ahead of everything else (it records what the rest does)."""
    status = [a for a in actions if type(a) is UpdateStatus]
    if not status:
        return tuple(actions)
    return (*status, *(a for a in actions if type(a) is not UpdateStatus))


def position(actions: Sequence[Action], action: Action) -> int:
    """Where ``action`` (this very object) stands in ``actions`` (on a failure only)."""
    return next(i for i, a in enumerate(actions) if a is action)


def bound_creates(actions: Sequence[Action], limit: int) -> tuple[tuple[Action, ...], int]:
    """``actions`` with at most ``limit`` pod creates (rounded up to the end of the last
    gang begun), and how many creates were left for the next pass (``limit`` 0: no bound).

    Why: one pass of a replica holds its key until every action answered, and a first pass
    of 250 Instances is 1,000 pod creates, 10 s at 100 QPS, during which none of its ready
    gangs can have their serving gates set. Left-out creates are planned again by the next
    pass (the pods do not exist), which the manager queues at once; every other action
    (gates, deletes, the status) stays in this pass. A gang's pods are not split.
    """
    if limit <= 0:
        return tuple(actions), 0
    kept: list[Action] = []
    creates = left = 0
    last_gang: object = None
    for action in actions:
        if type(action) is CreatePod:
            gang = instance_of("", action.name, action.body)  # its label; None: no gang
            if creates >= limit and (gang is None or gang != last_gang):
                left += 1
                continue
            creates += 1
            last_gang = gang
        kept.append(action)
    return (tuple(actions), 0) if not left else (tuple(kept), left)


def creates_behind(runs: list[tuple[int, tuple[Action, ...]]]
                   ) -> tuple[list[tuple[int, tuple[Action, ...]]], tuple[CreatePod, ...]]:
    """The runs a pass awaits, and the pod creates it may send behind itself
    (``create_pipeline.py``): those of its last run, which nothing after them could need;
    that run's serving gates stay in the pass."""
    if not runs:
        return runs, ()
    start, last = runs[-1]
    creates = tuple(a for a in last if type(a) is CreatePod)
    if not creates:
        return runs, ()
    rest = tuple(a for a in last if type(a) is not CreatePod)
    return runs[:-1] + ([(start, rest)] if rest else []), creates
