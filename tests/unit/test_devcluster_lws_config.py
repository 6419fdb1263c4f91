"""How the real LeaderWorkerSet is wired to the local control plane (no cluster needed).

LWS's webhooks are registered from the module's own manifest, pointed at the loopback
port with our certificate; its pod webhooks must see only LWS's pods (the selector of the
module's kustomize patch), or every other test's pods would go through LWS. The benchmark
reads LWS's request count from its metrics, and gives kube-controller-manager (which
creates LWS's pods) the same client limits.
"""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from omenative_devcluster.cluster import Cluster, ClusterOptions
from omenative_devcluster.lws import NAME_LABEL, requests_total, webhook_configurations

MANIFEST = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mleaderworkerset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system,
                 path: /mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset}}
  rules: [{apiGroups: [leaderworkerset.x-k8s.io], apiVersions: [v1],
           operations: [CREATE, UPDATE], resources: [leaderworkersets]}]
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: vpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate--v1-pod}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE],
           resources: [pods]}]
"""

PATCH = """
- op: replace
  path: /webhooks/1
  value:
    name: mpod.kb.io
    objectSelector:
      matchExpressions: [{key: leaderworkerset.sigs.k8s.io/name, operator: Exists}]
"""


def _module(tmp_path: Path, *, patch: bool) -> Path:
    hooks = tmp_path / "config" / "webhook"
    hooks.mkdir(parents=True)
    (hooks / "manifests.yaml").write_text(MANIFEST)
    if patch:
        (hooks / "mutating-patch.yaml").write_text(PATCH)
    return tmp_path


def test_webhooks_call_the_loopback_port_with_our_ca_and_see_only_lws_pods(
        tmp_path: Path) -> None:
    configs = webhook_configurations(_module(tmp_path, patch=True), "https://127.0.0.1:9443",
                                     b"PEM")
    assert [c["kind"] for c in configs] == ["MutatingWebhookConfiguration",
                                            "ValidatingWebhookConfiguration"]
    hooks = {h["name"]: h for c in configs for h in c["webhooks"]}
    assert hooks["mpod.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate--v1-pod",
        "caBundle": base64.b64encode(b"PEM").decode()}
    only_lws = {"matchExpressions": [{"key": NAME_LABEL, "operator": "Exists"}]}
    assert hooks["mpod.kb.io"]["objectSelector"] == only_lws
    assert hooks["vpod.kb.io"]["objectSelector"] == only_lws  # no patch: the same selector
    assert "objectSelector" not in hooks["mleaderworkerset.kb.io"]
    assert hooks["mleaderworkerset.kb.io"]["clientConfig"]["url"].endswith(
        "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset")
    # what is registered is valid YAML for kubectl apply
    assert len(list(yaml.safe_load_all(yaml.safe_dump_all(configs)))) == 2


def test_requests_are_summed_over_every_code_and_verb() -> None:
    text = "\n".join([
        "# HELP rest_client_requests_total Number of HTTP requests",
        'rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 12',
        'rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 30',
        'rest_client_requests_total{code="409",host="127.0.0.1:1",method="PUT"} 1',
        'rest_client_request_duration_seconds_count{verb="GET"} 99',
    ])
    assert requests_total(text) == 43
    assert requests_total("") == 0


def test_controller_manager_gets_the_client_limits_asked_for(tmp_path: Path) -> None:
    default = Cluster(ClusterOptions(state_dir=tmp_path))
    assert default._client_limits() == []
    tuned = Cluster(ClusterOptions(state_dir=tmp_path, controller_manager_qps=100,
                                   controller_manager_burst=200))
    assert tuned._client_limits() == ["--kube-api-qps=100", "--kube-api-burst=200"]
    assert tuned._client_limits(scheduler=True) == []
    scheduler = Cluster(ClusterOptions(state_dir=tmp_path, scheduler_qps=100,
                                       scheduler_burst=200))
    assert scheduler._client_limits(scheduler=True) == ["--kube-api-qps=100",
                                                        "--kube-api-burst=200"]
    assert scheduler._client_limits() == []
