"""``kubectl ome handover``: progress of an InferenceService's move off LeaderWorkerSet.
"""

from __future__ import annotations

import click

from omenative_controller.cli.handover_output import (
    format_handover,
    handover_json,
    handover_rows,
)
from omenative_controller.cli.kubectl_common import (
    Target,
    _connection,
    _echo_doc,
    _get_isvc,
    _output,
    _run,
    get_or_none,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import (
    INFERENCE_REPLICAS,
)
from omenative_controller.lws_handover import LEADER_WORKER_SETS
from omenative_core.service.handover import lws_name


@click.command("handover")
@click.argument("name")
@_output
@_connection
@click.pass_obj
def handover(target: Target, name: str, output: str) -> None:
    """Progress of InferenceService NAME's move off LeaderWorkerSet, per engine / decoder:
    phase, LeaderWorkerSet groups ready/desired, OMENative Instances ready/desired, and the
    LWSHandover condition's message."""

    async def work(kube: KubeClient) -> tuple[JSON, dict[str, JSON | None],
                                              dict[str, JSON | None]]:
        isvc = await _get_isvc(kube, target, name)
        sets: dict[str, JSON | None] = {}
        replicas: dict[str, JSON | None] = {}
        for comp in ("engine", "decoder"):
            sets[comp] = await get_or_none(kube, LEADER_WORKER_SETS, lws_name(name, comp),
                                            target.namespace)
            replicas[comp] = await get_or_none(kube, INFERENCE_REPLICAS, f"{name}-{comp}",
                                                target.namespace)
        return isvc, sets, replicas

    isvc, sets, replicas = _run(target, work)
    rows = handover_rows(isvc, sets, replicas)
    if output in ("json", "yaml"):
        _echo_doc(output, handover_json(rows))
        return
    click.echo(format_handover(name, rows))
