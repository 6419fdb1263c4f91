"""``kubectl ome advise``: the placement advisor on the live cluster, and ``--apply`` of its
moves as migration requests (one at a time, each waited for).
"""

from __future__ import annotations

import os
import time
import uuid

import click
from attrs import evolve

from omenative_controller.cli import ome_output as out
from omenative_controller.cli.advise_output import (
    advice_json,
    format_advice,
    move_line,
    move_request,
)
from omenative_controller.cli.kubectl_common import (
    EXIT_CONFLICT,
    CliError,
    Target,
    _connection,
    _echo_doc,
    _fail,
    _now,
    _output,
    _patch,
    _read,
    _ref,
    _run,
    _status,
    _yes,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    INFERENCE_REPLICAS,
    NODES,
    PODS,
)
from omenative_core.advisor import (
    Advice,
    AdvisorConfig,
    Recommendation,
    advise,
    cluster_view_from_json,
)
from omenative_core.model.config import (
    UNCONFIGURED,
    AuditConfig,
    ConfigError,
    parse_lifecycle_config,
)

# ------------------------------------------------------------------ advise


def _advise_once(target: Target, namespace: str | None, config_namespace: str,
                 config: AdvisorConfig) -> Advice:
    """Read nodes, pods, InferenceReplicas and the audit caps; ask the advisor."""

    notes: list[str] = []

    async def work(kube: KubeClient) -> tuple[list[JSON], list[JSON], list[JSON], JSON | None]:
        nodes = (await kube.list(NODES)).get("items") or []
        try:  # every namespace's pods hold GPUs, whichever namespace is advised on
            pods = (await kube.list(PODS)).get("items") or []
        except ApiError as exc:
            if namespace is None or exc.status != 403:
                raise
            notes.append("pods of other namespaces not readable (forbidden): their GPUs are "
                         "not counted, so free GPUs may be overstated")
            pods = (await kube.list(PODS, namespace)).get("items") or []
        irs = (await kube.list(INFERENCE_REPLICAS, namespace)).get("items") or []
        try:
            cm: JSON | None = await kube.get(CONFIG_MAPS, "inferenceservice-config",
                                             config_namespace)
        except ApiError:
            cm = None
        return list(nodes), list(pods), list(irs), cm

    nodes, pods, irs, cm = _run(target, work)
    audit: AuditConfig | None = AuditConfig()
    if cm is None:
        notes.append(f"ConfigMap {config_namespace}/inferenceservice-config not readable: "
                     "the default audit caps apply")
    else:
        try:
            audit = parse_lifecycle_config((cm.get("data") or {}).get("lifecycle", ""),
                                           absent=UNCONFIGURED).audit
        except ConfigError as exc:
            notes.append(f"the lifecycle block of inferenceservice-config is invalid ({exc}): "
                         "the default audit caps apply")
    view, skipped = cluster_view_from_json(nodes, pods, irs, now=_now(), audit=audit,
                                           namespace=namespace)
    advice = advise(view, evolve(config, audit=audit))
    return evolve(advice, notes=(*advice.notes, *skipped, *notes))


def _request_move(target: Target, rec: Recommendation) -> str:
    """Write the migration request for one recommended move; its request UUID."""
    here = Target(target.kubeconfig_flag, target.context, rec.instance.namespace)
    ir = _read(here, rec.instance.replica, None)
    status = _status(ir)
    conflict = out.migration_conflict(ir, status, rec.instance.index)
    if conflict is not None:
        _fail(f"{_ref(ir)}: {conflict}", EXIT_CONFLICT)
    request_uuid = str(uuid.uuid4())
    value = move_request(rec, component=str((ir.get("spec") or {}).get("component") or ""),
                         tool="kubectl ome advise",
                         requested_by=os.environ.get("USER") or "kubectl-ome-advise",
                         requested_at=_now())
    key = out.ANNOTATION_MIGRATION_PREFIX + request_uuid
    _patch(here, ir, {"metadata": {"annotations": {key: value}}})
    return request_uuid


def _wait_migration(target: Target, rec: Recommendation, request_uuid: str,
                    wait_seconds: int) -> str:
    """Poll the replica until the migration ends; its final phase."""
    here = Target(target.kubeconfig_flag, target.context, rec.instance.namespace)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        status = _status(_read(here, rec.instance.replica, None))
        for m in status.migrations:
            if m.request_uuid == request_uuid and m.phase not in out.ACTIVE_MIGRATION_PHASES:
                return m.phase
        time.sleep(2)
    raise CliError(f"migration {request_uuid} of {rec.instance} did not finish within "
                   f"{wait_seconds}s: see `kubectl ome migration status "
                   f"{rec.instance.replica} -n {rec.instance.namespace}`")


@click.command("advise")
@click.option("-A", "--all-namespaces", is_flag=True, help="Look at every namespace.")
@click.option("--apply", "apply_moves", is_flag=True,
              help="Request the moves (migration requests), one after another.")
@click.option("--max-moves", type=click.IntRange(1, 16), default=4, show_default=True,
              help="Most moves to consider for one pending gang.")
@click.option("--bad-gpu-condition", "bad", multiple=True,
              help="Node condition type that flags bad GPUs when True (repeatable).")
@click.option("--config-namespace", default="ome", show_default=True,
              help="Namespace of inferenceservice-config (its lifecycle.audit caps).")
@click.option("--wait", "wait_seconds", type=click.IntRange(10), default=900,
              show_default=True, help="With --apply: seconds to wait for each move.")
@_output
@_yes
@_connection
@click.pass_obj
def advise_cmd(target: Target, all_namespaces: bool, apply_moves: bool, max_moves: int,
               bad: tuple[str, ...], config_namespace: str, wait_seconds: int, output: str,
               yes: bool) -> None:
    """Recommend Instance moves that let pending gangs place or empty unsound nodes.

    With --apply: preview the migration requests, ask (unless --yes), then request the
    moves one at a time; after each, wait for it to finish and ask the advisor again,
    since the scheduler may not follow a hint.
    """
    namespace = None if all_namespaces else target.namespace
    config = AdvisorConfig(bad_gpu_conditions=bad, max_moves_per_gang=max_moves)
    advice = _advise_once(target, namespace, config_namespace, config)
    if output in ("json", "yaml"):
        _echo_doc(output, advice_json(advice))
    else:
        click.echo(format_advice(advice))
    if not apply_moves or not advice.recommendations:
        return
    click.echo("\n--apply will request these migrations, one after another:")
    for rec in advice.recommendations:
        click.echo(f"  {rec.instance.namespace}/{rec.instance.replica}: "
                   f"{out.ANNOTATION_MIGRATION_PREFIX}<uuid> = {move_line(rec)}")
    if not yes and not click.confirm("Apply?", default=False):
        raise CliError("not confirmed: nothing was changed")
    groups = {r.group for r in advice.recommendations}
    for _ in range(len(advice.recommendations) + 2):
        step = next((r for r in advice.recommendations if r.group in groups), None)
        if step is None:
            break
        rec = step
        request_uuid = _request_move(target, rec)
        click.echo(f"requested {request_uuid}: {move_line(rec)}")
        phase = _wait_migration(target, rec, request_uuid, wait_seconds)
        click.echo(f"migration {request_uuid}: {phase}")
        if phase != "Completed":
            _fail(f"migration {request_uuid} of {rec.instance} ended {phase}: stopping "
                  f"(see `kubectl ome migration status {rec.instance.replica} -n "
                  f"{rec.instance.namespace}`)", EXIT_CONFLICT)
        advice = _advise_once(target, namespace, config_namespace, config)
    click.echo("advise --apply: done")
