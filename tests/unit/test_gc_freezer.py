"""The survivor freezer: a long full collection moves its survivors out of the collector's
reach, so the next one walks only what came since; a short one, or a young collection,
moves nothing; garbage without cycles is still freed."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from omenative_controller.gc_freezer import SurvivorFreezer


class Held:
    """A tracked object the test can watch through a weak reference."""

    def __init__(self) -> None:
        self.items: list[object] = []


@pytest.fixture
def thawed() -> Iterator[None]:
    """Each test starts and ends with nothing frozen (the process's collector is shared)."""
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    yield
    gc.unfreeze()
    if frozen:
        gc.freeze()


def test_a_long_full_collection_freezes_its_survivors(thawed: None) -> None:
    freezer = SurvivorFreezer(freeze_after=0.0)  # every full collection counts as long
    freezer.install()
    try:
        kept = [Held() for _ in range(1000)]
        gc.collect()
        assert freezer.freezes == 1
        assert gc.get_freeze_count() >= len(kept)
        tracked = {id(o) for o in gc.get_objects()}
        assert not any(id(h) in tracked for h in kept)  # out of every generation
    finally:
        freezer.uninstall()
    assert gc.get_freeze_count() == 0  # handed back: what died meanwhile is collected


def test_a_short_or_young_collection_freezes_nothing(thawed: None) -> None:
    freezer = SurvivorFreezer(freeze_after=60.0)
    freezer.install()
    try:
        gc.collect()  # a full one, shorter than a minute
        gc.collect(0)
        gc.collect(1)
    finally:
        freezer.uninstall()
    assert freezer.freezes == 0
    assert gc.get_freeze_count() == 0


def test_frozen_objects_without_cycles_are_still_freed(thawed: None) -> None:
    freezer = SurvivorFreezer(freeze_after=0.0)
    freezer.install()
    try:
        held = Held()
        ref = weakref.ref(held)
        gc.collect()
        assert gc.get_freeze_count() > 0
        del held
        assert ref() is None  # reference counting, frozen or not
    finally:
        freezer.uninstall()


def test_install_is_idempotent_and_uninstall_removes_it() -> None:
    freezer = SurvivorFreezer()
    freezer.install()
    freezer.install()
    assert gc.callbacks.count(freezer) == 1
    freezer.uninstall()
    freezer.uninstall()
    assert freezer not in gc.callbacks
