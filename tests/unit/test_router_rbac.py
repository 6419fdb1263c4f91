"""The router runs as its own ServiceAccount that may read the namespace's pods, as OME
makes it: OME's prefill-decode router finds its prefill and decode pods through the API."""

from __future__ import annotations

from typing import Any

from omenative_core.service import isvc_from_json, render_service, runtime_from_json


def _runtime() -> dict[str, Any]:
    container = {"name": "ome-container", "image": "srt:1"}
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": "srt", "namespace": "llm"},
            "spec": {"engineConfig": {"runner": container},
                     "routerConfig": {"runner": {**container, "image": "router:1"}}}}


def _isvc(router: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "chat", "namespace": "llm", "uid": "u-1"},
            "spec": {"deploymentMode": "OMENative", "model": {"name": "m"},
                     "runtime": {"name": "srt", "kind": "ServingRuntime"},
                     "engine": {"minReplicas": 1, "maxReplicas": 1},
                     "router": {"minReplicas": 1, "maxReplicas": 1, **(router or {})}}}


def _objects(isvc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    plan = render_service(isvc_from_json(isvc), [runtime_from_json(_runtime())],
                          crds_present=[])
    return {cp.component: list(cp.objects) for cp in plan.components}


def _by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def test_the_router_gets_an_account_that_may_read_pods_and_runs_as_it() -> None:
    router = _objects(_isvc())["router"]
    kinds = [o["kind"] for o in router]
    assert kinds[:4] == ["ServiceAccount", "Role", "RoleBinding", "InferenceReplica"], kinds
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        obj = _by_kind(router, kind)
        assert obj["metadata"]["name"] == "chat-router"
        assert obj["metadata"]["namespace"] == "llm"
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "InferenceService", "chat", True)  # gone with the InferenceService
    assert _by_kind(router, "Role")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    binding = _by_kind(router, "RoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "chat-router"}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "chat-router", "namespace": "llm"}]
    runners = _by_kind(router, "InferenceReplica")["spec"]["runners"]
    assert {r["template"]["spec"]["serviceAccountName"] for r in runners} == {"chat-router"}


def test_only_the_router_gets_one_and_ome_overrides_a_spec_account() -> None:
    objects = _objects(_isvc({"serviceAccountName": "mine"}))
    engine = objects["engine"]
    assert not [o for o in engine if o["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    engine_runners = _by_kind(engine, "InferenceReplica")["spec"]["runners"]
    assert all("serviceAccountName" not in r["template"]["spec"] for r in engine_runners)
    router_runners = _by_kind(objects["router"], "InferenceReplica")["spec"]["runners"]
    assert {r["template"]["spec"]["serviceAccountName"] for r in router_runners} == {
        "chat-router"}
