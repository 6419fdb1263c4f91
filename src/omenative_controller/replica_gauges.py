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

The series are not ``Gauge`` children: a child of ``prometheus_client`` costs ~700 bytes
(its own object, value and lock), 9.3 KB for a replica's 13, 23 MB for 2,500 small replicas
(issue 36: the manager's peak with 10,000 watched pods). A replica keeps one tuple (its
identity and 13 counts, ~0.3 KB) and the families are built when scraped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from operator import attrgetter
from typing import Any, Final

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from omenative_core.labels import LABEL_ISVC
from omenative_core.phases import Phase
from omenative_core.policy import desired_instances

__all__ = ["PROGRESS_STATES", "ReplicaGauges"]

PROGRESS_STATES: Final = ("desired", "updated", "updated_ready", "ready", "serving")
"""The ``state`` values of ``omenative_rollout_instances``."""

_PHASE = attrgetter("phase")
_PHASES: Final = tuple(p.value for p in Phase)
_LABELS: Final = ("namespace", "replica", "isvc", "component")
_INSTANCES_HELP: Final = (
    "Instances of an InferenceReplica in each phase (Pending, Creating, Ready, Updating, "
    "Restarting, Migrating, Failed, Deleting), as its last pass planned.")
_ROLLOUT_HELP: Final = (
    "Rollout progress of an InferenceReplica: desired Instances (spec.replicas) and the "
    "updated, updated_ready, ready and serving counts of its status.")


def _identity(raw: Mapping[str, Any]) -> tuple[str, str, int | None]:
    """``(isvc, component, spec.replicas)`` of an InferenceReplica object."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    replicas = spec.get("replicas")
    return (str((meta.get("labels") or {}).get(LABEL_ISVC) or ""),
            str(spec.get("component") or ""),
            replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None)


class ReplicaGauges:
    """``omenative_instances`` and ``omenative_rollout_instances`` on a registry, as one
    collector over a row per replica: ``(namespace, replica, isvc, component, *counts)``,
    the 8 phase counts then the 5 progress counts."""

    def __init__(self, registry: CollectorRegistry) -> None:
        #: per (namespace, replica): its identity labels and counts, in first-seen order
        self._rows: dict[tuple[str, str], tuple[Any, ...]] = {}
        registry.register(self)

    def observe(self, ctx: Any, status: Any, *, changed: bool) -> None:
        """The pass ``ctx`` (a ``PassContext``) planned ``status`` (a decoded
        ``InferenceReplicaStatus``); ``changed``: it differs from the stored one."""
        key = (ctx.namespace, ctx.name)
        isvc, component, replicas = _identity(ctx.raw)
        ident = (ctx.namespace, ctx.name, isvc, component)
        old = self._rows.get(key)
        if old is not None and old[:4] == ident and not changed:
            return  # the series already say what the stored status says
        if old is not None and old[:4] != ident:
            del self._rows[key]  # another identity: new series, as a removed Gauge child's
        phases = Counter(map(_PHASE, status.instances))
        self._rows[key] = (*ident, *(phases.get(p, 0) for p in _PHASES),
                           desired_instances(replicas), status.updated_replicas,
                           status.updated_ready_replicas, status.ready_replicas,
                           status.serving_replicas)

    def forget(self, namespace: str, name: str) -> None:
        """Drop the series of the InferenceReplica ``name`` (it is gone)."""
        self._rows.pop((namespace, name), None)

    def clear(self) -> None:
        """Drop every replica's series (the manager stopped leading)."""
        self._rows.clear()

    def __len__(self) -> int:
        return len(self._rows)

    def describe(self) -> list[Metric]:
        """The two families, empty (the registry checks their names once)."""
        return [GaugeMetricFamily("omenative_instances", _INSTANCES_HELP),
                GaugeMetricFamily("omenative_rollout_instances", _ROLLOUT_HELP)]

    def collect(self) -> Iterator[Metric]:
        """The two families with every replica's series (a scrape; any thread)."""
        rows = list(self._rows.values())  # one step under the GIL: a pass may add a row
        instances = GaugeMetricFamily("omenative_instances", _INSTANCES_HELP,
                                      labels=[*_LABELS, "phase"])
        rollout = GaugeMetricFamily("omenative_rollout_instances", _ROLLOUT_HELP,
                                    labels=[*_LABELS, "state"])
        n = len(_PHASES)
        for row in rows:
            ident = list(row[:4])
            for phase, value in zip(_PHASES, row[4:4 + n], strict=True):
                instances.add_metric([*ident, phase], float(value))
            for state, value in zip(PROGRESS_STATES, row[4 + n:], strict=True):
                rollout.add_metric([*ident, state], float(value))
        yield instances
        yield rollout
