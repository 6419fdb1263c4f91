"""Status size against a real API server (issue 14): 20,000 Instances in one status.

A replica of 20,000 Instances mid-rollout (half on the new revision, half on the old, ten
surging with an operation in flight) is written through the manager's executor to a real
kube-apiserver + etcd: ColumnarV2 keeps it a few kilobytes, the server accepts it, and it
reads back to the same status. So does the largest status the operations budget lets the
planner reach at 20,000 Instances (``tests/status_states.worst_reachable``: as many open
operations and other entries as the budget admits, every field at its longest). The same
rows written DenseV1 would be over etcd's 1.5 MiB request limit: the executor does not
send them and says so with a Warning Event and the condition ``StatusSizeExceeded``
(reason ``StatusTooLarge``). The status is built directly; there are no pods.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tests.status_states import worst_reachable

from omenative_controller.executor import (
    STATUS_SIZE_LIMIT,
    CreateErrorStore,
    Executor,
    PassContext,
    ReplicaEvents,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_core.model.plan import Plan, UpdateStatus
from omenative_core.model.status import InferenceReplicaStatus, InstanceOperation, InstanceStatus
from omenative_core.status.budget import OPERATION_BOUND, STATUS_TARGET
from omenative_core.status.wire import go_json_bytes, status_from_json, status_to_json

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    eventually,
    get_replica,
    replica_body,
    warning_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

N = 20_000
OLD = "big-engine-5d8f9c"
NEW = "big-engine-7b21e4"
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _row(i: int) -> InstanceStatus:
    if i < N // 2:
        return InstanceStatus(index=i, incarnation=2, phase="Ready", running_revision=NEW,
                              pod_count=1, serving_pod_count=1, available_pod_count=1,
                              admitted=True)
    if i < N - 10:
        return InstanceStatus(index=i, incarnation=1, phase="Ready", running_revision=OLD,
                              pod_count=1, serving_pod_count=1, available_pod_count=1,
                              admitted=True)
    return InstanceStatus(
        index=i, incarnation=1, phase="Updating", running_revision=OLD, target_revision=NEW,
        pod_count=2, serving_pod_count=1, available_pod_count=1, admitted=True,
        operation=InstanceOperation(id=f"update-{i}-1", type="Update", step="Surge",
                                    started_at=T0, last_progress_at=T0, target_revision=NEW,
                                    reason="RevisionRoll", strategy="SurgeThenDrain"),
    )


def mid_rollout() -> InferenceReplicaStatus:
    """20,000 Instances, half rolled, ten surging."""
    return InferenceReplicaStatus(
        observed_generation=2, replicas=N, ready_replicas=N - 10, serving_replicas=N,
        available_replicas=N, updated_replicas=N // 2, updated_ready_replicas=N // 2,
        current_revision=OLD, update_revision=NEW,
        instances=tuple(_row(i) for i in range(N)),
    )


async def _write(kube: KubeClient, obj: JSON, namespace: str, encoding: str,
                 status: InferenceReplicaStatus) -> tuple[bool, str]:
    executor = Executor(kube, CreateErrorStore(), encoding=lambda: (encoding, N),
                        events=ReplicaEvents(EventRecorder(kube)))
    meta = obj["metadata"]
    ctx = PassContext(key=f"{namespace}/{meta['name']}", namespace=namespace,
                      name=meta["name"], raw=obj)
    result = await executor.apply(Plan(actions=(UpdateStatus(status=status),), status=status),
                                  ctx)
    return result.ok, result.message


async def test_a_20000_instance_status_mid_rollout_is_accepted_and_reads_back(
    kube: KubeClient, ir_crd: str, namespace: str
) -> None:
    obj = await kube.create(INFERENCE_REPLICAS, replica_body("big", replicas=N, single=True),
                            namespace)
    status = mid_rollout()
    body = status_to_json(status)
    assert body["instanceStatusEncoding"] == "ColumnarV2"
    assert len(go_json_bytes(body)) < 8 * 1024  # a few kilobytes for 20,000 Instances

    ok, message = await _write(kube, obj, namespace, "ColumnarV2", status)
    assert ok, message

    stored = await get_replica(kube, namespace, "big")
    assert stored["status"]["instanceStatusEncoding"] == "ColumnarV2"
    assert status_from_json(stored["status"]) == status


async def test_the_largest_status_the_budget_admits_at_20000_instances_is_accepted(
    kube: KubeClient, ir_crd: str, namespace: str
) -> None:
    obj = await kube.create(INFERENCE_REPLICAS, replica_body("worst", replicas=N, single=True),
                            namespace)
    status = worst_reachable(N, ops=OPERATION_BOUND, migrates=0, failed=0, seed=14)
    size = len(go_json_bytes(status_to_json(status)))
    assert 512 * 1024 < size <= STATUS_TARGET  # big, and within the budget's target

    ok, message = await _write(kube, obj, namespace, "ColumnarV2", status)
    assert ok, message

    stored = await get_replica(kube, namespace, "worst")
    assert status_from_json(stored["status"]) == status
    assert sum(1 for r in status.instances if r.operation is not None) == OPERATION_BOUND


async def test_a_dense_20000_instance_status_is_not_sent_and_a_warning_says_why(
    kube: KubeClient, ir_crd: str, namespace: str
) -> None:
    obj = await kube.create(INFERENCE_REPLICAS, replica_body("dense", replicas=N, single=True),
                            namespace)
    status = mid_rollout()
    assert len(go_json_bytes(status_to_json(status, encoding="DenseV1"))) > STATUS_SIZE_LIMIT

    ok, message = await _write(kube, obj, namespace, "DenseV1", status)
    assert not ok and "over the" in message

    async def warned() -> JSON | None:
        for event in await warning_events(kube, namespace, "dense"):
            if event.get("reason") == "StatusSizeExceeded":
                return event
        return None

    event = await eventually(warned, timeout=20, what="the StatusSizeExceeded Warning Event")
    assert f"over the {STATUS_SIZE_LIMIT}-byte limit" in event["message"]
    # no rows were written; the stored status says why, as a condition
    stored = (await get_replica(kube, namespace, "dense"))["status"]
    assert "instanceStatuses" not in stored and "instanceStatusColumns" not in stored
    [condition] = stored["conditions"]
    assert condition["type"] == "StatusSizeExceeded" and condition["status"] == "True"
    assert condition["reason"] == "StatusTooLarge"
