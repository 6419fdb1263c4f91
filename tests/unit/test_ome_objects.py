"""The objects OME creates for an InferenceService, as OME's code writes them (issue 28,
item 4): the external ``{isvc}`` Service, per-revision Services for every OMENative
component, the PodMonitor's cluster labels and relabelings (the PDB: test_service_render)."""

from __future__ import annotations

from typing import Any

from test_service_render import comp, make_isvc, render, seed_isvc

from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec, ObjectMeta
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.rollout.services import component_revision_services, live_revision_hashes
from omenative_core.service import CRD_POD_MONITOR, ServiceConfig
from omenative_core.service.cluster_blocks import parse_pod_monitor


def _external(plan: Any) -> list[dict[str, Any]]:
    return [o for o in plan.objects if o["kind"] == "Service" and o["metadata"]["name"] == "chat"]


def test_the_external_service_fronts_the_router() -> None:
    """OME's guides `kubectl port-forward svc/<isvc>`: the Service named after the ISVC."""
    plan = render(seed_isvc())
    (svc,) = _external(plan)
    assert svc in comp(plan, "router").objects
    assert svc["metadata"]["labels"] == {"ome.io/inferenceservice": "chat",
                                         "component": "external-service"}
    assert svc["metadata"]["ownerReferences"][0]["uid"] == "isvc-uid"
    assert svc["spec"] == {
        "selector": {"ome.io/inferenceservice": "chat", "component": "router"},
        "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
        "type": "ClusterIP",
    }


def test_without_a_router_the_external_service_fronts_the_engine_on_its_port() -> None:
    isvc = make_isvc({"deploymentMode": "OMENative", "model": {"name": "llama"},
                      "runtime": {"name": "srt"},
                      "engine": {"minReplicas": 1, "leader": {}, "worker": {"size": 1}}},
                     annotations={"ome.io/service-type": "LoadBalancer",
                                  "service.beta.kubernetes.io/oci-load-balancer-shape": "flex",
                                  "unrelated/annotation": "x"})
    (svc,) = _external(render(isvc))
    assert svc["spec"]["selector"] == {"ome.io/inferenceservice": "chat", "component": "engine"}
    assert svc["spec"]["ports"][0]["port"] == 30000  # the engine's traffic port
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["metadata"]["annotations"] == {
        "service.beta.kubernetes.io/oci-load-balancer-shape": "flex"}


def test_a_cluster_local_isvc_gets_no_external_service() -> None:
    isvc = make_isvc(seed_isvc().spec, labels={"networking.knative.dev/visibility":
                                               "cluster-local"})
    assert _external(render(isvc)) == []


def test_pod_monitor_carries_the_cluster_labels_and_relabelings() -> None:
    monitor_config = parse_pod_monitor({
        "labels": {"monitoring.example.com/scrape-tier": "cluster", "component": "spoof"},
        "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_label_component"],
                         "targetLabel": "component"}],
        "metricRelabelings": [{"sourceLabels": ["__name__"], "regex": "vllm_(.+)",
                               "targetLabel": "__name__", "replacement": "vllm:$1"}],
    })
    config = ServiceConfig(pod_monitor=monitor_config)
    monitor = comp(render(seed_isvc(), crds=(CRD_POD_MONITOR,), config=config),
                   "engine").object("PodMonitor")
    assert monitor is not None
    labels = monitor["metadata"]["labels"]
    assert labels["monitoring.example.com/scrape-tier"] == "cluster"
    assert labels["component"] == "engine"  # omenative's own label is never overridden
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_label_component"], "targetLabel": "component"}]
    assert endpoint["metricRelabelings"][0]["replacement"] == "vllm:$1"
    assert "spoof" not in monitor["spec"]["selector"]["matchLabels"].values()


def _replica(rows: list[tuple[str, str]], current: str, update: str) -> InferenceReplica:
    return InferenceReplica(
        metadata=ObjectMeta(name="chat-engine", namespace="prod"),
        spec=InferenceReplicaSpec(component="engine"),
        status=InferenceReplicaStatus(
            current_revision=current, update_revision=update,
            instances=tuple(InstanceStatus(index=n, running_revision=r, target_revision=t)
                            for n, (r, t) in enumerate(rows))),
    )


def test_every_live_revision_of_a_component_gets_its_services() -> None:
    """Not only rollout-group members: an engine mid-update has Services for the revision
    its old Instances run and the one they move to."""
    replica = _replica([("chat-engine-aaa111", "chat-engine-bbb222"),
                        ("chat-engine-bbb222", "chat-engine-bbb222")],
                       "chat-engine-aaa111", "chat-engine-bbb222")
    hashes = live_revision_hashes(replica, "bbb222")
    assert hashes == {"aaa111", "bbb222"}
    main = comp(render(seed_isvc()), "engine").object("Service")
    wanted = component_revision_services("chat", "prod", "engine", hashes, main_service=main,
                                         owner={"uid": "isvc-uid"})
    assert sorted(wanted) == ["chat-engine-rev-aaa111", "chat-engine-rev-aaa111-headless",
                              "chat-engine-rev-bbb222", "chat-engine-rev-bbb222-headless"]
    traffic = wanted["chat-engine-rev-aaa111"]
    assert traffic["spec"]["selector"] == {**main["spec"]["selector"],  # type: ignore[index]
                                           "ome.io/revision-hash": "aaa111"}
    assert wanted["chat-engine-rev-aaa111-headless"]["spec"]["publishNotReadyAddresses"]


def test_a_fresh_component_has_the_services_of_its_rendered_revision() -> None:
    assert live_revision_hashes(None, "ccc333") == {"ccc333"}
