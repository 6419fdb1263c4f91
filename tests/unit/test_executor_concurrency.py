"""The executor's order and concurrency, as the API server sees them.

The status goes first; a gang's pods (and their serving gates) are sent at once; all
workers together never have more than ``max_inflight`` actions talking to the server; a
failure ends the pass after its run.
"""

from __future__ import annotations

import asyncio
from typing import Any

from omenative_controller.executor import CreateErrorStore, Executor, PassContext, action_runs
from omenative_controller.kube.errors import ApiError
from omenative_controller.observability import Metrics
from omenative_core.model.plan import (
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeletePod,
    Plan,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.status import InferenceReplicaStatus


class SlowApi:
    """Answers every call after ``delay`` seconds; records the order and the concurrency."""

    def __init__(self, delay: float = 0.01, refuse: frozenset[str] = frozenset()) -> None:
        self.delay = delay
        self.refuse = refuse
        self.calls: list[str] = []
        self.now = 0
        self.peak = 0

    async def _call(self, what: str, body: Any) -> Any:
        self.calls.append(what)
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.now -= 1
        if what in self.refuse:
            raise ApiError(500, "InternalError", f"{what} refused")
        return body

    async def create(self, res: Any, body: Any, ns: Any = None, **kw: Any) -> Any:
        return await self._call(f"create {body['metadata']['name']}", body)

    async def replace(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        return await self._call(f"status {name}", body)

    async def patch(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        return await self._call(f"patch {name}", {"metadata": {"name": name}})

    async def delete(self, res: Any, name: str, ns: Any = None, **kw: Any) -> None:
        await self._call(f"delete {name}", None)


def _executor(api: SlowApi, max_inflight: int = 32, metrics: Metrics | None = None
              ) -> Executor:
    return Executor(api, CreateErrorStore(), max_inflight=max_inflight,  # type: ignore[arg-type]
                    metrics=metrics)


def _ctx(name: str = "r") -> PassContext:
    raw = {"metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": "1"}, "spec": {}}
    return PassContext(key=f"ns/{name}", namespace="ns", name=name, raw=raw)


def _pod(name: str) -> CreatePod:
    return CreatePod(body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}})


def _plan(*actions: Any) -> Plan:
    return Plan(actions=tuple(actions), status=InferenceReplicaStatus())


def test_the_status_is_written_before_anything_else() -> None:
    api = SlowApi()
    plan = _plan(_pod("p0"), UpdateStatus(status=InferenceReplicaStatus()), _pod("p1"))
    result = asyncio.run(_executor(api).apply(plan, _ctx()))
    assert result.ok and result.applied == 3
    assert api.calls[0] == "status r"
    assert sorted(api.calls[1:]) == ["create p0", "create p1"]


def test_a_bring_up_sends_its_prelude_at_once_then_every_pod_at_once() -> None:
    api = SlowApi()
    service = CreateObject(body={"apiVersion": "v1", "kind": "Service",
                                 "metadata": {"name": "svc"}})
    plan = _plan(UpdateStatus(status=InferenceReplicaStatus()), SetFinalizer(present=True),
                 CreateRevision(body={"metadata": {"name": "rev"}}), service,
                 *(_pod(f"p{i}") for i in range(4)))
    asyncio.run(_executor(api).apply(plan, _ctx()))
    assert api.calls[0] == "status r"
    assert "create svc" in api.calls[1:4], "the Service went out with the prelude"
    assert sorted(api.calls[4:]) == [f"create p{i}" for i in range(4)], (
        "no pod was created before the Service that selects it existed")
    assert api.peak == 4, "the four pods were in flight together"


