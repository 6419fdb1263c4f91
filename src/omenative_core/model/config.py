"""The cluster-wide ``lifecycle`` entry of the ``inferenceservice-config`` ConfigMap.

``LifecycleConfig()`` is OME's chart (what a manager with no ConfigMap at all runs with).
Inside a ConfigMap, a key that is absent means what OME's binary makes of it, which for
most keys is "off" (``UNCONFIGURED``: no readiness deadline, no stuck-pod escalation, the
first failure of a revision holds, no relocation, no teardown deadline, migration requests
wait, no revision pruning; OME's ``controllerconfig`` package, ``lifecycle_test.go`` at
ome-projects/ome@4dfb96b1). A key present with JSON ``null`` turns that feature off too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from attrs import evolve, field, frozen

from omenative_core.model.timefmt import DurationError, parse_duration

__all__ = [
    "GANG_SCHEDULING_SETTINGS",
    "UNCONFIGURED",
    "AuditConfig",
    "AutoMigrateConfig",
    "ConfigError",
    "ForceDeleteConfig",
    "GangScheduleTimeout",
    "LifecycleConfig",
    "RequeueConfig",
    "RestartBackoff",
    "TeardownConfig",
    "UpdateRetry",
    "parse_lifecycle_config",
]


class ConfigError(ValueError):
    """The lifecycle entry is not valid; the message names every bad key and its rule.

    ``problems`` holds one ``lifecycle.<key>: <rule>`` line per bad key, so an operator
    fixes them all in one edit instead of one per restart.
    """

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)


@frozen(kw_only=True)
class UpdateRetry:
    """Backoff for a revision's retries: ``initial_delay * multiplier**(n-1)``, capped."""

    max_attempts: int = 3
    initial_delay: timedelta = timedelta(minutes=1)
    max_delay: timedelta = timedelta(minutes=30)
    multiplier: float = 2.0

    def delay(self, attempt: int) -> timedelta:
        """The wait before attempt ``attempt + 1`` after ``attempt`` failures (1-based)."""
        seconds = self.initial_delay.total_seconds() * self.multiplier ** max(attempt - 1, 0)
        return min(timedelta(seconds=seconds), self.max_delay)


@frozen(kw_only=True)
class AutoMigrateConfig:
    """Relocation budget for failed attempts that sat on one node."""

    max_attempts: int = 3


@frozen(kw_only=True)
class RestartBackoff:
    """How whole-Instance restarts and pre-Ready pod recycling are spaced out (kubelet's
    crash-loop defaults), and when a crash-looping Instance is given up on.

    The n-th restart of a series waits ``initial_delay * 2**(n-1)``, capped at
    ``max_delay``; a series ends once the Instance has stayed Ready for ``reset_after``.
    ``max_restarts`` restarts within one ``window`` make the Instance Failed
    (``RestartLimitExceeded``; None: never). ``components`` overrides any of these per
    component (``engine``, ``decoder``, ``router``).
    """

    initial_delay: timedelta = timedelta(seconds=10)
    max_delay: timedelta = timedelta(minutes=5)
    reset_after: timedelta = timedelta(minutes=10)
    max_restarts: int | None = 6
    window: timedelta = timedelta(hours=1)
    components: tuple[tuple[str, RestartBackoff], ...] = ()
    """(component, its settings) pairs: a tuple, so the config stays hashable."""

    def delay(self, n: int) -> timedelta:
        """The wait before the ``n``-th restart (1-based) of a series."""
        seconds = self.initial_delay.total_seconds() * 2.0 ** min(max(n - 1, 0), 40)
        return min(timedelta(seconds=seconds), self.max_delay)

    def for_component(self, component: str) -> RestartBackoff:
        """The settings for ``component``: its override, else these."""
        return next((b for name, b in self.components if name == component), self)


@frozen(kw_only=True)
class ForceDeleteConfig:
    """Force-delete pods stuck Terminating on unreachable nodes (off unless configured)."""

    overdue_slack: timedelta
    node_unreachable_threshold: timedelta


@frozen(kw_only=True)
class TeardownConfig:
    """How long the teardown finalizer may hold a deleted InferenceReplica."""

    deadline: timedelta | None = timedelta(minutes=30)


