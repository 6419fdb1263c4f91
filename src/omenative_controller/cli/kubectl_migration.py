"""``kubectl ome migration`` (status, start) and ``kubectl ome scale``: the verbs that move
or add Instances, each refused while other migration or rollout work is in progress.
"""

from __future__ import annotations

import os
import uuid

import click

from omenative_controller.cli import history_output as hist
from omenative_controller.cli import ome_output as out
from omenative_controller.cli.kubectl_common import (
    EXIT_CONFLICT,
    Target,
    _component,
    _confirm,
    _connection,
    _echo_doc,
    _fail,
    _find_isvc,
    _get_replica,
    _guarded,
    _kept,
    _now,
    _output,
    _output_wide,
    _patch,
    _projected_note,
    _read,
    _read_guarded,
    _ref,
    _run,
    _status,
    get_or_none,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    INFERENCE_REPLICAS,
    PODS,
)

# ------------------------------------------------------------------ migration


@click.group()
def migration() -> None:
    """Manual migrations: start one, show their progress."""


@migration.command("status")
@click.argument("name")
@_component
@_output
@_connection
@click.pass_obj
def migration_status(target: Target, name: str, component: str | None, output: str) -> None:
    """Migration records (phase, source, surge, result) and requests not yet accepted."""
    ir = _read(target, name, component)
    status = _status(ir)
    pending = out.pending_migration_requests(ir)
    if output in ("json", "yaml"):
        _echo_doc(output, {"name": ir["metadata"]["name"], **out.migrations_json(status, pending)})
        return
    click.echo(out.format_migrations(status, pending, _now()))


@migration.command("history")
@click.argument("name")
@_component
@_output_wide
@_connection
@click.pass_obj
def migration_history(target: Target, name: str, component: str | None, output: str) -> None:
    """The service's migrations: live records (AUTH) and the audit ConfigMap (AUDIT)."""

    async def work(kube: KubeClient) -> tuple[list[JSON], JSON | None]:
        page = await kube.list(INFERENCE_REPLICAS, target.namespace)
        irs = [ir for ir in page.get("items") or ()
               if ((ir.get("spec") or {}).get("parentRef") or {}).get("name") == name]
        audit = await get_or_none(kube, CONFIG_MAPS, f"{name}-ome-migration-audit",
                                  target.namespace)
        return irs, audit

    irs, audit = _run(target, work)
    records = [r for ir in irs
               for r in hist.auth_records(str((ir.get("spec") or {}).get("component") or ""),
                                          _status(ir))]
    audited, issues = hist.audit_records(audit)
    records += audited
    if component is not None:
        records = [r for r in records if r.component == component]
    if output in ("json", "yaml"):
        _echo_doc(output, hist.history_json(target.namespace, name, records, issues,
                                            audit is not None))
        return
    click.echo(hist.format_history_table(records, issues, wide=output == "wide"))


@migration.command("start")
@click.argument("name")
@click.option("--instance", "index", type=int, required=True, help="Instance index to move.")
@click.option("--from-node", default=None,
              help="Node to move off (default: the node all its pods are on, if one).")
@click.option("--hint-node", "hints", multiple=True,
              help=f"Preferred target node (repeatable, at most {out.MAX_HINT_NODES}).")
