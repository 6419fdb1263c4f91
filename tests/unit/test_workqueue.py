"""The manager's work queue and the client-side token bucket."""

from __future__ import annotations

import asyncio

import pytest

from omenative_controller.kube.ratelimit import TokenBucket
from omenative_controller.kube.workqueue import WorkQueue


async def test_add_dedupes_waiting_keys() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_key_in_flight_is_not_handed_out_twice() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    assert key == "a"
    q.add("a")  # changed while a worker holds it
    assert len(q) == 0, "a key in flight must wait for done()"
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not second.done()
    q.done("a")
    assert await asyncio.wait_for(second, 1) == "a"
    q.done("a")
    assert q.in_flight == 0


async def test_done_without_new_add_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    await q.get()
    q.done("a")
    assert len(q) == 0


async def test_workers_run_distinct_keys_concurrently_and_one_key_serially() -> None:
    q: WorkQueue[str] = WorkQueue()
    running: dict[str, int] = {}
    peak: dict[str, int] = {}
    overall: list[int] = []

    async def worker() -> None:
        while (key := await q.get()) is not None:
            running[key] = running.get(key, 0) + 1
            peak[key] = max(peak.get(key, 0), running[key])
            overall.append(sum(running.values()))
            await asyncio.sleep(0.02)
            running[key] -= 1
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for _ in range(5):
        for key in ("a", "b", "c"):
            q.add(key)
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.2)
    q.shutdown()
    await asyncio.gather(*workers)
    assert max(peak.values()) == 1, "one key never runs on two workers at once"
    assert max(overall) >= 2, "different keys run in parallel"


async def test_add_after_fires_later_and_earliest_wins() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 10.0)
    q.add_after("a", 0.05)  # earlier: replaces
    q.add_after("a", 5.0)  # later: ignored
    assert len(q) == 0 and q.delayed == 1
    assert await asyncio.wait_for(q.get(), 1) == "a"
    assert q.delayed == 0


async def test_rate_limited_backoff_doubles_and_forget_resets() -> None:
    q: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=0.05)
    delays = [q.add_rate_limited("a") for _ in range(5)]
    assert delays == pytest.approx([0.01, 0.02, 0.04, 0.05, 0.05])
    assert q.failures("a") == 5
    q.forget("a")
    assert q.failures("a") == 0
    assert q.add_rate_limited("a") == pytest.approx(0.01)
    assert await asyncio.wait_for(q.get(), 1) == "a"


async def test_shutdown_wakes_waiting_workers_and_wait_idle() -> None:
    q: WorkQueue[str] = WorkQueue()
    waiting = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")
    assert await asyncio.wait_for(waiting, 1) == "a"
    idle = asyncio.create_task(q.wait_idle(1))
    await asyncio.sleep(0.01)
    assert not idle.done()
    q.shutdown()
    assert await q.get() is None
    q.done("a")
    assert await idle is True
    q.add("b")  # ignored after shutdown
    assert len(q) == 0


async def test_depth_callback_follows_the_queue() -> None:
    seen: list[int] = []
    q: WorkQueue[str] = WorkQueue(on_depth=seen.append)
    q.add("a")
    q.add("b")
    await q.get()
    assert seen == [1, 2, 1]


async def test_cancelled_getter_passes_the_wakeup_on() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")
    first.cancel()
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert "a" in results


# ---------------------------------------------------------------------------- token bucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_token_bucket_allows_burst_then_paces_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 3, clock=clock, sleep=clock.sleep)
    waits = [await bucket.acquire() for _ in range(6)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3:] == pytest.approx([0.1, 0.1, 0.1])
    assert clock.now == pytest.approx(0.3)


async def test_token_bucket_refills_up_to_burst_only() -> None:
    clock = FakeClock()
    bucket = TokenBucket(2, 2, clock=clock, sleep=clock.sleep)
    assert bucket.try_acquire() and bucket.try_acquire()
    assert not bucket.try_acquire()
    clock.now += 100.0  # long idle: still only `burst` tokens
    assert bucket.try_acquire() and bucket.try_acquire()
    assert not bucket.try_acquire()


async def test_token_bucket_concurrent_waiters_are_spread_out() -> None:
    clock = FakeClock()
    bucket = TokenBucket(5, 1, clock=clock, sleep=clock.sleep)
    waits = [bucket.reserve() for _ in range(4)]
    assert waits == pytest.approx([0.0, 0.2, 0.4, 0.6])


def test_token_bucket_unlimited_and_bad_burst() -> None:
    bucket = TokenBucket(0, 1)
    assert bucket.unlimited
    assert all(bucket.reserve() == 0.0 for _ in range(1000))
    with pytest.raises(ValueError):
        TokenBucket(1, 0)


async def test_priority_key_is_served_before_waiting_fresh_keys() -> None:
    q: WorkQueue[str] = WorkQueue()
    for i in range(5):
        q.add(f"fresh-{i}")
    q.add("gang-waiting-for-gate", priority=True)
    assert len(q) == 6
    assert await q.get() == "gang-waiting-for-gate"
    assert [await q.get() for _ in range(5)] == [f"fresh-{i}" for i in range(5)]


