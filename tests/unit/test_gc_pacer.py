"""The collection pacer: the young generation is collected once it holds ``young_limit``
objects (CPython's count misses a cache's replacements), the middle generation after a few
young collections, its survivors frozen so no full collection walks them again; a thaw
(full collection of everything) comes once an hour when the manager is quiet (or too long
has passed), and uninstalling gives everything back. The process's collector is shared, so
each test restores it."""

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


def _frozen_garbage(pacer: GcPacer, now: float) -> weakref.ref[Cycle]:
    """A cycle alive at a paced middle collection (so frozen), then dropped: garbage that
    only a thaw finds."""
    held = Cycle()
    ref = weakref.ref(held)
    for _ in range(pacer.young_every):
        gc.collect(0)
    assert pacer.step(now) == 1
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
    looks = 0
    for n in range(20000):
        cache[n % 5000] = View(n)  # a watch event's new view replaces the old one
        if n % 50 == 0:  # a replacement every 0.1 ms; a look every 5 ms, as in the manager
            looks += 1
            if pacer.step(now=1.0 + n * 1e-4) == 0:
                collected_at.append(n)
    assert gc.get_count()[0] < gc.get_threshold()[0]  # CPython would never have started
    assert len(collected_at) >= 8  # 2 objects a replacement: every ~1,000 replacements
    assert len(gc.get_objects(generation=0)) < 2000 + 2 * 50
    assert pacer.youngs == len(collected_at)
    # it walked the young generation at most about twice per doubling of what was left,
    # not at every look
    assert pacer.counts <= looks // 3


def test_a_short_young_generation_is_left_to_cpython(collector: None) -> None:
    pacer = GcPacer(Busy(True), young_limit=2000)
    gc.collect()
    kept = [View(n) for n in range(100)]
    assert pacer.step(now=1.0) is None
    assert pacer.youngs == 0 and kept


def test_the_middle_generations_survivors_are_frozen_out_of_every_full_walk(
        collector: None) -> None:
    pacer = GcPacer(Busy(True), young_every=1)
    kept = [Cycle() for _ in range(1000)]
    gc.collect(0)
    assert pacer.step(now=1.0) == 1
    tracked = {id(o) for o in gc.get_objects()}
    assert not any(id(k) in tracked for k in kept)  # out of every generation
    assert gc.get_freeze_count() >= len(kept)
    assert pacer.freezes == 1


def test_cycles_dead_by_the_middle_collection_are_freed_not_frozen(collector: None) -> None:
    pacer = GcPacer(Busy(True), young_every=2)
    held = [Cycle() for _ in range(100)]
    refs = [weakref.ref(c) for c in held]
    gc.collect(0)
    gc.collect(0)  # alive through two young collections: in the middle generation
    del held
    assert all(r() is not None for r in refs)  # cycles: no refcount frees them
    assert pacer.step(now=1.0) == 1
    assert all(r() is None for r in refs)  # found dead by the middle collection itself


def test_a_busy_manager_defers_the_thaw_until_quiet(collector: None) -> None:
    busy = Busy(True)
    pacer = GcPacer(busy, quiet_for=5.0, thaw_every=3600.0, max_defer=600.0)
    ref = _frozen_garbage(pacer, now=1.0)
    assert ref() is not None  # frozen: no collection sees it
    busy.value = False
    assert pacer.step(now=3000.0) is None  # quiet, but not an hour since the last thaw
    busy.value = True
    assert pacer.step(now=3700.0) is None  # an hour, but busy: the cycle waits
    busy.value = False
    assert pacer.step(now=3702.0) is None  # quiet for 2 s only
    assert pacer.step(now=3705.5) == 2  # quiet for 5.5 s
    assert ref() is None
    assert pacer.fulls == 1
    assert pacer.step(now=3800.0) is None  # the next one an hour later


def test_max_defer_thaws_a_manager_that_is_never_quiet(collector: None) -> None:
    pacer = GcPacer(Busy(True), quiet_for=5.0, thaw_every=100.0, max_defer=60.0)
    ref = _frozen_garbage(pacer, now=1.0)
    assert pacer.step(now=159.0) is None
    assert pacer.step(now=161.0) == 2
    assert ref() is None


async def test_uninstall_hands_everything_frozen_back(collector: None) -> None:
    pacer = GcPacer(Busy(True), young_every=1)
    pacer.install()
    kept = [Cycle() for _ in range(100)]
    gc.collect(0)
    assert pacer.step(now=asyncio.get_running_loop().time()) == 1
    assert gc.get_freeze_count() >= len(kept)
    pacer.uninstall()
    assert gc.get_freeze_count() == 0  # handed back: what died meanwhile is collected


def test_each_collection_reaches_the_managers_metrics(collector: None) -> None:
    """``on_collect`` hears of every paced collection; the manager wires it to
    ``omenative_gc_collection_seconds`` and ``omenative_gc_freezes_total``."""
    metrics = Metrics()
    pacer = GcPacer(Busy(False), young_every=1, quiet_for=0.0, thaw_every=50.0,
                    on_collect=metrics.gc_collected)
    _frozen_garbage(pacer, now=10.0)
    assert pacer.step(now=100.0) == 2
    sample = metrics.registry.get_sample_value
    assert sample("omenative_gc_collection_seconds_count", {"generation": "1"}) == 1
    assert sample("omenative_gc_collection_seconds_count", {"generation": "2"}) == 1
    assert sample("omenative_gc_freezes_total") == 2


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


def test_a_burst_of_new_objects_is_counted_at_once(collector: None) -> None:
    """Between two counts the pacer trusts the growth it last saw, but a burst of new
    objects (CPython's own count jumps) is counted at the next look, however soon."""
    gc.set_threshold(100_000, VALVE)  # as installed: CPython's own young collection waits
    pacer = GcPacer(Busy(True), young_limit=2000)
    assert pacer.step(now=1.0) is None  # counted: nearly empty, growing slowly
    counts = pacer.counts
    assert pacer.step(now=1.001) is None and pacer.counts == counts  # too soon: not counted
    burst = [View(n) for n in range(1500)]  # 3,000 tracked objects, none freed
    assert pacer.step(now=1.002) == 0  # counted at once, and collected
    assert pacer.counts == counts + 1 and burst
