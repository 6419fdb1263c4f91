"""Instances by phase and rollout progress, per InferenceReplica, as Prometheus gauges.

* ``omenative_instances{namespace, replica, isvc, component, phase}``: the Instances of the
  replica in each phase of the core's ``Phase`` enum (all eight are exported, 0 where none,
  so a stacked panel never has gaps).
* ``omenative_rollout_instances{namespace, replica, isvc, component, state}``: ``desired``
  (``spec.replicas``, OME's "unset or 0 runs one"), and the status counts ``updated``,
  ``updated_ready``, ``ready`` and ``serving`` (OME's ``updatedReplicas``,
  ``updatedReadyReplicas``, ``readyReplicas``, ``servingReplicas``): a rollout is done when
  ``updated_ready`` reaches ``desired``.

Both read the status the manager's last pass planned (written, or held back as
progress-only). Cardinality is bounded by the replicas, never by their Instances: 8 + 5
series per replica (``isvc`` and ``component`` follow from the replica), removed when the
replica goes, and all of them when the manager stops leading (a standby reports none).
Counting the phases walks the rows, so it is done only when a pass changes the status or
the replica has no series yet.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping
from operator import attrgetter
from typing import Any, Final

from prometheus_client import CollectorRegistry, Gauge

from omenative_core.labels import LABEL_ISVC
from omenative_core.phases import Phase
from omenative_core.policy import desired_instances

__all__ = ["PROGRESS_STATES", "ReplicaGauges"]

PROGRESS_STATES: Final = ("desired", "updated", "updated_ready", "ready", "serving")
"""The ``state`` values of ``omenative_rollout_instances``."""

_PHASE = attrgetter("phase")


def _identity(raw: Mapping[str, Any]) -> tuple[str, str, int | None]:
    """``(isvc, component, spec.replicas)`` of an InferenceReplica object."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    replicas = spec.get("replicas")
    return (str((meta.get("labels") or {}).get(LABEL_ISVC) or ""),
            str(spec.get("component") or ""),
            replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None)


class ReplicaGauges:
    """``omenative_instances`` and ``omenative_rollout_instances`` on a registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["namespace", "replica", "isvc", "component"]
        self.instances = Gauge(
            "omenative_instances",
            "Instances of an InferenceReplica in each phase (Pending, Creating, Ready, "
            "Updating, Restarting, Migrating, Failed, Deleting), as its last pass planned.",
            [*labels, "phase"], registry=registry)
        self.rollout = Gauge(
            "omenative_rollout_instances",
            "Rollout progress of an InferenceReplica: desired Instances (spec.replicas) and "
            "the updated, updated_ready, ready and serving counts of its status.",
            [*labels, "state"], registry=registry)
        #: per (namespace, replica): the identity labels its series carry
        self._keys: dict[tuple[str, str], tuple[str, str, str, str]] = {}

    def observe(self, ctx: Any, status: Any, *, changed: bool) -> None:
        """The pass ``ctx`` (a ``PassContext``) planned ``status`` (a decoded
        ``InferenceReplicaStatus``); ``changed``: it differs from the stored one."""
        key = (ctx.namespace, ctx.name)
        isvc, component, replicas = _identity(ctx.raw)
        ident = (ctx.namespace, ctx.name, isvc, component)
        old = self._keys.get(key)
        if old == ident and not changed:
            return  # the series already say what the stored status says
        if old is not None and old != ident:
            self.forget(*key)
        self._keys[key] = ident
        phases = Counter(map(_PHASE, status.instances))
        for phase in Phase:
            self.instances.labels(*ident, phase.value).set(phases.get(phase.value, 0))
        counts = (desired_instances(replicas), status.updated_replicas,
                  status.updated_ready_replicas, status.ready_replicas, status.serving_replicas)
        for state, value in zip(PROGRESS_STATES, counts, strict=True):
            self.rollout.labels(*ident, state).set(value)

    def forget(self, namespace: str, name: str) -> None:
        """Drop the series of the InferenceReplica ``name`` (it is gone)."""
        ident = self._keys.pop((namespace, name), None)
        if ident is None:
            return
        for gauge, values in ((self.instances, [p.value for p in Phase]),
                              (self.rollout, list(PROGRESS_STATES))):
            for value in values:
                with contextlib.suppress(KeyError):
                    gauge.remove(*ident, value)

    def clear(self) -> None:
        """Drop every replica's series (the manager stopped leading)."""
        for key in list(self._keys):
            self.forget(*key)