@frozen(kw_only=True)
class AuditConfig:
    """Migration caps: in flight at once, and started per window."""

    max_in_flight_migrations: int = 3
    max_migrations_per_window: int = 10
    window: timedelta = timedelta(hours=1)


@frozen(kw_only=True)
class GangScheduleTimeout:
    """Clamp for a PodGroup's ``scheduleTimeoutSeconds``."""

    min: timedelta = timedelta(seconds=60)
    max: timedelta = timedelta(seconds=600)


GANG_SCHEDULING_SETTINGS = ("Auto", "Native", "PodGroup", "None")
"""``lifecycle.gangScheduling`` (omenative's addition): which gang mechanism multi-pod
Instances use. ``Auto`` picks Kubernetes' own (``scheduling.k8s.io/v1alpha2``) when it is
served and the pods use the default scheduler, the scheduler-plugins PodGroup when its CRD
is installed and the component names a ``schedulerName``, else none."""


@frozen(kw_only=True)
class RequeueConfig:
    """How often to look again while an operation or a gate is open."""

    operation: timedelta = timedelta(seconds=5)
    gate: timedelta = timedelta(seconds=3)


@frozen(kw_only=True)
class LifecycleConfig:
    """Cluster-wide lifecycle settings; the defaults are OME's chart defaults."""

    instance_ready_timeout: timedelta | None = timedelta(minutes=30)
    stuck_pod_grace_period: timedelta | None = timedelta(seconds=60)
    unschedulable_grace_period: timedelta | None = timedelta(minutes=15)
    scheduling_decision_timeout: timedelta | None = timedelta(minutes=5)
    """How long pods may wait for any scheduling decision before ``RolloutStalled``
    (``NoSchedulingDecision``) says so; None: never reported."""
    update_retry: UpdateRetry | None = field(factory=UpdateRetry)
    auto_migrate: AutoMigrateConfig | None = field(factory=AutoMigrateConfig)
    force_delete: ForceDeleteConfig | None = None
    teardown: TeardownConfig = field(factory=TeardownConfig)
    audit: AuditConfig | None = field(factory=AuditConfig)
    gang_schedule_timeout: GangScheduleTimeout = field(factory=GangScheduleTimeout)
    gang_scheduling: str = "Auto"
    lws_handover_trade_after: timedelta = timedelta(seconds=15)
    requeue: RequeueConfig = field(factory=RequeueConfig)
    restart_backoff: RestartBackoff | None = field(factory=RestartBackoff)
    revision_history_limit: int | None = 10
    retry_block_history_limit: int | None = None
    instance_status_encoding: str = "ColumnarV2"
    max_decoded_instances: int = 20000
    scale_down_pod_batch_size: int | None = 100
    """OME's ``scaleDownPodBatchSize``: pod-equivalent cost of the scale-down work admitted at
    once per component (an Instance costs its pods, or 1 once they are gone); None: no
    bound, as OME's binary when the key is absent."""
    scale_up_pod_batch_size: int | None = 100
    """OME's ``scaleUpPodBatchSize``: pods created at most per pass and component, whole
    Instances (``steps.waves``); None (the key absent): omenative's own pace, the manager's
    ``--creates-per-pass`` (32), where OME's binary is unbounded."""
    scale_down_requeue_interval: timedelta | None = timedelta(seconds=5)
    """OME's ``scaleDownRequeueInterval``: look again this often while scale-down work is in
    progress (None: only on change, as OME's binary when the key is absent)."""


UNCONFIGURED = LifecycleConfig(
    instance_ready_timeout=None,
    stuck_pod_grace_period=None,
    unschedulable_grace_period=None,
    update_retry=None,
    auto_migrate=None,
    teardown=TeardownConfig(deadline=None),
    audit=None,
    revision_history_limit=None,
    scale_up_pod_batch_size=None,
    scale_down_pod_batch_size=None,
    scale_down_requeue_interval=None,
)
"""What each absent key of a present ``lifecycle`` entry means, as OME's binary reads it.
``gangScheduleTimeout`` and ``requeue`` keep the chart's values (omenative needs a PodGroup
timeout and a cadence; OME falls back to no clamp and to rate-limited backoff), and
``gangScheduling`` / ``lwsHandoverTradeAfter`` / ``schedulingDecisionTimeout`` are
omenative's own keys."""


