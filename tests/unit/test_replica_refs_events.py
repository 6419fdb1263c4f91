"""A standalone replica's render Warnings (OME's ``RuntimeCompatibilityAdvisory``) become
Warning Events on the replica, once per generation, not only a log line."""

from __future__ import annotations

import asyncio
from typing import Any

from test_replica_refs_model import LLAMA, SRT, pool, runtime

from omenative_controller.replica_refs import RefsWarnings, render_refs
from omenative_core.model.spec import InferenceReplica
from omenative_core.service import ServiceConfig
from omenative_core.status.wire import replica_from_json


class FakeSources:
    """The model cache of the InferenceService controller, listed."""

    def models_synced(self) -> bool:
        return True

    def all_models(self) -> list[Any]:
        return [LLAMA]


class FakeIsvc:
    """The InferenceService controller's caches, as ``with_rendered_runners`` reads them."""

    sources = FakeSources()

    def runtimes_synced(self) -> bool:
        return True

    def all_runtimes(self) -> list[Any]:
        return [runtime("onnx-rt", ["onnx"]), SRT]


def test_the_advisory_is_an_event_once_per_generation() -> None:
    body = pool(modelRef={"name": "llama-3-2-1b-instruct"}, runtimeRef={"name": "onnx-rt"})
    body["metadata"]["generation"] = 1
    sent: list[tuple[str, str]] = []

    async def emit(reason: str, message: str) -> None:
        sent.append((reason, message))

    memo = RefsWarnings()

    async def one_pass(raw: dict[str, Any]) -> Any:
        return await render_refs(replica_from_json(raw), raw, FakeIsvc(),  # type: ignore[arg-type]
                                 ServiceConfig(), memo, "llama-demo/llama-pool", emit)

    got = asyncio.run(one_pass(body))
    assert isinstance(got, InferenceReplica) and got.spec.runners
    assert [r for r, _ in sent] == ["RuntimeCompatibilityAdvisory"]
    assert "proceeding because the runtime was named explicitly" in sent[0][1]
    asyncio.run(one_pass(body))  # the next pass of the same generation: nothing new
    assert len(sent) == 1
    body["metadata"]["generation"] = 2  # a new spec: OME reports it again
    asyncio.run(one_pass(body))
    assert len(sent) == 2
    memo.forget("llama-demo/llama-pool")
    assert memo.sent == {}


def test_a_runtime_or_model_change_queues_the_replicas_that_render_from_it() -> None:
    """OME's replica controller watches the runtime and model a standalone replica names:
    ``referencing`` picks the replicas a change concerns, the manager queues them."""
    from omenative_controller.replica_refs import referencing
    from omenative_core.service import runtime_from_json

    def raw(name: str, ns: str = "team-a", **spec: Any) -> tuple[str, dict[str, Any]]:
        return f"{ns}/{name}", {"metadata": {"name": name, "namespace": ns},
                                "spec": {"component": "engine", **spec}}

    base = runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": "base"},
                              "spec": {}})
    child = runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {
        "name": "child", "annotations": {"ome.io/inherit-from": "base"}}, "spec": {}})
    local = runtime_from_json({"kind": "ServingRuntime", "metadata": {
        "name": "child", "namespace": "team-a"}, "spec": {}})
    replicas = [raw("named", runtimeRef={"name": "child"}),
                raw("local", runtimeRef={"name": "child", "kind": "ServingRuntime"}),
                raw("auto", modelRef={"name": "llama"}),
                raw("other-ns", "team-b", modelRef={"name": "llama"}),
                raw("own-runners", runners=[{"name": "r"}], runtimeRef={"name": "child"}),
                raw("unrelated", runtimeRef={"name": "else"})]
    runtimes = [base, child, local]
    assert referencing(replicas, "runtime", None, "child", runtimes) == [
        "team-a/named", "team-a/auto", "team-b/other-ns"]
    assert referencing(replicas, "runtime", None, "base", runtimes) == [
        "team-a/named", "team-a/auto", "team-b/other-ns"]  # child inherits from base
    assert referencing(replicas, "runtime", "team-a", "child", runtimes) == [
        "team-a/local", "team-a/auto"]
    assert referencing(replicas, "model", None, "llama", runtimes) == [
        "team-a/auto", "team-b/other-ns"]
    assert referencing(replicas, "model", "team-b", "llama", runtimes) == ["team-b/other-ns"]
