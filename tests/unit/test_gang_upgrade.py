"""Upgrade path: a 1.37 API server that cannot read the gang objects a 1.36 one stored.

Its discovery serves ``scheduling.k8s.io/v1beta1`` but every LIST of PodGroups or Workloads
fails (the objects were stored as ``v1alpha2``, which 1.37 no longer decodes). The manager
must not wait for those caches forever: it reconciles everything else, with no native gang
for new attempts, until the objects are readable (docs/gang-scheduling.md, "Upgrading").
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, ApiPresence
from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.crdwatch import CrdPresence
from omenative_controller.kube.informer import Informer
from omenative_controller.manager import Manager
from omenative_controller.manager_config import ManagerOptions


class _Cache:
    """An informer as the manager's sync check reads it."""

    def __init__(self, name: str, *, synced: bool = True, failures: int = 0) -> None:
        self.name = name
        self.synced = asyncio.Event()
        if synced:
            self.synced.set()
        self.list_failures = failures
        self.list_error = "500 InternalError: no kind \"PodGroup\" is registered for version " \
                          "\"scheduling.k8s.io/v1alpha2\"" if failures else ""


def _manager(gang_failures: int, *, gang_synced: bool = False) -> Manager:
    manager = Manager(ManagerOptions())
    for attr in ("replicas", "pods", "nodes", "revisions", "services", "slices"):
        setattr(manager, attr, _Cache(attr))
    crd = CrdPresence(cast(KubeClient, None), "podgroups.scheduling.x-k8s.io", interval=1)
    crd.checked.set()
    native = ApiPresence(cast(KubeClient, None), NATIVE_GANG_VERSIONS, lambda _v: {},
                         interval=1)
    native.checked.set()
    native.served = "scheduling.k8s.io/v1beta1"
    native.informers = cast(dict[str, Informer[Any]], {
        kind: _Cache(kind.lower() + "s", synced=gang_synced, failures=gang_failures)
        for kind in ("PodGroup", "Workload")})
    native.present = gang_synced
    manager.pod_group_crd, manager.native_gang = crd, native
    return manager


def test_unreadable_gang_objects_do_not_stop_reconciling() -> None:
    async def check() -> None:
        manager = _manager(gang_failures=3)
        assert manager.caches_synced()
        assert manager.readiness() == (True, "ok (standby)")
        assert manager.native_gang is not None
        assert manager.native_gang.failing.startswith(
            "LIST scheduling.k8s.io/v1beta1 podgroups: 500 InternalError")
        assert not manager.native_gang.present  # no native gang for new attempts meanwhile

    asyncio.run(check())


def test_a_gang_cache_still_listing_is_waited_for() -> None:
    async def check() -> None:
        assert not _manager(gang_failures=1).caches_synced()  # one failure: maybe transient
        assert _manager(gang_failures=0, gang_synced=True).caches_synced()

    asyncio.run(check())
