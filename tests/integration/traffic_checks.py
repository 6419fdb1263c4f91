"""Helpers of the traffic tests: the model server's own log, and the figures each scenario
prints (collected for docs/benchmarks.md and docs/real-nodes.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from manager_fixtures import eventually

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, SERVICES
from omenative_devcluster.loopback import kubectl
from omenative_devcluster.model_engine import (
    leader_service,
    model_replica,
    wait_answering,
    wait_converged,
)
from omenative_devcluster.traffic_picture import save_traffic, traffic_data
from omenative_devcluster.traffic_report import TrafficReport

__all__ = ["FIGURES", "answering_service", "log_time", "print_figures", "server_log",
           "server_log_with", "serving_engine"]

FIGURES: list[dict[str, Any]] = []
"""Every scenario's figures, as printed."""


async def serving_engine(kube: KubeClient, namespace: str, *, replicas: int) -> str:
    """Create the model-server engine ``llm`` (leader + worker, revision ``rev-1``) with
    ``replicas`` Instances, wait until it converged and every leader answers through its
    Service, and return the Service's ClusterIP: where each scenario starts its traffic."""
    await kube.create(INFERENCE_REPLICAS,
                      model_replica("llm", replicas=replicas, revision="rev-1"), namespace)
    ip = await leader_service(kube, namespace, "llm")
    await wait_converged(kube, namespace, "llm", replicas=replicas, pods_per_instance=2,
                         revision="rev-1")
    await wait_answering(f"http://{ip}:8080/", pods=replicas)
    return ip


async def answering_service(kube: KubeClient, namespace: str, name: str, *, pods: int,
                            timeout: float = 60) -> str:
    """Wait for the Service ``name`` an InferenceService made, then until ``pods`` distinct
    pods answer through its ClusterIP; return its base URL (``http://IP:PORT``): where a
    scenario on an InferenceService starts its traffic."""
    svc = await eventually(lambda: kube.get(SERVICES, name, namespace), timeout=timeout,
                           what=f"the Service {name}")
    url = f"http://{svc['spec']['clusterIP']}:{svc['spec']['ports'][0]['port']}"
    await wait_answering(f"{url}/", pods=pods, timeout=timeout)
    return url


def server_log(kubeconfig: Path, namespace: str, pod: str) -> list[JSON]:
    """The model server's JSON log lines of a pod (``kubectl logs``)."""
    out = kubectl(kubeconfig, "-n", namespace, "logs", pod)
    lines = []
    for raw in out.splitlines():
        with contextlib.suppress(ValueError):
            lines.append(json.loads(raw))
    return lines


async def server_log_with(kubeconfig: Path, namespace: str, pod: str, *events: str,
                          timeout: float = 30) -> list[JSON]:
    """``server_log`` once it holds a line of every one of ``events``. The server writes a
    line before it answers (its first ready answer, say), but the container runtime copies
    it into the log file on its own time: a read right after what that answer led to (the
    pod Ready, the Instance serving) can come before the line."""
    async def logged() -> list[JSON] | None:
        lines = await asyncio.to_thread(server_log, kubeconfig, namespace, pod)
        seen = {ln.get("event") for ln in lines}
        return lines if all(e in seen for e in events) else None

    return await eventually(logged, timeout=timeout, what=f"{pod}'s log lines {events}")


def log_time(ts: str) -> float:
    """Epoch seconds of the server's RFC 3339 timestamp (nanoseconds cut to microseconds)."""
    head, _, frac = ts.rstrip("Z").partition(".")
    micro = (frac + "000000")[:6]
    return datetime.fromisoformat(f"{head}.{micro}+00:00").timestamp()


TRAFFIC_DIR = Path(os.environ.get("OMENATIVE_TRAFFIC_DIR", ".state/traffic"))
"""Where each scenario's recorded run (JSON) and picture (SVG) are saved beside its table."""


def print_figures(scenario: str, report: TrafficReport, *,
                  marks: Sequence[tuple[float, str]] = (),
                  intervals: Sequence[dict[str, Any]] = (), **extra: Any) -> None:
    """Print the scenario's figures (table + timeline), keep them in ``FIGURES``, and save
    the run and its picture in ``TRAFFIC_DIR`` (marks and serving intervals when given)."""
    figures = {"scenario": scenario, "sent": report.sent, "answered": report.answered,
               "failed": report.failed, "retried": report.retried,
               "by_revision": report.answers_by_revision(),
               "failures": report.failures_by_kind(),
               "failure_windows": [(round(w.start, 2), round(w.end, 2), w.count)
                                   for w in report.failure_windows()], **extra}
    FIGURES.append(figures)
    print(f"\n{report.table(scenario)}\n{report.timeline()}")
    print(f"TRAFFIC FIGURES {json.dumps(figures, sort_keys=True)}")
    slug = re.sub(r"[^a-z0-9]+", "-", scenario.lower()).strip("-")
    data = traffic_data(report, title=scenario, intervals=intervals, marks=marks)
    data_path, picture = save_traffic(data, TRAFFIC_DIR, f"traffic-{slug}")
    print(f"TRAFFIC RUN {data_path} picture {picture}")
