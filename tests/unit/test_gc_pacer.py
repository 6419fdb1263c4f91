"""The collection pacer: the young generation is collected once it holds ``young_limit``
objects (CPython's count misses a cache's replacements), the middle generation after a few
young collections, full collections wait until the manager is
quiet (or too long has passed), a long one freezes its survivors, and uninstalling gives
everything back. The process's collector is shared, so each test restores it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from omenative_controller.gc_pacer import VALVE, GcPacer
from omenative_controller.observability import Metrics


class Cycle:
    """A tracked object in a reference cycle: only a collection frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector() -> Iterator[None]:
    """Each test starts with nothing frozen and ends with the collector as it found it."""
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.unfreeze()
    gc.collect()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if frozen:
        gc.freeze()


class Busy:
    """The manager's ``busy()``, switchable."""

    def __init__(self, value: bool) -> None:
        self.value = value

    def __call__(self) -> bool:
        return self.value


def _old_garbage() -> weakref.ref[Cycle]:
    """A cycle promoted to the old generation while alive, then dropped: garbage that
    only a full collection finds."""
    held = Cycle()
    ref = weakref.ref(held)
    gc.collect(1)  # survives into the old generation
    del held
    return ref


async def test_install_takes_over_the_older_generations_and_uninstall_restores(
        collector: None) -> None:
    before = gc.get_threshold()
    first, second = GcPacer(Busy(False)), GcPacer(Busy(False))
    first.install()
    second.install()
    first.install()  # idempotent
    young, middle, old = gc.get_threshold()
    assert young == before[0]  # CPython still runs the young collections
    assert middle == VALVE and old > 10**6  # the rest is the pacer's
    first.uninstall()
    assert gc.get_threshold() == (young, middle, old)  # another manager still paces
    second.uninstall()
    assert gc.get_threshold() == before


def test_the_middle_generation_is_collected_after_young_every_young_collections(
        collector: None) -> None:
    pacer = GcPacer(Busy(True), young_every=3)
    for _ in range(2):
        gc.collect(0)
    assert pacer.step(now=1.0) is None  # two young collections: not yet
    gc.collect(0)
    assert pacer.step(now=1.0) == 1
    assert gc.get_count()[1] == 0
    assert pacer.middles == 1


class View:
    """A cached object: tracked by the collector, as the manager's pod views are."""

    __slots__ = ("labels",)

    def __init__(self, n: int) -> None:
        self.labels = [n]


def test_a_cache_that_replaces_its_objects_is_collected_young_by_the_pacer(
        collector: None) -> None:
    """Each replacement allocates one view and frees another, so CPython's young count
    (allocations less deallocations) stays under its threshold while the young generation
    grows without bound; the pacer collects it at its limit."""
    cache = {n: View(n) for n in range(5000)}
    gc.collect()
    pacer = GcPacer(Busy(True), young_limit=2000)
    collected_at: list[int] = []
    for n in range(20000):
        cache[n % 5000] = View(n)  # a watch event's new view replaces the old one
        if n % 250 == 0 and pacer.step(now=1.0) == 0:
            collected_at.append(n)
    assert gc.get_count()[0] < gc.get_threshold()[0]  # CPython would never have started
    assert len(collected_at) >= 8  # 2 objects a replacement: every ~1,000 replacements
    assert len(gc.get_objects(generation=0)) < 2000 + 2 * 250
    assert pacer.youngs == len(collected_at)


def test_a_short_young_generation_is_left_to_cpython(collector: None) -> None:
    pacer = GcPacer(Busy(True), young_limit=2000)
    gc.collect()
    kept = [View(n) for n in range(100)]
    assert pacer.step(now=1.0) is None
    assert pacer.youngs == 0 and kept