def test_a_gangs_first_pass_is_two_round_trips_prelude_with_podgroup_then_pods() -> None:
    """A scheduler-plugins PodGroup goes with the prelude; the pods follow it."""
    api = SlowApi()
    group = CreatePodGroup(body={"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                 "metadata": {"name": "g"}})
    plan = _plan(SetFinalizer(present=True), CreateRevision(body={"metadata": {"name": "rev"}}),
                 group, *(_pod(f"p{i}") for i in range(4)))
    assert [len(run) for _, run in action_runs(plan.actions)] == [3, 4]
    asyncio.run(_executor(api).apply(plan, _ctx()))
    assert "create g" in api.calls[:3], "the PodGroup went out with the prelude"
    assert sorted(api.calls[3:]) == [f"create p{i}" for i in range(4)]


def test_kubernetes_own_podgroup_waits_for_the_workload_it_names() -> None:
    """The API server refuses a native PodGroup (403) until its Workload exists."""
    workload = CreateObject(body={"apiVersion": "scheduling.k8s.io/v1alpha2",
                                  "kind": "Workload", "metadata": {"name": "w"}})
    group = CreatePodGroup(body={"apiVersion": "scheduling.k8s.io/v1alpha2",
                                 "kind": "PodGroup", "metadata": {"name": "g"}})
    actions = (SetFinalizer(present=True), workload, group, _pod("p0"), _pod("p1"))
    assert [[a.kind for a in run] for _, run in action_runs(actions)] == [
        ["SetFinalizer", "CreateObject"], ["CreatePodGroup"], ["CreatePod", "CreatePod"]]


def test_podgroups_go_before_their_pods_and_deletes_before_creates() -> None:
    api = SlowApi()
    group = CreatePodGroup(body={"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                 "metadata": {"name": "g"}})
    plan = _plan(DeletePod(name="old", uid="u"), group, _pod("p0"), _pod("p1"))
    asyncio.run(_executor(api).apply(plan, _ctx()))
    assert api.calls[:2] == ["delete old", "create g"]
    assert sorted(api.calls[2:]) == ["create p0", "create p1"]


def test_runs_group_consecutive_actions_of_one_family() -> None:
    gate = SetServingGate(name="p0", uid="u", value=True)
    actions = (UpdateStatus(status=InferenceReplicaStatus()), SetFinalizer(present=True),
               _pod("a"), _pod("b"), gate, gate, DeletePod(name="x", uid="u"),
               SetFinalizer(present=False), _pod("c"))
    assert [(i, len(run)) for i, run in action_runs(actions)] == [
        (0, 1), (1, 1), (2, 4), (6, 1), (7, 1), (8, 1)]


def test_every_worker_together_stays_within_the_in_flight_budget() -> None:
    api = SlowApi()
    metrics = Metrics()
    executor = _executor(api, max_inflight=3, metrics=metrics)

    async def main() -> list[Any]:
        plans = [(_plan(*(_pod(f"{r}-{i}") for i in range(4))), _ctx(r)) for r in "abcde"]
        return list(await asyncio.gather(*(executor.apply(p, c) for p, c in plans)))

    results = asyncio.run(main())
    assert all(r.ok for r in results)
    assert len(api.calls) == 20, "every pod of the five replicas was created"
    assert api.peak == 3
    assert metrics.sample("omenative_api_requests_in_flight") == 0


def test_a_failed_pod_create_ends_the_pass_after_its_run() -> None:
    api = SlowApi(refuse=frozenset({"create p1"}))
    plan = _plan(_pod("p0"), _pod("p1"), _pod("p2"), DeletePod(name="q", uid="u"))
    result = asyncio.run(_executor(api).apply(plan, _ctx()))
    assert result.outcome == "failed" and result.failed_kind == "CreatePod"
    assert result.failed_index == 1
    assert result.applied == 2, "the other pods of the run were still created"
    assert "delete q" not in api.calls, "nothing after the failed run was sent"


def test_a_created_revision_or_service_is_written_through_for_the_next_pass() -> None:
    api = SlowApi()
    seen: list[tuple[str, str]] = []
    executor = Executor(api, CreateErrorStore(),  # type: ignore[arg-type]
                        on_created=lambda res, obj: seen.append(
                            (res.plural, obj["metadata"]["name"])))
    plan = _plan(CreateRevision(body={"apiVersion": "apps/v1", "kind": "ControllerRevision",
                                      "metadata": {"name": "rev"}}),
                 CreateObject(body={"apiVersion": "v1", "kind": "Service",
                                    "metadata": {"name": "r-headless"}}),
                 _pod("p0"))
    asyncio.run(executor.apply(plan, _ctx()))
    assert sorted(seen) == [("controllerrevisions", "rev"), ("services", "r-headless")]


def test_a_run_of_thousands_goes_through_a_bounded_number_of_tasks() -> None:
    """A big run (a new revision of a big replica) never makes a task per member: at most
    ``max_inflight`` lanes, so no event-loop step creates thousands of tasks at once."""
    api = SlowApi(delay=0.0)
    peak_tasks = 0
    call = api._call

    async def counting(what: str, body: Any) -> Any:
        nonlocal peak_tasks
        peak_tasks = max(peak_tasks, len(asyncio.all_tasks()))
        return await call(what, body)

    api._call = counting  # type: ignore[method-assign]
    plan = _plan(*(DeletePod(name=f"p{i}", uid="u") for i in range(2000)))
    result = asyncio.run(_executor(api, max_inflight=8).apply(plan, _ctx()))
    assert result.ok and result.applied == 2000 and len(api.calls) == 2000
    assert peak_tasks <= 8 + 1, "the lanes and the main task, not one task per delete"
    assert api.peak == 8


def test_after_a_failure_in_a_big_run_no_more_members_are_sent() -> None:
    api = SlowApi(refuse=frozenset({"delete p3"}))
    plan = _plan(*(DeletePod(name=f"p{i}", uid="u") for i in range(500)))
    result = asyncio.run(_executor(api, max_inflight=4).apply(plan, _ctx()))
    assert result.outcome == "failed" and result.failed_index == 3
    assert len(api.calls) < 16, "the lanes stopped taking members once p3 was refused"
