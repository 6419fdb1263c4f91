"""The status-size guard: a status write over etcd's request limit is never sent.

Instead the pass ends, a Warning Event ``StatusSizeExceeded`` names the size and the
limit, and the stored status gets the condition ``StatusSizeExceeded=True`` (reason
``StatusTooLarge``), so a user sees why the manager stopped rather than a stream of
refused writes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from omenative_controller.executor import (
    STATUS_SIZE_LIMIT,
    CreateErrorStore,
    Executor,
    PassContext,
    ReplicaEvents,
)
from omenative_controller.kube.events import EventRecorder
from omenative_core.model.plan import Plan, UpdateStatus
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus


class FakeClient:
    """Records the calls the executor makes; answers a status PUT with the body."""

    def __init__(self) -> None:
        self.replaced: list[dict[str, Any]] = []
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str | None, dict[str, Any]]] = []

    async def replace(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        self.replaced.append(body)
        return body

    async def patch(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        self.patched.append((kw.get("subresource"), body))
        return {"metadata": {"name": name}, **body}

    async def create(self, res: Any, body: Any, ns: Any = None, **kw: Any) -> Any:
        self.created.append(body)
        return body


def _status(rows: int) -> InferenceReplicaStatus:
    return InferenceReplicaStatus(
        replicas=rows,
        instances=tuple(
            InstanceStatus(index=i, phase="Ready", running_revision=f"rev-{i}") for i in range(rows)
        ),
    )


def _apply(status: InferenceReplicaStatus, limit: int) -> tuple[Any, FakeClient]:
    fake = FakeClient()
    executor = Executor(
        fake,  # type: ignore[arg-type]
        CreateErrorStore(),
        encoding=lambda: ("DenseV1", 20000),
        events=ReplicaEvents(EventRecorder(fake)),  # type: ignore[arg-type]
        status_size_limit=limit,
    )
    raw = {"metadata": {"name": "chat-engine", "uid": "u1", "resourceVersion": "7"}, "spec": {}}
    ctx = PassContext(key="ns/chat-engine", namespace="ns", name="chat-engine", raw=raw)
    plan = Plan(actions=(UpdateStatus(status=status),), status=status)
    return asyncio.run(executor.apply(plan, ctx)), fake


def test_the_limit_is_etcds_default_request_size() -> None:
    assert STATUS_SIZE_LIMIT == 1_572_864


def test_an_oversized_status_is_not_sent_and_a_warning_names_size_and_limit() -> None:
    result, fake = _apply(_status(200), limit=4096)
    assert not result.ok and result.failed_kind == "UpdateStatus"
    assert fake.replaced == []
    [event] = fake.created
    assert event["type"] == "Warning" and event["reason"] == "StatusSizeExceeded"
    assert "over the 4096-byte limit" in event["message"]
    size = int(event["message"].split("body is ")[1].split(" bytes")[0])
    assert size > 4096
    # the stored status keeps its rows and gets the condition that says why
    [(subresource, patch)] = fake.patched
    assert subresource == "status" and patch["metadata"]["resourceVersion"] == "7"
    [condition] = patch["status"]["conditions"]
    assert condition["type"] == "StatusSizeExceeded" and condition["status"] == "True"
    assert condition["reason"] == "StatusTooLarge" and f"{size} bytes" in condition["message"]


def test_a_status_within_the_limit_is_written() -> None:
    result, fake = _apply(_status(3), limit=4096)
    assert result.ok
    assert len(fake.replaced) == 1 and fake.created == [] and fake.patched == []
