"""The cluster-wide ``lifecycle`` entry of the ``inferenceservice-config`` ConfigMap.

Absent configuration means OME's chart defaults, not "off": ``LifecycleConfig()`` is the
chart. A key present with JSON ``null`` turns that feature off explicitly (for example
``"updateRetry": null`` holds a revision on its first failure of its own).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from attrs import field, frozen

from omenative_core.model.timefmt import DurationError, parse_duration

__all__ = [
    "AuditConfig",
    "AutoMigrateConfig",
    "ConfigError",
    "ForceDeleteConfig",
    "GangScheduleTimeout",
    "LifecycleConfig",
    "RequeueConfig",
    "TeardownConfig",
    "UpdateRetry",
    "parse_lifecycle_config",
]


class ConfigError(ValueError):
    """The lifecycle entry is not valid; the message names the key and the value."""


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
    update_retry: UpdateRetry | None = field(factory=UpdateRetry)
    auto_migrate: AutoMigrateConfig | None = field(factory=AutoMigrateConfig)
    force_delete: ForceDeleteConfig | None = None
    teardown: TeardownConfig = field(factory=TeardownConfig)
    audit: AuditConfig | None = field(factory=AuditConfig)
    gang_schedule_timeout: GangScheduleTimeout = field(factory=GangScheduleTimeout)
    requeue: RequeueConfig = field(factory=RequeueConfig)
    revision_history_limit: int | None = 10
    retry_block_history_limit: int | None = None
    instance_status_encoding: str = "ColumnarV2"
    max_decoded_instances: int = 20000


_KEYS = {
    "instanceReadyTimeout",
    "stuckPodGracePeriod",
    "unschedulableGracePeriod",
    "updateRetry",
    "autoMigrate",
    "forceDelete",
    "teardown",
    "audit",
    "gangScheduleTimeout",
    "requeue",
    "revisionHistoryLimit",
    "retryBlockHistoryLimit",
    "scaleUpPodBatchSize",
    "scaleDownPodBatchSize",
    "scaleDownRequeueInterval",
    "instanceStatusEncoding",
    "maxDecodedInstances",
}


def _duration(path: str, value: object) -> timedelta:
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ConfigError(f"lifecycle.{path}: {exc}") from exc


def _positive_int(path: str, value: object, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        bound = ">= 0" if allow_zero else ">= 1"
        raise ConfigError(f"lifecycle.{path}: expected an integer {bound}, got {value!r}")
    return value


def _object(path: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"lifecycle.{path}: expected an object, got {value!r}")
    return value


def _check_keys(path: str, obj: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        where = f"lifecycle.{path}" if path else "lifecycle"
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")


def parse_lifecycle_config(raw: str | Mapping[str, Any] | None) -> LifecycleConfig:
    """Parse the ``lifecycle`` entry (JSON text or an object); None means chart defaults."""
    if raw is None:
        return LifecycleConfig()
    if isinstance(raw, str):
        if not raw.strip():
            return LifecycleConfig()
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
    _check_keys("", data, _KEYS)
    base = LifecycleConfig()
    kw: dict[str, Any] = {}

    def opt_duration(key: str, attr: str) -> None:
        if key in data:
            value = data[key]
            kw[attr] = None if value is None else _duration(key, value)

    opt_duration("instanceReadyTimeout", "instance_ready_timeout")
    opt_duration("stuckPodGracePeriod", "stuck_pod_grace_period")
    opt_duration("unschedulableGracePeriod", "unschedulable_grace_period")
    if kw.get("instance_ready_timeout") == timedelta(0):
        kw["instance_ready_timeout"] = None  # 0s counts as unset

    if "updateRetry" in data:
        value = data["updateRetry"]
        if value is None:
            kw["update_retry"] = None
        else:
            obj = _object("updateRetry", value)
            _check_keys(
                "updateRetry", obj, {"maxAttempts", "initialDelay", "maxDelay", "multiplier"}
            )
            d = UpdateRetry()
            mult = obj.get("multiplier", d.multiplier)
            if isinstance(mult, bool) or not isinstance(mult, int | float) or mult < 1:
                raise ConfigError(
                    f"lifecycle.updateRetry.multiplier: expected a number >= 1, got {mult!r}"
                )
            kw["update_retry"] = UpdateRetry(
                max_attempts=_positive_int(
                    "updateRetry.maxAttempts", obj.get("maxAttempts", d.max_attempts)
                ),
                initial_delay=_duration("updateRetry.initialDelay", obj.get("initialDelay", "1m")),
                max_delay=_duration("updateRetry.maxDelay", obj.get("maxDelay", "30m")),
                multiplier=float(mult),
            )
    if "autoMigrate" in data:
        value = data["autoMigrate"]
        if value is None:
            kw["auto_migrate"] = None
        else:
            obj = _object("autoMigrate", value)
            _check_keys("autoMigrate", obj, {"maxAttempts"})
            kw["auto_migrate"] = AutoMigrateConfig(
                max_attempts=_positive_int("autoMigrate.maxAttempts", obj.get("maxAttempts", 3))
            )
    if "forceDelete" in data and data["forceDelete"] is not None:
        obj = _object("forceDelete", data["forceDelete"])
        _check_keys("forceDelete", obj, {"overdueSlack", "nodeUnreachableThreshold"})
        missing = [k for k in ("overdueSlack", "nodeUnreachableThreshold") if k not in obj]
        if missing:
            raise ConfigError(f"lifecycle.forceDelete: both keys are required, missing {missing}")
        kw["force_delete"] = ForceDeleteConfig(
            overdue_slack=_duration("forceDelete.overdueSlack", obj["overdueSlack"]),
            node_unreachable_threshold=_duration(
                "forceDelete.nodeUnreachableThreshold", obj["nodeUnreachableThreshold"]
            ),
        )
    if "teardown" in data:
        value = data["teardown"]
        if value is None:
            kw["teardown"] = TeardownConfig(deadline=None)
        else:
            obj = _object("teardown", value)
            _check_keys("teardown", obj, {"deadline"})
            dl = obj.get("deadline", "30m")
            kw["teardown"] = TeardownConfig(
                deadline=None if dl is None else _duration("teardown.deadline", dl)
            )
    if "audit" in data:
        value = data["audit"]
        if value is None:
            kw["audit"] = None
        else:
            obj = _object("audit", value)
            _check_keys("audit", obj, {"maxInFlightMigrations", "maxMigrationsPerWindow", "window"})
            missing = [
                k
                for k in ("maxInFlightMigrations", "maxMigrationsPerWindow", "window")
                if k not in obj
            ]
            if missing:
                raise ConfigError(f"lifecycle.audit: all keys are required, missing {missing}")
            window = _duration("audit.window", obj["window"])
            if window <= timedelta(0):
                raise ConfigError("lifecycle.audit.window: must be > 0")
            kw["audit"] = AuditConfig(
                max_in_flight_migrations=_positive_int(
                    "audit.maxInFlightMigrations", obj["maxInFlightMigrations"]
                ),
                max_migrations_per_window=_positive_int(
                    "audit.maxMigrationsPerWindow", obj["maxMigrationsPerWindow"]
                ),
                window=window,
            )
    if "gangScheduleTimeout" in data and data["gangScheduleTimeout"] is not None:
        obj = _object("gangScheduleTimeout", data["gangScheduleTimeout"])
        _check_keys("gangScheduleTimeout", obj, {"min", "max"})
        lo = _duration("gangScheduleTimeout.min", obj.get("min", "60s"))
        hi = _duration("gangScheduleTimeout.max", obj.get("max", "600s"))
        if lo > hi:
            raise ConfigError("lifecycle.gangScheduleTimeout: min must not exceed max")
        kw["gang_schedule_timeout"] = GangScheduleTimeout(min=lo, max=hi)
    if "requeue" in data and data["requeue"] is not None:
        obj = _object("requeue", data["requeue"])
        _check_keys("requeue", obj, {"operation", "gate"})
        kw["requeue"] = RequeueConfig(
            operation=_duration("requeue.operation", obj.get("operation", "5s")),
            gate=_duration("requeue.gate", obj.get("gate", "3s")),
        )
    if "revisionHistoryLimit" in data:
        value = data["revisionHistoryLimit"]
        kw["revision_history_limit"] = (
            None if value is None else _positive_int("revisionHistoryLimit", value)
        )
    if "retryBlockHistoryLimit" in data:
        value = data["retryBlockHistoryLimit"]
        kw["retry_block_history_limit"] = (
            None
            if value is None
            else _positive_int("retryBlockHistoryLimit", value, allow_zero=True)
        )
    for key in ("scaleUpPodBatchSize", "scaleDownPodBatchSize"):
        if key in data:
            _positive_int(key, data[key])
    if "scaleDownRequeueInterval" in data:
        _duration("scaleDownRequeueInterval", data["scaleDownRequeueInterval"])
    if "instanceStatusEncoding" in data:
        enc = data["instanceStatusEncoding"]
        if enc not in ("ColumnarV2", "DenseV1"):
            raise ConfigError(
                f"lifecycle.instanceStatusEncoding: expected ColumnarV2 or DenseV1, got {enc!r}"
            )
        kw["instance_status_encoding"] = enc
    if "maxDecodedInstances" in data:
        kw["max_decoded_instances"] = _positive_int(
            "maxDecodedInstances", data["maxDecodedInstances"]
        )
    return LifecycleConfig(
        **{**{a.name: getattr(base, a.name) for a in LifecycleConfig.__attrs_attrs__}, **kw}
    )
