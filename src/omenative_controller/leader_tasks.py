"""What the manager runs beside its InferenceReplica workers while it leads: the
InferenceService controller (``--inference-services``) and the GPU advisor (``--advisor``).

Started when leadership begins, cancelled (and awaited) when it ends, so a standby never
writes through them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from omenative_controller.advisor_loop import AdvisorLoop, AdvisorMetrics
from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.tasks import cancel_and_wait
from omenative_controller.manager_config import ManagerOptions
from omenative_controller.ome_series import OMESeries
from omenative_controller.service_controller import ServiceController
from omenative_core.model.config import LifecycleConfig
from omenative_core.service import ServiceConfig

__all__ = ["LeaderTasks"]


class LeaderTasks:
    """The leader-only controllers of one manager; ``isvc`` is the running ISVC controller."""

    def __init__(self) -> None:
        self.isvc: ServiceController | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    def start(self, opts: ManagerOptions, client: KubeClient, events: EventRecorder | None, *,
              service_config: Callable[[], ServiceConfig], lifecycle: Callable[[], LifecycleConfig],
              is_leader: Callable[[], bool], advisor_metrics: AdvisorMetrics,
              ome_series: OMESeries | None = None) -> None:
        """Start what ``opts`` turns on (the advisor needs the manager's Event recorder)."""
        if opts.inference_services:
            self.isvc = ServiceController(
                client, opts.namespaces, service_config,
                guard=is_leader, crd_poll_seconds=opts.crd_poll_seconds,
                backoff_base=opts.backoff_base, backoff_max=opts.backoff_max,
                revision_namespace=opts.config_namespace,
                revision_retention=opts.runtime_revision_retention,
                revision_grace=timedelta(seconds=opts.runtime_revision_grace))
            self.isvc.rollout.ome_series = ome_series
            self._tasks.append(asyncio.create_task(self.isvc.run(), name="isvc-controller"))
        if opts.advisor != "off" and events is not None:
            loop = AdvisorLoop(client, events, advisor_metrics, mode=opts.advisor,
                               config=lifecycle, namespaces=opts.namespaces,
                               bad_gpu_conditions=opts.advisor_bad_gpu_conditions,
                               interval=opts.advisor_interval)
            self._tasks.append(asyncio.create_task(loop.run(), name="advisor"))

    async def stop(self) -> None:
        """Cancel them, the advisor first, and wait until they are gone."""
        for task in reversed(self._tasks):
            await cancel_and_wait([task])
        self._tasks = []
        self.isvc = None

    def settings_changed(self) -> None:
        """The cluster settings were reloaded: the ISVC controller looks at every ISVC."""
        if self.isvc is not None:
            self.isvc.enqueue_all()
