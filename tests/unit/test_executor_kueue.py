"""The executor ends retired Kueue pod groups: which Workload it deletes, and when not.

The real Kueue runs in ``tests/integration/test_kueue.py``; this checks the decisions against
a recording stand-in for the API client.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from omenative_controller.executor import (
    KUEUE_MANAGED_LABEL,
    KUEUE_WORKLOADS,
    CreateErrorStore,
    Executor,
    PassContext,
)
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource
from omenative_core.labels import LABEL_KUEUE_POD_GROUP
from omenative_core.model.observed import PodView

GROUP = "chat-engine-0-1-0123456789"
V1BETA2, V1BETA1 = KUEUE_WORKLOADS
DELETED = datetime(2026, 1, 1, tzinfo=UTC)


class Api:
    """Workloads by (version, name); records every call."""

    def __init__(self, workloads: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.workloads = workloads
        self.calls: list[tuple[str, str, str, str | None]] = []

    async def get(self, res: Resource, name: str, namespace: str | None = None,
                  **_: Any) -> dict[str, Any]:
        self.calls.append(("get", res.version, name, None))
        try:
            return self.workloads[(res.version, name)]
        except KeyError:
            raise ApiError(404, "NotFound") from None

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *,
                     uid: str | None = None, **_: Any) -> None:
        self.calls.append(("delete", res.version, name, uid))


def workload(*owner_uids: str, uid: str = "wl-uid") -> dict[str, Any]:
    return {"metadata": {"name": GROUP, "uid": uid, "ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": f"p{i}", "uid": u}
        for i, u in enumerate(owner_uids)]}}


def pod(uid: str, *, deleting: bool = True, managed: bool = True,
        group: str = GROUP) -> PodView:
    labels = {LABEL_KUEUE_POD_GROUP: group}
    if managed:
        labels[KUEUE_MANAGED_LABEL] = "true"
    return PodView(name=f"pod-{uid}", uid=uid, labels=labels,
                   deletion_timestamp=DELETED if deleting else None)


def executor(api: Api, pods: list[PodView]) -> Executor:
    return Executor(api, CreateErrorStore(), pods_of=lambda key: pods)  # type: ignore[arg-type]


CTX = PassContext(key="llm/chat-engine", namespace="llm", name="chat-engine", raw={})


async def test_a_group_whose_pods_are_all_terminating_loses_its_workload() -> None:
    api = Api({("v1beta2", GROUP): workload("a", "b")})
    ex = executor(api, [pod("a"), pod("b")])
    await ex.end_kueue_groups(CTX)
    assert api.calls == [("get", "v1beta2", GROUP, None), ("delete", "v1beta2", GROUP, "wl-uid")]
    # the next pass sees the same terminating pods: nothing is asked again
    await ex.end_kueue_groups(CTX)
    assert len(api.calls) == 2


async def test_a_group_with_a_live_pod_keeps_its_workload() -> None:
    # a pod being replaced within its attempt (restartPolicy None), or a group still serving
    api = Api({("v1beta2", GROUP): workload("a", "b")})
    await executor(api, [pod("a"), pod("b", deleting=False)]).end_kueue_groups(CTX)
    assert api.calls == []


async def test_pods_kueue_does_not_manage_are_left_alone() -> None:
    api = Api({("v1beta2", GROUP): workload("a")})
    await executor(api, [pod("a", managed=False)]).end_kueue_groups(CTX)
    assert api.calls == []


async def test_a_workload_of_that_name_not_owned_by_the_groups_pods_is_not_deleted() -> None:
    api = Api({("v1beta2", GROUP): workload("someone-else")})
    await executor(api, [pod("a")]).end_kueue_groups(CTX)
    assert [c[0] for c in api.calls] == ["get"]


async def test_an_older_kueue_serving_only_v1beta1_is_handled() -> None:
    api = Api({("v1beta1", GROUP): workload("a", uid="old")})
    await executor(api, [pod("a")]).end_kueue_groups(CTX)
    assert api.calls == [("get", "v1beta2", GROUP, None), ("get", "v1beta1", GROUP, None),
                         ("delete", "v1beta1", GROUP, "old")]


async def test_a_refused_read_is_retried_on_a_later_pass_and_never_raises() -> None:
    class Forbidden(Api):
        async def get(self, res: Resource, name: str, namespace: str | None = None,
                      **_: Any) -> dict[str, Any]:
            self.calls.append(("get", res.version, name, None))
            raise ApiError(403, "Forbidden", "workloads.kueue.x-k8s.io is forbidden")

    api = Forbidden({})
    ex = executor(api, [pod("a")])
    await ex.end_kueue_groups(CTX)
    await ex.end_kueue_groups(CTX)
    assert [c[0] for c in api.calls] == ["get", "get"]


async def test_without_a_pod_cache_nothing_is_done() -> None:
    api = Api({("v1beta2", GROUP): workload("a")})
    await Executor(api, CreateErrorStore()).end_kueue_groups(CTX)  # type: ignore[arg-type]
    assert api.calls == []
