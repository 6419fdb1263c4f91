"""A runtime's inheritance status on the real manager: a child whose parent is missing reports
``InheritanceReady=False ParentNotFound`` and a Warning Event naming the broken link; once
the parent exists it reports ``Resolved`` and its chain root first (OME v1.3, ome-docs
``concepts/runtimes/runtime-inheritance.md`` at 7f641a34, "When a chain breaks"; the runtimes
carry OME's status subresource, config/ome-crd/).
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.service_controller import SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import eventually, posted_warning_events  # noqa: E402 - after the rewrite

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


def runtime(name: str, namespace: str, parent: str | None = None) -> JSON:
    meta: JSON = {"name": name, "namespace": namespace}
    if parent is not None:
        meta["annotations"] = {"ome.io/inherit-from": parent}
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime", "metadata": meta,
            "spec": {"engineConfig": {"runner": {"name": "ome-container",
                                                 "image": "example.com/sglang:1"}}}}


async def _ready(kube: KubeClient, namespace: str, name: str, status: str) -> JSON | None:
    obj = await kube.get(SERVING_RUNTIMES, name, namespace)
    cond = next((c for c in (obj.get("status") or {}).get("conditions") or ()
                 if c["type"] == "InheritanceReady"), None)
    return obj if cond is not None and cond["status"] == status else None


async def test_a_broken_chain_is_reported_and_mended(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    await start_manager()
    await kube.create(SERVING_RUNTIMES, runtime("sglang-llama-3-2-3b", namespace,
                                                "sglang-profile"), namespace)
    child = await eventually(lambda: _ready(kube, namespace, "sglang-llama-3-2-3b", "False"),
                             timeout=60, what="InheritanceReady=False on the child")
    (cond,) = child["status"]["conditions"]
    assert cond["reason"] == "ParentNotFound"
    assert 'inherit-from parent "sglang-profile" not found' in cond["message"]

    (event,) = await posted_warning_events(kube, namespace, "sglang-llama-3-2-3b",
                                           "ParentNotFound", timeout=60)
    assert event["involvedObject"]["kind"] == "ServingRuntime"
    assert "ome.io/inherit-from link sglang-llama-3-2-3b -> sglang-profile is broken" in \
        event["message"]

    await kube.create(SERVING_RUNTIMES, runtime("sglang-profile", namespace), namespace)
    child = await eventually(lambda: _ready(kube, namespace, "sglang-llama-3-2-3b", "True"),
                             timeout=60, what="InheritanceReady=True on the child")
    assert child["status"]["conditions"][0]["reason"] == "Resolved"
    assert child["status"]["inheritanceChain"] == ["sglang-profile", "sglang-llama-3-2-3b"]
    profile = await eventually(lambda: _ready(kube, namespace, "sglang-profile", "True"),
                               timeout=60, what="InheritanceReady=True on the profile")
    assert profile["status"]["inheritanceChain"] == ["sglang-profile"]
