"""``kubectl ome runtime`` and ``wait --for=runtime-sync=acknowledged`` on the real manager,
as OME's reference runs them (reference/kubectl-ome/runtime.md, "sync" examples): pin an
InferenceService, change its runtime, read the drift with ``effective`` and ``history``, roll
forward with ``sync`` (dry runs store nothing) and wait for the manager to acknowledge it;
``tree`` shows the runtime with the InferenceService that names it.
Runtime revisions live in OME's namespace: here the test's (``--ome-namespace``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import eventually  # noqa: E402
from test_isvc_runtime_pin import RUNTIME, isvc_body, runtime_body  # noqa: E402
from test_kubectl_ome import Kubectl  # noqa: E402
from test_kubectl_ome import kubectl as kubectl_on_path  # noqa: E402, F401 - a fixture

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

NAME = "llama-3-2-3b-instruct"


@pytest.fixture
def kubectl(kubectl_on_path: Kubectl) -> Kubectl:  # noqa: F811 - the imported fixture
    """The plugin on PATH, as the kubectl-ome tests run it."""
    return kubectl_on_path


def _fields(text: str) -> dict[tuple[str, str], str]:
    """A SCOPE/FIELD/VALUE table as {(scope, field): value} (the last ISSUE row wins)."""
    out = {}
    for line in text.splitlines()[1:]:
        parts = line.split(None, 2)
        if len(parts) == 3:
            out[(parts[0], parts[1])] = parts[2].strip()
    return out


async def test_runtime_effective_history_sync_and_wait(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str],
    kubectl: Kubectl,
) -> None:
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "0.9"), namespace)
    await start_manager()
    await kube.create(INFERENCE_SERVICES, isvc_body(namespace), namespace)
    ome_ns = f"--ome-namespace={namespace}"

    async def effective() -> dict[tuple[str, str], str]:
        return _fields(await kubectl.ok("runtime", "effective", NAME, ome_ns))

    async def resolved() -> dict[tuple[str, str], str] | None:
        rows = await effective()
        return rows if rows[("Service", "PIN")] == "ManagedPin/Resolved" else None

    rows = await eventually(resolved, timeout=60, what="runtime effective: ManagedPin/Resolved")
    assert rows[("Service", "LIVE-RELATION")] == "Equal", rows
    assert rows[("Live", "RUNTIME")] == f"SR/{namespace}/{RUNTIME}"
    first = rows[("Active", "REVISION")]
    tree = (await kubectl.ok("runtime", "tree", RUNTIME)).splitlines()
    assert tree[:5] == ["RUNTIME TREE", f"Target: ServingRuntime/{namespace}/{RUNTIME}",
                        f"Context: Namespaced/{namespace} (resolution: Complete)",
                        f"Head: ServingRuntime/{RUNTIME}",
                        f"ServingRuntime/{RUNTIME} [selected]"], tree
    assert f"`-- InferenceService/{NAME}" in tree, tree
    doc = json.loads(await kubectl.ok("runtime", "tree", RUNTIME, "-o", "json"))
    assert doc["kind"] == "RuntimeTreeReport"
    assert doc["content"]["contexts"][0]["paths"][0]["dependents"] == [
        {"kind": "InferenceService", "namespace": namespace, "name": NAME}]
    rc, out, err = await kubectl.ome("runtime", "sync", NAME, ome_ns, "--yes")
    assert rc == 1 and "safety evidence is unavailable or inconsistent" in err, (out, err)

    live = await kube.get(SERVING_RUNTIMES, RUNTIME, namespace)
    live["spec"]["engineConfig"]["runner"]["args"][1] = "--mem-frac=0.85"
    await kube.replace(SERVING_RUNTIMES, RUNTIME, live, namespace)

    async def drifted() -> dict[tuple[str, str], str] | None:
        rows = await effective()
        return rows if rows[("Service", "DRIFT")] == "ReportedTrue/RevisionMismatch" else None

    rows = await eventually(drifted, timeout=60, what="runtime effective: drift reported")
    assert rows[("Service", "LIVE-RELATION")] == "Different" and \
        rows[("Active", "REVISION")] == first, rows
    report = json.loads(await kubectl.ok("runtime", "effective", NAME, ome_ns, "-o", "json"))
    assert report["kind"] == "RuntimeEffectiveReport"
    assert report["content"]["active"]["revision"] == first
    history = await kubectl.ok("runtime", "history", NAME, ome_ns, "-o", "wide")
    assert first in history and "Active,Reported,History" in history, history

    before = await kube.get(INFERENCE_SERVICES, NAME, namespace)
    for mode in ("client", "server"):
        out = await kubectl.ok("runtime", "sync", NAME, ome_ns, "--dry-run", mode, "--yes")
        assert "accepted" in out and f"dry-run         {mode}" in out, out
    after = await kube.get(INFERENCE_SERVICES, NAME, namespace)
    assert "ome.io/runtime-sync" not in (after["metadata"].get("annotations") or {})
    assert after["metadata"].get("generation") == before["metadata"].get("generation")

    rc, out, err = await kubectl.ome("runtime", "sync", NAME, ome_ns)  # no terminal, no --yes
    assert rc == 1 and "noninteractive input requires --yes" in err, (out, err)
    result: JSON = json.loads(await kubectl.ok("runtime", "sync", NAME, ome_ns, "--yes",
                                               "-o", "json"))
    assert (result["kind"], result["accepted"], result["applied"]) == \
        ("ActionResult", True, True), result
    request_id = result["requestID"]

    rc, out, err = await kubectl.ome("wait", NAME, "--for=runtime-sync=acknowledged",
                                     f"--request-id={request_id}", "--timeout=90s")
    assert rc == 0, (out, err)
    assert "RuntimeSyncObserved" in out and "Acknowledged" in out, out
    rows = await effective()
    assert rows[("Service", "SYNC")] == "Acknowledged" and \
        rows[("Service", "LIVE-RELATION")] == "Equal" and \
        rows[("Active", "REVISION")] != first, rows
