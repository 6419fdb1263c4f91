"""The integration tests' waiting and recording fail loudly (``tests/integration/pod_recorder``,
``eventually`` from ``omenative_devcluster.waiting``).

* ``eventually`` retries "not yet" (a falsy result, a failed assert, a missing key, a 404)
  and raises anything else at once: a broken check does not wait out its timeout;
* ``PodRecorder`` replays a watch, resumes a broken stream from where it was, and when its
  history is cut (410 Expired) ``stop()``, ``replay()`` and ``check()`` raise instead of
  letting "never" checks pass over part of it.

A fake client stands in for the API server (the recorder only LISTs and WATCHes).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from pod_recorder import PodRecorder, RecorderDied, eventually

from omenative_controller.kube.errors import ApiError

JSON = dict[str, Any]


def pod(name: str, rv: int) -> JSON:
    return {"metadata": {"name": name, "resourceVersion": str(rv)}}


class FakeKube:
    """LIST answers ``listed`` at resourceVersion 10; each WATCH plays the next script: a
    list of events, then an exception to raise (or None: the stream stays open)."""

    def __init__(self, listed: list[JSON], scripts: list[tuple[list[JSON], BaseException | None]]
                 ) -> None:
        self.listed = listed
        self.scripts = scripts
        self.watched_from: list[str] = []
        self.gate = asyncio.Event()  # the streams send their events once it is set
        self.gate.set()

    async def list(self, resource: Any, namespace: str) -> JSON:
        return {"metadata": {"resourceVersion": "10"}, "items": list(self.listed)}

    @contextlib.asynccontextmanager
    async def watch(self, resource: Any, namespace: str, *, resource_version: str,
                    **_: Any) -> AsyncIterator[AsyncIterator[JSON]]:
        self.watched_from.append(resource_version)
        if not self.scripts:
            await asyncio.Event().wait()  # no more scripts: an idle stream
        events, end = self.scripts.pop(0)
        if isinstance(end, ApiError) and not events:
            raise end  # a non-200 answer to the WATCH itself

        async def stream() -> AsyncIterator[JSON]:
            await self.gate.wait()
            for ev in events:
                yield ev
            if end is not None:
                raise end
            await asyncio.Event().wait()

        yield stream()


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------- eventually


async def test_eventually_retries_not_yet_and_returns_the_value() -> None:
    answers: list[Any] = [None, AssertionError("not yet"), KeyError("status"),
                          ApiError(404, "NotFound"), ApiError(503, "ServiceUnavailable"),
                          "done"]

    async def check() -> Any:
        got = answers.pop(0)
        if isinstance(got, BaseException):
            raise got
        return got

    assert await eventually(check, timeout=10, interval=0.001) == "done"
    assert answers == []


@pytest.mark.parametrize("broken", [TypeError("bad check"), ApiError(422, "Invalid"),
                                    ApiError(400, "BadRequest"), RecorderDied("cut")])
async def test_eventually_raises_a_broken_check_at_once(broken: Exception) -> None:
    calls = 0

    async def check() -> bool:
        nonlocal calls
        calls += 1
        raise broken

    with pytest.raises(type(broken)) as err:
        await eventually(check, timeout=30, interval=0.001, what="the thing")
    assert calls == 1
    assert "raised at once while waiting for the thing" in "".join(err.value.__notes__)


async def test_eventually_times_out_naming_what_and_the_last_value() -> None:
    async def check() -> int:
        return 0

    with pytest.raises(AssertionError, match=r"waiting for three pods; last: 0"):
        await eventually(check, timeout=0.01, interval=0.001, what="three pods")


# ---------------------------------------------------------------------------- the recorder


async def test_the_recorder_resumes_a_broken_stream_without_losing_a_change() -> None:
    kube = FakeKube([pod("a", 5)], [
        ([{"type": "ADDED", "object": pod("b", 11)}], aiohttp.ClientPayloadError("cut")),
        ([{"type": "MODIFIED", "object": pod("a", 12)},
          {"type": "DELETED", "object": pod("b", 13)}], None),
    ])
    recorder = await PodRecorder(kube, "ns").start()  # type: ignore[arg-type]
    for _ in range(100):
        if len(recorder.history) == 4:
            break
        await asyncio.sleep(0.01)
    await recorder.stop()
    assert kube.watched_from == ["10", "11"]  # the second watch starts after the last event
    states = [(kind, sorted(state)) for kind, _, state in recorder.replay(from_start=True)]
    assert states == [("ADDED", ["a"]), ("ADDED", ["a", "b"]), ("MODIFIED", ["a", "b"]),
                      ("DELETED", ["a"])]


async def test_a_recorder_cut_by_410_fails_stop_replay_and_check() -> None:
    kube = FakeKube([], [([{"type": "ADDED", "object": pod("a", 11)},
                           {"type": "ERROR", "object": {"kind": "Status", "code": 410}}], None)])
    kube.gate.clear()
    recorder = await PodRecorder(kube, "ns").start()  # type: ignore[arg-type]
    recorder.check()  # recording
    kube.gate.set()
    await settle()
    with pytest.raises(RecorderDied, match="expired"):
        recorder.check()
    with pytest.raises(RecorderDied):
        recorder.replay()
    with pytest.raises(RecorderDied):
        await recorder.stop()


async def test_a_watch_refused_with_410_fails_the_recorder() -> None:
    kube = FakeKube([], [([], ApiError(410, "Expired"))])
    with pytest.raises(RecorderDied, match="410"):
        recorder = await PodRecorder(kube, "ns").start()  # type: ignore[arg-type]
        await settle()
        await recorder.stop()


async def test_assert_never_names_the_first_bad_state() -> None:
    kube = FakeKube([pod("a", 5)], [([{"type": "ADDED", "object": pod("b", 11)},
                                      {"type": "DELETED", "object": pod("b", 12)}], None)])
    recorder = await PodRecorder(kube, "ns").start()  # type: ignore[arg-type]
    for _ in range(100):
        if len(recorder.history) == 3:
            break
        await asyncio.sleep(0.01)
    await recorder.stop()
    assert recorder.assert_never(lambda s: None if len(s) < 3 else "three", "fewer than 3") == 3
    with pytest.raises(AssertionError, match=r"at most one pod: after ADDED b "
                                             r"\(resourceVersion 11\): 2 pods"):
        recorder.assert_never(lambda s: f"{len(s)} pods" if len(s) > 1 else None,
                              "at most one pod")
