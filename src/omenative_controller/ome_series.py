"""OME's ``ome_omenative_*`` Prometheus series, beside omenative's own ``omenative_*`` ones.

OME v1.3's dashboards, runbooks and its ``ome-p0-alerts`` rules read these names; the
manager exports them with OME's label names and types (OME's ``obsmetrics`` and
coordination packages) so those keep working, while every ``omenative_*`` series stays:

* scale-down: ``ome_omenative_scale_down_batch_pods`` (histogram, ``component``: the pods
  of the Instances one pass newly condemned), ``_active_pods`` and ``_deferred_instances``
  (gauges, ``namespace``, ``isvc``, ``component``), ``_oversized_batch_total`` (counter,
  ``component``). omenative condemns every Instance above ``replicas`` at once (no pod
  budget), so nothing is ever deferred or oversized: those two stay at 0 by construction.
* status: ``ome_omenative_ir_status_writes_total`` (``encoding``, ``result``: attempt,
  committed, conflict, rejected, error), ``_conversions_total`` (``from``, ``to``: a write
  in another encoding than the stored one), ``_bytes`` (``namespace``, ``name``,
  ``component``, ``encoding``) and ``_codec_errors_total`` (``reason``: OME's decode reasons).
  Encodings are spelled ``dense_v1`` / ``columnar_v2`` as OME labels them.
* rollout groups: ``ome_omenative_rollout_group_transition_total`` (``namespace``, ``isvc``,
  ``group``, ``from``, ``to``), one per phase change a committed pass made.

The shell calls the ``record_*`` methods; nothing here reads the cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from omenative_core.labels import LABEL_ISVC

__all__ = ["ENCODING_LABELS", "OMESeries", "WriteResult", "condemned_pods", "encoding_label"]

ENCODING_LABELS = {"DenseV1": "dense_v1", "ColumnarV2": "columnar_v2"}
"""OME's label value per status encoding."""


def encoding_label(obj: Mapping[str, Any]) -> str:
    """OME's label of the encoding an object's ``status`` rows are written in."""
    status = obj.get("status")
    marker = status.get("instanceStatusEncoding") if isinstance(status, Mapping) else None
    return ENCODING_LABELS.get(marker, "dense_v1") if isinstance(marker, str) else "dense_v1"


def condemned_pods(observed: Any, planned: Any) -> tuple[int, int]:
    """``(active, wave)``: the pods of the Instances ``planned`` (a decoded status) condemns,
    and those of the ones it newly condemns (an Instance without pods costs 1, as in OME)."""
    def condemned(status: Any) -> list[Any]:
        return [r for r in getattr(status, "instances", None) or ()
                if r.operation is not None and r.operation.type == "Delete"]
    before = {r.index for r in condemned(observed)}
    now = condemned(planned)
    return (sum(r.pod_count for r in now),
            sum(max(r.pod_count, 1) for r in now if r.index not in before))


class WriteResult:
    """The ``result`` label values of ``ome_omenative_ir_status_writes_total`` (OME's)."""

    ATTEMPT = "attempt"
    COMMITTED = "committed"
    CONFLICT = "conflict"
    REJECTED = "rejected"
    ERROR = "error"


_BATCH_BUCKETS = tuple(float(2**i) for i in range(12))  # 1 .. 2048 pods, as OME's


