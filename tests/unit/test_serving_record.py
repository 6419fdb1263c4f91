"""The serving record: when omenative counted each Instance serving, and answers checked
against it; the recorder's watch loop on a fake API client (errors are re-raised)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from omenative_controller.kube.errors import ApiError
from omenative_devcluster.serving_record import ServingRecord, ServingRecorder
from omenative_devcluster.traffic_report import Outcome


def pod(name: str, index: int, incarnation: int = 1, *, gate: bool | None = None,
        ready: bool = False, uid: str = "", runner: str = "leader") -> dict[str, Any]:
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    if gate is not None:
        conds.append({"type": "ome.io/serving", "status": "True" if gate else "False"})
    return {"metadata": {"name": name, "uid": uid or f"{name}-{incarnation}",
                         "labels": {"ome.io/inferencereplica": "llm",
                                    "ome.io/instance-index": str(index),
                                    "ome.io/instance-incarnation": str(incarnation),
                                    "ome.io/runner": runner}},
            "status": {"conditions": conds}}


def answer(at: float, pod_name: str) -> Outcome:
    return Outcome(started=at - 0.01, ended=at, via="new", revision="r", instance="0",
                   pod=pod_name)


def gang_serving_at(rec: ServingRecord, t: float, incarnation: int = 1) -> None:
    """Instance 0 (leader + 1 worker): created at t-2, gate True on both pods at t, t+0.1."""
    rec.observe_pod("ADDED", pod("llm-0", 0, incarnation), t - 2)
    rec.observe_pod("ADDED", pod("llm-0-1", 0, incarnation, runner="worker"), t - 2)
    rec.observe_pod("MODIFIED", pod("llm-0", 0, incarnation, gate=True), t)
    rec.observe_pod("MODIFIED", pod("llm-0-1", 0, incarnation, gate=True, runner="worker"),
                    t + 0.1)


def test_instance_serves_once_every_pod_has_the_gate() -> None:
    rec = ServingRecord()
    gang_serving_at(rec, 10.0)
    assert rec.serving_since == {("llm", 0, 1, 1): 10.1}
    assert rec.instances() == [("llm", 0, 1, 1)]


def test_answer_before_the_instance_served_is_reported() -> None:
    rec = ServingRecord()
    gang_serving_at(rec, 10.0)
    problems = rec.unserving_answers([answer(10.05, "llm-0"), answer(10.2, "llm-0")],
                                     wall=lambda offset: offset)
    assert len(problems) == 1
    assert "10.05s from llm-0" in problems[0] and "until 10.10s" in problems[0]


def test_answers_while_draining_are_fine_and_the_drain_is_noted() -> None:
    rec = ServingRecord()
    gang_serving_at(rec, 10.0)
    rec.observe_pod("MODIFIED", pod("llm-0", 0, gate=False), 20.0)
    assert rec.unserving_since == {("llm", 0, 1, 1): 20.0}
    assert rec.unserving_answers([answer(21.0, "llm-0")], wall=lambda o: o) == []


def test_a_restarted_instance_reusing_pod_names_must_serve_again() -> None:
    rec = ServingRecord()
    gang_serving_at(rec, 10.0)
    rec.observe_pod("DELETED", pod("llm-0", 0, gate=False), 20.0)
    rec.observe_pod("DELETED", pod("llm-0-1", 0, gate=False, runner="worker"), 20.0)
    rec.observe_pod("ADDED", pod("llm-0", 0, 2), 21.0)
    rec.observe_pod("ADDED", pod("llm-0-1", 0, 2, runner="worker"), 21.0)
    rec.observe_pod("MODIFIED", pod("llm-0", 0, 2, gate=True), 30.0)
    rec.observe_pod("MODIFIED", pod("llm-0-1", 0, 2, gate=True, runner="worker"), 30.0)
    problems = rec.unserving_answers(
        [answer(15.0, "llm-0"), answer(25.0, "llm-0"), answer(31.0, "llm-0")],
        wall=lambda o: o)
    assert len(problems) == 1 and "('llm', 0, 2, 1)" in problems[0]
    assert rec.serving_since[("llm", 0, 2, 1)] == 30.0
    assert rec.peak_pods == 2


def test_an_index_taken_again_at_incarnation_1_is_a_new_attempt() -> None:
    rec = ServingRecord()
    gang_serving_at(rec, 10.0)
    rec.observe_pod("DELETED", pod("llm-0", 0, gate=False), 20.0)
    rec.observe_pod("DELETED", pod("llm-0-1", 0, gate=False, runner="worker"), 20.0)
    gang_serving_at(rec, 40.0)  # a surge replacement at the freed index, incarnation 1
    assert rec.serving_since == {("llm", 0, 1, 1): 10.1, ("llm", 0, 1, 2): 40.1}
    problems = rec.unserving_answers([answer(39.0, "llm-0"), answer(41.0, "llm-0")],
                                     wall=lambda o: o)
    assert len(problems) == 1 and "39.00s" in problems[0]


def test_answer_from_an_unknown_pod_is_reported() -> None:
    assert "no such pod" in ServingRecord().unserving_answers([answer(1.0, "x")],
                                                              wall=lambda o: o)[0]


def test_pod_ready_since_follows_the_uid() -> None:
    rec = ServingRecord()
    rec.observe_pod("ADDED", pod("llm-0", 0, uid="a", ready=True), 1.0)
    rec.observe_pod("MODIFIED", pod("llm-0", 0, 2, uid="b"), 2.0)
    rec.observe_pod("MODIFIED", pod("llm-0", 0, 2, uid="b", ready=True), 3.0)
    assert rec.pod_ready_since("llm-0", "a") == 1.0
    assert rec.pod_ready_since("llm-0", "b") == 3.0


def test_replica_rows_that_read_ready_are_noted_once() -> None:
    ir = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
          "metadata": {"name": "llm"},
          "spec": {"component": "engine", "replicas": 1,
                   "runners": [{"name": "default", "size": 1, "template": {"spec": {
                       "containers": [{"name": "ome-container", "image": "x"}]}}}]},
          "status": {"instanceStatuses": [
              {"index": 0, "incarnation": 1, "phase": "Ready"}]}}
    rec = ServingRecord()
    rec.observe_replica(ir, 4.0)  # no pod of the Instance seen yet: nothing to note
    rec.observe_pod("ADDED", pod("llm-0", 0), 4.5)
    rec.observe_replica(ir, 5.0)
    rec.observe_replica(ir, 6.0)
    rec.observe_replica({"metadata": {"name": "llm"}}, 7.0)
    assert rec.row_ready_since == {("llm", 0, 1, 1): 5.0}


class FakeKube:
    """list + watch of pods; the watch streams ``events`` then ends with ``final``."""

    def __init__(self, events: list[dict[str, Any]], refusals: int = 0) -> None:
        self.events = events
        self.release = asyncio.Event()
        self.refusals = refusals
        #: what LISTs of pods answer once the watch is open (None: the one first pod)
        self.listed: list[dict[str, Any]] | None = None
        self.lists = 0

    async def list(self, res: Any, namespace: str | None = None) -> dict[str, Any]:
        if self.refusals:
            self.refusals -= 1
            raise ApiError(429, "TooManyRequests", "storage is (re)initializing")
        if res.plural == "pods":
            self.lists += 1
        first = self.lists <= 1 or self.listed is None
        items = ([pod("llm-0", 0)] if first else self.listed) if res.plural == "pods" else []
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    @contextlib.asynccontextmanager
    async def watch(self, res: Any, namespace: str | None = None, **kw: Any
                    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        events = self.events if res.plural == "pods" else []

        async def stream() -> AsyncIterator[dict[str, Any]]:
            for ev in events:
                await self.release.wait()
                yield ev
            await asyncio.sleep(3600)
            yield {}  # pragma: no cover

        yield stream()


async def test_recorder_feeds_the_record_from_the_watch() -> None:
    # a CRD created a moment ago refuses LISTs while its storage initializes: wait it out
    kube = FakeKube(refusals=2, events=[{"type": "MODIFIED",
                      "object": {**pod("llm-0", 0, gate=True),
                                 "metadata": {**pod("llm-0", 0)["metadata"],
                                              "resourceVersion": "2"}}}])
    clock = iter(range(100))
    rec = ServingRecorder(kube, "ns", clock=lambda: float(next(clock)))  # type: ignore[arg-type]
    async with rec:
        kube.release.set()
        for _ in range(100):
            if rec.record.serving_since:
                break
            await asyncio.sleep(0.01)
    assert rec.record.serving_since == {("llm", 0, 1, 1): 1.0}


async def test_recorder_reraises_a_watch_error_at_the_end() -> None:
    kube = FakeKube([{"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                  "reason": "Expired", "message": "too old"}}])
    rec = ServingRecorder(kube, "ns")  # type: ignore[arg-type]
    with pytest.raises(ApiError) as err:
        async with rec:
            kube.release.set()
            await asyncio.sleep(0.1)
    assert err.value.gone


async def test_caught_up_waits_for_the_watch_to_deliver_what_a_list_shows() -> None:
    # the LIST already shows llm-0 at resourceVersion 2; the watch delivers it a moment later
    later = {**pod("llm-0", 0, gate=True),
             "metadata": {**pod("llm-0", 0)["metadata"], "resourceVersion": "2"}}
    kube = FakeKube(events=[{"type": "MODIFIED", "object": later}])
    kube.listed = [later]
    rec = ServingRecorder(kube, "ns")  # type: ignore[arg-type]
    async with rec:
        waiting = asyncio.create_task(rec.caught_up(timeout=5))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # the record has not seen resourceVersion 2 yet
        kube.release.set()
        await asyncio.wait_for(waiting, 5)
        assert list(rec.record.serving_since) == [("llm", 0, 1, 1)]  # the gate True is in


async def test_caught_up_gives_up_with_the_resource_still_behind() -> None:
    kube = FakeKube(events=[])
    kube.listed = [{**pod("llm-0", 0), "metadata": {**pod("llm-0", 0)["metadata"],
                                                     "resourceVersion": "9"}}]
    rec = ServingRecorder(kube, "ns")  # type: ignore[arg-type]
    async with rec:
        kube.release.set()
        with pytest.raises(AssertionError, match=r"timed out .*\['pods'\] are behind"):
            await rec.caught_up(timeout=0.3)


async def test_caught_up_fails_at_once_when_a_watch_stopped() -> None:
    # a watch that stopped on a 500 leaves a hole in the record: waiting cannot mend that,
    # so caught_up says so at once instead of retrying the 500 until its timeout
    kube = FakeKube([{"type": "ERROR", "object": {"kind": "Status", "code": 500,
                                                  "reason": "InternalError", "message": "x"}}])
    rec = ServingRecorder(kube, "ns")  # type: ignore[arg-type]
    await rec.__aenter__()
    kube.release.set()
    await asyncio.sleep(0.1)
    try:
        with pytest.raises(RuntimeError, match="watch stopped") as err:
            await asyncio.wait_for(rec.caught_up(timeout=600), 5)
    finally:
        with pytest.raises(ApiError):  # stopping re-raises the watch's own error
            await rec.stop()
    assert isinstance(err.value.__cause__, ApiError)
    assert err.value.__cause__.status == 500
