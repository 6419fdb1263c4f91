"""The manager's opt-in GPU caretaker: ``omenative-manager --advisor=recommend|apply``.

While the manager leads, every ``interval`` seconds it lists nodes, pods and
InferenceReplicas, asks ``omenative_core.advisor.advise`` and:

* publishes the picture as metrics: free GPUs, the largest placeable gang and the
  fragmentation ratio per topology domain, and the recommendations open;
* ``recommend``: records each recommended move as a ``MoveRecommended`` Event on the
  InferenceReplica it would move (the Event recorder aggregates repeats, so a standing
  recommendation does not flood);
* ``apply``: also requests the first move as a migration (the annotation ``kubectl ome
  migration start`` writes; the planner enforces the caps and records it in the migration
  audit), and no other until that one has ended, since the scheduler may not follow a hint
  and the next move is planned from where the replacement landed.

``off`` (the default) starts nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Gauge

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder, involved_object
from omenative_controller.kube.resources import INFERENCE_REPLICAS, NODES, PODS
from omenative_controller.migration_requests import (
    ACTIVE_MIGRATION_PHASES,
    ANNOTATION_MIGRATION_PREFIX,
    move_request,
)
from omenative_core.advisor import Advice, AdvisorConfig, Recommendation, advise
from omenative_core.advisor.observe import cluster_view_from_json
from omenative_core.model.config import LifecycleConfig

__all__ = ["ADVISOR_MODES", "AdvisorLoop", "AdvisorMetrics"]

log = structlog.get_logger("omenative.advisor")

ADVISOR_MODES = ("off", "recommend", "apply")
"""``--advisor`` values: nothing, Events and metrics, or also migration requests."""

REQUESTED_BY = "omenative-manager/advisor"
"""``requested_by`` of the migrations the advisor requests (the audit records it)."""


class AdvisorMetrics:
    """The advisor's gauges, on the manager's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.free_gpus = Gauge("omenative_advisor_free_gpus",
                               "Free GPUs on schedulable, sound nodes, per topology domain.",
                               ["domain"], registry=registry)
        self.largest_gang = Gauge(
            "omenative_advisor_largest_placeable_gang_gpus",
            "GPUs on wholly free nodes of a domain: the most a gang of whole-node pods gets.",
            ["domain"], registry=registry)
        self.fragmentation = Gauge(
            "omenative_advisor_fragmentation_ratio",
            "1 - free GPUs on wholly free nodes / free GPUs, per topology domain.",
            ["domain"], registry=registry)
        self.recommendations = Gauge("omenative_advisor_recommendations_open",
                                     "Instance moves the advisor recommends now.",
                                     registry=registry)

    def publish(self, advice: Advice) -> None:
        """Set every gauge from one advice (domains that vanished are dropped)."""
        for gauge in (self.free_gpus, self.largest_gang, self.fragmentation):
            gauge.clear()
        for d in advice.domains:
            name = "cluster" if d.key is None else f"{d.key}={d.value}"
            self.free_gpus.labels(name).set(d.free_gpus)
            self.largest_gang.labels(name).set(d.largest_placeable_gang)
            self.fragmentation.labels(name).set(d.fragmentation)
        self.recommendations.set(len(advice.recommendations))


def _message(rec: Recommendation) -> str:
    what = (f"to place pending gang {rec.benefit.pending_gang}" if rec.benefit.pending_gang
            else f"off node {','.join(rec.from_nodes)}")
    return (f"advisor: move Instance {rec.instance.index} {what} ({rec.reason}): "
            f"{','.join(rec.from_nodes)} -> {','.join(rec.target_nodes)}, {rec.gpus} GPUs; "
            f"step {rec.step} of {rec.cost.instances_moved}")