@click.option("--reason", default="manual migration (kubectl ome)", show_default=True)
@click.option("--requested-by", default=None, help="Who asks (default: $USER).")
@click.option("--request-id", default=None, help="Request UUID (default: a new one).")
@_component
@_guarded
@_connection
@click.pass_obj
def migration_start(target: Target, name: str, index: int, from_node: str | None,
                    hints: tuple[str, ...], reason: str, requested_by: str | None,
                    request_id: str | None, component: str | None, yes: bool) -> None:
    """Move one Instance: a replacement comes up first, then the source drains."""
    if len(hints) > out.MAX_HINT_NODES:
        raise click.UsageError(f"at most {out.MAX_HINT_NODES} --hint-node values "
                               f"(got {len(hints)})")
    try:
        request_uuid = str(uuid.UUID(request_id)) if request_id else \
            _kept("request-uuid", lambda: str(uuid.uuid4()))
    except ValueError:
        raise click.BadParameter(f"{request_id!r} is not a UUID",
                                 param_hint="--request-id") from None

    async def work(kube: KubeClient) -> tuple[JSON, list[JSON]]:
        ir = await _get_replica(kube, target, name, component)
        selector = f"ome.io/inferencereplica={ir['metadata']['name']}," \
                   f"ome.io/instance-index={index}"
        page = await kube.list(PODS, target.namespace, label_selector=selector)
        return ir, list(page.get("items") or ())

    ir, pods = _run(target, work)
    status = _status(ir)
    spec = ir.get("spec") or {}
    conflict = out.migration_conflict(ir, status, index)
    mode = ((spec.get("lifecycle") or {}).get("migrationPolicy") or {}).get("mode")
    if conflict is None and mode == "Never":
        conflict = "lifecycle.migrationPolicy.mode is Never: migrations are disabled"
    key = out.ANNOTATION_MIGRATION_PREFIX + request_uuid
    if conflict is None and key in ((ir.get("metadata") or {}).get("annotations") or {}):
        conflict = f"request {request_uuid} already exists"
    if conflict is None and any(m.request_uuid == request_uuid for m in status.migrations):
        conflict = f"request {request_uuid} was already recorded"
    if conflict is not None:
        _fail(f"{_ref(ir)}: {conflict}", EXIT_CONFLICT)
    if from_node is None:
        nodes = {str((p.get("spec") or {}).get("nodeName") or "") for p in pods
                 if not (p.get("metadata") or {}).get("deletionTimestamp")}
        nodes.discard("")
        from_node = nodes.pop() if len(nodes) == 1 else None
    value = out.migration_request(
        instance=index, component=str(spec.get("component") or ""), from_node=from_node,
        hint_nodes=hints, reason=reason,
        requested_by=requested_by or os.environ.get("USER") or "kubectl-ome",
        requested_at=_kept("requested-at", _now))
    notes = ["the InferenceReplica is paused: the migration waits for resume"] \
        if spec.get("paused") else []
    _confirm(ir, [f"metadata.annotations[{key}] = {value}"], yes, notes)
    _patch(target, ir, {"metadata": {"annotations": {key: value}}})
    click.echo(f"{_ref(ir)}: migration {request_uuid} of Instance {index} requested")


# ------------------------------------------------------------------ scale


@click.command("scale")
@click.argument("name")
@click.argument("replicas_arg", metavar="[REPLICAS]", type=int, required=False)
@click.option("--replicas", type=int, default=None,
              help="Instance count to ask for (OME's spelling; REPLICAS is the same).")
@click.option("--override-autoscaler", is_flag=True,
              help="Scale even though spec.autoscaler manages the count.")
@_component
@_guarded
@_connection
@click.pass_obj
def scale(target: Target, name: str, replicas_arg: int | None, replicas: int | None,
          override_autoscaler: bool, component: str | None, yes: bool) -> None:
    """Set the Instance count through the scale subresource (transient under an autoscaler).

    As OME: ``kubectl ome scale ISVC --component engine --replicas 3``; refused outside the
    component's minReplicas..maxReplicas."""
    count = _replicas_wanted(replicas_arg, replicas)
    ir = _read_guarded(target, name, component, "scale")
    status = _status(ir)
    refusal = out.scale_refusal(ir, status, count)
    spec = ir.get("spec") or {}
    if refusal is None and spec.get("autoscaler") and not override_autoscaler:
        refusal = "spec.autoscaler manages the count: pass --override-autoscaler to scale anyway"
    if refusal is None:
        refusal = out.scale_bounds_refusal(_parent_component(target, ir), count)
    if refusal is not None:
        _fail(f"{_ref(ir)}: {refusal}", EXIT_CONFLICT)
    current = spec.get("replicas")
    if current == count:
        click.echo(f"{_ref(ir)} already has spec.replicas {count}: nothing to do")
        return
    _confirm(ir, [f"scale: spec.replicas {current if current is not None else '(unset: 1)'} "
                  f"-> {count}"], yes, _projected_note(ir))
    _patch(target, ir, {"spec": {"replicas": count}}, subresource="scale")
    click.echo(f"{_ref(ir)} scaled to {count}")


def _replicas_wanted(positional: int | None, flag: int | None) -> int:
    """The count from ``REPLICAS`` or ``--replicas`` (exactly one, or both equal)."""
    if positional is None and flag is None:
        raise click.UsageError("give the count: --replicas N (or REPLICAS)")
    if positional is not None and flag is not None and positional != flag:
        raise click.UsageError(f"REPLICAS {positional} and --replicas {flag} disagree")
    return flag if flag is not None else int(positional or 0)


def _parent_component(target: Target, ir: JSON) -> JSON | None:
    """The parent InferenceService's spec of this replica's component (None: standalone)."""
    spec = ir.get("spec") or {}
    parent = (spec.get("parentRef") or {}).get("name")
    comp = spec.get("component")
    if not parent or not comp:
        return None
    isvc = _run(target, lambda kube: _find_isvc(kube, target, str(parent)))
    found = ((isvc or {}).get("spec") or {}).get(str(comp))
    return found if isinstance(found, dict) else None
