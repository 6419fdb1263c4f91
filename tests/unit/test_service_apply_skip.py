"""The InferenceService controller's apply: a pass that renders what it applied last time,
onto objects still as that apply left them, sends no write; a delete, a user's change, a
cache that has not listed, or a restarted controller sends the apply again."""

from __future__ import annotations

import copy
from typing import Any

from omenative_controller.kube.client import JSON
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import resource_for
from omenative_controller.service_controller import ServiceController

OWNER = "ns/chat"


class FakeApi:
    """Answers server-side applies as the API server would (UID, defaults, status)."""

    def __init__(self) -> None:
        self.patches: list[str] = []

    async def request(self, method: str, path: str, **kw: Any) -> JSON:
        assert method == "PATCH" and kw["content_type"] == "application/apply-patch+yaml"
        self.patches.append(path)
        out = copy.deepcopy(kw["body"])
        out["metadata"].update(uid="u1", resourceVersion=str(len(self.patches)))
        out["status"] = {}
        return out


def pdb(min_available: int = 1) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "chat-engine", "namespace": "ns",
                         "labels": {"ome.io/inferenceservice": "chat"}},
            "spec": {"minAvailable": min_available}}


def controller(api: FakeApi, *, synced: bool = True) -> ServiceController:
    """A controller whose PodDisruptionBudget cache exists (listed when ``synced``)."""
    sc = ServiceController(api, ["ns"], crds_present=lambda: ())  # type: ignore[arg-type]
    cache: Informer[JSON] = Informer(api, resource_for("policy/v1", "PodDisruptionBudget"),  # type: ignore[arg-type]
                                     dict, namespaces=["ns"])
    if synced:
        cache.synced.set()
    sc.owned_caches.started[("policy/v1", "PodDisruptionBudget")] = cache
    return sc


def cache_of(sc: ServiceController) -> Informer[JSON]:
    return sc.owned_caches.started[("policy/v1", "PodDisruptionBudget")]


async def test_the_same_body_again_is_not_written() -> None:
    api = FakeApi()
    sc = controller(api)
    first = await sc.apply(pdb(), owner=OWNER)
    again = await sc.apply(pdb(), owner=OWNER)
    assert len(api.patches) == 1
    assert again["metadata"]["uid"] == first["metadata"]["uid"]  # the cached object
    await sc.apply(pdb(2), owner=OWNER)  # a changed body is written
    assert len(api.patches) == 2


async def test_a_deleted_or_changed_object_is_applied_again() -> None:
    api = FakeApi()
    sc = controller(api)
    await sc.apply(pdb(), owner=OWNER)
    changed = copy.deepcopy(cache_of(sc).get("ns/chat-engine"))
    assert changed is not None
    changed["spec"]["minAvailable"] = 0  # kubectl edit
    changed["metadata"]["resourceVersion"] = "50"
    cache_of(sc).upsert_if_newer(changed)
    await sc.apply(pdb(), owner=OWNER)
    assert len(api.patches) == 2
    cache_of(sc)._remove("ns/chat-engine", "60")  # the watch saw it deleted
    await sc.apply(pdb(), owner=OWNER)
    assert len(api.patches) == 3


async def test_an_unlisted_cache_or_a_restart_applies() -> None:
    api = FakeApi()
    sc = controller(api, synced=False)
    await sc.apply(pdb(), owner=OWNER)
    await sc.apply(pdb(), owner=OWNER)
    assert len(api.patches) == 2  # the cache has not listed: nothing is known
    sc = controller(api)
    await sc.apply(pdb(), owner=OWNER)
    restarted = controller(api)
    cache_of(restarted).upsert_if_newer(cache_of(sc).get("ns/chat-engine") or {})
    await restarted.apply(pdb(), owner=OWNER)  # nothing remembered: applied
    assert len(api.patches) == 4


async def test_a_deleted_isvc_forgets_its_applies() -> None:
    api = FakeApi()
    sc = controller(api)
    await sc.apply(pdb(), owner=OWNER)
    isvc = {"metadata": {"name": "chat", "namespace": "ns"}}
    sc._isvc_changed("ns", isvc, None)
    assert len(sc.repeats) == 0


def test_every_running_informer_of_the_controller_is_a_cache_of_applies() -> None:
    sc = ServiceController(FakeApi(), ["ns"])  # type: ignore[arg-type]
    names = {i.resource.kind for i in sc._owned_informers()}
    assert {"InferenceReplica", "Deployment", "HorizontalPodAutoscaler"} <= names
