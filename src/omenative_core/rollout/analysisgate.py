"""The Analysis gate: rounds of Prometheus queries judged against thresholds.

A round is asked (its queries go out in the decision), then judged when every answer is
back or the interval has passed: Pass opens the gate; Fail counts toward failureLimit;
Inconclusive follows ``onInconclusive``. Query ids are stable, so a round asked twice is
the same round; the last rounds are kept in the state's history.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import timedelta

from attrs import evolve

from omenative_core.rollout.decision import AnalysisQuery
from omenative_core.rollout.guards import _Guards
from omenative_core.rollout.members import AnalysisMeasurement
from omenative_core.rollout.passstate import group_label
from omenative_core.rollout.phases import Failure, GateVerdict, OnInconclusive, RoundOutcome
from omenative_core.rollout.spec import Analysis, RolloutGroup
from omenative_core.rollout.state import AnalysisRound, AnalysisState, GroupState

__all__: list[str] = []

HISTORY = 10
"""Analysis rounds kept in the state."""


def _score(a: Analysis, got: Mapping[str, AnalysisMeasurement]) -> tuple[RoundOutcome, str]:
    """A round's outcome (``Pass``, ``Fail`` or ``Inconclusive``: any failing metric fails
    it, any metric without a value makes it inconclusive) and its detail line."""
    verdicts: list[RoundOutcome] = []
    details = []
    for m in a.metrics:
        res = got.get(m.name)
        if res is None or res.value is None or math.isnan(res.value):
            verdicts.append(RoundOutcome.INCONCLUSIVE)
            why = res.error if res is not None and res.error else "no value"
            details.append(f"{m.name}: {why}")
        elif m.passes(res.value):
            verdicts.append(RoundOutcome.PASS)
            details.append(f"{m.name}={res.value:g} {m.operator} {m.threshold:g}")
        else:
            verdicts.append(RoundOutcome.FAIL)
            details.append(f"{m.name}={res.value:g} not {m.operator} {m.threshold:g}")
    outcome = next(
        (o for o in (RoundOutcome.FAIL, RoundOutcome.INCONCLUSIVE) if o in verdicts),
        RoundOutcome.PASS,
    )
    return outcome, "; ".join(details)


class _AnalysisGate(_Guards):
    def analysis_gate(
        self, gs: GroupState, group: RolloutGroup
    ) -> tuple[GroupState, GateVerdict]:
        """Run the step's analysis; returns the group and ``open`` | ``wait`` | ``failed``."""
        assert group.canary is not None
        step = group.canary.steps[gs.step]
        a = step.analysis
        assert a is not None
        ready_at = gs.step_ready_at or self.now
        an = gs.analysis if gs.analysis is not None and gs.analysis.step == gs.step else None
        if an is None:
            an = AnalysisState(step=gs.step, next_at=ready_at + (a.initial_delay or timedelta(0)))
        if an.passed:
            return evolve(gs, analysis=an), GateVerdict.OPEN
        interval = a.effective_interval
        entered = int((gs.step_entered_at or ready_at).timestamp())

        def qid(round_: int, metric: str) -> str:
            return f"g{gs.index}-s{gs.step}-r{round_}-{entered}-{metric}"

        if an.pending_round is not None:
            n = an.pending_round
            ids = {m.name: qid(n, m.name) for m in a.metrics}
            got = {name: self.results[i] for name, i in ids.items() if i in self.results}
            since = an.pending_since or self.now
            if len(got) < len(ids) and self.now < since + interval:
                self.queries.extend(self.round_queries(gs, a, n, qid))
                self.timers.append(since + interval)
                return evolve(gs, analysis=an), GateVerdict.WAIT
            an, verdict, failure = self.judge_round(gs, a, an, got)
            if verdict != GateVerdict.WAIT:
                return evolve(gs, analysis=an, failure=failure or gs.failure), verdict
        if an.pending_round is None and an.next_at is not None and self.now >= an.next_at:
            n = an.rounds + 1
            an = evolve(an, pending_round=n, pending_since=self.now)
            self.queries.extend(self.round_queries(gs, a, n, qid))
            self.timers.append(self.now + interval)
        elif an.next_at is not None:
            self.timers.append(an.next_at)
        return evolve(gs, analysis=an), GateVerdict.WAIT

    def judge_round(
        self,
        gs: GroupState,
        a: Analysis,
        an: AnalysisState,
        got: Mapping[str, AnalysisMeasurement],
    ) -> tuple[AnalysisState, GateVerdict, Failure]:
        """Judge the pending round from its answers: the analysis state, ``open`` | ``wait``
        | ``failed``, and the group's failure when it failed."""
        n = an.pending_round
        outcome, detail = _score(a, got)
        history = (
            *an.history,
            AnalysisRound(round=n or 0, at=self.now, outcome=outcome.value, detail=detail),
        )[-HISTORY:]
        an = evolve(
            an, rounds=an.rounds + 1, pending_round=None, pending_since=None, history=history
        )
        label = f"{group_label(gs)} step {gs.step + 1} analysis round {n}"
        interval = a.effective_interval
        if outcome == RoundOutcome.PASS:
            an = evolve(an, passed=True, inconclusive=0)
            self.group_event(gs, "Normal", "CanaryAnalysisPassed", f"{label} passed: {detail}")
            return an, GateVerdict.OPEN, Failure.NONE
        if outcome == RoundOutcome.FAIL:
            an = evolve(an, failures=an.failures + 1, inconclusive=0, next_at=self.now + interval)
            limit = a.effective_failure_limit
            failed = an.failures >= limit
            self.group_event(
                gs,
                "Warning",
                "CanaryAnalysisFailed" if failed else "CanaryAnalysisRoundFailed",
                f"{label} failed ({an.failures}/{limit}): {detail}",
            )
            if failed:
                return an, GateVerdict.FAILED, Failure.ANALYSIS_FAILED
            return an, GateVerdict.WAIT, Failure.NONE
        an = evolve(an, inconclusive=an.inconclusive + 1, next_at=self.now + interval)
        policy = a.effective_on_inconclusive
        self.group_event(
            gs,
            "Warning",
            "CanaryAnalysisInconclusive",
            f"{label} inconclusive ({policy}): {detail}",
        )
        if policy == OnInconclusive.ROLLBACK:
            return an, GateVerdict.FAILED, Failure.ANALYSIS_INCONCLUSIVE
        if (
            policy == OnInconclusive.ROLLBACK_ON_STALL
            and an.inconclusive >= a.effective_failure_limit
        ):
            return an, GateVerdict.FAILED, Failure.ANALYSIS_STALLED
        return an, GateVerdict.WAIT, Failure.NONE

    def round_queries(
        self, gs: GroupState, a: Analysis, n: int, qid: Callable[[int, str], str]
    ) -> list[AnalysisQuery]:
        """The queries of round ``n``."""
        return [
            AnalysisQuery(
                id=qid(n, m.name),
                group=gs.index,
                step=gs.step,
                round=n,
                metric=m.name,
                query=m.query,
                operator=m.operator,
                threshold=m.threshold,
            )
            for m in a.metrics
        ]
