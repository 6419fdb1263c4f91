"""``kubectl ome runtime explain|effective|tree|history|sync``: the runtime behind an
InferenceService, as OME v1.3's plugin shows it (``runtime_output``,
``runtime_verbs_output``), and the alpha ``sync`` action that asks the manager to move a
managed pin to the runtime's live spec (annotation ``ome.io/runtime-sync``).

``sync`` follows OME's guarded-action contract for this verb: a refusal exits 1, the preview
goes to stderr, ``Confirm this exact action? [y/N]`` (``--yes`` skips it; also asked under
``--dry-run client``), then everything is read again and the write refused (exit 3) when
anything checked changed; the merge patch carries the resourceVersion read.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import click

from omenative_controller.cli import runtime_output as ro
from omenative_controller.cli import runtime_tree_output as rt
from omenative_controller.cli import runtime_verbs_output as rv
from omenative_controller.cli.kubectl_common import (
    EXIT_CONFLICT,
    CliError,
    Target,
    _connection,
    _echo_doc,
    _get_isvc,
    _now,
    _output_wide,
    _run,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    Resource,
)
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_controller.service_sources import (
    BASE_MODELS,
    CLUSTER_BASE_MODELS,
    CLUSTER_SERVING_RUNTIMES,
    SERVING_RUNTIMES,
)
from omenative_core.codec import CodecError
from omenative_core.service import InferenceService, ServingRuntime
from omenative_core.service.models import ModelRef, find_model
from omenative_core.service.runtime_pin import ANNOTATION_RUNTIME_SYNC, LABEL_RUNTIME_OF

_OME_NAMESPACE = click.option("--ome-namespace", default="ome", show_default=True,
                              help="Namespace where the OME control plane is installed.")


async def _list(kube: KubeClient, res: Resource, namespace: str | None,
                selector: str | None = None) -> list[JSON]:
    """Every object of ``res`` (none when its CRD is not installed), with its kind set."""
    try:
        page = await kube.list(res, namespace if res.namespaced else None,
                               label_selector=selector)
    except ApiError as exc:
        if exc.not_found:
            return []
        raise
    items = list(page.get("items") or ())
    for obj in items:
        obj.setdefault("kind", res.kind)
    return items


class Evidence:
    """What the runtime verbs read: the InferenceService, runtimes, models, revisions and
    (for ``sync``) the namespace's InferenceReplicas."""

    def __init__(self, isvc: JSON, runtimes: list[JSON], models: list[JSON],
                 revisions: list[JSON], replicas: list[JSON]) -> None:
        self.isvc = isvc
        self.runtimes = runtimes
        self.models = models
        self.revisions = revisions
        self.replicas = replicas

    def effective(self) -> ro.Effective:
        """The Live and Active views (a CliError when the InferenceService does not decode)."""
        try:
            return ro.effective(self.isvc, ro.decode_runtimes(self.runtimes),
                                ro.decode_models(self.models), self.revisions)
        except (CodecError, ValueError) as exc:
            raise CliError(f"collect runtime evidence: {exc}") from None

    def active_runtime(self, rep: ro.Effective) -> ServingRuntime | None:
        """The runtime the InferenceService is meant to run: the pinned revision's spec
        over the live runtime's metadata, else the live (merged) runtime."""
        live = rep.live_runtime
        if not rep.active.revision or rep.active.state != "Available":
            return live
        rev = next((r for r in self.revisions
                    if r["metadata"].get("name") == rep.active.revision), None)
        if rev is None:
            return live
        spec = dict((rev.get("data") or {}).get("spec") or {})
        base = live.raw if live is not None else {
            "kind": rep.active.kind, "metadata": {"name": rep.active.name,
                                                  "namespace": rep.namespace}}
        return ServingRuntime({**base, "spec": spec})

    def fingerprint(self) -> tuple[Any, ...]:
        """resourceVersions of everything read: equal means nothing changed in between."""
        def rvs(objs: list[JSON]) -> tuple[tuple[str, str], ...]:
            return tuple(sorted((str(o["metadata"].get("name")),
                                 str(o["metadata"].get("resourceVersion"))) for o in objs))
        return (self.isvc["metadata"].get("resourceVersion"), rvs(self.runtimes),
                rvs(self.revisions), rvs(self.replicas))


