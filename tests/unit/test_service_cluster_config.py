"""The inferenceservice-config blocks the InferenceService layer reads."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from tests.ome_chart_config import ome_chart_data

from omenative_core.model.config import UNCONFIGURED, ConfigError, LifecycleConfig
from omenative_core.model.spec import RollingUpdate, UpdateStrategy
from omenative_core.service import (
    PdbPolicy,
    ServiceConfig,
    ignored_ome_keys,
    parse_service_config,
)


def data(**blocks: object) -> dict[str, str]:
    return {k: json.dumps(v) for k, v in blocks.items()}


def test_absent_blocks_are_the_chart_defaults() -> None:
    lifecycle = LifecycleConfig()
    assert parse_service_config({}, lifecycle) == ServiceConfig(lifecycle=lifecycle)
    chart = parse_service_config({"lifecycle": "{}"})
    assert chart.rollout.default_ready_timeout == timedelta(minutes=15)
    assert chart.rollout.default_ratio_tolerance == 5
    assert chart.pdb_omenative == PdbPolicy(max_unavailable=1)


def test_every_block_reaches_the_setting_it_names() -> None:
    cfg = parse_service_config(data(
        deploy={"replicas": 2, "minReadySeconds": 30, "terminationGracePeriodSeconds": 600,
                "updateStrategy": {"decoder": {"type": "RecreatePod",
                                               "rollingUpdate": {"maxUnavailable": 1}}}},
        podDisruptionBudget={"omeNative": {"minAvailable": "50%"}, "rawDeployment": None},
        coordination={"defaultRatioTolerancePercent": 10, "trafficWeightDeadbandPercent": 2},
        rollout={"defaultReadyTimeout": "5m", "maxPinnedPlanBytes": 4096},
    ))
    assert cfg.default_min_replicas == 2
    assert cfg.operator.min_ready_seconds == 30
    decoder = cfg.operator.update_strategy["decoder"]
    assert isinstance(decoder, UpdateStrategy) and decoder.type == "RecreatePod"
    assert cfg.operator.update_strategy["engine"] is None  # OME: not named, unconfigured
    assert cfg.pdb_omenative == PdbPolicy(min_available="50%")
    assert cfg.pdb_raw_deployment is None  # null: no budget unless the component sets one
    assert (cfg.rollout.default_ratio_tolerance, cfg.rollout.traffic_deadband) == (10, 2)
    assert cfg.rollout.default_ready_timeout == timedelta(minutes=5)
    assert cfg.rollout.max_pinned_plan_bytes == 4096


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ({"coordination": "{not json"}, "coordination: unable to parse json"),
        ({"rollout": "[1]"}, "rollout: expected an object"),
        (data(rollout={"defaultReadyTimeout": "15"}), "rollout.defaultReadyTimeout"),
        (data(coordination={"defaultRatioTolerancePercent": 101}),
         "coordination.defaultRatioTolerancePercent: expected an integer 0..100"),
        (data(coordination={"ratio": 1}), "coordination: unknown key(s) ratio"),
        (data(podDisruptionBudget={"omeNative": {"maxUnavailable": 1, "minAvailable": 1}}),
         "podDisruptionBudget.omeNative: set exactly one"),
        (data(podDisruptionBudget={"omeNative": {"maxUnavailable": "half"}}),
         "podDisruptionBudget.omeNative.maxUnavailable"),
        (data(deploy={"updateStrategy": {"gpu": {}}}), "deploy.updateStrategy: expected"),
        (data(deploy={"updateStrategy": {"engine": {"type": 3}}}),
         "deploy.updateStrategy.engine"),
        (data(deploy={"replicas": -1}), "deploy.replicas: expected an integer >= 0"),
        (data(deploy={"replicas": {"defaultMinReplicas": 0}}),
         "deploy.replicas.defaultMinReplicas: must be > 0, got 0"),
        (data(deploy={"replicas": {"defaultMaxReplicas": {"gpu": 2}}}),
         "deploy.replicas.defaultMaxReplicas: unknown key(s) gpu"),
        (data(deploy={"replicas": {"defaultMinReplica": 1}}),
         "deploy.replicas: unknown key(s) defaultMinReplica"),
        (data(deploy={"defaultDeploymentMode": "OMENative"}),
         "deploy.defaultDeploymentMode: 'OMENative' is not supported"),
        (data(deploy={"updateStrategy": {"engine": {"type": "SurgeThenDrain",
                                                    "maxSurge": "0%"}}}),
         "deploy.updateStrategy.engine.maxSurge: must be an integer or percentage > 0"),
        (data(deploy={"updateStrategy": {"router": {"type": "Rolling"}}}),
         "deploy.updateStrategy.router.type: 'Rolling' is not a supported update strategy"),
        (data(deploy={"terminationGracePeriodSeconds": 0}),
         "deploy.terminationGracePeriodSeconds"),
        (data(omenativeStatus={"instanceStatusEncoding": "ColumnarV2"}),
         "omenativeStatus.maxDecodedInstances: required when instanceStatusEncoding is "
         "ColumnarV2"),
        (data(omenativeStatus={"instanceStatusEncoding": "Dense"}),
         "omenativeStatus.instanceStatusEncoding: expected DenseV1 or ColumnarV2"),
        (data(podMonitor={"label": {}}), "podMonitor: unknown key(s) label"),
        (data(podMonitor={"relabelings": [{"targetLabel": 3}]}),
         "podMonitor.relabelings[0].targetLabel: expected a string"),
        ({"lifecyle": "{}"}, "inferenceservice-config: unknown key(s) lifecyle"),
    ],
)
def test_a_malformed_block_is_refused_naming_its_key(blocks: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_service_config(blocks)
    assert message in str(info.value)


def test_omes_chart_configmap_reads_with_omes_meaning() -> None:
    """OME's chart-rendered ConfigMap (tests/ome_chart_config.py) parses, every OME key
    with OME's meaning: replica defaults, flat update strategies, omenativeStatus."""
    from omenative_controller.manager_config import ConfigSource

    lifecycle, cfg = ConfigSource.parse_all(ome_chart_data())
    assert cfg.default_min_replicas == 1
    assert cfg.default_max_replicas == {"engine": 3, "decoder": 3, "router": 2}
    engine = cfg.operator.update_strategy["engine"]
    assert engine == UpdateStrategy(
        type="SurgeThenDrain", rolling_update=RollingUpdate(max_surge="25%",
                                                            max_unavailable="25%"))
    assert cfg.pdb_omenative == PdbPolicy(max_unavailable=1)
    assert lifecycle.instance_status_encoding == "DenseV1"  # omenativeStatus, not the chart's
    assert lifecycle is cfg.lifecycle
    # the lifecycle keys OME's chart leaves out mean what OME's binary makes of them
    assert lifecycle.instance_ready_timeout is None
    assert lifecycle.unschedulable_grace_period is None
    assert lifecycle.audit is None
    assert lifecycle.stuck_pod_grace_period == timedelta(seconds=60)
    assert lifecycle.revision_history_limit == 10
    assert ignored_ome_keys(ome_chart_data()) == (
        "acceleratorResources", "canaryAnalysis", "ingress", "metricsAggregator", "modelInit",
        "multicluster", "omeAgent", "servingSidecar")


