"""What a step may touch of a pass, as a type: ``StepPass``.

A pass is one ``steps.state.PassState``: the frozen view, the write-set and the incremental
cache. Most steps need only the view, the plan's material (rows, actions, Events, wake-up
times, the status extras, migrations, RetryBlocks) and the pass's queries (``pods_of``,
``odd_rows``, ``may_open`` ...). They take ``StepPass``, a protocol of exactly that, so mypy
refuses a read of the incremental cache (``st.cache``) or of another step's named result
(``steady_rows``, ``tallies``, ``nodes_out`` ...) from them: "a step reads only the
write-set's named results it is given" is checked, not documented.

Who still takes the whole ``PassState``, and why (26 functions of 156): the ones that
read the incremental cache or hand on a named result: ``steady.find``, ``repair.settled``
(``steady_rows``, ``steady_counts``), ``revisions.group_pods``/``load_rows`` (they build
the cache), ``native_gang.cleanup`` (``row_groups``, ``groups_out``), ``capacity.check_nodes``
(``nodes_out``, the kept totals), ``teardown.cleanup_orphan_pod_groups``,
``steps.status.finish`` and its tally helpers (the tallies, the totals), and the planner's
own passes and ``lifecycle.advance``.

``PassState`` satisfies every protocol here structurally: nothing imports this module at
run time but for the annotations (``from __future__ import annotations``), so it costs
nothing per pass.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from omenative_core.model.observed import PodView
from omenative_core.model.plan import Event, ScaleDownWave
from omenative_core.model.status import InstanceStatus, MigrationStatus, RolloutHold
from omenative_core.retry import RetryBook
from omenative_core.steps.state import ActionSink
from omenative_core.steps.view import PassView

__all__ = ["StepPass"]


class StepPass(Protocol):
    """A step's part of a pass: the view, the plan's material and the queries (see the
    module docstring); no incremental cache and no named result of another step."""

    rows: dict[int, InstanceStatus]
    out: ActionSink
    events: list[Event]
    wake: list[datetime]
    audit: list[dict[str, Any]]
    hold: RolloutHold | None
    extra_conditions: dict[str, tuple[str, str, str]]
    poll: bool
    wave: ScaleDownWave | None
    migrations: dict[str, MigrationStatus]
    book: RetryBook

    @property
    def view(self) -> PassView: ...

    # the write-set's helpers (``PassWrites``)
    def hand_off(self, by: int | None, row: InstanceStatus, why: str) -> None: ...
    def warn(self, reason: str, message: str, instance: int | None = None) -> None: ...
    def note(self, reason: str, message: str, instance: int | None = None) -> None: ...

    # the pass's queries (``PassState``)
    def pods_of(self, index: int) -> list[PodView]: ...
    def advance(self, index: int) -> None: ...
    def prev_ready(self) -> set[int]: ...
    def matches(self, pod: PodView, revision: str, incarnation: int) -> bool: ...
    def attempt(self, pod: PodView) -> tuple[str | None, int]: ...
    def all_ready(self, row: InstanceStatus) -> bool: ...
    def steady_phase(self, row: InstanceStatus) -> str: ...
    def members(self) -> list[InstanceStatus]: ...
    def odd_rows(self) -> list[InstanceStatus]: ...
    def member_count(self) -> int: ...
    def unavailable(self) -> int: ...
    def free_index(self, start: int = 0) -> int: ...
    def may_open(self, count: int = 1, *, migrate: bool = False) -> bool: ...
    def charge_open(self) -> None: ...
    def start_attempt(self, revision: str) -> bool: ...
    def set_hold(self, gate: str, reason: str) -> None: ...
    def hold_retry(self, target: str) -> None: ...