async def collect_evidence(kube: KubeClient, target: Target, name: str, ome_ns: str, *,
                           replicas: bool = False) -> Evidence:
    """Read what the runtime (and autoscale) verbs judge: the InferenceService ``name``, the
    runtimes and models it can see, the runtime revisions in ``ome_ns`` and, with
    ``replicas``, the namespace's InferenceReplicas."""
    isvc = await _get_isvc(kube, target, name)
    ns = target.namespace
    runtimes = await _list(kube, SERVING_RUNTIMES, ns) + \
        await _list(kube, CLUSTER_SERVING_RUNTIMES, None)
    models = await _list(kube, BASE_MODELS, ns) + await _list(kube, CLUSTER_BASE_MODELS, None)
    revisions = await _list(kube, CONTROLLER_REVISIONS, ome_ns, LABEL_RUNTIME_OF)
    irs = await _list(kube, INFERENCE_REPLICAS, ns) if replicas else []
    return Evidence(isvc, runtimes, models, revisions, irs)


def _stamp() -> str:
    return _now().strftime("%Y-%m-%dT%H:%M:%SZ")


@click.group("runtime")
def runtime() -> None:
    """The serving runtime behind an InferenceService: selection, pin, revisions, sync."""


@runtime.command("effective")
@click.argument("name")
@_OME_NAMESPACE
@_output_wide
@_connection
@click.pass_obj
def effective_cmd(target: Target, name: str, ome_namespace: str, output: str) -> None:
    """Show the runtime an InferenceService uses (Live) and the one it is pinned to (Active)."""
    ev = _run(target, lambda kube: collect_evidence(kube, target, name, ome_namespace))
    rep = ev.effective()
    if output in ("json", "yaml"):
        _echo_doc(output, ro.effective_json(rep, _stamp()))
    else:
        click.echo(ro.effective_wide(rep) if output == "wide" else ro.effective_table(rep))


@runtime.command("history")
@click.argument("name")
@_OME_NAMESPACE
@_output_wide
@_connection
@click.pass_obj
def history_cmd(target: Target, name: str, ome_namespace: str, output: str) -> None:
    """List the revisions kept for an InferenceService's runtime, newest first."""
    ev = _run(target, lambda kube: collect_evidence(kube, target, name, ome_namespace))
    rep = ev.effective()
    rows = ro.history_rows(rep, ev.isvc, ev.revisions)
    if output in ("json", "yaml"):
        _echo_doc(output, ro.history_json(rep, rows, _stamp()))
    else:
        click.echo(ro.history_table(rows, rep.issues, wide=output == "wide"))


@runtime.command("tree")
@click.argument("name")
@click.option("--kind", "kind", default=None,
              help="Runtime kind: ServingRuntime or ClusterServingRuntime (auto-detected "
                   "when omitted).")
