"""Admission checks of one canary group (``spec.rollout.groups[i].canary``), OME's reasons.

Split from ``validate.py`` so each file holds one concept: here the steps (capacity that
never shrinks and ends at 100%, traffic 0-100 that never decreases and ends at 100), the
step analyses, the canary's timeouts and the fields omenative does not implement (warned).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from omenative_core.model.spec import IntOrStr
from omenative_core.rollout.findings import Findings
from omenative_core.rollout.model import ANALYSIS_OPERATORS, ON_INCONCLUSIVE, RolloutGroup

__all__ = ["MAX_CANARY_STEPS", "MAX_METRICS", "check_canary"]

MAX_CANARY_STEPS = 20
"""Most steps a canary may have."""

MAX_METRICS = 10
"""Most metrics an analysis may have."""

_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")
_DIGITS = re.compile(r"^-?[0-9]+$")


def _capacity(c: Findings, value: IntOrStr, path: str) -> tuple[str, int] | None:
    """The step's capacity as ("count" | "percent", number); None (and a finding) if bad."""
    if isinstance(value, int):
        if value < 0:
            c.reject("CanaryInvalid", path, f"capacity {value} is negative")
            return None
        return ("count", value)
    text = value.strip()
    if _PERCENT.match(text) and int(text[:-1]) <= 100:
        return ("percent", int(text[:-1]))
    if _PERCENT.match(text):
        message = f"capacity {value!r} is above 100%"
    elif _DIGITS.match(text):
        message = (
            f"capacity {value!r} is a quoted number: write {text} for a count "
            f"or '{text}%' for a share"
        )
    else:
        message = f"capacity {value!r} is neither a count nor a percentage such as '25%'"
    c.reject("CanaryInvalid", path, message)
    return None


class _Steps:
    """Walks the steps in order, remembering the last capacity and traffic."""

    def __init__(self, c: Findings) -> None:
        self.c = c
        self.last_cap: tuple[str, int] | None = None
        self.last_traffic: int | None = None
        self.any_traffic = False

    def step(self, step: Any, p: str) -> None:
        c = self.c
        cap = _capacity(c, step.capacity, f"{p}.capacity")
        last = self.last_cap
        if cap is not None and last is not None and cap[0] == last[0] and cap[1] < last[1]:
            c.reject(
                "CanaryInvalid",
                f"{p}.capacity",
                f"capacity {step.capacity!r} is below the previous step's: "
                "Instances never leave the canary before the end",
            )
        self.last_cap = cap if cap is not None else last
        if step.traffic is not None:
            self._traffic(step.traffic, f"{p}.traffic")
        pause = step.pause
        if pause is not None and pause.duration is not None and pause.duration < timedelta(0):
            c.reject("InvalidDuration", f"{p}.pause.duration", "must not be negative")
        if step.analysis is not None:
            _analysis(c, step.analysis, f"{p}.analysis")

    def _traffic(self, traffic: int, path: str) -> None:
        self.any_traffic = True
        if not 0 <= traffic <= 100:
            self.c.reject("CanaryInvalid", path, f"traffic {traffic} is outside 0-100")
        elif self.last_traffic is not None and traffic < self.last_traffic:
            self.c.reject(
                "CanaryInvalid",
                path,
                f"traffic {traffic} is below the previous step's {self.last_traffic}: "
                "traffic never decreases",
            )
        self.last_traffic = traffic


def check_canary(c: Findings, group: RolloutGroup, path: str) -> None:
    """Append every finding about ``group.canary`` (``path`` is the group's) to ``c``."""
    canary = group.canary
    assert canary is not None
    steps = canary.steps
    sp = f"{path}.canary.steps"
    if not steps:
        c.reject("CanaryInvalid", sp, "a canary needs at least one step")
        return
    if len(steps) > MAX_CANARY_STEPS:
        c.reject(
            "CanaryInvalid", sp, f"{len(steps)} steps: a canary has at most {MAX_CANARY_STEPS}"
        )
    walker = _Steps(c)
    for i, step in enumerate(steps):
        walker.step(step, f"{sp}[{i}]")
    last = f"{sp}[{len(steps) - 1}]"
    final = steps[-1]
    if not (isinstance(final.capacity, str) and final.capacity.strip() == "100%"):
        c.reject(
            "CanaryInvalid",
            f"{last}.capacity",
            f"the last step's capacity is {final.capacity!r}: it must be '100%'",
        )
    if walker.any_traffic and final.traffic != 100:
        c.reject(
            "CanaryInvalid",
            f"{last}.traffic",
            f"the last step's traffic is {final.traffic}: it must be 100",
        )
    _canary_settings(c, canary, f"{path}.canary")


def _canary_settings(c: Findings, canary: Any, path: str) -> None:
    if canary.ready_timeout is not None and canary.ready_timeout <= timedelta(0):
        c.reject("InvalidDuration", f"{path}.readyTimeout", "must be positive")
    delay = canary.scale_down_delay_seconds
    if delay is not None and delay < 0:
        c.reject("CanaryInvalid", f"{path}.scaleDownDelaySeconds", "must not be negative")
    elif delay is not None:
        c.warn(
            "FieldIgnored",
            f"{path}.scaleDownDelaySeconds",
            "omenative does not implement it: an old Instance is deleted once it is "
            "drained and unrouted (its pods get their terminationGracePeriodSeconds)",
        )
    prom = canary.prometheus
    if prom is not None and prom.provider_ref and not prom.server_address:
        c.warn(
            "FieldIgnored",
            f"{path}.prometheus.providerRef",
            "omenative does not resolve providerRef: every analysis round will error; "
            "set serverAddress",
        )


def _analysis(c: Findings, a: Any, path: str) -> None:
    if a.failure_limit is not None and a.failure_limit < 1:
        c.reject(
            "AnalysisInvalid",
            f"{path}.failureLimit",
            f"failureLimit {a.failure_limit} must be at least 1",
        )
    if not 1 <= len(a.metrics) <= MAX_METRICS:
        c.reject(
            "AnalysisInvalid",
            f"{path}.metrics",
            f"{len(a.metrics)} metrics: an analysis has 1 to {MAX_METRICS}",
        )
    if a.on_inconclusive is not None and a.on_inconclusive not in ON_INCONCLUSIVE:
        c.reject(
            "AnalysisInvalid",
            f"{path}.onInconclusive",
            f"onInconclusive {a.on_inconclusive!r} is not one of {', '.join(ON_INCONCLUSIVE)}",
        )
    if a.interval is not None and a.interval <= timedelta(0):
        c.reject("InvalidDuration", f"{path}.interval", "must be positive")
    if a.initial_delay is not None and a.initial_delay < timedelta(0):
        c.reject("InvalidDuration", f"{path}.initialDelay", "must not be negative")
    names: set[str] = set()
    for j, m in enumerate(a.metrics):
        mp = f"{path}.metrics[{j}]"
        if not m.name:
            c.reject("AnalysisInvalid", f"{mp}.name", "a metric needs a name")
        elif m.name in names:
            c.reject("AnalysisInvalid", f"{mp}.name", f"metric {m.name!r} is repeated")
        names.add(m.name)
        if not m.query.strip():
            c.reject("AnalysisInvalid", f"{mp}.query", "a metric needs a query")
        if m.operator not in ANALYSIS_OPERATORS:
            c.reject(
                "AnalysisInvalid",
                f"{mp}.operator",
                f"operator {m.operator!r} is not one of {', '.join(ANALYSIS_OPERATORS)}",
            )
