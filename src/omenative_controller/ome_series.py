"""OME's ``ome_omenative_*`` Prometheus series, beside omenative's own ``omenative_*`` ones.

OME v1.3's dashboards, runbooks and its ``ome-p0-alerts`` rules read these names; the
manager exports them with OME's label names and types (OME's ``obsmetrics`` and
coordination packages) so those keep working, while every ``omenative_*`` series stays:

* scale-down: ``ome_omenative_scale_down_batch_pods`` (histogram, ``component``: the pods
  of the Instances one pass newly condemned), ``_active_pods`` and ``_deferred_instances``
  (gauges, ``namespace``, ``isvc``, ``component``), ``_oversized_batch_total`` (counter,
  ``component``). With ``scaleDownPodBatchSize`` the core plans OME's waves
  (``Plan.scale_down_wave``): deferred is the wave's Instances left waiting, and a wave
  that admitted one Instance over the whole budget counts once; without it every Instance
  above ``replicas`` is condemned at once, so those stay at 0.
* status: ``ome_omenative_ir_status_writes_total`` (``encoding``, ``result``: attempt,
  committed, conflict, rejected, error), ``_conversions_total`` (``from``, ``to``: a write
  in another encoding than the stored one), ``_bytes`` (``namespace``, ``name``,
  ``component``, ``encoding``) and ``_codec_errors_total`` (``reason``: OME's decode reasons).
  Encodings are spelled ``dense_v1`` / ``columnar_v2`` as OME labels them.
* rollout groups: ``ome_omenative_rollout_group_transition_total`` (``namespace``, ``isvc``,
  ``group``, ``from``, ``to``), one per phase change a committed pass made;
  ``_group_phase_total`` (``namespace``, ``isvc``, ``group``, ``phase``), one per group and
  committed pass; ``_group_failure_total`` (``namespace``, ``isvc``, ``group``, ``reason``:
  the group's failure, e.g. ``ReadyTimeout``), one per entry into ``Failed``;
  ``ome_omenative_rollout_phase_duration_seconds`` (histogram, ``phase``: the phase left),
  the time since this manager saw the group enter it (not observed when it did not: a
  phase entered before the manager started or took the lead).
* readiness: ``ome_omenative_pod_create_to_ready_seconds`` (histogram, ``namespace``,
  ``isvc``, ``component``): from the earliest pod's creation to the committed write that
  first shows a created Instance Ready.

Every series labelled with an ISVC goes with it (:meth:`OMESeries.forget_isvc`), as OME's
``DeleteForISVC`` / ``DeleteISVCSeries`` drop theirs. The shell calls the methods; nothing
here reads the cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from omenative_controller.gauge_rows import GaugeRows
from omenative_core.labels import LABEL_ISVC
from omenative_core.model.observed import PodView
from omenative_core.model.plan import ScaleDownWave
from omenative_core.phases import OpType, Phase
from omenative_core.rollout.phases import GroupPhase

__all__ = ["ENCODING_LABELS", "READINESS_BUCKETS", "GroupMove", "OMESeries", "WriteResult",
           "condemned_pods", "encoding_label", "first_ready"]

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
READINESS_BUCKETS = tuple(float(2**i) for i in range(15))
"""1 s .. 16384 s (OME's ``readinessDurationBuckets``): a cold weight load takes minutes."""

GroupMove = tuple[int, str, str, str]
"""``(group index, phase before, phase after, failure)`` of one group in a committed pass."""


def first_ready(observed: Any, planned: Any) -> list[tuple[int, int]]:
    """``(index, incarnation)`` of the Instances ``planned`` (a decoded status) shows Ready for
    the first time: their Create operation ended in Ready (OME's ``InstanceReady``)."""
    before = {r.index: r for r in getattr(observed, "instances", None) or ()}
    out = []
    for r in getattr(planned, "instances", None) or ():
        b = before.get(r.index)
        if r.phase == Phase.READY and b is not None and b.phase != Phase.READY \
                and b.operation is not None and b.operation.type == OpType.CREATE:
            out.append((r.index, r.incarnation))
    return out


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
            "Eligible OMENative scale-down Instances outside the active prefix, labeled by "
            "namespace, ISVC, and component.", identity, registry=r)
        self.scale_down_oversized = Counter(
            "ome_omenative_scale_down_oversized_batch_total",
            "Count of OMENative scale-down waves that admit one indivisible Instance above "
            "the configured Pod budget, labeled by component.", ["component"], registry=r)
        self.status_conversions = Counter(
            "ome_omenative_ir_status_conversions_total",
            "InferenceReplica status writes that changed the stored encoding.",
            ["from", "to"], registry=r)
        self.status_writes = Counter(
            "ome_omenative_ir_status_writes_total",
            "InferenceReplica status writes by encoding and result (rejected: too large).",
            ["encoding", "result"], registry=r)
        self.status_bytes = GaugeRows(  # a series per replica: rows, not Gauge children
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
        self.group_phase_total = Counter(
            "ome_omenative_rollout_group_phase_total",
            "Committed passes per (namespace, isvc, group, phase) of rollout groups.",
            ["namespace", "isvc", "group", "phase"], registry=r)
        self.group_failure_total = Counter(
            "ome_omenative_rollout_group_failure_total",
            "Count of group entries into the Failed phase per (namespace, isvc, group, "
            "reason).", ["namespace", "isvc", "group", "reason"], registry=r)
        self.phase_duration = Histogram(
            "ome_omenative_rollout_phase_duration_seconds",
            "Wall-clock seconds a rollout group spent in a phase before transitioning out, "
            "labeled by the phase being left.", ["phase"], registry=r,
            buckets=READINESS_BUCKETS)
        self.create_to_ready = Histogram(
            "ome_omenative_pod_create_to_ready_seconds",
            "Wall-clock seconds from the earliest pod's creation to the Instance first "
            "reaching Ready, labeled by namespace, ISVC, and component.",
            ["namespace", "isvc", "component"], registry=r, buckets=READINESS_BUCKETS)
        #: the manager's clock (tests set their own)
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._status_keys: dict[tuple[str, str], tuple[str, str]] = {}
        #: per replica key: the scale-down wave its pass planned, until its status commits
        self._waves: dict[str, ScaleDownWave] = {}
        self._scale_keys: dict[tuple[str, str], tuple[str, str, str]] = {}
        #: per (namespace, isvc, group): its phase and when this manager saw it entered
        self._entered: dict[tuple[str, str, str], tuple[str, datetime | None]] = {}
        #: per (namespace, isvc): the labelled children of the series that go with it
        self._isvc_series: dict[tuple[str, str], set[tuple[Any, tuple[str, ...]]]] = {}

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
                         planned: Any, *,
                         pods: Callable[[str], Iterable[PodView]] | None = None) -> None:
        """The write of ``body`` (``planned``: its decoded status) committed for ``ctx``:
        count it, a conversion when the stored encoding differed, the scale-down, and the
        readiness of Instances first Ready (``pods``: the cached pods of a replica key)."""
        self.status_written(label, WriteResult.COMMITTED)
        if isinstance(ctx.raw.get("status"), Mapping):
            stored = encoding_label(ctx.raw)
            if stored != label:
                self.status_conversions.labels(stored, label).inc()
        meta = ctx.raw.get("metadata") or {}
        isvc = str((meta.get("labels") or {}).get(LABEL_ISVC) or "")
        component = str((body.get("spec") or {}).get("component") or "")
        active, wave = condemned_pods(ctx.observed_status, planned)
        planned_wave = self._waves.pop(ctx.key, None)
        self.scale_down(ctx.namespace, ctx.name, isvc, component,
                        active_pods=active, wave_pods=wave, wave=planned_wave)
        if pods is not None and isvc and component:
            ready = first_ready(ctx.observed_status, planned)
            if ready:
                self._created_to_ready(ctx.namespace, isvc, component, ready, pods(ctx.key))

    def _created_to_ready(self, namespace: str, isvc: str, component: str,
                          ready: list[tuple[int, int]], pods: Iterable[PodView]) -> None:
        """Observe, per Instance in ``ready``, the time since its earliest live pod's creation
        (OME drops a non-positive one, and so does this)."""
        earliest: dict[tuple[int, int], datetime] = {}
        wanted = set(ready)
        for pod in pods:
            created = pod.creation_timestamp
            if created is None or pod.deletion_timestamp is not None or pod.instance is None:
                continue
            key = (pod.instance, pod.incarnation or 1)
            if key in wanted and (key not in earliest or created < earliest[key]):
                earliest[key] = created
        now = self.clock()
        for created in earliest.values():
            seconds = (now - created).total_seconds()
            if seconds > 0:
                self._isvc_child(self.create_to_ready, namespace, isvc, component
                                 ).observe(seconds)

    def codec_error(self, reason: str) -> None:
        """A stored status failed to decode with OME's ``reason``."""
        self.codec_errors.labels(reason).inc()

    # ------------------------------------------------------------------ scale-down

    def planned_wave(self, key: str, wave: ScaleDownWave | None) -> None:
        """The pass over replica ``key`` planned ``wave`` (``Plan.scale_down_wave``); it is
        counted when that pass's status write commits."""
        if wave is None:
            self._waves.pop(key, None)
        else:
            self._waves[key] = wave

    def scale_down(self, namespace: str, name: str, isvc: str, component: str, *,
                   active_pods: int, wave_pods: int, wave: ScaleDownWave | None = None) -> None:
        """Replica ``name`` committed a status: ``active_pods`` of condemned Instances remain;
        ``wave_pods`` are those of the Instances this pass newly condemned (0: no new wave);
        ``wave``: the pass's scale-down wave under ``scaleDownPodBatchSize``, if any."""
        if not (namespace and isvc and component):
            return
        self._scale_keys[(namespace, name)] = (namespace, isvc, component)
        self.scale_down_active_pods.labels(namespace, isvc, component).set(active_pods)
        self.scale_down_deferred_instances.labels(namespace, isvc, component).set(
            wave.deferred_instances if wave is not None else 0)
        if wave_pods > 0:
            self.scale_down_batch_pods.labels(component).observe(wave_pods)
        if wave is not None and wave.oversized:
            self.scale_down_oversized.labels(component).inc()

    # ------------------------------------------------------------------ rollout groups

    def group_transitions(self, namespace: str, isvc: str,
                          moves: Iterable[tuple[int, str, str]]) -> None:
        """Count each ``(group index, from, to)`` phase change of a committed pass."""
        for group, before, after in moves:
            if before != after:
                self._isvc_child(self.group_transition_total, namespace, isvc, str(group),
                                 before, after).inc()

    def rollout_groups(self, namespace: str, isvc: str, moves: Iterable[GroupMove]) -> None:
        """One committed ISVC pass with rollout groups: per group, its phase, its transition,
        an entry into ``Failed`` (with its failure) and how long it stayed in a phase left."""
        now = self.clock()
        for index, before, after, failure in moves:
            group = str(index)
            self._isvc_child(self.group_phase_total, namespace, isvc, group, after).inc()
            key = (namespace, isvc, group)
            seen = self._entered.get(key)
            if before == after:
                if seen is None or seen[0] != after:  # entered before we looked: when, unknown
                    self._entered[key] = (after, None)
                continue
            self.group_transitions(namespace, isvc, [(index, before, after)])
            if seen is not None and seen[0] == before and seen[1] is not None:
                seconds = (now - seen[1]).total_seconds()
                if seconds > 0:
                    self.phase_duration.labels(before).observe(seconds)
            self._entered[key] = (after, now)
            if after == GroupPhase.FAILED:
                self._isvc_child(self.group_failure_total, namespace, isvc, group,
                                 failure).inc()

    def _isvc_child(self, metric: Any, namespace: str, isvc: str, *rest: str) -> Any:
        """``metric.labels(namespace, isvc, *rest)``, remembered to go with the ISVC."""
        labels = (namespace, isvc, *rest)
        self._isvc_series.setdefault((namespace, isvc), set()).add((metric, labels))
        return metric.labels(*labels)

    def forget_isvc(self, namespace: str, isvc: str) -> None:
        """The InferenceService is gone: drop every series labelled with it (OME's
        ``DeleteForISVC`` and ``DeleteISVCSeries``), so deleted ISVCs leave none behind."""
        for metric, labels in self._isvc_series.pop((namespace, isvc), ()):
            with contextlib.suppress(KeyError):
                metric.remove(*labels)
        for key in [k for k in self._entered if k[:2] == (namespace, isvc)]:
            del self._entered[key]

    # ------------------------------------------------------------------ cleanup

    def forget(self, namespace: str, name: str) -> None:
        """Drop the per-InferenceReplica series of a deleted replica ``name``."""
        self._waves.pop(f"{namespace}/{name}", None)
        old = self._status_keys.pop((namespace, name), None)
        if old is not None:
            with contextlib.suppress(KeyError):
                self.status_bytes.remove(namespace, name, *old)
        key = self._scale_keys.pop((namespace, name), None)
        if key is not None:
            for gauge in (self.scale_down_active_pods, self.scale_down_deferred_instances):
                with contextlib.suppress(KeyError):
                    gauge.remove(*key)