@_output_wide
@_connection
@click.pass_obj
def tree_cmd(target: Target, name: str, kind: str | None, output: str) -> None:
    """Show a runtime's inheritance chain, the runtimes that inherit from it and the
    InferenceServices that name them."""

    async def work(kube: KubeClient) -> rt.Tree:
        ns = target.namespace
        csrs = await _list(kube, CLUSTER_SERVING_RUNTIMES, None)
        local = await _list(kube, SERVING_RUNTIMES, ns)
        try:
            chosen = rt.find_target(name, kind, ns, ro.decode_runtimes(csrs + local))
        except rt.TreeError as exc:
            raise CliError(str(exc)) from None
        wide_scope = chosen.kind == "ClusterServingRuntime"
        srs = await _list(kube, SERVING_RUNTIMES, None) if wide_scope else local
        isvcs = await _list(kube, INFERENCE_SERVICES, None if wide_scope else ns)
        scope, where = ("AllNamespaces", "") if wide_scope else ("Namespace", ns)
        cols = [rt.Collection("ClusterServingRuntime", "Cluster", "", len(csrs)),
                rt.Collection("ServingRuntime", scope, where, len(srs)),
                rt.Collection("InferenceService", scope, where, len(isvcs))]
        return rt.build_tree(chosen, ro.decode_runtimes(csrs + srs), isvcs, cols)

    tree = _run(target, work)
    if output in ("json", "yaml"):
        _echo_doc(output, rt.tree_json(tree, _stamp()))
    else:
        click.echo(rt.tree_table(tree, wide=output == "wide"))


@runtime.command("explain")
@click.option("--model", "model_name", default=None,
              help="Explain runtime selection for this BaseModel/ClusterBaseModel.")
@click.option("--isvc", "isvc_name", default=None,
              help="Explain runtime selection for this InferenceService's model.")
@click.option("--with-effective", is_flag=True,
              help="Append the effective context for --isvc (what `runtime effective` "
                   "shows, with the inheritance chain).")
@_OME_NAMESPACE
@_connection
@click.pass_obj
def explain_cmd(target: Target, model_name: str | None, isvc_name: str | None,
                with_effective: bool, ome_namespace: str) -> None:
    """List the runtimes OME can choose for a model, in rank order, and why others don't
    qualify."""
    if (model_name is None) == (isvc_name is None):
        raise CliError("exactly one of --model or --isvc is required")
    if with_effective and isvc_name is None:
        raise CliError("--with-effective requires --isvc")

    async def work(kube: KubeClient) -> tuple[JSON | None, list[JSON], list[JSON]]:
        isvc = await _get_isvc(kube, target, isvc_name) if isvc_name else None
        ns = target.namespace
        runtimes = await _list(kube, SERVING_RUNTIMES, ns) + \
            await _list(kube, CLUSTER_SERVING_RUNTIMES, None)
        models = await _list(kube, BASE_MODELS, ns) + \
            await _list(kube, CLUSTER_BASE_MODELS, None)
        return isvc, runtimes, models

    isvc_obj, runtime_objs, model_objs = _run(target, work)
    isvc = _explain_subject(target, isvc_obj)
    wanted = model_name or str((isvc.spec.get("model") or {}).get("name") or "")
    if not wanted:
        raise CliError(f'InferenceService "{isvc_name}" has no spec.model; pass --model instead')
    model = find_model(ModelRef(name=wanted), target.namespace, ro.decode_models(model_objs))
    if model is None:
        raise CliError(f'clusterbasemodels.ome.io "{wanted}" not found')
    runtimes = ro.decode_runtimes(runtime_objs)
    text, count = rv.explain_table(isvc, model, runtimes)
    if isvc_obj is not None and isvc.runtime_ref is not None:
        click.echo("Note: spec.runtime is explicit; automatic selection below is hypothetical.",
                   err=True)
    if count == 0 and not with_effective:
        click.echo("No serving runtimes found in the selected namespace or at cluster scope.",
                   err=True)
        return
    if count == 0:
        click.echo("No serving runtimes found for selector.", err=True)
    else:
        click.echo(text)
    if with_effective:
        assert isvc_name is not None
        click.echo("" if count == 0 else "\n", nl=False)
        click.echo(rv.effective_context(_context_report(target, isvc_name, ome_namespace),
                                        runtimes))


def _context_report(target: Target, name: str, ome_ns: str) -> ro.Effective | None:
    """The ``effective`` report of ``name``, collected again on its own (None when it
    cannot be: the context then says EVIDENCE Unavailable)."""
    try:
        return _run(target, lambda kube: collect_evidence(kube, target, name, ome_ns)) \
            .effective()
    except CliError:
        return None


