"""OME's ``inferenceservice-config`` as OME's own chart renders it with its default values.

Transcribed by hand from ome-projects/ome at commit 4ff3b6e39a76100dd2d733522463408e4f0b538f:
the template ``charts/ome-resources/templates/ome-controller/configmap.yaml`` rendered with
``charts/ome-resources/values.yaml`` of the same commit (``ome.controller.*`` defaults;
``global.hub`` ``ghcr.io/moirai-internal``, images tagged with the chart's
``ome.version``; ``prometheus.service.port`` 9090; ``metricProviders``, ``podMonitor``
(``{}``) and ``autoscalerPolicy`` (disabled) render no key). Whitespace aside, each entry is
the JSON text the template writes.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["OME_CHART_COMMIT", "ome_chart_data"]

OME_CHART_COMMIT: Final = "4ff3b6e39a76100dd2d733522463408e4f0b538f"

_IMAGE: Final = "ghcr.io/moirai-internal/ome-agent:v1.2.2"


def _blocks(namespace: str) -> dict[str, Any]:
    update = {"type": "SurgeThenDrain", "maxSurge": "25%", "maxUnavailable": "25%"}
    return {
        "ingress": {
            "disableIstioVirtualHost": False,
            "ingressGateway": "istio-system/ingress-gateway",
            "ingressService": "istio-ingressgateway.istio-system.svc.cluster.local",
            "omeIngressGateway": "",
            "omeIngressGatewayClass": "",
            "consistentHashHeaders": ["x-routing-key", "X-SMG-Routing-Key"],
            "ingressDomain": "svc.cluster.local",
            "ingressClassName": "istio",
            "additionalIngressDomains": None,
            "domainTemplate": "{{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }}",
            "urlScheme": "http",
            "pathTemplate": "",
            "disableIngressCreation": True,
            "enableGatewayAPI": False,
            "perISVCSubdomain": False,
            "sharedHostPrefix": "llm",
            "defaultRouteTimeoutSeconds": 0,
            "additionalIngressGateways": [],
            "namespaceIngressGateways": {},
        },
        "deploy": {
            "defaultDeploymentMode": "RawDeployment",
            "replicas": {"defaultMinReplicas": 1,
                         "defaultMaxReplicas": {"engine": 3, "decoder": 3, "router": 2}},
            "terminationGracePeriodSeconds": 600,
            "updateStrategy": {"router": update, "engine": update, "decoder": update},
        },
        "podDisruptionBudget": {"omeNative": {"maxUnavailable": 1},
                                "rawDeployment": {"maxUnavailable": 1}},
        "canaryAnalysis": {
            "bundledPrometheusAddress": f"http://ome-prometheus.{namespace}.svc:9090",
            "defaultProvider": "",
            "queryTimeout": "5s",
            "maxConcurrency": 8,
            "cacheTTL": "2m",
        },
        "rollout": {"maxPinnedPlanBytes": 16384, "defaultReadyTimeout": "15m"},
        "coordination": {"trafficWeightDeadbandPercent": 0, "defaultRatioTolerancePercent": 5},
        "omenativeStatus": {"instanceStatusEncoding": "DenseV1"},
        "lifecycle": {
            "autoMigrate": {"maxAttempts": 3},
            "revisionHistoryLimit": 10,
            "scaleDownPodBatchSize": 100,
            "scaleDownRequeueInterval": "5s",
            "scaleUpPodBatchSize": 100,
            "stuckPodGracePeriod": "60s",
            "teardown": {"deadline": "30m"},
            "updateRetry": {"initialDelay": "1m", "maxAttempts": 3, "maxDelay": "30m",
                            "multiplier": 2},
        },
        "multicluster": {
            "workloadCluster": {
                "clientQPS": 0, "clientBurst": 0, "perCallTimeout": "", "cacheEnabled": False,
                "healthInterval": "", "connectionGrace": "", "eventsBatchPeriod": "",
                "establishInitial": "", "establishMax": "", "reconnectRetryMax": "",
                "funnelResyncInterval": "", "funnelBufferSize": 0,
            },
            "placement": {
                "requeueInterval": "", "gcInterval": "", "maxConcurrentReconciles": 0,
                "fanoutTimeout": "", "winnerLostGrace": "", "statusBatchPeriod": "",
                "statusSafetyRequeue": "", "dispatcherMode": "", "dispatcherStepSize": 0,
                "dispatcherRoundTimeout": "", "localQueue": "",
            },
            "endpoint": {
                "globalHostTemplate": "", "globalGateway": "", "routeNamespace": "",
                "backendPort": 0,
                "gatewayBackend": {
                    "rewriteHostname": False,
                    "tls": {"enabled": False, "wellKnownCACertificates": ""},
                    "endpointSlices": {"enabled": False, "addressRefreshInterval": ""},
                },
            },
            "routing": {"enabled": False},
        },
        "metricsAggregator": {"enableMetricAggregation": "false",
                              "enablePrometheusScraping": "false"},
        "acceleratorResources": ["nvidia.com/gpu"],
        "servingSidecar": {
            "image": _IMAGE, "memoryRequest": "2Gi", "memoryLimit": "4Gi", "cpuRequest": "1",
            "cpuLimit": "2", "compartmentId": "ocid1.compartment.oc1..dummy-compartment",
            "authType": "InstancePrincipal", "region": "ap-osaka-1",
        },
        "omeAgent": {
            "image": _IMAGE, "serviceAccount": "ome-model-metadata", "memoryRequest": "256Mi",
            "memoryLimit": "512Mi", "cpuRequest": "100m", "cpuLimit": "500m",
            "backoffLimit": 2, "ttlSecondsAfterFinished": 3600, "nodeSelector": {},
            "tolerations": [], "affinity": {}, "priorityClassName": "",
        },
        "modelInit": {
            "image": _IMAGE, "memoryRequest": "150Gi", "memoryLimit": "180Gi",
            "cpuRequest": "15", "cpuLimit": "15",
            "compartmentId": "ocid1.compartment.oc1..dummy-compartment",
            "authType": "InstancePrincipal",
            "vaultId": "ocid1.vault.oc1.ap-osaka-1.dummy.dummy-vault", "region": "ap-osaka-1",
            "extraEnvVars": [{"name": "INSTANCE_TYPE_MAP", "value": "{}"}],
            "extraVolumeMounts": [],
        },
    }


def ome_chart_data(namespace: str = "ome", **overrides: Any) -> dict[str, str]:
    """The ConfigMap's ``data``: each block as JSON text; ``overrides`` replace blocks
    (None removes one), for the tests that change one setting."""
    blocks = _blocks(namespace)
    for key, value in overrides.items():
        if value is None:
            blocks.pop(key, None)
        else:
            blocks[key] = value
    return {k: json.dumps(v, indent=2) for k, v in blocks.items()}