async def test_priority_add_moves_a_waiting_key_up_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add("b", priority=True)
    q.add("b", priority=True)
    assert len(q) == 2
    assert await q.get() == "b"
    assert await q.get() == "a"
    assert len(q) == 0


async def test_priority_add_while_in_flight_requeues_in_the_priority_lane() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("x")
    q.add("a", priority=True)  # its pods changed while a worker held it
    q.done("a")
    assert await q.get() == "a"
    assert await q.get() == "x"


async def test_discard_drops_a_priority_key() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a", priority=True)
    q.add("b")
    q.discard("a")
    assert len(q) == 1
    assert await q.get() == "b"


async def test_on_wait_reports_each_keys_wait_and_its_lane() -> None:
    now = [0.0]
    waits: list[tuple[bool, float]] = []
    q: WorkQueue[str] = WorkQueue(on_wait=lambda lane, s: waits.append((lane, s)),
                                  clock=lambda: now[0])
    q.add("fresh")
    now[0] = 1.0
    q.add("gang", priority=True)
    now[0] = 3.0
    assert await q.get() == "gang"
    assert await q.get() == "fresh"
    assert waits == [(True, 2.0), (False, 3.0)]
    q.add("fresh")  # added again while in flight: it waits for the pass to end too
    now[0] = 4.0
    q.done("fresh")
    now[0] = 4.5
    assert await q.get() == "fresh"
    assert waits[-1] == (False, 1.5)


async def test_add_soon_makes_one_pass_of_a_burst_and_none_after_a_pass_that_saw_it() -> None:
    q: WorkQueue[str] = WorkQueue()
    for _ in range(4):  # a gang's four pods scheduled together
        q.add_soon("gang", 0.05)
    assert len(q) == 0 and q.holds("gang")
    assert await asyncio.wait_for(q.get(), 1) == "gang"
    q.done("gang")
    await asyncio.sleep(0.1)
    assert len(q) == 0 and not q.holds("gang"), "the burst was one pass"

    q.add_soon("gang", 0.05)
    q.add("gang", priority=True)  # an urgent change before the window ends
    assert await q.get() == "gang"
    q.done("gang")
    await asyncio.sleep(0.1)
    assert len(q) == 0, "the pass started after the change: the timer is dropped"


async def test_add_soon_while_in_flight_still_queues_a_pass_after_it() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("gang")
    assert await q.get() == "gang"
    q.add_soon("gang", 0.02)  # changed while the pass runs: it may have read the old state
    await asyncio.sleep(0.05)
    q.done("gang")
    assert await asyncio.wait_for(q.get(), 1) == "gang"


async def test_a_worker_of_the_priority_lane_takes_a_gang_while_every_other_is_busy() -> None:
    q: WorkQueue[str] = WorkQueue()
    lane_worker = asyncio.create_task(q.get(priority_only=True))
    q.add("fresh-0")  # an ordinary key: not for the lane's worker
    assert await asyncio.wait_for(q.get(), 1) == "fresh-0"  # the only other worker, now busy
    q.add("fresh-1")
    await asyncio.sleep(0.01)
    assert not lane_worker.done(), "a worker of the priority lane takes no ordinary key"
    q.add("gang", priority=True)
    assert await asyncio.wait_for(lane_worker, 1) == "gang"
    q.done("fresh-0")
    assert await asyncio.wait_for(q.get(), 1) == "fresh-1", "the ordinary key still waits"


async def test_an_ordinary_key_is_not_stranded_behind_a_waiting_lane_worker() -> None:
    q: WorkQueue[str] = WorkQueue()
    lane_worker = asyncio.create_task(q.get(priority_only=True))
    general = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("gang", priority=True)
    q.add("fresh")
    got = await asyncio.wait_for(asyncio.gather(lane_worker, general), 1)
    assert sorted(got) == ["fresh", "gang"]
    promoted = asyncio.create_task(q.get(priority_only=True))
    q.add("late")  # waits in the ordinary lane ...
    await asyncio.sleep(0.01)
    assert not promoted.done()
    q.add("late", priority=True)  # ... until its pods are one pass from the gate
    assert await asyncio.wait_for(promoted, 1) == "late"


async def test_a_change_before_the_pass_reads_does_not_run_it_again_one_after_does() -> None:
    # a worker takes the key, waits for its turn (kube/turns.py), then reads the caches:
    # what changed while it waited is in what it reads, so only a later change re-runs it
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a", priority=True)  # a pod turned ready while the worker waited for its turn
    q.add_soon("a", 0.05)
    q.reading("a")
    q.done("a")
    assert len(q) == 0, "the pass saw that change: no second pass for it"
    await asyncio.sleep(0.1)
    assert len(q) == 0, "nor one from the windowed add"
    q.add("a")
    assert await q.get() == "a"
    q.reading("a")
    q.add("a")  # after the pass read the caches: it must run again
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"


async def test_reading_touches_only_a_key_in_flight() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add_soon("c", 0.02)
    q.reading("a")  # waiting, not taken: still waits
    q.reading("c")  # its windowed add still comes
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert await asyncio.wait_for(q.get(), 1) == "c"
