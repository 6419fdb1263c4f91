"""Pod creates sent behind their pass: the replica's next pass plans while they are answered.

Why a user cares: a big bring-up no longer waits, chunk after chunk, for the slowest create
of each pass before the next pass may plan (create_pipeline.py). What must hold meanwhile:
the pods being created are in the cache (a next pass never plans them twice), a refused
create is taken back out and reported to the next pass, one replica never has more than
two chunks out, and losing the Lease stops every create.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from test_executor_concurrency import SlowApi, _ctx, _plan

from omenative_controller.cache_views import owner_index, pod_view
from omenative_controller.create_pipeline import expected_pod
from omenative_controller.executor import CreateErrorStore, Executor
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import PODS
from omenative_core.labels import (
    KUEUE_ADMISSION_GATE,
    LABEL_INSTANCE_INDEX,
    LABEL_KUEUE_QUEUE,
    LABEL_REPLICA,
)
from omenative_core.model.observed import PodView
from omenative_core.model.plan import CreatePod, DeletePod, SetServingGate, UpdateStatus
from omenative_core.model.status import InferenceReplicaStatus


def _gang(index: int, size: int = 2) -> list[CreatePod]:
    return [CreatePod(body={"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"r-{index}-{k}",
        "labels": {LABEL_INSTANCE_INDEX: str(index), LABEL_REPLICA: "r"}}})
        for k in range(size)]


def _chunk(index: int, size: int = 2) -> list[CreatePod]:
    """A gang, and one more the pass leaves for the next (``creates_per_pass=1``): only a
    pass that leaves creates for the next sends its own behind it."""
    return [*_gang(index, size), *_gang(index + 100, 1)]


def _cache() -> Informer[PodView]:
    return Informer(None, PODS, pod_view, indexers={"owner": owner_index})  # type: ignore[arg-type]


class GatedApi(SlowApi):
    """Holds every create until :attr:`release` is set; refuses the names in ``quota``;
    answers 409 AlreadyExists for the names in ``taken``."""

    def __init__(self, quota: frozenset[str] = frozenset(),
                 taken: frozenset[str] = frozenset()) -> None:
        super().__init__(delay=0.0)
        self.release = asyncio.Event()
        self.quota = quota
        self.taken = taken

    async def create(self, res: Any, body: Any, ns: Any = None, **kw: Any) -> Any:
        await self.release.wait()
        name = body["metadata"]["name"]
        if name in self.taken:
            self.calls.append(f"exists {name}")
            raise ApiError(409, "AlreadyExists", f'pods "{name}" already exists')
        if name in self.quota:
            self.calls.append(f"refused {name}")
            raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: exceeded quota: q')
        return await self._call(f"create {name}", {**body, "metadata": {
            **body["metadata"], "uid": f"uid-{name}", "resourceVersion": "10"}})


def _executor(api: SlowApi, cache: Informer[PodView], failed: list[str] | None = None,
              guard: Any = lambda: True) -> Executor:
    return Executor(api, CreateErrorStore(), creates_per_pass=1,  # type: ignore[arg-type]
                    pipeline_depth=2, on_pod_expected=cache.expect,
                    on_pod_unexpected=cache.unexpect, on_pod_written=cache.upsert_if_newer,
                    on_creates_failed=None if failed is None else failed.append, guard=guard)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_pass_ends_with_its_pods_expected_and_their_answers_replace_them() -> None:
    async def run() -> None:
        api, cache = GatedApi(), _cache()
        executor = _executor(api, cache)
        gate = SetServingGate(name="r-0-0", uid="u", value=True)
        result = await executor.apply(_plan(UpdateStatus(status=InferenceReplicaStatus()),
                                            gate, *_chunk(1)), _ctx())
        assert result.ok and result.behind == 2
        assert api.calls == ["status r", "patch r-0-0"], "status and gates within the pass"
        expected = cache.by_index("owner", "ns/r")  # what the next snapshot reads
        assert [(v.name, v.uid, v.phase) for v in expected] == [
            ("r-1-0", "", "Pending"), ("r-1-1", "", "Pending")]
        assert all(v.creation_timestamp is not None for v in expected)
        api.release.set()
        assert await executor.pipeline.drain(5)  # type: ignore[union-attr]
        assert {cache.get(f"ns/r-1-{k}").uid for k in range(2)} == {  # type: ignore[union-attr]
            "uid-r-1-0", "uid-r-1-1"}
        assert executor.pipeline is not None and executor.pipeline.outstanding() == 0

    asyncio.run(run())


def test_a_refused_create_is_taken_back_out_reported_and_stops_the_replicas_other_chunk() -> None:
    async def run() -> None:
        api = GatedApi(quota=frozenset({"r-1-0"}))
        cache, failed = _cache(), []
        executor = _executor(api, cache, failed)
        executor.max_inflight = 1  # one lane: r-1-0 is refused before r-1-1 is sent
        executor.__attrs_post_init__()
        await executor.apply(_plan(*_chunk(1)), _ctx())
        await executor.apply(_plan(*_chunk(2)), _ctx())
        assert cache.get("ns/r-2-0") is not None, "the second chunk's pods are expected too"
        api.release.set()
        assert await executor.pipeline.drain(5)  # type: ignore[union-attr]
        assert failed == ["ns/r"], "the replica is queued again once"
        assert "refused r-1-0" in api.calls
        assert not [c for c in api.calls if c.startswith("create")], (
            "after a refusal no chunk of that replica sends another create")
        assert cache.get("ns/r-1-0") is None and cache.get("ns/r-2-1") is None, (
            "no pod that was not created stays expected")
        errors = executor.create_errors.take("ns/r")
        assert [(e.name, e.reason) for e in errors] == [("r-1-0", "QuotaExceeded")]

    asyncio.run(run())


def test_a_replica_has_at_most_two_chunks_out_a_third_pass_sends_none_and_waits_for_a_place(
) -> None:
    async def run() -> None:
        api, cache, free = GatedApi(), _cache(), []
        executor = _executor(api, cache)
        executor.on_creates_free = free.append
        executor.__attrs_post_init__()
        first = await executor.apply(_plan(*_chunk(1)), _ctx())
        assert (first.behind, first.creates_waiting) == (2, False), "next pass at once"
        second = await executor.apply(_plan(*_chunk(2)), _ctx())
        assert (second.behind, second.creates_waiting) == (2, True), "full: wait for a place"
        third = await executor.apply(_plan(*_chunk(3)), _ctx())
        assert (third.behind, third.deferred_creates, third.creates_waiting) == (0, 3, True)
        assert cache.get("ns/r-3-0") is None, "creates not sent are not expected"
        other = await executor.apply(_plan(*_chunk(9)), _ctx("s"))
        assert other.behind == 2, "another replica is not held by this one's chunks"
        assert free == []
        api.release.set()
        assert await executor.pipeline.drain(5)  # type: ignore[union-attr]
        assert free == ["ns/r"], "queued again once, when its oldest chunk ended"
        assert sorted(c for c in api.calls if c.startswith("create r-")) == sorted(
            f"create r-{i}-{k}" for i in (1, 2, 9) for k in range(2))

    asyncio.run(run())


def test_losing_the_lease_stops_the_creates_and_takes_their_pods_out() -> None:
    async def run() -> None:
        api, cache = GatedApi(), _cache()
        leader = [True]
        executor = _executor(api, cache, guard=lambda: leader[0])
        executor.max_inflight = 1
        executor.__attrs_post_init__()
        await executor.apply(_plan(*_chunk(1, 3)), _ctx())
        await _settle()
        leader[0] = False
        api.release.set()
        assert await executor.pipeline.drain(5)  # type: ignore[union-attr]
        assert [c for c in api.calls if c.startswith("create")] == ["create r-1-0"]
        assert cache.get("ns/r-1-1") is None and cache.get("ns/r-1-2") is None
        assert cache.get("ns/r-1-0") is not None, "the one created stays"

    asyncio.run(run())


def test_cancelling_takes_out_every_pod_still_expected() -> None:
    async def run() -> None:
        api, cache = GatedApi(), _cache()
        executor = _executor(api, cache)
        await executor.apply(_plan(*_chunk(1)), _ctx())
        assert len(cache) == 2
        await executor.pipeline.cancel()  # type: ignore[union-attr]
        assert len(cache) == 0 and api.calls == []

    asyncio.run(run())


def test_the_cache_never_trades_a_real_pod_for_an_expected_one() -> None:
    cache = _cache()
    real = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "5"}}
    cache.upsert_if_newer(real)
    assert cache.expect({"metadata": {"name": "p", "namespace": "ns"}}) is None
    assert cache.get("ns/p").uid == "u1"  # type: ignore[union-attr]
    view = cache.expect({"metadata": {"name": "q", "namespace": "ns"}})
    assert view is not None
    cache._apply("ADDED", {"metadata": {"name": "q", "namespace": "ns", "uid": "u2",
                                        "resourceVersion": "7"}})
    cache.unexpect({"metadata": {"name": "q", "namespace": "ns"}}, view)
    assert cache.get("ns/q").uid == "u2", "the watch event won; unexpect left it"  # type: ignore[union-attr]
    cache._apply("DELETED", {"metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                                          "resourceVersion": "8"}})
    again = cache.expect({"metadata": {"name": "p", "namespace": "ns"}})
    assert again is not None, "a name deleted before may be expected again (a re-create)"
    cache.unexpect({"metadata": {"name": "p", "namespace": "ns"}}, again)
    assert cache.deleted("ns/p"), "taking an expected pod out is not a delete"


def test_without_the_cache_callbacks_pipelining_stays_off() -> None:
    executor = Executor(SlowApi(), CreateErrorStore(), pipeline_depth=2)  # type: ignore[arg-type]
    assert executor.pipeline is None
    result = asyncio.run(executor.apply(_plan(*_gang(1)), _ctx()))
    assert result.behind == 0 and result.applied == 2


def test_a_pod_queued_to_kueue_is_expected_gated_as_kueues_webhook_creates_it() -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "r-0-0", "labels": {LABEL_KUEUE_QUEUE: "team", LABEL_REPLICA: "r"}},
        "spec": {"containers": []}}
    now = datetime(2026, 12, 5, tzinfo=UTC)
    view = pod_view(expected_pod(CreatePod(body=body), _ctx(), now))
    assert view.scheduling_gates == (KUEUE_ADMISSION_GATE,), "not taken for admitted"
    assert "schedulingGates" not in body["spec"], "the body sent is not changed"
    plain = pod_view(expected_pod(_gang(0)[0], _ctx(), now))
    assert plain.scheduling_gates == () and plain.creation_timestamp == now


def test_a_name_taken_by_a_pod_not_ours_is_not_kept_expected_nor_deleted_by_name() -> None:
    """409 AlreadyExists is success for the pass, but the pod of that name is not one we
    made (not in our cache): it must not stay expected, where a later pass could plan to
    delete it; a delete without a UID (only an expected pod has none) is never sent."""
    async def run() -> None:
        api, cache = GatedApi(taken=frozenset({"r-1-1"})), _cache()
        executor = _executor(api, cache)
        await executor.apply(_plan(*_chunk(1)), _ctx())
        api.release.set()
        assert await executor.pipeline.drain(5)  # type: ignore[union-attr]
        assert cache.get("ns/r-1-0") is not None and cache.get("ns/r-1-1") is None
        result = await executor.apply(_plan(DeletePod(name="r-1-1", uid="")), _ctx())
        assert result.ok and not [c for c in api.calls if c.startswith("delete")]

    asyncio.run(run())


def test_a_pass_whose_creates_all_fit_answers_them_itself() -> None:
    """Run M: 250 replicas of one gang each gained nothing from sending their creates
    behind (no next chunk to plan) and lost by it, their passes ending early and flooding
    the budget with status writes: a pass that leaves no creates for the next keeps its."""
    async def run() -> None:
        api, cache = GatedApi(), _cache()
        api.release.set()
        executor = _executor(api, cache)
        executor.creates_per_pass = 32
        result = await executor.apply(_plan(*_gang(1), *_gang(2)), _ctx())
        assert (result.behind, result.applied, result.deferred_creates) == (0, 4, 0)
        assert sorted(v.uid for _, v in cache.items()) == [
            f"uid-r-{i}-{k}" for i in (1, 2) for k in range(2)], "created, none expected"
        assert executor.pipeline is not None and executor.pipeline.outstanding() == 0

    asyncio.run(run())
