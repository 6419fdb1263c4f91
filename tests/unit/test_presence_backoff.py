"""The optional-API polls back off while nothing changes (issue 36: fewer requests)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omenative_controller.kube import presence as presence_mod
from omenative_controller.kube.presence import (
    POLL_BACKOFF_LIMIT,
    UNKNOWN,
    Presence,
    Unknown,
)


class _Scripted(Presence):
    """Answers each probe from a script; stops the loop once the script is done."""

    def __init__(self, answers: list[str | Unknown | None], interval: float) -> None:
        super().__init__("scripted", interval=interval, on_change=None)
        self.answers = list(answers)

    async def _probe(self) -> str | Unknown | None:
        if not self.answers:
            raise asyncio.CancelledError
        return self.answers.pop(0)


def _waits(answers: list[str | Unknown | None], monkeypatch: pytest.MonkeyPatch,
           interval: float = 5.0) -> list[float]:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float, *args: Any) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(presence_mod.asyncio, "sleep", sleep)

    async def main() -> None:
        with pytest.raises(asyncio.CancelledError):
            await _Scripted(answers, interval).run()

    asyncio.run(main())
    return waits


def test_an_unchanged_answer_doubles_the_wait_up_to_the_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    waits = _waits([None] * 6, monkeypatch)
    assert waits == [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]
    assert max(waits) == POLL_BACKOFF_LIMIT * 5.0


def test_the_backoff_never_waits_beyond_30_s_nor_shortens_a_longer_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _waits([None] * 5, monkeypatch, interval=10.0) == [10.0, 20.0, 30.0, 30.0, 30.0]
    assert _waits([None] * 3, monkeypatch, interval=45.0) == [45.0, 45.0, 45.0]
    assert _waits([None] * 5, monkeypatch, interval=1.0) == [1.0, 2.0, 4.0, 6.0, 6.0]


def test_a_change_or_an_error_polls_at_the_interval_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # absent, absent, absent, installed (v1), v1, an API error, v1, gone
    waits = _waits([None, None, None, "v1", "v1", UNKNOWN, "v1", None], monkeypatch)
    assert waits == [5.0, 10.0, 20.0, 5.0, 10.0, 5.0, 10.0, 5.0]
