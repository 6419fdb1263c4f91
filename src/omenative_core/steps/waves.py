"""OME's pod batches: ``scaleUpPodBatchSize`` for creates, ``scaleDownPodBatchSize`` for
deletion work (scale-down and the teardown of a deleted InferenceReplica).

Theory of operation (OME's "Configure pod batching"), the same in both directions:

1. A budget counts pods; an Instance is indivisible: all its pods join a batch together or
   all wait (a gang is never split).
2. The first Instance may be larger than the whole budget: it goes alone.
3. Once an Instance does not fit, the ones after it wait too (no skipping ahead), for a
   later pass.
4. Deletion work already running counts first (``deletion_wave``), so a lowered count or a
   deleted replica resumes it before admitting more; an Instance being deleted costs its
   live and Terminating pods, or 1 once they are gone but cleanup remains (``cost``).
5. Scale-up counts pod creates only (``batch_creates``): a gate, a delete or the status
   never waits behind a create; a new pod need not be Ready before the next batch.

Each direction returns its batch as data (``ScaleDownWave``, ``ScaleUpBatch`` in the
``Plan``): the shell logs it and counts the metrics; an absent key is no bound here (the
shell keeps its own ``--creates-per-pass`` then).
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import define

from omenative_core.labels import LABEL_INSTANCE_INDEX
from omenative_core.model.plan import Action, CreatePod, ScaleDownWave, ScaleUpBatch
from omenative_core.model.status import InstanceStatus
from omenative_core.phases import OpType
from omenative_core.steps.step_pass import StepPass

__all__ = ["Wave", "batch_creates", "cost", "deleting", "deletion_wave", "wave_data"]


@define
class Wave:
    """One batch being filled under ``budget`` pods (None: no bound); see rules 1-3."""

    budget: int | None
    spent: int = 0
    admitted: int = 0
    oversized: bool = False
    """An Instance larger than the whole budget was admitted (alone)."""

    def fits(self, pods: int) -> bool:
        """Whether an Instance of ``pods`` pods joins this batch (rules 2 and 3)."""
        return self.budget is None or self.spent == 0 or self.spent + pods <= self.budget

    def admit(self, pods: int) -> None:
        """Count an Instance of ``pods`` pods into the batch."""
        self.oversized = self.oversized or (self.budget is not None and pods > self.budget)
        self.spent += pods
        self.admitted += 1


def cost(st: StepPass, row: InstanceStatus | None) -> int:
    """An Instance's pod-equivalent cost in a deletion wave: its live and Terminating pods,
    or 1 once they are gone but cleanup remains (0: no Instance)."""
    return 0 if row is None else max(len(st.pods_of(row.index)), 1)


def deleting(st: StepPass) -> list[InstanceStatus]:
    """Instances being deleted (never plain rows, so only the odd ones are read)."""
    return [r for r in st.odd_rows()
            if r.operation is not None and r.operation.type == OpType.DELETE]


def deletion_wave(st: StepPass, active: Sequence[InstanceStatus]) -> Wave:
    """The pass's deletion wave, the work already running (``active``) counted first."""
    return Wave(budget=st.view.config.scale_down_pod_batch_size,
                spent=sum(cost(st, r) for r in active))


def wave_data(wave: Wave, active: Sequence[InstanceStatus], active_cost: int,
              candidates: int) -> ScaleDownWave | None:
    """What the shell logs of a deletion wave (None: no budget)."""
    if wave.budget is None:
        return None
    return ScaleDownWave(pod_budget=wave.budget, active_pod_cost=active_cost,
                         active_instances=len(active), admitted_instances=wave.admitted,
                         deferred_instances=candidates - wave.admitted,
                         oversized=wave.oversized)


def _instance_key(action: CreatePod) -> str:
    """The Instance a create belongs to: its pod's index label (the name if it has none)."""
    labels = action.body.get("metadata", {}).get("labels") or {}
    index = labels.get(LABEL_INSTANCE_INDEX)
    return f"index:{index}" if isinstance(index, str) else f"pod:{action.name}"


def batch_creates(
    actions: Sequence[Action], budget: int | None
) -> tuple[list[Action], ScaleUpBatch | None]:
    """``actions`` with their pod creates cut to one scale-up batch (rules 1-3, 5), and the
    batch (None: no budget, or no create). The creates left out are planned again by the
    next pass (the pods do not exist), which the shell asks for at once."""
    creates = [a for a in actions if type(a) is CreatePod]
    if budget is None or not creates:
        return list(actions), None
    sizes: dict[str, int] = {}
    for action in creates:  # Instances in the order their first create comes
        key = _instance_key(action)
        sizes[key] = sizes.get(key, 0) + 1
    wave, admitted = Wave(budget=budget), set()
    for key, pods in sizes.items():
        if not wave.fits(pods):
            break
        wave.admit(pods)
        admitted.add(key)
    kept = [a for a in actions if type(a) is not CreatePod or _instance_key(a) in admitted]
    return kept, ScaleUpBatch(
        pod_budget=budget, admitted_pods=wave.spent, admitted_instances=wave.admitted,
        deferred_pods=len(creates) - wave.spent,
        deferred_instances=len(sizes) - wave.admitted, oversized=wave.oversized)