def _explain_subject(target: Target, isvc_obj: JSON | None) -> InferenceService:
    """The InferenceService to match runtimes against (a bare one in the namespace for
    ``--model``)."""
    if isvc_obj is None:
        return InferenceService({"metadata": {"name": "-", "namespace": target.namespace},
                                 "spec": {}})
    try:
        return ro.decode_isvc(isvc_obj)[0]
    except (CodecError, ValueError) as exc:
        raise CliError(f"InferenceService {isvc_obj['metadata'].get('name')}: {exc}") from None


@runtime.command("sync")
@click.argument("name")
@click.option("--dry-run", type=click.Choice(["none", "client", "server"]), default="none",
              show_default=True, help="Dry-run: none, client or server.")
@click.option("--yes", "-y", is_flag=True, help="Confirm the exact preview without a prompt.")
@_OME_NAMESPACE
@_output_wide
@_connection
@click.pass_obj
def sync_cmd(target: Target, name: str, dry_run: str, yes: bool, ome_namespace: str,
             output: str) -> None:
    """(alpha) Ask the controller to move a pinned InferenceService to its runtime's current
    spec (``ome.io/runtime-sync``)."""
    ev = _run(target, lambda kube: collect_evidence(kube, target, name, ome_namespace,
                                                    replicas=True))
    rep = ev.effective()
    refusal = rv.sync_refusal(rep, ev.isvc, ev.replicas)
    if refusal is not None:
        raise CliError(refusal)
    request_id = str(uuid.uuid4())
    exists = any(r["metadata"].get("name") == rv.predicted_revision(rep) for r in ev.revisions)
    click.echo(rv.sync_preview(rep, ev.isvc, context=target.context or "", dry_run=dry_run,
                               request_id=request_id, target_exists=exists), err=True)
    if not yes:
        try:
            ok = click.confirm("Confirm this exact action?", default=False, err=True)
        except click.Abort:
            ok = False
        if not ok:
            raise CliError("action not confirmed; noninteractive input requires --yes")
    _send(target, name, ome_namespace, ev, dry_run, request_id)
    uid = str(ev.isvc["metadata"].get("uid"))
    context = f" --context={target.context}" if target.context else ""
    follow = (f"kubectl ome runtime effective {name} -n {target.namespace}{context} "
              f"--ome-namespace={ome_namespace}")
    result = rv.action_result_json(rep, uid=uid, dry_run=dry_run, request_id=request_id,
                                   follow_up=follow)
    if output in ("json", "yaml"):
        _echo_doc(output, result)
    else:
        click.echo(rv.action_result_table(result))


def _send(target: Target, name: str, ome_ns: str, before: Evidence, dry_run: str,
          request_id: str) -> None:
    """Read everything again, refuse (exit 3) if anything checked changed, then write the
    token (not under ``--dry-run client``)."""

    async def work(kube: KubeClient) -> None:
        again = await collect_evidence(kube, target, name, ome_ns, replicas=True)
        if again.fingerprint() != before.fingerprint() or \
                rv.sync_refusal(again.effective(), again.isvc, again.replicas) is not None:
            raise CliError("runtime sync safety snapshot changed; refresh runtime effective "
                           "and retry explicitly", EXIT_CONFLICT)
        if dry_run == "client":
            return
        patch: Mapping[str, Any] = {"metadata": {
            "resourceVersion": before.isvc["metadata"].get("resourceVersion"),
            "annotations": {ANNOTATION_RUNTIME_SYNC: rv.TOKEN_PREFIX + request_id}}}
        try:
            await kube.patch(INFERENCE_SERVICES, name, dict(patch), target.namespace,
                             dry_run=dry_run == "server")
        except ApiError as exc:
            if exc.conflict:
                raise CliError("guarded annotation patch rejected; refresh runtime effective "
                               "and retry explicitly", EXIT_CONFLICT) from None
            raise

    _run(target, work)
