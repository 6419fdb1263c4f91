"""KEDA's ``scaledobjects.keda.sh`` CRD (v2.21.1, from its Go module; no operator) on the
test API server, for the tests that render or switch ScaledObjects."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import CRDS
from omenative_devcluster.keda import scaledobject_crd

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import delete_crd, eventually  # noqa: E402

__all__ = ["keda_crd"]


@pytest.fixture
async def keda_crd(kube: KubeClient) -> AsyncIterator[str]:
    """KEDA's ScaledObject CRD, Established; removed (with its objects) at the end, and
    waited for until it is gone."""
    crd = scaledobject_crd()
    name = crd["metadata"]["name"]
    try:
        await kube.create(CRDS, crd)
    except ApiError as exc:
        if not exc.already_exists:
            raise

    async def served() -> bool:
        got = await kube.get(CRDS, name)
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (got.get("status") or {}).get("conditions") or ())

    await eventually(served, timeout=30, what=f"CRD {name} Established")
    yield name
    await delete_crd(kube, name)  # gone before the next test creates it again
