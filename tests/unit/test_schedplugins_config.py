"""How the real scheduler-plugins is configured for the tests (no process started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omenative_devcluster.schedplugins import (
    CRD_NAMES,
    SCHEDULER_NAME,
    SchedPluginsError,
    crd_files,
    scheduler_config,
)


def test_one_coscheduling_profile_under_its_own_scheduler_name() -> None:
    cfg = scheduler_config(Path("/state/kubeconfig"))
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    (profile,) = cfg["profiles"]  # the cluster's default-scheduler is not replaced
    assert profile["schedulerName"] == SCHEDULER_NAME == "scheduler-plugins-scheduler"
    plugins = profile["plugins"]
    assert plugins["queueSort"] == {"enabled": [{"name": "Coscheduling"}],
                                    "disabled": [{"name": "*"}]}
    assert plugins["multiPoint"]["enabled"] == [{"name": "Coscheduling"}]
    assert cfg["clientConnection"]["kubeconfig"] == "/state/kubeconfig"
    assert cfg["leaderElection"] == {"leaderElect": False}


def test_a_gang_is_never_parked_by_a_backoff() -> None:
    (profile,) = scheduler_config(Path("k"), permit_wait_seconds=30)["profiles"]
    (args,) = [c["args"] for c in profile["pluginConfig"] if c["name"] == "Coscheduling"]
    assert args == {"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": 0}


def test_the_crds_are_read_from_the_modules_config_crd_bases(tmp_path: Path) -> None:
    bases = tmp_path / "config" / "crd" / "bases"
    bases.mkdir(parents=True)
    for name in ("scheduling.x-k8s.io_podgroups.yaml", "scheduling.x-k8s.io_elasticquotas.yaml"):
        (bases / name).write_text("kind: CustomResourceDefinition\n")
    files = crd_files(tmp_path)
    assert [f.name for f in files] == ["scheduling.x-k8s.io_podgroups.yaml",
                                       "scheduling.x-k8s.io_elasticquotas.yaml"]
    assert CRD_NAMES == ("podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io")


def test_a_module_without_a_crd_is_an_error_naming_the_file(tmp_path: Path) -> None:
    bases = tmp_path / "config" / "crd" / "bases"
    bases.mkdir(parents=True)
    (bases / "scheduling.x-k8s.io_podgroups.yaml").write_text("kind: CustomResourceDefinition\n")
    with pytest.raises(SchedPluginsError, match=r"scheduling\.x-k8s\.io_elasticquotas\.yaml"):
        crd_files(tmp_path)
