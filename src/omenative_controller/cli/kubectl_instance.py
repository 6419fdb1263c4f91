"""``kubectl ome instance``: list, status, retry-blocks and release-held on an InferenceReplica.
"""

from __future__ import annotations

import click

from omenative_controller.cli import ome_output as out
from omenative_controller.cli.kubectl_common import (
    EXIT_CONFLICT,
    Target,
    _component,
    _confirm,
    _connection,
    _echo_doc,
    _fail,
    _get_replica,
    _guarded,
    _now,
    _output,
    _patch,
    _read,
    _ref,
    _run,
    _status,
)
from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, served_resources
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import (
    INFERENCE_REPLICAS,
    PODS,
)

# ------------------------------------------------------------------ instance


@click.group()
def instance() -> None:
    """Instances of an InferenceReplica: list, status, retry blocks, release a hold."""


async def _native_gang_api(kube: KubeClient) -> str:
    """The native gang API version the cluster serves, as the manager picks it ("": none)."""
    for resources in NATIVE_GANG_VERSIONS:
        group_version = resources[0].api_version
        served = await served_resources(kube, group_version)
        if isinstance(served, frozenset) and all(r.plural in served for r in resources):
            return group_version
    return ""


@instance.command("list")
@click.argument("name")
@_component
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]),
              default="table", show_default=True,
              help="Output format; wide adds each Instance's gang mechanism.")
@_connection
@click.pass_obj
def instance_list(target: Target, name: str, component: str | None, output: str) -> None:
    """One line per Instance: phase, pods, revisions, active ordinal, evidence.

    NAME is an InferenceService (all its OMENative components, as OME; ``--component``
    picks one) or an InferenceReplica."""

    async def work(kube: KubeClient) -> tuple[list[tuple[JSON, list[JSON]]], str]:
        if component is None:
            page = await kube.list(INFERENCE_REPLICAS, target.namespace)
            irs = sorted((ir for ir in page.get("items") or ()
                          if ((ir.get("spec") or {}).get("parentRef") or {}).get("name")
                          == name), key=_component_order)
        else:
            irs = []
        if not irs:
            irs = [await _get_replica(kube, target, name, component)]
        found = []
        for ir in irs:
            pods: list[JSON] = []
            if output == "wide":
                selector = f"ome.io/inferencereplica={ir['metadata']['name']}"
                page = await kube.list(PODS, target.namespace, label_selector=selector)
                pods = list(page.get("items") or ())
            found.append((ir, pods))
        return found, (await _native_gang_api(kube) if output == "wide" else "")

    found, native_api = _run(target, work)
    parts = [(str((ir.get("spec") or {}).get("component") or ""), _status(ir), ir, pods)
             for ir, pods in found]
    if output in ("json", "yaml"):
        listed = [{"name": ir["metadata"]["name"], "component": comp,
                   "instances": [out.instance_json(r, comp) for r in status.instances]}
                  for comp, status, ir, _ in parts]
        _echo_doc(output, listed[0] if len(listed) == 1 else {"name": name,
                                                              "components": listed})
        return
    wide = output == "wide"
    click.echo(out.format_components_table(
        [(comp, status, out.gang_by_instance(pods, native_api) if wide else None)
         for comp, status, _, pods in parts], wide=wide))


def _component_order(ir: JSON) -> int:
    """engine, decoder, router, then anything else."""
    order = ("engine", "decoder", "router")
    comp = (ir.get("spec") or {}).get("component")
    return order.index(comp) if comp in order else len(order)


@instance.command("status")
@click.argument("name")
@click.argument("index", type=int)
@_component
@_output
@_connection
@click.pass_obj
def instance_status(target: Target, name: str, index: int, component: str | None,
                    output: str) -> None:
    """One Instance in detail: operation, deadline, last failure, conditions, pods."""

    async def work(kube: KubeClient) -> tuple[JSON, list[JSON]]:
        ir = await _get_replica(kube, target, name, component)
        selector = f"ome.io/inferencereplica={ir['metadata']['name']}," \
                   f"ome.io/instance-index={index}"
        page = await kube.list(PODS, target.namespace, label_selector=selector)
        return ir, list(page.get("items") or ())

    ir, pods = _run(target, work)
    status = _status(ir)
    row = next((r for r in status.instances if r.index == index), None)
    if row is None:
        known = ", ".join(str(r.index) for r in status.instances) or "none"
        _fail(f"{_ref(ir)} has no Instance {index} (Instances: {known})")
    comp = str((ir.get("spec") or {}).get("component") or "")
    if output in ("json", "yaml"):
        _echo_doc(output, {"name": ir["metadata"]["name"],
                           "instance": out.instance_json(row, comp),
                           "pods": [_pod_json(p) for p in pods]})
        return
    click.echo(out.format_instance_detail(ir["metadata"]["name"], comp, row, pods, _now()))


def _pod_json(pod: JSON) -> JSON:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    return {"name": meta.get("name"), "phase": status.get("phase"),
            "terminating": bool(meta.get("deletionTimestamp")),
            "node": (pod.get("spec") or {}).get("nodeName"),
            "ready": conds.get("Ready"), "serving": conds.get("ome.io/serving"),
            "revisionHash": (meta.get("labels") or {}).get("ome.io/revision-hash")}


@instance.command("retry-blocks")
@click.argument("name")
@_component
@_output
@_connection
@click.pass_obj
def instance_retry_blocks(target: Target, name: str, component: str | None,
                          output: str) -> None:
    """Per-revision retry authority: BACKOFF, RUNNING or HELD."""
    ir = _read(target, name, component)
    status = _status(ir)
    if output in ("json", "yaml"):
        _echo_doc(output, {"name": ir["metadata"]["name"],
                           "retryBlocks": out.retry_blocks_json(status)})
        return
    click.echo(out.format_retry_blocks(status, _now()))


@instance.command("release-held")
@click.argument("name")
@click.option("--revision", required=True, help="Held revision: full name or hash.")
@_component
@_guarded
@_connection
@click.pass_obj
def instance_release_held(target: Target, name: str, revision: str, component: str | None,
                          yes: bool) -> None:
    """Give a Held revision another try (sets ome.io/release-held-revision)."""
    ir = _read(target, name, component)
    status = _status(ir)
    matches = out.held_revision_match(status, revision)
    if not matches:
        held = [b.target_revision for b in status.retry_blocks if b.state == "Held"]
        _fail(f"{_ref(ir)}: no Held revision matches {revision!r} (held: "
              f"{', '.join(held) or 'none'})", EXIT_CONFLICT)
    _confirm(ir, [f"metadata.annotations[{out.ANNOTATION_RELEASE_HELD}] = {revision!r} "
                  f"(releases {', '.join(matches)})"], yes)
    _patch(target, ir, {"metadata": {"annotations": {out.ANNOTATION_RELEASE_HELD: revision}}})
    click.echo(f"{_ref(ir)}: release of {', '.join(matches)} requested")
