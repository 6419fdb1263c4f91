"""``kubectl ome autoscale status|explain``, ``wait --for=rollout=stable`` and ``-o yaml`` on
the seed example ``chat`` served by the real manager (stand-in nodes): the default HPA the
manager makes for each component is what ``autoscale`` shows and expects."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from omenative_controller.cli.kubectl_autoscale import HPAS
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import eventually  # noqa: E402
from test_kubectl_ome import Kubectl  # noqa: E402
from test_kubectl_ome import kubectl as kubectl_on_path  # noqa: E402, F401 - a fixture
from test_service_controller import (  # noqa: E402
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    chat_body,
    runtime_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


@pytest.fixture
def kubectl(kubectl_on_path: Kubectl) -> Kubectl:  # noqa: F811 - the imported fixture
    """The plugin on PATH, as the kubectl-ome tests run it."""
    return kubectl_on_path


def _columns(text: str) -> dict[str, list[str]]:
    """A FIELD table as {field: [cells...]} (the first row per field)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = line.split()
        if cells:
            out.setdefault(cells[0], cells[1:])
    return out


async def test_autoscale_status_explain_rollout_wait_and_yaml(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str],
    kubectl: Kubectl,
) -> None:
    await start_manager()
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"), namespace)
    await kube.create(INFERENCE_SERVICES, chat_body(namespace), namespace)

    async def hpa() -> JSON | None:
        try:
            return await kube.get(HPAS, "chat-engine", namespace)
        except ApiError:
            return None

    made = await eventually(hpa, timeout=60, what="the engine's default HPA")
    assert made["spec"]["scaleTargetRef"]["kind"] == "InferenceReplica"

    # the pass that applied the HPA writes the engine's autoscaler into the status just
    # after: wait for it, so the commands below read the status that goes with the HPA
    async def reported() -> JSON | None:
        isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        engine = ((isvc.get("status") or {}).get("components") or {}).get("engine") or {}
        return engine if engine.get("autoscaler") else None

    await eventually(reported, timeout=60, what="the engine's autoscaler in the ISVC status")
    rows = _columns(await kubectl.ok("autoscale", "status", "chat"))
    assert rows["FIELD"] == ["SERVICE", "ENGINE", "DECODER", "ROUTER"]
    # the status carries OME's autoscaler fields
    assert rows["CLASS"][1] == "HPA" and rows["TARGET-NAME"][1] == "chat-engine", rows
    doc = yaml.safe_load(await kubectl.ok("autoscale", "status", "chat", "-o", "yaml"))
    assert doc["kind"] == "AutoscaleStatusReport"
    assert [c["type"] for c in doc["content"]["components"]] == ["engine", "router"]

    explained = _columns(await kubectl.ok("autoscale", "explain", "chat",
                                          f"--ome-namespace={namespace}"))
    assert explained["FIELD"] == ["ENGINE", "ROUTER"], explained
    assert explained["MODE"] == ["Native", "Native"]
    assert explained["DESIRED"] == ["HPA/default", "HPA/default"]
    assert explained["RANGE"] == ["2..2", "1..1"]
    assert explained["EXPECTED-TARGET"] == ["InferenceReplica/chat-engine",
                                            "InferenceReplica/chat-router"]
    assert explained["CHECK"][0] == "match", explained

    rc, out, err = await kubectl.ome("wait", "chat", "--for=rollout=stable", "--timeout=90s")
    assert rc == 0 and "RolloutMatched" in out, (out, err)
    rc, out, err = await kubectl.ome("wait", "chat", "--for=rollout=failed", "--timeout=2s",
                                     "-o", "json")
    assert rc == 2 and json.loads(out)["content"]["reason"] == "RolloutNotMatched", (out, err)

    got = yaml.safe_load(await kubectl.ok("get", "isvc", "chat", "-o", "yaml"))
    assert (got["kind"], got["metadata"]["name"]) == ("InferenceService", "chat")
    listed = yaml.safe_load(await kubectl.ok("get", "ir", "-o", "yaml"))
    assert {i["metadata"]["name"] for i in listed["items"]} >= {"chat-engine", "chat-router"}