def test_absent_lifecycle_keys_are_off_in_a_configmap_and_the_chart_without_one() -> None:
    from omenative_controller.manager_config import ConfigSource

    off, _ = ConfigSource.parse_all({"lifecycle": "{}"})
    assert off == UNCONFIGURED
    assert (off.update_retry, off.auto_migrate, off.teardown.deadline) == (None, None, None)
    nothing, _ = ConfigSource.parse_all({})
    assert nothing == UNCONFIGURED  # OME: no lifecycle key is no lifecycle config
    chart, _ = ConfigSource.parse_all(None)  # no ConfigMap at all
    assert chart == LifecycleConfig()


def test_ome_defaults_for_unset_blocks_and_fields() -> None:
    cfg = parse_service_config(data(
        coordination={"trafficWeightDeadbandPercent": 0},
        rollout={"maxPinnedPlanBytes": 0, "defaultReadyTimeout": ""},
        podMonitor={"labels": {"scrape": "yes"}, "relabelings": [
            {"sourceLabels": ["__meta_kubernetes_namespace"], "targetLabel": "ns"}]},
    ))
    assert cfg.rollout.default_ratio_tolerance is None  # OME: no drift bound
    assert cfg.rollout.max_pinned_plan_bytes == 0  # OME: uncapped
    assert cfg.rollout.default_ready_timeout == timedelta(minutes=15)
    assert cfg.pod_monitor.labels == {"scrape": "yes"}
    assert cfg.pod_monitor.relabelings == (
        {"sourceLabels": ["__meta_kubernetes_namespace"], "targetLabel": "ns"},)