def test_a_busy_manager_defers_full_collections_until_quiet(collector: None) -> None:
    busy = Busy(True)
    pacer = GcPacer(busy, quiet_for=5.0, max_defer=600.0)
    ref = _old_garbage()
    assert pacer.step(now=10.0) is None  # busy: the cycle waits
    assert ref() is not None
    busy.value = False
    assert pacer.step(now=12.0) is None  # quiet for 2 s only
    assert pacer.step(now=15.5) == 2  # quiet for 5.5 s
    assert ref() is None
    assert pacer.fulls == 1


def test_max_defer_collects_a_manager_that_is_never_quiet(collector: None) -> None:
    pacer = GcPacer(Busy(True), quiet_for=5.0, max_defer=60.0)
    ref = _old_garbage()
    assert pacer.step(now=59.0) is None
    assert pacer.step(now=61.0) == 2
    assert ref() is None


def test_nothing_promoted_means_no_full_collection(collector: None) -> None:
    pacer = GcPacer(Busy(False), quiet_for=0.0)
    gc.collect()  # the old generation's count is 0 again
    assert pacer.step(now=100.0) is None


def test_a_long_full_collection_freezes_its_survivors_and_uninstall_thaws(
        collector: None) -> None:
    async def run() -> None:
        pacer = GcPacer(Busy(False), quiet_for=0.0, freeze_after=0.0)
        pacer.install()
        kept = [Cycle() for _ in range(1000)]
        gc.collect(1)
        assert pacer.step(now=asyncio.get_running_loop().time() + 1.0) == 2
        assert pacer.freezes == 1
        tracked = {id(o) for o in gc.get_objects()}
        assert not any(id(k) in tracked for k in kept)  # out of every generation
        pacer.uninstall()
        assert gc.get_freeze_count() == 0  # handed back: what died meanwhile is collected

    asyncio.run(run())


def test_each_collection_reaches_the_managers_metrics(collector: None) -> None:
    """``on_collect`` hears of every paced collection; the manager wires it to
    ``omenative_gc_collection_seconds`` and ``omenative_gc_freezes_total``."""
    metrics = Metrics()
    pacer = GcPacer(Busy(False), young_every=1, quiet_for=0.0, freeze_after=0.0,
                    on_collect=metrics.gc_collected)
    gc.collect(0)
    assert pacer.step(now=100.0) == 1
    _old_garbage()
    assert pacer.step(now=100.0) == 2
    gc.unfreeze()
    sample = metrics.registry.get_sample_value
    assert sample("omenative_gc_collection_seconds_count", {"generation": "1"}) == 1
    assert sample("omenative_gc_collection_seconds_count", {"generation": "2"}) == 1
    assert sample("omenative_gc_freezes_total") == 1


def test_a_short_full_collection_freezes_nothing(collector: None) -> None:
    pacer = GcPacer(Busy(False), quiet_for=0.0, freeze_after=60.0)
    _old_garbage()
    assert pacer.step(now=100.0) == 2
    assert pacer.freezes == 0
    assert gc.get_freeze_count() == 0


def test_the_running_pacer_collects_the_middle_generation_as_garbage_comes(
        collector: None) -> None:
    """The task on a real loop: cyclic garbage made in bursts between loop iterations is
    found by the pacer's middle collections; CPython never needed its valve."""
    async def run() -> tuple[int, int, list[weakref.ref[Cycle]]]:
        pacer = GcPacer(Busy(True), young_every=2, check=0.001)
        pacer.install()
        refs: list[weakref.ref[Cycle]] = []
        try:
            for _ in range(40):
                burst = [Cycle() for _ in range(2000)]  # several young collections each
                refs.extend(weakref.ref(c) for c in burst[::500])
                del burst
                await asyncio.sleep(0.003)
            await asyncio.sleep(0.02)
            return pacer.middles, gc.get_count()[1], refs
        finally:
            pacer.uninstall()

    middles, middle, refs = asyncio.run(run())
    assert middles >= 5
    assert middle < VALVE
    assert sum(r() is None for r in refs) >= len(refs) // 2  # most cycles already gone
