"""Runtime and service merged per field (service wins), templates, lifecycle precedence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import LifecycleSpec, RollingUpdate, UpdateStrategy
from omenative_core.service import (
    ComponentSpec,
    OperatorDefaults,
    component_runners,
    effective_component,
    effective_lifecycle,
    isvc_from_json,
    merge_json,
    merge_lifecycle,
    merge_runner,
    runtime_from_json,
)


def isvc(spec: dict[str, Any]) -> Any:
    return isvc_from_json({"metadata": {"name": "chat"}, "spec": spec})


def runtime(spec: dict[str, Any]) -> Any:
    return runtime_from_json(
        {"kind": "ClusterServingRuntime", "metadata": {"name": "rt"}, "spec": spec}
    )


def test_service_scalars_win_and_runtime_only_fields_stay() -> None:
    merged = merge_json(
        {"minReplicas": 1, "nodeSelector": {"pool": "a100", "zone": "z1"}, "hostIPC": True},
        {"minReplicas": 3, "nodeSelector": {"pool": "h100"}},
    )
    assert merged == {
        "minReplicas": 3,
        "nodeSelector": {"pool": "h100", "zone": "z1"},
        "hostIPC": True,
    }


def test_named_lists_merge_item_by_item() -> None:
    merged = merge_json(
        {
            "containers": [
                {
                    "name": "ome-container",
                    "image": "a:1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                }
            ],
            "volumes": [{"name": "shm", "emptyDir": {}}],
        },
        {
            "containers": [
                {
                    "name": "ome-container",
                    "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
                },
                {"name": "sidecar", "image": "s:1"},
            ]
        },
    )
    main, sidecar = merged["containers"]
    assert main["image"] == "a:1"
    assert main["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "two"},
        {"name": "C", "value": "3"},
    ]
    assert sidecar == {"name": "sidecar", "image": "s:1"}
    assert merged["volumes"] == [{"name": "shm", "emptyDir": {}}]


def test_plain_lists_are_replaced_and_null_keeps_the_runtime_value() -> None:
    merged = merge_json(
        {"args": ["--a"], "tolerations": [{"key": "gpu"}], "image": "x"},
        {"args": ["--b"], "image": None},
    )
    assert merged == {"args": ["--b"], "tolerations": [{"key": "gpu"}], "image": "x"}


def test_empty_leader_and_worker_keep_the_runtimes_blocks() -> None:
    merged = effective_component(
        isvc({"engine": {"leader": {}, "worker": {}}}),
        runtime({"engineConfig": {"leader": {"runner": {"args": ["--l"]}}, "worker": {"size": 3}}}),
        "engine",
    )
    assert merged is not None and merged.worker is not None and merged.leader is not None
    assert merged.worker.size == 3
    assert merged.leader.runner == {"args": ["--l"]}


def test_service_worker_size_wins() -> None:
    merged = effective_component(
        isvc({"engine": {"worker": {"size": 4}}}),
        runtime({"engineConfig": {"worker": {"size": 2}}}),
        "engine",
    )
    assert merged is not None and merged.worker is not None and merged.worker.size == 4


def test_component_absent_from_the_runtime_is_the_service_one() -> None:
    merged = effective_component(isvc({"router": {"minReplicas": 2}}), runtime({}), "router")
    assert merged == ComponentSpec({"minReplicas": 2})
    assert effective_component(isvc({}), None, "router") is None


def test_runner_goes_into_ome_container_or_the_first_container() -> None:
    pod = {"containers": [{"name": "sidecar"}, {"name": "ome-container", "image": "a"}]}
    assert merge_runner(pod, {"image": "b"})["containers"][1] == {
        "name": "ome-container",
        "image": "b",
    }
    only = merge_runner({"containers": [{"name": "main", "image": "a"}]}, {"args": ["x"]})
    assert only["containers"] == [{"name": "main", "image": "a", "args": ["x"]}]
    empty = merge_runner({}, {"image": "c"})
    assert empty["containers"] == [{"image": "c", "name": "ome-container"}]


def test_leader_runner_merges_over_the_component_runner() -> None:
    service = isvc(
        {
            "engine": {
                "runner": {"image": "own:2", "env": [{"name": "X", "value": "1"}]},
                "leader": {"runner": {"args": ["--leader"]}, "nodeSelector": {"role": "head"}},
                "worker": {"size": 2},
            }
        }
    )
    rt = runtime(
        {
            "engineConfig": {"runner": {"image": "rt:1", "resources": {"limits": {"gpu": 8}}}},
            "nodeSelector": {"pool": "gpu"},
        }
    )
    merged = effective_component(service, rt, "engine")
    assert merged is not None
    leader, worker = component_runners(service, rt, "engine", merged, multi_pod=True)
    (lc,) = leader.template["spec"]["containers"]
    assert lc == {
        "image": "own:2",
        "resources": {"limits": {"gpu": 8}},
        "env": [{"name": "X", "value": "1"}],
        "args": ["--leader"],
        "name": "ome-container",
    }
    assert leader.template["spec"]["nodeSelector"] == {"pool": "gpu", "role": "head"}
    assert worker.size == 2
    assert "args" not in worker.template["spec"]["containers"][0]
    assert worker.template["spec"]["nodeSelector"] == {"pool": "gpu"}


def test_lifecycle_precedence_service_then_runtime_then_operator() -> None:
    lc = merge_lifecycle(
        {"restartPolicy": "None"},
        {
            "restartPolicy": "RecreateInstanceOnPodRestart",
            "instanceReadyTimeout": "45m",
            "updateStrategy": {"type": "RecreatePod"},
        },
        component="engine",
        operator=OperatorDefaults(min_ready_seconds=30),
    )
    assert lc is not None
    assert lc.restart_policy == "None"  # service
    assert lc.instance_ready_timeout == timedelta(minutes=45)  # runtime
    assert lc.min_ready_seconds == 30  # operator deploy default
    # the operator fills only the budget RecreatePod reads
    assert lc.update_strategy == UpdateStrategy(
        type="RecreatePod", rolling_update=RollingUpdate(max_unavailable="25%")
    )


def test_operator_default_strategy_fills_only_the_surge_budget() -> None:
    lc = merge_lifecycle(None, None, component="router", operator=OperatorDefaults())
    assert lc is not None and lc.update_strategy == UpdateStrategy(
        type="SurgeThenDrain", rolling_update=RollingUpdate(max_surge="25%")
    )
    assert merge_lifecycle(None, None, component="router") is None


def test_nested_lifecycle_fields_merge_one_by_one() -> None:
    lc = merge_lifecycle(
        {"updateStrategy": {"rollingUpdate": {"maxSurge": 1}}},
        {"updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"partition": 2}}},
        component="engine",
    )
    assert lc is not None and lc.update_strategy == UpdateStrategy(
        type="SurgeThenDrain", rolling_update=RollingUpdate(partition=2, max_surge=1)
    )


def test_effective_lifecycle_falls_back_to_cluster_config_then_fixed_defaults() -> None:
    multi = effective_lifecycle(None, LifecycleConfig(), multi_pod=True)
    assert multi.restart_policy == "RecreateInstanceOnPodRestart"
    assert multi.ready_policy == "AllPodReady"
    assert multi.instance_ready_timeout == timedelta(minutes=30)  # the chart's cluster entry
    assert multi.migration_policy is not None and multi.migration_policy.mode == "Auto"
    single = effective_lifecycle(
        LifecycleSpec(instance_ready_timeout=timedelta(0)),
        LifecycleConfig(instance_ready_timeout=None),
        multi_pod=False,
    )
    assert (single.restart_policy, single.ready_policy) == ("None", "None")
    assert single.instance_ready_timeout is None  # 0s is unset, and no cluster value: no deadline
    own = effective_lifecycle(
        LifecycleSpec(instance_ready_timeout=timedelta(minutes=5)),
        LifecycleConfig(),
        multi_pod=True,
    )
    assert own.instance_ready_timeout == timedelta(minutes=5)
