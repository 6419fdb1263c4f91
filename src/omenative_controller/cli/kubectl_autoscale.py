"""``kubectl ome autoscale status|explain``: how each component of an InferenceService scales,
as OME v1.3's plugin shows it (``autoscale_output``, ``autoscale_explain``). Both only read.

``status`` judges ``status.components.<c>.autoscaler`` / ``.scaleTargetRef``; for a component
whose status carries none it also reads the HPA ``<isvc>-<c>`` or the ScaledObject
``scaledobject-<isvc>-<c>`` (the SCALER rows), so the autoscaler the manager made is shown.
``--live-scale`` reads the component's InferenceReplica, ``--live-scaler`` the HPA or
ScaledObject the status names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import click
from attrs import evolve

from omenative_controller.cli import autoscale_explain as ae
from omenative_controller.cli import autoscale_output as ao
from omenative_controller.cli import runtime_output as ro
from omenative_controller.cli.kubectl_common import (
    Target,
    _connection,
    _echo_doc,
    _get_isvc,
    _now,
    _output_wide,
    _run,
    get_or_none,
)
from omenative_controller.cli.kubectl_runtime import collect_evidence
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, Resource, resource_for

HPAS: Final = resource_for("autoscaling/v2", "HorizontalPodAutoscaler")
"""The HorizontalPodAutoscaler resource OME's HPA class makes."""
SCALED_OBJECTS: Final = Resource("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject")
"""KEDA's ScaledObject resource."""


def _stamp() -> str:
    return _now().strftime("%Y-%m-%dT%H:%M:%SZ")


async def _read(kube: KubeClient, res: Resource, name: str, namespace: str
                ) -> tuple[JSON | None, str]:
    """(the object or None, the evidence when the read failed: Forbidden/Unavailable)."""
    try:
        return await get_or_none(kube, res, name, namespace), ""
    except ApiError as exc:
        return None, "Forbidden" if exc.status in (401, 403) else "Unavailable"


async def _scaler_of(kube: KubeClient, namespace: str, target: str) -> ao.LiveScaler | None:
    """The HPA or ScaledObject OME's naming gives ``target`` (None: neither exists)."""
    for klass, res, name in (("HPA", HPAS, target),
                             ("KEDA", SCALED_OBJECTS, f"scaledobject-{target[-50:]}")):
        obj, error = await _read(kube, res, name, namespace)
        if obj is not None:
            return ao.live_scaler(klass, obj, error)
    return None


async def _status_reports(kube: KubeClient, target: Target, isvc: Mapping[str, Any],
                          live_scale: bool, live_scaler: bool
                          ) -> tuple[list[ao.ComponentReport], list[str]]:
    ns = target.namespace
    name = str(isvc["metadata"]["name"])
    raw = (isvc.get("status") or {}).get("components")
    components: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    unknown = sorted(str(k) for k in components if k not in ro.COMPONENTS)
    spec = isvc.get("spec") or {}
    out = []
    for comp in ro.COMPONENTS:
        if comp not in components and comp not in spec:
            continue
        body = components.get(comp)
        rep = ao.component_report(comp, body if isinstance(body, Mapping) else {}, ns)
        extra: dict[str, Any] = {}
        if rep.state == "NotReported":
            extra["scaler"] = await _scaler_of(kube, ns, f"{name}-{comp}")
        elif live_scaler:
            res = HPAS if rep.klass == "HPA" else SCALED_OBJECTS
            obj_name = rep.target_name if rep.klass == "HPA" else \
                f"scaledobject-{rep.target_name[-50:]}"
            obj, error = (await _read(kube, res, obj_name, ns)) \
                if rep.klass in ("HPA", "KEDA") and rep.target_name else (None, "")
            extra["scaler"] = ao.live_scaler(rep.klass, obj, error)
        if live_scale:
            ir, error = (await _read(kube, INFERENCE_REPLICAS, rep.target_name, ns)) \
                if rep.target_kind == "InferenceReplica" else (None, "")
            extra["live"] = ao.live_scale(rep, ir, error)
        out.append(evolve(rep, **extra))
    return out, unknown


@click.group("autoscale")
def autoscale() -> None:
    """How each component of an InferenceService scales (read only)."""


@autoscale.command("status")
@click.argument("name")
@click.option("--live-scale", is_flag=True,
              help="Compare the status counts with the component's InferenceReplica.")
@click.option("--live-scaler", is_flag=True,
              help="Inspect the HPA or KEDA ScaledObject the status names.")
@_output_wide
@_connection
@click.pass_obj
def status_cmd(target: Target, name: str, live_scale: bool, live_scaler: bool,
               output: str) -> None:
    """Show the autoscaling the status reports for each component."""

    async def work(kube: KubeClient) -> tuple[list[ao.ComponentReport], list[str]]:
        isvc = await _get_isvc(kube, target, name)
        return await _status_reports(kube, target, isvc, live_scale, live_scaler)

    components, unknown = _run(target, work)
    state = ao.service_state(components, unknown)
    if output in ("json", "yaml"):
        _echo_doc(output, ao.status_json(target.namespace, name, state, components,
                                         unknown, _stamp()))
    elif output == "wide":
        click.echo(ao.status_wide(state, components))
    else:
        click.echo(ao.status_table(state, components, unknown))


@autoscale.command("explain")
@click.argument("name")
@click.option("--ome-namespace", default="ome", show_default=True,
              help="Namespace where the OME control plane is installed.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table",
              show_default=True, help="Output format.")
@_connection
@click.pass_obj
def explain_cmd(target: Target, name: str, ome_namespace: str, output: str) -> None:
    """Work out which autoscaler each component should have and compare it with the status."""
    ev = _run(target, lambda kube: collect_evidence(kube, target, name, ome_namespace))
    rep = ev.effective()
    runtime = ev.active_runtime(rep)
    isvc = ro.decode_isvc(ev.isvc)[0]
    status = ev.isvc.get("status") or {}
    columns = [ae.expect(isvc, runtime, comp, status)
               for comp in ro.components_of(isvc, runtime)]
    service = ae.service_issues(rep.issues, rep.pin_state,
                                rep.pin_mode in ("ManagedPin", "ExplicitPin"))
    if output in ("json", "yaml"):
        _echo_doc(output, ae.explain_json(target.namespace, name, columns, _stamp(), service))
    else:
        click.echo(ae.explain_table(columns, service))