class _Problems:
    """Collects every problem of one parse; each helper returns a usable placeholder on a
    bad value so parsing goes on (the result is discarded when anything was wrong)."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, rule: str) -> None:
        """Record ``rule`` broken at ``lifecycle.<path>``."""
        self.items.append(f"lifecycle.{path}: {rule}" if path else f"lifecycle: {rule}")

    def duration(self, path: str, value: object) -> timedelta:
        """A Go duration, or a problem."""
        try:
            return parse_duration(value)
        except DurationError as exc:
            self.add(path, str(exc))
            return timedelta(0)

    def count(self, path: str, value: object, *, allow_zero: bool = False) -> int:
        """An integer >= 1 (>= 0 with ``allow_zero``), or a problem."""
        low = 0 if allow_zero else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.add(path, f"expected an integer >= {low}, got {value!r}")
            return low
        return value

    def obj(self, path: str, value: object, allowed: set[str]) -> Mapping[str, Any] | None:
        """An object with only ``allowed`` keys, or a problem (then None)."""
        if not isinstance(value, Mapping):
            self.add(path, f"expected an object, got {value!r}")
            return None
        self.keys(path, value, allowed)
        return value

    def keys(self, path: str, obj: Mapping[str, Any], allowed: set[str]) -> None:
        """Unknown keys of ``obj`` are a problem."""
        unknown = sorted(set(obj) - allowed)
        if unknown:
            self.add(path, f"unknown key(s) {', '.join(unknown)}")

    def required(self, path: str, obj: Mapping[str, Any], keys: tuple[str, ...],
                 what: str) -> bool:
        """True when ``obj`` has every one of ``keys`` (else a problem)."""
        missing = [k for k in keys if k not in obj]
        if missing:
            self.add(path, f"{what} keys are required, missing {missing}")
        return not missing

    def error(self) -> ConfigError | None:
        """The ConfigError naming every problem, or None."""
        if not self.items:
            return None
        if len(self.items) == 1:
            return ConfigError(self.items[0], self.items)
        return ConfigError(f"{len(self.items)} problems: " + "; ".join(self.items), self.items)


_Block = Callable[[_Problems, Any, dict[str, Any]], None]


def _update_retry(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        kw["update_retry"] = None
        return
    obj = p.obj("updateRetry", value, {"maxAttempts", "initialDelay", "maxDelay", "multiplier"})
    if obj is None:
        return
    d = UpdateRetry()
    mult = obj.get("multiplier", d.multiplier)
    if isinstance(mult, bool) or not isinstance(mult, int | float) or mult < 1:
        p.add("updateRetry.multiplier", f"expected a number >= 1, got {mult!r}")
        mult = d.multiplier
    kw["update_retry"] = UpdateRetry(
        max_attempts=p.count("updateRetry.maxAttempts", obj.get("maxAttempts", d.max_attempts)),
        initial_delay=p.duration("updateRetry.initialDelay", obj.get("initialDelay", "1m")),
        max_delay=p.duration("updateRetry.maxDelay", obj.get("maxDelay", "30m")),
        multiplier=float(mult),
    )


def _auto_migrate(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        kw["auto_migrate"] = None
        return
    obj = p.obj("autoMigrate", value, {"maxAttempts"})
    if obj is None:
        return
    kw["auto_migrate"] = AutoMigrateConfig(
        max_attempts=p.count("autoMigrate.maxAttempts", obj.get("maxAttempts", 3)))


def _force_delete(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        return
    keys = ("overdueSlack", "nodeUnreachableThreshold")
    obj = p.obj("forceDelete", value, set(keys))
    if obj is None:
        return
    if not p.required("forceDelete", obj, keys, "both"):
        return
    kw["force_delete"] = ForceDeleteConfig(
        overdue_slack=p.duration("forceDelete.overdueSlack", obj["overdueSlack"]),
        node_unreachable_threshold=p.duration(
            "forceDelete.nodeUnreachableThreshold", obj["nodeUnreachableThreshold"]),
    )


_BACKOFF_KEYS = {"initialDelay", "maxDelay", "resetAfter", "maxRestarts", "window"}


def _backoff_fields(p: _Problems, path: str, obj: Mapping[str, Any],
                    base: RestartBackoff) -> RestartBackoff:
    """``base`` with the keys of ``obj`` applied (``path`` names them in problems)."""
    kw: dict[str, Any] = {}
    for key, attr in (("initialDelay", "initial_delay"), ("maxDelay", "max_delay"),
                      ("resetAfter", "reset_after"), ("window", "window")):
        if key in obj:
            kw[attr] = p.duration(f"{path}.{key}", obj[key])
    if "maxRestarts" in obj:
        raw = obj["maxRestarts"]
        kw["max_restarts"] = None if raw is None else p.count(f"{path}.maxRestarts", raw)
    return evolve(base, **kw)


def _restart_backoff(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        kw["restart_backoff"] = None
        return
    obj = p.obj("restartBackoff", value, _BACKOFF_KEYS | {"components"})
    if obj is None:
        return
    base = _backoff_fields(p, "restartBackoff", obj, RestartBackoff())
    per: list[tuple[str, RestartBackoff]] = []
    comps = obj.get("components", {})
    if p.obj("restartBackoff.components", comps, set(comps) if isinstance(comps, Mapping)
             else set()) is not None:
        for name, sub in comps.items():
            path = f"restartBackoff.components.{name}"
            got = p.obj(path, sub, _BACKOFF_KEYS)
            if got is not None:
                per.append((str(name), _backoff_fields(p, path, got, base)))
    kw["restart_backoff"] = evolve(base, components=tuple(sorted(per, key=lambda t: t[0])))


def _teardown(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        kw["teardown"] = TeardownConfig(deadline=None)
        return
    obj = p.obj("teardown", value, {"deadline"})
    if obj is None:
        return
    dl = obj.get("deadline", "30m")
    kw["teardown"] = TeardownConfig(
        deadline=None if dl is None else p.duration("teardown.deadline", dl))


def _audit(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        kw["audit"] = None
        return
    keys = ("maxInFlightMigrations", "maxMigrationsPerWindow", "window")
    obj = p.obj("audit", value, set(keys))
    if obj is None:
        return
    if not p.required("audit", obj, keys, "all"):
        return
    before = len(p.items)
    window = p.duration("audit.window", obj["window"])
    if window <= timedelta(0) and len(p.items) == before:
        p.add("audit.window", "must be > 0")
    kw["audit"] = AuditConfig(
        max_in_flight_migrations=p.count("audit.maxInFlightMigrations",
                                         obj["maxInFlightMigrations"]),
        max_migrations_per_window=p.count("audit.maxMigrationsPerWindow",
                                          obj["maxMigrationsPerWindow"]),
        window=window,
    )


def _gang_schedule_timeout(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        return
    obj = p.obj("gangScheduleTimeout", value, {"min", "max"})
    if obj is None:
        return
    lo = p.duration("gangScheduleTimeout.min", obj.get("min", "60s"))
    hi = p.duration("gangScheduleTimeout.max", obj.get("max", "600s"))
    if lo > hi:
        p.add("gangScheduleTimeout", "min must not exceed max")
    kw["gang_schedule_timeout"] = GangScheduleTimeout(min=lo, max=hi)


def _gang_scheduling(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value not in GANG_SCHEDULING_SETTINGS:
        p.add("gangScheduling",
              f"expected one of {', '.join(GANG_SCHEDULING_SETTINGS)}, got {value!r}")
        return
    kw["gang_scheduling"] = value


def _lws_handover_trade_after(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    kw["lws_handover_trade_after"] = p.duration("lwsHandoverTradeAfter", value)


def _requeue(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value is None:
        return
    obj = p.obj("requeue", value, {"operation", "gate"})
    if obj is None:
        return
    kw["requeue"] = RequeueConfig(
        operation=p.duration("requeue.operation", obj.get("operation", "5s")),
        gate=p.duration("requeue.gate", obj.get("gate", "3s")),
    )


def _optional_duration(key: str, attr: str) -> _Block:
    def parse(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
        kw[attr] = None if value is None else p.duration(key, value)
    return parse


def _instance_ready_timeout(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    got = None if value is None else p.duration("instanceReadyTimeout", value)
    kw["instance_ready_timeout"] = None if got == timedelta(0) else got  # 0s counts as unset


def _history_limit(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    kw["revision_history_limit"] = (
        None if value is None else p.count("revisionHistoryLimit", value))


def _retry_block_history_limit(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    kw["retry_block_history_limit"] = (
        None if value is None else p.count("retryBlockHistoryLimit", value, allow_zero=True))


def _scale_up_batch(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    kw["scale_up_pod_batch_size"] = p.count("scaleUpPodBatchSize", value)


def _scale_down_batch(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    kw["scale_down_pod_batch_size"] = p.count("scaleDownPodBatchSize", value)


def _scale_down_requeue(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    interval = p.duration("scaleDownRequeueInterval", value)
    if interval <= timedelta(0):
        p.add("scaleDownRequeueInterval", f"expected a positive duration, got {value!r}")
    kw["scale_down_requeue_interval"] = interval


def _status_encoding(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    if value not in ("ColumnarV2", "DenseV1"):
        p.add("instanceStatusEncoding", f"expected ColumnarV2 or DenseV1, got {value!r}")
        return
    kw["instance_status_encoding"] = value


def _max_decoded(p: _Problems, value: Any, kw: dict[str, Any]) -> None:
    kw["max_decoded_instances"] = p.count("maxDecodedInstances", value)


_BLOCKS: dict[str, _Block] = {
    "instanceReadyTimeout": _instance_ready_timeout,
    "stuckPodGracePeriod": _optional_duration("stuckPodGracePeriod", "stuck_pod_grace_period"),
    "unschedulableGracePeriod": _optional_duration(
        "unschedulableGracePeriod", "unschedulable_grace_period"),
    "schedulingDecisionTimeout": _optional_duration(
        "schedulingDecisionTimeout", "scheduling_decision_timeout"),
    "updateRetry": _update_retry,
    "autoMigrate": _auto_migrate,
    "forceDelete": _force_delete,
    "teardown": _teardown,
    "audit": _audit,
    "gangScheduleTimeout": _gang_schedule_timeout,
    "gangScheduling": _gang_scheduling,
    "lwsHandoverTradeAfter": _lws_handover_trade_after,
    "requeue": _requeue,
    "restartBackoff": _restart_backoff,
    "revisionHistoryLimit": _history_limit,
    "retryBlockHistoryLimit": _retry_block_history_limit,
    "scaleUpPodBatchSize": _scale_up_batch,
    "scaleDownPodBatchSize": _scale_down_batch,
    "scaleDownRequeueInterval": _scale_down_requeue,
    "instanceStatusEncoding": _status_encoding,
    "maxDecodedInstances": _max_decoded,
}
"""One parser per top-level key of the lifecycle entry."""


def _load(raw: str | Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The entry as an object (None: empty text, i.e. defaults)."""
    if isinstance(raw, str):
        if not raw.strip():
            return None
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"unable to parse lifecycle config json: {exc}") from exc
    else:
        data = raw
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"unable to parse lifecycle config json: expected an object, got {data!r}"
        )
    return data


def parse_lifecycle_config(
    raw: str | Mapping[str, Any] | None, *, absent: LifecycleConfig | None = None
) -> LifecycleConfig:
    """Parse the ``lifecycle`` entry (JSON text or an object); None means chart defaults.

    ``absent`` gives what a key left out means: the chart's value (None, the default,
    e.g. for a simulator scenario) or ``UNCONFIGURED`` (how OME reads its ConfigMap).
    Every bad key is reported at once: the :class:`ConfigError` lists each one with its
    rule (``problems``), unknown keys included.
    """
    data = None if raw is None else _load(raw)
    if data is None:
        return LifecycleConfig() if absent is None else absent
    problems = _Problems()
    problems.keys("", data, set(_BLOCKS))
    kw: dict[str, Any] = {}
    for key, parse in _BLOCKS.items():
        if key in data:
            parse(problems, data[key], kw)
    error = problems.error()
    if error is not None:
        raise error
    base = LifecycleConfig() if absent is None else absent
    return LifecycleConfig(
        **{**{a.name: getattr(base, a.name) for a in LifecycleConfig.__attrs_attrs__}, **kw}
    )
