"""The inferenceservice-config blocks the InferenceService layer reads."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from omenative_core.model.config import ConfigError, LifecycleConfig
from omenative_core.model.spec import UpdateStrategy
from omenative_core.service import PdbPolicy, ServiceConfig, parse_service_config


def data(**blocks: object) -> dict[str, str]:
    return {k: json.dumps(v) for k, v in blocks.items()}


def test_absent_blocks_are_the_chart_defaults() -> None:
    lifecycle = LifecycleConfig()
    assert parse_service_config({}, lifecycle) == ServiceConfig(lifecycle=lifecycle)
    chart = parse_service_config({"lifecycle": "{}", "unrelated": "x"})
    assert chart.rollout.default_ready_timeout == timedelta(minutes=15)
    assert chart.rollout.default_ratio_tolerance == 5
    assert chart.pdb_omenative == PdbPolicy(max_unavailable=1)


def test_every_block_reaches_the_setting_it_names() -> None:
    cfg = parse_service_config(data(
        deploy={"replicas": 2, "minReadySeconds": 30, "terminationGracePeriodSeconds": 600,
                "updateStrategy": {"decoder": {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxUnavailable": 1}}}},
        podDisruptionBudget={"omeNative": {"minAvailable": "50%"}, "rawDeployment": None},
        coordination={"defaultRatioTolerancePercent": 10, "trafficWeightDeadbandPercent": 2},
        rollout={"defaultReadyTimeout": "5m", "maxPinnedPlanBytes": 4096},
    ))
    assert cfg.default_min_replicas == 2
    assert cfg.operator.min_ready_seconds == 30
    decoder = cfg.operator.update_strategy["decoder"]
    assert isinstance(decoder, UpdateStrategy) and decoder.type == "RollingUpdate"
    assert cfg.operator.update_strategy["engine"] == ServiceConfig().operator.update_strategy[
        "engine"]  # the components not named keep the chart's
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
    ],
)
def test_a_malformed_block_is_refused_naming_its_key(blocks: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_service_config(blocks)
    assert message in str(info.value)
