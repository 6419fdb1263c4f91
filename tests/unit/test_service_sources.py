"""The ISVC controller's runtime and model caches: which InferenceServices a change queues,
and the Warnings a plan asks for."""

from __future__ import annotations

from typing import Any, cast

from omenative_controller.kube.client import KubeClient
from omenative_controller.service_sources import Sources
from omenative_core.service import (
    basemodel_from_json,
    isvc_from_json,
    plan_warnings,
    render_service,
)


class _Isvcs:
    def __init__(self, objs: dict[str, dict[str, Any]]) -> None:
        self.objs = objs

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self.objs.items())


def _isvc(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


ISVCS = {
    "a/named": _isvc("a", "named", runtime={"name": "srt"}, model={"name": "llama"}),
    "a/auto": _isvc("a", "auto", model={"name": "llama"}),
    "b/auto": _isvc("b", "auto", model={"name": "qwen"}),
    "a/bare": _isvc("a", "bare", engine={}),
}


def sources() -> tuple[Sources, list[str]]:
    queued: list[str] = []
    src = Sources(cast(KubeClient, None), None, cast(Any, _Isvcs(ISVCS)), queued.append)
    return src, queued


def test_a_cluster_runtime_change_queues_its_users_and_every_auto_selecting_service() -> None:
    src, queued = sources()
    src.cluster_runtimes.on_change(None, None, {"metadata": {"name": "srt"}})  # type: ignore[misc]
    assert sorted(queued) == ["a/auto", "a/named", "b/auto"]


def test_a_namespace_runtime_change_queues_only_its_namespace() -> None:
    src, queued = sources()
    src.runtimes.on_change("b", None, {"metadata": {"name": "other", "namespace": "b"}})  # type: ignore[misc]
    assert queued == ["b/auto"]


def test_a_model_change_queues_the_services_naming_it() -> None:
    src, queued = sources()
    src.cluster_models.on_change(None, {"metadata": {"name": "llama"}}, None)  # type: ignore[misc]
    assert sorted(queued) == ["a/auto", "a/named"]
    queued.clear()
    src.models.on_change("b", None, {"metadata": {"name": "llama", "namespace": "b"}})  # type: ignore[misc]
    assert queued == []


def test_models_are_not_resolved_while_their_crds_are_not_served() -> None:
    src, _ = sources()
    assert src.all_models() is None


def test_a_missing_model_is_one_warning_for_all_components() -> None:
    isvc = isvc_from_json({"metadata": {"name": "chat", "namespace": "a"},
                           "spec": {"model": {"name": "llama"}, "engine": {}, "router": {}}})
    other = basemodel_from_json({"kind": "ClusterBaseModel", "metadata": {"name": "qwen"}})
    plan = render_service(isvc, [], (), models=[other])
    assert [r for r, _ in plan_warnings(plan)] == ["ModelNotFound"]
