"""A pass sends a bounded number of pod creates, whole gangs, and leaves the rest for the next.

Why a user cares: one pass holds its replica until every action answered, so without a bound
the 1,000 creates of a 250-Instance bring-up (10 s at 100 QPS) keep every ready gang of that
replica out of rotation until the last create; with it, gates go out between chunks.
"""

from __future__ import annotations

import asyncio

from test_executor_concurrency import SlowApi, _ctx, _plan

from omenative_controller.executor import CreateErrorStore, Executor
from omenative_controller.runs import bound_creates
from omenative_core.labels import LABEL_INSTANCE_INDEX
from omenative_core.model.plan import (
    CreatePod,
    DeletePod,
    Plan,
    ScaleUpBatch,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.status import InferenceReplicaStatus


def _gang(index: int, size: int) -> list[CreatePod]:
    return [CreatePod(body={"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"r-{index}-{k}", "labels": {LABEL_INSTANCE_INDEX: str(index)}}})
        for k in range(size)]


def test_creates_past_the_bound_wait_for_the_next_pass_and_nothing_else_does() -> None:
    gates = [SetServingGate(name=f"r-0-{k}", uid="u", value=True) for k in range(4)]
    creates = [c for i in range(1, 76) for c in _gang(i, 4)]  # 300 creates
    delete = DeletePod(name="stray", uid="u")
    actions = (*gates, *creates, delete)
    kept, left = bound_creates(actions, 128)
    assert left == 300 - 128
    assert [a for a in kept if isinstance(a, CreatePod)] == creates[:128]
    assert kept[:4] == tuple(gates) and kept[-1] is delete, "gates and deletes all stay"


def test_a_gang_is_never_split_across_passes() -> None:
    creates = [c for i in range(5) for c in _gang(i, 3)]  # 15 creates, gangs of 3
    kept, left = bound_creates(creates, 4)
    assert [a.name for a in kept] == [f"r-{i}-{k}" for i in range(2) for k in range(3)]
    assert left == 9


def test_no_bound_or_a_small_plan_is_left_as_it_is() -> None:
    creates = tuple(_gang(0, 4))
    assert bound_creates(creates, 0) == (creates, 0)
    assert bound_creates(creates, 128) == (creates, 0)


def test_the_executor_sends_one_chunk_and_says_how_many_wait() -> None:
    api = SlowApi(delay=0.0)
    executor = Executor(api, CreateErrorStore(), creates_per_pass=8)  # type: ignore[arg-type]
    plan = _plan(UpdateStatus(status=InferenceReplicaStatus()),
                 *(c for i in range(5) for c in _gang(i, 4)))
    result = asyncio.run(executor.apply(plan, _ctx()))
    assert result.ok and result.deferred_creates == 12
    assert api.calls[0] == "status r", "the status (every Instance's operation) still goes first"
    assert sorted(api.calls[1:]) == sorted(f"create r-{i}-{k}" for i in range(2) for k in range(4))


def test_a_plan_batched_by_the_core_is_sent_whole_and_its_rest_comes_next() -> None:
    """``scaleUpPodBatchSize`` set: the core already cut the creates to OME's batch, so the
    executor's own bound (``--creates-per-pass``) does not cut it again, and the creates the
    core left out still bring the next pass at once."""
    api = SlowApi(delay=0.0)
    executor = Executor(api, CreateErrorStore(), creates_per_pass=8)  # type: ignore[arg-type]
    creates = [c for i in range(5) for c in _gang(i, 4)]  # 20 creates: the core's batch
    batch = ScaleUpBatch(pod_budget=20, admitted_pods=20, admitted_instances=5,
                         deferred_pods=12, deferred_instances=3)
    plan = Plan(actions=(UpdateStatus(status=InferenceReplicaStatus()), *creates),
                status=InferenceReplicaStatus(), scale_up_batch=batch)
    result = asyncio.run(executor.apply(plan, _ctx()))
    assert result.ok and result.deferred_creates == 12
    assert sorted(api.calls[1:]) == sorted(f"create {c.name}" for c in creates)