class AdvisorLoop:
    """One advisor pass every ``interval`` seconds, while the manager leads."""

    def __init__(self, client: KubeClient, recorder: EventRecorder, metrics: AdvisorMetrics,
                 *, mode: str, config: Callable[[], LifecycleConfig],
                 namespaces: Sequence[str] = (), bad_gpu_conditions: Sequence[str] = (),
                 interval: float = 60.0) -> None:
        if mode not in ADVISOR_MODES:
            raise ValueError(f"--advisor must be one of {ADVISOR_MODES}, got {mode!r}")
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.mode = mode
        self.config = config
        self.namespaces = tuple(namespaces)
        self.bad = tuple(bad_gpu_conditions)
        self.interval = interval
        #: the migration this advisor requested and waits for: (namespace, replica, uuid)
        self.waiting: tuple[str, str, str] | None = None

    async def run(self) -> None:
        """Pass after pass until cancelled; a failed pass is logged and retried next time."""
        while True:
            try:
                await self.once()
            except ApiError as exc:
                log.warning("advisor.pass_failed", reason=exc.reason, error=exc.message)
            await asyncio.sleep(self.interval)

    async def _list(self, res: Any) -> list[JSON]:
        if not self.namespaces or not res.namespaced:
            return list((await self.client.list(res)).get("items") or ())
        out: list[JSON] = []
        for ns in self.namespaces:
            out += (await self.client.list(res, ns)).get("items") or ()
        return out

    async def once(self) -> Advice:
        """One pass: observe, advise, publish, and (per mode) record and request."""
        lifecycle = self.config()
        nodes, pods, irs = (await self._list(NODES), await self._list(PODS),
                            await self._list(INFERENCE_REPLICAS))
        view, skipped = cluster_view_from_json(nodes, pods, irs, now=datetime.now(UTC),
                                               audit=lifecycle.audit)
        for note in skipped:
            log.warning("advisor.skipped", note=note)
        advice = advise(view, AdvisorConfig(bad_gpu_conditions=self.bad, audit=lifecycle.audit))
        self.metrics.publish(advice)
        by_name = {(ir["metadata"].get("namespace"), ir["metadata"]["name"]): ir for ir in irs}
        for rec in advice.recommendations:
            ir = by_name.get((rec.instance.namespace, rec.instance.replica))
            if ir is not None:
                await self.recorder.record(_ref(ir), "Normal", "MoveRecommended", _message(rec))
        if self.mode == "apply":
            await self._apply(advice, by_name)
        return advice

    def _still_waiting(self, by_name: dict[tuple[Any, Any], JSON]) -> bool:
        if self.waiting is None:
            return False
        ns, name, request = self.waiting
        ir = by_name.get((ns, name))
        if ir is None:
            self.waiting = None
            return False
        annotations = ir["metadata"].get("annotations") or {}
        if ANNOTATION_MIGRATION_PREFIX + request in annotations:
            return True  # not taken yet
        for m in (ir.get("status") or {}).get("migrations") or ():
            if m.get("requestUUID") == request and m.get("phase") in ACTIVE_MIGRATION_PHASES:
                return True
        self.waiting = None
        return False

    async def _apply(self, advice: Advice, by_name: dict[tuple[Any, Any], JSON]) -> None:
        if self._still_waiting(by_name) or not advice.recommendations:
            return
        rec = advice.recommendations[0]
        ir = by_name.get((rec.instance.namespace, rec.instance.replica))
        if ir is None:
            return
        request = str(uuid.uuid4())
        value = move_request(rec, component=str((ir.get("spec") or {}).get("component") or ""),
                             tool="omenative advisor", requested_by=REQUESTED_BY,
                             requested_at=datetime.now(UTC))
        meta = ir["metadata"]
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                             "annotations": {ANNOTATION_MIGRATION_PREFIX + request: value}}}
        try:
            await self.client.patch(INFERENCE_REPLICAS, meta["name"], body, meta.get("namespace"))
        except ApiError as exc:
            log.info("advisor.request_refused", replica=meta["name"], reason=exc.reason,
                     error=exc.message)
            return
        self.waiting = (rec.instance.namespace, rec.instance.replica, request)
        await self.recorder.record(_ref(ir), "Normal", "MoveRequested",
                                   f"{_message(rec)}: migration {request} requested")
        log.info("advisor.requested", replica=meta["name"], instance=rec.instance.index,
                 request=request)


def _ref(ir: JSON) -> JSON:
    return involved_object(ir, api_version=INFERENCE_REPLICAS.api_version,
                           kind=INFERENCE_REPLICAS.kind)
