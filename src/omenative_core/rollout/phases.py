"""The names a rollout group's run is spelled in: phases, gates, progressions, failures.

Each is a ``StrEnum`` whose values are the wire strings of ``status.rollout`` (and of OME's
``spec.rollout`` for the progressions and ``onInconclusive``), so a member compares and
hashes equal to the string a persisted state holds. The core compares and writes members,
never bare strings; ``machine.TRANSITIONS`` says how the phases connect.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "AUTO_ROLLBACK",
    "CLOCK_HOLDS",
    "FORWARD",
    "SETTLED",
    "Failure",
    "GateVerdict",
    "GroupOrdering",
    "GroupPhase",
    "HoldGate",
    "OnInconclusive",
    "Progression",
    "RoundOutcome",
    "StepGate",
]


class GroupPhase(StrEnum):
    """``groups[].phase``: where a group's run is, as OME names the phases."""

    PENDING = "Pending"
    CANARYING = "Canarying"
    PAUSED = "Paused"
    PROMOTING = "Promoting"
    STABLE = "Stable"
    FAILED = "Failed"
    ROLLING_BACK = "RollingBack"
    ROLLED_BACK = "RolledBack"


SETTLED = frozenset({GroupPhase.STABLE, GroupPhase.ROLLED_BACK})
"""Phases with no run under way."""

FORWARD = frozenset({GroupPhase.CANARYING, GroupPhase.PAUSED, GroupPhase.PROMOTING})
"""Phases of a run moving forward (past Pending, not failed or rolling back)."""


class StepGate(StrEnum):
    """``groups[].gate``: the gate in force at the current step (``NONE``: no gate).

    A canary step's kind of gate (``CanaryStep.gate``) is ``Analysis``, ``Pause`` (timed),
    ``Manual`` or ``Immediate``; a running group also waits at ``Capacity`` (the step's
    Instances not ready yet) and ``Drain`` (the old revision's Instances leaving).
    """

    NONE = ""
    CAPACITY = "Capacity"
    ANALYSIS = "Analysis"
    PAUSE = "Pause"
    MANUAL = "Manual"
    DRAIN = "Drain"
    IMMEDIATE = "Immediate"


class HoldGate(StrEnum):
    """``rolloutHold.gate`` of a rollout hold: what stops the group (or the member)."""

    PLAN = "Plan"
    RATIO = "Ratio"
    SEQUENTIAL = "Sequential"
    PAIRING = "Pairing"
    HELD = "Held"
    RETRY_BLOCK = "RetryBlock"
    BUDGET = "Budget"


CLOCK_HOLDS = frozenset({HoldGate.PLAN, HoldGate.RATIO, HoldGate.SEQUENTIAL, HoldGate.PAIRING})
"""Holds that stop the readyTimeout clock (the group is waiting by design, not failing)."""


class Progression(StrEnum):
    """How a group moves its members: the one progression its spec sets (``blueGreen``
    when none is set)."""

    CANARY = "canary"
    BLUE_GREEN = "blueGreen"
    ROLLING_UPDATE = "rollingUpdate"


class Failure(StrEnum):
    """``groups[].failure``: why a group failed or rolls back (``NONE``: it did not)."""

    NONE = ""
    HELD = "Held"
    READY_TIMEOUT = "ReadyTimeout"
    ANALYSIS_FAILED = "AnalysisFailed"
    ANALYSIS_INCONCLUSIVE = "AnalysisInconclusive"
    ANALYSIS_STALLED = "AnalysisStalled"
    ROLLBACK = "Rollback"


AUTO_ROLLBACK = frozenset(
    {
        Failure.ANALYSIS_FAILED,
        Failure.ANALYSIS_INCONCLUSIVE,
        Failure.ANALYSIS_STALLED,
        Failure.READY_TIMEOUT,
    }
)
"""Failures that roll the group back on the next pass without being asked."""


class RoundOutcome(StrEnum):
    """An analysis round's outcome (``history[].outcome``)."""

    PASS = "Pass"
    FAIL = "Fail"
    INCONCLUSIVE = "Inconclusive"


class OnInconclusive(StrEnum):
    """``analysis.onInconclusive``: what an inconclusive round does (``Hold`` by default)."""

    HOLD = "Hold"
    ROLLBACK = "Rollback"
    ROLLBACK_ON_STALL = "RollbackOnStall"


class GroupOrdering(StrEnum):
    """``spec.rollout.groupOrdering`` (``Sequential`` by default)."""

    SEQUENTIAL = "Sequential"
    CONCURRENT = "Concurrent"


class GateVerdict(StrEnum):
    """What a step's gate says this pass (not persisted)."""

    OPEN = "open"
    WAIT = "wait"
    FAILED = "failed"
