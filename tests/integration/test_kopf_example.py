"""The kopf example (examples/kopf-operator) runs InferenceReplicas through the core alone.

The operator runs as its own process (``kopf.run`` standalone) on the test's namespace, in
place of omenative-manager (no manager runs here). It must bring up a leader+worker
InferenceReplica with OME's names, labels and env, and restart an Instance whole when one
of its pods is lost, leaving the other Instance alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    REPO,
    TEST_LIFECYCLE,
    eventually,
    gate,
    get_replica,
    list_pods,
    put_lifecycle,
    release_finalizers,
    replica_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

OPERATOR = REPO / "examples" / "kopf-operator" / "omenative_kopf.py"


class KopfOperator:
    """The example operator's process and its log."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def tail(self, lines: int = 60) -> str:
        """The end of the operator's log (for failure messages)."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def alive(self) -> bool:
        """The process still runs."""
        return self.proc.poll() is None


@pytest.fixture
async def kopf_operator(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, ir_crd: str, tmp_path: Path
) -> AsyncIterator[KopfOperator]:
    """The example operator on the test's namespace, reading its lifecycle config there."""
    await put_lifecycle(kube, namespace, TEST_LIFECYCLE)
    log = tmp_path / "kopf-operator.log"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_path), "OME_CONFIG_NAMESPACE": namespace}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(OPERATOR), "--namespace", namespace],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    operator = KopfOperator(proc, log)
    try:
        yield operator
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        await release_finalizers(kube, namespace)


async def wait_ready(kube: KubeClient, namespace: str, name: str, operator: KopfOperator,
                     ready: int) -> dict[str, JSON]:
    """Until ``ready`` Instances are Ready and every pod's gate is True; the pods."""
    async def check() -> dict[str, JSON] | None:
        if not operator.alive():  # terminal: fail at once, not at the deadline
            pytest.fail(f"the operator exited:\n{operator.tail()}", pytrace=False)
        ir = await get_replica(kube, namespace, name)
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        if status.get("readyReplicas") == ready and len(pods) == 2 * ready and \
                all(gate(p) == "True" for p in pods.values()):
            return pods
        return None

    try:
        return await eventually(check, timeout=120, what=f"{name}: {ready} Instances Ready")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{operator.tail()}") from None


def env_of(pod: JSON) -> dict[str, str]:
    """The first container's env as name -> value."""
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


async def test_kopf_operator_brings_up_a_gang_with_omes_names_labels_and_env(
    kube: KubeClient, namespace: str, kopf_operator: KopfOperator
) -> None:
    await kube.create(INFERENCE_REPLICAS, replica_body("kc", replicas=2), namespace)
    pods = await wait_ready(kube, namespace, "kc", kopf_operator, 2)

    assert sorted(pods) == ["kc-engine-0-leader-0", "kc-engine-0-worker-0",
                            "kc-engine-1-leader-0", "kc-engine-1-worker-0"]
    for index in (0, 1):
        for runner in ("leader", "worker"):
            pod = pods[f"kc-engine-{index}-{runner}-0"]
            labels = pod["metadata"]["labels"]
            assert labels["ome.io/inferencereplica"] == "kc"
            assert labels["ome.io/instance-index"] == str(index)
            assert labels["ome.io/instance-incarnation"] == "1"
            assert labels["ome.io/runner"] == runner
            assert labels["ome.io/pod-ordinal"] == "0"
            assert labels["ome.io/revision-hash"]
            env = env_of(pod)
            assert env["OME_COMPONENT"] == "engine"
            assert env["OME_INSTANCE_INDEX"] == str(index)
            assert env["OME_RUNNER"] == runner
            assert env["OME_INSTANCE_POD_COUNT"] == "2"
            assert env["OME_LEADER_ADDRESS"] == f"kc-engine-{index}-leader-0.kc-engine-headless"
            assert {"conditionType": "ome.io/serving"} in pod["spec"]["readinessGates"]
            owner = pod["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"], owner["controller"]) == \
                ("InferenceReplica", "kc", True)

    ir = await get_replica(kube, namespace, "kc")
    # the core's status is the only memory: kopf wrote no progress or diff-base annotation,
    # and no finalizer of its own
    assert not any("kopf" in k for k in (ir["metadata"].get("annotations") or {}))
    assert ir["metadata"].get("finalizers") == ["ome.io/ir-teardown"]
    assert "kopf" not in (ir.get("status") or {})
    rows = {r["index"]: r for r in ir["status"]["instanceStatuses"]}
    assert {i: (r["phase"], r["incarnation"]) for i, r in rows.items()} == \
        {0: ("Ready", 1), 1: ("Ready", 1)}


async def test_kopf_operator_restarts_an_instance_whole_when_a_worker_is_lost(
    kube: KubeClient, namespace: str, kopf_operator: KopfOperator
) -> None:
    await kube.create(INFERENCE_REPLICAS, replica_body("kl", replicas=2), namespace)
    before = await wait_ready(kube, namespace, "kl", kopf_operator, 2)

    await kube.delete(PODS, "kl-engine-0-worker-0", namespace)

    async def restarted() -> dict[str, JSON] | None:
        if not kopf_operator.alive():  # terminal: fail at once, not at the deadline
            pytest.fail(f"the operator exited:\n{kopf_operator.tail()}", pytrace=False)
        ir = await get_replica(kube, namespace, "kl")
        pods = await list_pods(kube, namespace)
        inst0 = [p for n, p in pods.items() if n.startswith("kl-engine-0-")]
        rows = {r["index"]: r for r in (ir.get("status") or {}).get("instanceStatuses") or ()}
        if (
            len(inst0) == 2
            and all(p["metadata"]["labels"]["ome.io/instance-incarnation"] == "2"
                    and gate(p) == "True" and not p["metadata"].get("deletionTimestamp")
                    for p in inst0)
            and rows.get(0, {}).get("incarnation") == 2
            and rows.get(0, {}).get("phase") == "Ready"
            and (ir.get("status") or {}).get("readyReplicas") == 2
        ):
            return pods
        return None

    try:
        after = await eventually(restarted, timeout=120,
                                 what="Instance 0 recreated whole at incarnation 2")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{kopf_operator.tail()}") from None
    # the leader that never failed was replaced too: the Instance restarts as one unit
    for name in ("kl-engine-0-leader-0", "kl-engine-0-worker-0"):
        assert after[name]["metadata"]["uid"] != before[name]["metadata"]["uid"]
    # the other Instance was not touched
    for name in ("kl-engine-1-leader-0", "kl-engine-1-worker-0"):
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"]
        assert after[name]["metadata"]["labels"]["ome.io/instance-incarnation"] == "1"
