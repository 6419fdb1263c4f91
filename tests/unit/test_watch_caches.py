"""The manager's watch caches list in small pages: a page is parsed whole before it is slimmed."""

from __future__ import annotations

from typing import Any, cast

from omenative_controller.kube.client import KubeClient
from omenative_controller.observability import Metrics
from omenative_controller.wakeups import Wakeups
from omenative_controller.watch_caches import LIST_PAGE, REPLICA_PAGE, build_watch_caches


def test_every_cache_lists_in_small_pages_and_the_node_map_follows_the_node_cache() -> None:
    caches = build_watch_caches(cast(KubeClient, object()), None,
                                Wakeups(lambda: None, lambda: None, lambda: None),
                                lambda *_: None, Metrics(), 5.0)
    pages = {inf.name: inf.page_size for inf in caches.always}
    assert pages.pop("inferencereplicas") == REPLICA_PAGE
    assert set(pages.values()) == {LIST_PAGE} and LIST_PAGE <= 100
    first = caches.node_map.get()
    assert caches.node_map.get() is first
    nodes: Any = caches.nodes
    nodes.on_change(None, None, None)  # a node changed: the next Snapshot gets a new map
    assert caches.node_map.get() is not first
