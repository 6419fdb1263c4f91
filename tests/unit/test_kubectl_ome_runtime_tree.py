"""``kubectl ome runtime tree`` judged on plain objects: OME v1.3's example tree
(reference/kubectl-ome/runtime.md "tree"), its RuntimeTreeReport, the target lookup errors
and a broken chain's Issue lines."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.cli import runtime_output as ro
from omenative_controller.cli import runtime_tree_output as rt


def runtime(kind: str, name: str, parent: str = "", ns: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name,
                            "annotations": {"ome.io/inherit-from": parent} if parent else {}}
    if ns:
        meta["namespace"] = ns
    return {"kind": kind, "metadata": meta, "spec": {}}


def isvc(ns: str, name: str, runtime_name: str | None, kind: str | None = None
         ) -> dict[str, Any]:
    spec: dict[str, Any] = {"model": {"name": "llama"}}
    if runtime_name:
        spec["runtime"] = {"name": runtime_name, **({"kind": kind} if kind else {})}
    return {"kind": "InferenceService", "metadata": {"namespace": ns, "name": name},
            "spec": spec}


CSR, SR = "ClusterServingRuntime", "ServingRuntime"
RUNTIMES = [runtime(CSR, "vllm-base"), runtime(CSR, "vllm-llama", "vllm-base"),
            runtime(CSR, "srt-llama-1b"), runtime(CSR, "vllm-legacy"),
            runtime(SR, "team-llama", "vllm-llama", "team-a")]
ISVCS = [isvc("team-a", "llama-chat", "vllm-llama"),
         isvc("team-b", "llama-batch", "vllm-llama", CSR),
         isvc("team-a", "llama-dev", "team-llama", SR), isvc("team-b", "llama-auto", None)]


def tree(name: str, kind: str | None = None) -> rt.Tree:
    decoded = ro.decode_runtimes(RUNTIMES)
    target = rt.find_target(name, kind, "team-a", decoded)
    wide = target.kind == CSR
    srs = [r for r in RUNTIMES if r["kind"] == SR]
    isvcs = ISVCS if wide else [i for i in ISVCS if i["metadata"]["namespace"] == "team-a"]
    scope, ns = ("AllNamespaces", "") if wide else ("Namespace", "team-a")
    cols = [rt.Collection(CSR, "Cluster", "", 4), rt.Collection(SR, scope, ns, len(srs)),
            rt.Collection("InferenceService", scope, ns, len(isvcs))]
    return rt.build_tree(target, decoded, isvcs, cols)


def test_the_tree_around_a_cluster_runtime_is_omes_example() -> None:
    assert rt.tree_table(tree("vllm-llama")) == "\n".join([
        "RUNTIME TREE",
        "Target: ClusterServingRuntime/vllm-llama",
        "Context: Cluster (resolution: Complete)",
        "Head: ClusterServingRuntime/vllm-llama",
        "ClusterServingRuntime/vllm-base",
        "`-- ClusterServingRuntime/vllm-llama [selected]",
        "    |-- InferenceService/team-a/llama-chat",
        "    `-- InferenceService/team-b/llama-batch",
        "Context: Namespaced/team-a (resolution: Complete)",
        "Head: ServingRuntime/team-llama",
        "ClusterServingRuntime/vllm-base",
        "`-- ClusterServingRuntime/vllm-llama [selected]",
        "    `-- ServingRuntime/team-llama",
        "        `-- InferenceService/llama-dev",
        "Snapshot: Complete",
        "Collection: ClusterServingRuntime scope=Cluster status=Complete pages=1 items=4",
        "Collection: ServingRuntime scope=AllNamespaces status=Complete pages=1 items=1",
        "Collection: InferenceService scope=AllNamespaces status=Complete pages=1 items=4"])


def test_the_tree_around_a_namespaced_runtime_wraps_long_collection_lines() -> None:
    text = rt.tree_table(tree("team-llama"))
    assert text.splitlines()[1:7] == [
        "Target: ServingRuntime/team-a/team-llama",
        "Context: Namespaced/team-a (resolution: Complete)",
        "Head: ServingRuntime/team-llama",
        "ClusterServingRuntime/vllm-base",
        "`-- ClusterServingRuntime/vllm-llama",
        "    `-- ServingRuntime/team-llama [selected]"]
    assert "        `-- InferenceService/llama-dev" in text
    assert "llama-chat" not in text
    assert text.endswith("Collection: InferenceService scope=Namespace/team-a\n"
                         "  status=Complete pages=1 items=2")
    wide = rt.tree_table(tree("team-llama"), wide=True)
    assert "Collection: InferenceService scope=Namespace/team-a status=Complete pages=1 " \
           "items=2" in wide


def test_the_report_is_omes_runtime_tree_report() -> None:
    doc = rt.tree_json(tree("vllm-llama"), "2026-09-07T19:34:56Z")
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]) == (
        "cli.ome.io/v1alpha1", "RuntimeTreeReport", {"name": "vllm-llama"})
    content = doc["content"]
    assert content["target"] == {"kind": CSR, "name": "vllm-llama"}
    assert content["snapshot"]["collections"][0] == {
        "kind": CSR, "scope": "Cluster", "status": "Complete", "observedPages": 1,
        "observedItems": 4}
    cluster, local = content["contexts"]
    assert cluster["context"] == {"mode": "Cluster"}
    assert local["context"] == {"mode": "Namespaced", "namespace": "team-a"}
    path = cluster["paths"][0]
    assert path["runtimes"] == [
        {"identity": {"kind": CSR, "name": "vllm-base"}},
        {"identity": {"kind": CSR, "name": "vllm-llama"}, "parentName": "vllm-base",
         "resolvedParent": {"kind": CSR, "name": "vllm-base"}}]
    assert path["dependents"] == [
        {"kind": "InferenceService", "namespace": "team-a", "name": "llama-chat"},
        {"kind": "InferenceService", "namespace": "team-b", "name": "llama-batch"}]


def test_a_missing_or_ambiguous_target_fails_with_omes_message() -> None:
    decoded = ro.decode_runtimes([*RUNTIMES, runtime(SR, "vllm-base", "", "team-a")])
    with pytest.raises(rt.TreeError, match='runtime target was not found: "nope"'):
        rt.find_target("nope", None, "team-a", decoded)
    with pytest.raises(rt.TreeError, match='runtime "vllm-base" is ambiguous; pass --kind'):
        rt.find_target("vllm-base", None, "team-a", decoded)
    assert rt.find_target("vllm-base", SR, "team-a", decoded).kind == SR
    with pytest.raises(rt.TreeError, match='unsupported runtime kind "Other"'):
        rt.find_target("vllm-base", "Other", "team-a", decoded)


def test_a_broken_chain_ends_at_the_break_with_its_issue() -> None:
    decoded = ro.decode_runtimes([runtime(CSR, "orphan", "gone")])
    target = rt.find_target("orphan", None, "team-a", decoded)
    text = rt.tree_table(rt.build_tree(target, decoded, [], []))
    assert "ClusterServingRuntime/orphan [selected]\n" \
           "Issue: ParentMissing subject=ClusterServingRuntime/orphan parent=gone\n" \
           "Issue path: ClusterServingRuntime/orphan" in text