class OMESeries:
    """The ``ome_omenative_*`` series on the manager's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        identity = ["namespace", "isvc", "component"]
        self.scale_down_batch_pods = Histogram(
            "ome_omenative_scale_down_batch_pods",
            "Pod-equivalent cost selected in one OMENative scale-down wave, labeled by "
            "component.", ["component"], registry=r, buckets=_BATCH_BUCKETS)
        self.scale_down_active_pods = Gauge(
            "ome_omenative_scale_down_active_pods",
            "Current Pod-equivalent cost selected for OMENative scale-down, labeled by "
            "namespace, ISVC, and component.", identity, registry=r)
        self.scale_down_deferred_instances = Gauge(
            "ome_omenative_scale_down_deferred_instances",
            "Eligible OMENative scale-down Instances outside the active prefix (always 0: "
            "omenative condemns every Instance above replicas at once).", identity, registry=r)
        self.scale_down_oversized = Counter(
            "ome_omenative_scale_down_oversized_batch_total",
            "OMENative scale-down waves that admit one indivisible Instance above the Pod "
            "budget (omenative has no budget: never counted).", ["component"], registry=r)
        self.status_conversions = Counter(
            "ome_omenative_ir_status_conversions_total",
            "InferenceReplica status writes that changed the stored encoding.",
            ["from", "to"], registry=r)
        self.status_writes = Counter(
            "ome_omenative_ir_status_writes_total",
            "InferenceReplica status writes by encoding and result (rejected: too large).",
            ["encoding", "result"], registry=r)
        self.status_bytes = Gauge(
            "ome_omenative_ir_status_bytes",
            "Bytes of an InferenceReplica's last status write.",
            ["namespace", "name", "component", "encoding"], registry=r)
        self.codec_errors = Counter(
            "ome_omenative_ir_status_codec_errors_total",
            "Stored InferenceReplica statuses that failed to decode, by OME's reason.",
            ["reason"], registry=r)
        self.group_transition_total = Counter(
            "ome_omenative_rollout_group_transition_total",
            "Phase transitions of rollout groups per (namespace, isvc, group, from, to).",
            ["namespace", "isvc", "group", "from", "to"], registry=r)
        self._status_keys: dict[tuple[str, str], tuple[str, str]] = {}
        self._scale_keys: dict[tuple[str, str], tuple[str, str, str]] = {}

    # ------------------------------------------------------------------ status

    def status_write(self, ctx: Any, body: Mapping[str, Any], size: int) -> str:
        """A status ``body`` of ``size`` bytes is about to be sent for the pass ``ctx`` (a
        ``PassContext``): count the attempt, set the bytes gauge; returns the encoding label
        for ``status_written``."""
        label = encoding_label(body)
        component = str((body.get("spec") or {}).get("component") or "")
        key = (ctx.namespace, ctx.name)
        old = self._status_keys.get(key)
        if old is not None and old != (component, label):
            with contextlib.suppress(KeyError):
                self.status_bytes.remove(*key, *old)
        self._status_keys[key] = (component, label)
        self.status_bytes.labels(*key, component, label).set(size)
        self.status_writes.labels(label, WriteResult.ATTEMPT).inc()
        return label

    def status_written(self, label: str, result: str) -> None:
        """Count a status write's ``result`` (a ``WriteResult``)."""
        self.status_writes.labels(label, result).inc()

    def status_committed(self, ctx: Any, body: Mapping[str, Any], label: str,
                         planned: Any) -> None:
        """The write of ``body`` (``planned``: its decoded status) committed for ``ctx``:
        count it, a conversion when the stored encoding differed, and the scale-down."""
        self.status_written(label, WriteResult.COMMITTED)
        if isinstance(ctx.raw.get("status"), Mapping):
            stored = encoding_label(ctx.raw)
            if stored != label:
                self.status_conversions.labels(stored, label).inc()
        meta = ctx.raw.get("metadata") or {}
        active, wave = condemned_pods(ctx.observed_status, planned)
        self.scale_down(ctx.namespace, ctx.name,
                        str((meta.get("labels") or {}).get(LABEL_ISVC) or ""),
                        str((body.get("spec") or {}).get("component") or ""),
                        active_pods=active, wave_pods=wave)

    def codec_error(self, reason: str) -> None:
        """A stored status failed to decode with OME's ``reason``."""
        self.codec_errors.labels(reason).inc()

    # ------------------------------------------------------------------ scale-down

    def scale_down(self, namespace: str, name: str, isvc: str, component: str, *,
                   active_pods: int, wave_pods: int) -> None:
        """Replica ``name`` committed a status: ``active_pods`` of condemned Instances remain;
        ``wave_pods`` are those of the Instances this pass newly condemned (0: no new wave)."""
        if not (namespace and isvc and component):
            return
        self._scale_keys[(namespace, name)] = (namespace, isvc, component)
        self.scale_down_active_pods.labels(namespace, isvc, component).set(active_pods)
        self.scale_down_deferred_instances.labels(namespace, isvc, component).set(0)
        if wave_pods > 0:
            self.scale_down_batch_pods.labels(component).observe(wave_pods)

    # ------------------------------------------------------------------ rollout groups

    def group_transitions(self, namespace: str, isvc: str,
                          moves: Iterable[tuple[int, str, str]]) -> None:
        """Count each ``(group index, from, to)`` phase change of a committed pass."""
        for group, before, after in moves:
            if before != after:
                self.group_transition_total.labels(namespace, isvc, str(group), before, after).inc()

    # ------------------------------------------------------------------ cleanup

    def forget(self, namespace: str, name: str) -> None:
        """Drop the per-InferenceReplica series of a deleted replica ``name``."""
        old = self._status_keys.pop((namespace, name), None)
        if old is not None:
            with contextlib.suppress(KeyError):
                self.status_bytes.remove(namespace, name, *old)
        key = self._scale_keys.pop((namespace, name), None)
        if key is not None:
            for gauge in (self.scale_down_active_pods, self.scale_down_deferred_instances):
                with contextlib.suppress(KeyError):
                    gauge.remove(*key)
