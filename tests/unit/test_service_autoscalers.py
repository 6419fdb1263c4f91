"""The ISVC controller's autoscaler caches (``service_autoscalers.py``): what a pass sees of
an InferenceService's HPAs and ScaledObjects, and how the ones a class change replaced go."""

from __future__ import annotations

from typing import Any

from omenative_controller.kube.errors import ApiError
from omenative_controller.service_autoscalers import HPAS, SCALED_OBJECTS, OwnedAutoscalers


class _Client:
    """Records DELETEs; the one named ``gone`` answers 404 (deleted meanwhile)."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str, str | None, str | None]] = []

    async def delete(self, res: Any, name: str, namespace: str | None = None, *,
                     uid: str | None = None, **_: Any) -> dict[str, Any]:
        if name == "gone":
            raise ApiError(404, "NotFound", "not found")
        self.deleted.append((res.plural, name, namespace, uid))
        return {}


def _obj(name: str, namespace: str = "prod", isvc: str = "chat") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace,
                         "labels": {"ome.io/inferenceservice": isvc}}}


def _caches(client: _Client) -> OwnedAutoscalers:
    owned = OwnedAutoscalers(client, ("prod",), lambda *_: None)  # type: ignore[arg-type]
    for name, ns, isvc in (("chat-engine", "prod", "chat"), ("other-engine", "prod", "other"),
                           ("chat-engine2", "dev", "chat")):
        body = _obj(name, ns, isvc)
        body["metadata"]["resourceVersion"] = "1"
        owned.hpas.upsert_if_newer(body)
    so = _obj("scaledobject-chat-engine")
    so["metadata"]["resourceVersion"] = "1"
    owned.scaled_objects.upsert_if_newer(so)
    return owned


def test_a_pass_sees_the_isvcs_own_hpas_and_scaled_objects_only_while_keda_is_served() -> None:
    owned = _caches(_Client())
    seen = owned.of("prod", "chat")
    assert [(o["kind"], o["metadata"]["name"]) for o in seen] == [
        ("HorizontalPodAutoscaler", "chat-engine")]  # KEDA's API is not served (yet)
    assert seen[0]["apiVersion"] == "autoscaling/v2"
    owned.keda.informers = {SCALED_OBJECTS.plural: owned.scaled_objects}  # discovery found it
    assert [(o["kind"], o["metadata"]["name"]) for o in owned.of("prod", "chat")] == [
        ("HorizontalPodAutoscaler", "chat-engine"), ("ScaledObject", "scaledobject-chat-engine")]


async def test_a_replaced_autoscaler_is_deleted_with_its_uid_and_a_404_is_no_error() -> None:
    client = _Client()
    owned = _caches(client)
    await owned.delete("prod", [
        {"kind": "HorizontalPodAutoscaler", "name": "chat-engine", "uid": "u-1"},
        {"kind": "ScaledObject", "name": "gone", "uid": "u-2"},
        {"kind": "Deployment", "name": "chat-engine", "uid": "u-3"}])  # never anything else
    assert client.deleted == [(HPAS.plural, "chat-engine", "prod", "u-1")]


def test_only_a_change_an_isvc_pass_reads_queues_its_owner() -> None:
    """The HPA controller rewrites its status on its own beat; only what the ISVC status
    mirrors (or the object's identity and spec) may queue a pass, else every pass re-applies
    the InferenceService's objects at steady state."""
    from omenative_controller.service_autoscalers import relevant

    seen: list[object] = []
    changed = relevant(lambda ns, old, new: seen.append((old, new)))
    hpa = {"metadata": {"name": "chat-engine", "uid": "u1", "resourceVersion": "1",
                        "labels": {"ome.io/inferenceservice": "chat"}},
           "spec": {"minReplicas": 1, "maxReplicas": 3},
           "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentMetrics": []}}
    beat = {**hpa, "metadata": {**hpa["metadata"], "resourceVersion": "2"},
            "status": {**hpa["status"], "currentMetrics": [{"type": "Resource"}],
                       "observedGeneration": 2}}
    changed("ns", hpa, beat)
    assert seen == []
    scaled = {**beat, "status": {**beat["status"], "desiredReplicas": 2}}
    changed("ns", beat, scaled)
    changed("ns", None, hpa)
    changed("ns", hpa, None)
    assert len(seen) == 3
