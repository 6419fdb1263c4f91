"""The webhook's model and runtime reads: only what admission decides with, no collection
LIST per review unless OME's auto-selection needs every runtime.

The fake API server answers as kube-apiserver does: a missing object is a 404 whose Status
names it, a resource that is not served is a 404 naming nothing. Each test counts the calls
one review makes (before this change every review made four LISTs, plus the runtime GET).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource
from omenative_controller.webhook_sources import kube_sources_lookup
from omenative_core.service import decode_runtime, isvc_from_json
from omenative_core.service.admission_models import AdmissionSources, model_admission

NS = "ns"
CBM = {"name": "llama", "kind": "ClusterBaseModel"}  # OME's CRD defaults the kind to this
FORMAT = {"modelFormat": {"name": "safetensors"}, "modelFramework": {"name": "transformers"}}


class FakeApi:
    """GET and LIST over a dict of objects, recording (verb, plural) per call."""

    def __init__(self, *objs: dict[str, Any], served: tuple[str, ...] = (
            "servingruntimes", "clusterservingruntimes", "basemodels", "clusterbasemodels")):
        self.objs = {(o["plural"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
                     for o in objs}
        self.served = served
        self.calls: list[tuple[str, str]] = []

    def _check(self, res: Resource) -> None:
        if res.plural not in self.served:
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {"kind": "Status", "reason": "NotFound", "details": {}})

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Any:
        self.calls.append(("get", res.plural))
        self._check(res)
        found = self.objs.get((res.plural, namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f'{res.plural}.ome.io "{name}" not found',
                           {"kind": "Status", "reason": "NotFound",
                            "details": {"name": name, "group": "ome.io", "kind": res.plural}})
        return found

    async def list(self, res: Resource, namespace: str | None = None, **_: Any) -> Any:
        self.calls.append(("list", res.plural))
        self._check(res)
        return {"items": [o for (plural, ns, _n), o in self.objs.items()
                          if plural == res.plural and (namespace is None or ns == namespace)],
                "metadata": {}}


def obj(plural: str, name: str, namespace: str | None = None, *,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    if namespace:
        meta["namespace"] = namespace
    return {"plural": plural, "metadata": meta, "spec": spec}


def model(name: str = "llama", **spec: Any) -> dict[str, Any]:
    return obj("clusterbasemodels", name, storage={"path": "/m"}, **FORMAT, **spec)


def runtime(name: str = "srt", **kw: Any) -> dict[str, Any]:
    return obj("servingruntimes", name, NS, supportedModelFormats=[
        {**FORMAT, "autoSelect": True}], engineConfig={"runner": {"name": "c", "image": "i:1"}},
        **kw)


def isvc(**spec: Any) -> Any:
    return isvc_from_json({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                           "metadata": {"name": "chat", "namespace": NS},
                           "spec": {"engine": {"minReplicas": 1}, **spec}})


def read(api: FakeApi, svc: Any) -> AdmissionSources | None:
    return asyncio.run(kube_sources_lookup(cast(KubeClient, api))(svc, None))


def reasons(svc: Any, sources: AdmissionSources | None) -> list[str]:
    assert sources is not None
    return [r.reason for r in model_admission(svc, sources.runtimes, sources.models)
            if not r.warning]


def test_a_named_runtime_and_model_take_two_gets_and_no_list() -> None:
    api = FakeApi(model(), runtime())
    svc = isvc(model=CBM, runtime={"name": "srt", "kind": "ServingRuntime"})
    sources = read(api, svc)
    assert api.calls == [("get", "clusterbasemodels"), ("get", "servingruntimes")]
    assert reasons(svc, sources) == []


def test_auto_selection_lists_the_runtimes_but_never_the_models() -> None:
    api = FakeApi(model(), runtime())
    svc = isvc(model=CBM)
    sources = read(api, svc)
    assert api.calls == [("get", "clusterbasemodels"), ("list", "servingruntimes"),
                         ("list", "clusterservingruntimes")]
    assert sources is not None and [rt.name for rt in sources.runtimes] == ["srt"]


def test_a_missing_model_is_still_refused_after_one_get() -> None:
    api = FakeApi(runtime())
    svc = isvc(model={"name": "nope", "kind": "ClusterBaseModel"})
    assert reasons(svc, read(api, svc)) == ["ModelNotFound"]
    assert api.calls == [("get", "clusterbasemodels")]


def test_without_model_crds_the_model_is_not_checked() -> None:
    api = FakeApi(runtime(), served=("servingruntimes", "clusterservingruntimes"))
    svc = isvc(model={"name": "llama", "kind": "ClusterBaseModel"})
    sources = read(api, svc)
    assert sources is not None and sources.models is None
    assert reasons(svc, sources) == []
    assert api.calls == [("get", "clusterbasemodels"), ("get", "basemodels")]


def test_a_namespaced_base_model_wins_and_kind_unset_tries_both() -> None:
    api = FakeApi(model("llama", disabled=True),
                  {**obj("basemodels", "llama", NS, storage={"path": "/m"}, **FORMAT)},
                  runtime())
    svc = isvc(model={"name": "llama"}, runtime={"name": "srt", "kind": "ServingRuntime"})
    sources = read(api, svc)
    assert api.calls[0] == ("get", "basemodels") and ("get", "clusterbasemodels") not in \
        api.calls
    assert sources is not None and sources.models is not None
    assert [m.kind for m in sources.models] == ["BaseModel"]


def test_a_runtime_the_webhook_has_read_is_not_read_again_unless_it_inherits() -> None:
    api = FakeApi(model(), runtime("srt"), runtime("child", annotations={
        "ome.io/inherit-from": "srt"}))
    lookup = kube_sources_lookup(cast(KubeClient, api))
    svc = isvc(model=CBM, runtime={"name": "srt", "kind": "ServingRuntime"})
    known = decode_runtime({**runtime("srt"), "kind": "ServingRuntime"})
    asyncio.run(lookup(svc, known))
    assert api.calls == [("get", "clusterbasemodels")]

    api.calls.clear()
    child = isvc(model=CBM, runtime={"name": "child", "kind": "ServingRuntime"})
    sources = asyncio.run(lookup(child, None))
    assert api.calls[-2:] == [("list", "servingruntimes"), ("list", "clusterservingruntimes")]
    assert sources is not None and {rt.name for rt in sources.runtimes} == {"srt", "child"}


def test_a_failed_read_skips_the_checks_instead_of_refusing() -> None:
    class Down(FakeApi):
        async def get(self, res: Resource, name: str, namespace: str | None = None) -> Any:
            raise ApiError(503, "ServiceUnavailable", "etcd down")

    api = Down(model())
    assert read(api, isvc(model={"name": "llama"})) is None
