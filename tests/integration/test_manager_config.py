"""The cluster ``lifecycle`` config is re-read while the manager runs."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import CONTROLLER_REVISIONS, INFERENCE_REPLICAS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    TEST_LIFECYCLE,
    eventually,
    get_replica,
    patch_replica,
    put_lifecycle,
    replica_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


async def _revisions(kube: KubeClient, namespace: str) -> list[str]:
    page = await kube.list(CONTROLLER_REVISIONS, namespace)
    return sorted(r["metadata"]["name"] for r in page.get("items") or ())


async def _on_image(kube: KubeClient, namespace: str, image: str) -> JSON:
    async def check() -> JSON | None:
        ir = await get_replica(kube, namespace, "cfg")
        status = ir.get("status") or {}
        ok = (status.get("readyReplicas") == 1 and status.get("updatedReplicas") == 1
              and status.get("currentRevision") == status.get("updateRevision")
              and ir["spec"]["runners"][0]["template"]["spec"]["containers"][0]["image"]
              == image
              and (status.get("observedGeneration") or 0) >= ir["metadata"]["generation"])
        return ir if ok else None

    return await eventually(check, timeout=90, what=f"the Instance on {image}")


async def test_config_changes_apply_without_restart_and_bad_config_keeps_the_last_good(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    handle = await start_manager(lifecycle={**TEST_LIFECYCLE, "revisionHistoryLimit": 10})
    await kube.create(INFERENCE_REPLICAS, replica_body("cfg", replicas=1, single=True),
                      namespace)
    await _on_image(kube, namespace, "example.com/llm:1")
    for n in (2, 3, 4):
        image = f"example.com/llm:{n}"
        body = replica_body("cfg", replicas=1, single=True, image=image)
        await patch_replica(kube, namespace, "cfg", {"spec": {"runners": body["spec"]["runners"]}})
        await _on_image(kube, namespace, image)
    kept = await _revisions(kube, namespace)
    assert len(kept) == 4, f"a history limit of 10 keeps every revision: {kept}"

    # A config the parser refuses is logged and counted; the last good one stays in force.
    def reloads(result: str) -> float:
        return float(handle.metrics.sample("omenative_config_reloads_total", {"result": result}))

    await put_lifecycle(kube, namespace, {**TEST_LIFECYCLE, "revisionHistoryLimit": "many"})
    await eventually(lambda: _true(reloads("invalid") >= 1), timeout=30,
                     what="the invalid config noticed")
    await patch_replica(kube, namespace, "cfg", {"metadata": {"labels": {"poke": "1"}}})
    assert await _revisions(kube, namespace) == kept
    assert (await get_replica(kube, namespace, "cfg"))["status"]["readyReplicas"] == 1

    # A valid change is picked up at the next reload and every replica is looked at again.
    await put_lifecycle(kube, namespace, {**TEST_LIFECYCLE, "revisionHistoryLimit": 1})

    async def pruned() -> list[str] | None:
        names = await _revisions(kube, namespace)
        return names if len(names) == 2 else None

    names = await eventually(pruned, timeout=60, what="history pruned to the live + 1 revision")
    ir = await get_replica(kube, namespace, "cfg")
    assert any(ir["status"]["currentRevision"] == n for n in names), "the live one was pruned"
    assert reloads("changed") >= 1


async def _true(value: bool) -> bool:
    return value
