"""``kubectl ome get RESOURCE [NAME]``: OME's model-centric tables for InferenceServices,
InferenceReplicas (with PARENT) and serving runtimes (merged view ``runtimes``)."""

from __future__ import annotations

import click

from omenative_controller.cli import get_output as go
from omenative_controller.cli.kubectl_common import (
    Target,
    _connection,
    _echo_doc,
    _fail,
    _now,
    _output_wide,
    _run,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, Resource
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_controller.service_sources import CLUSTER_SERVING_RUNTIMES, SERVING_RUNTIMES

_SOURCES: dict[str, tuple[tuple[Resource, bool], ...]] = {
    "inferenceservices": ((INFERENCE_SERVICES, True),),
    "inferencereplicas": ((INFERENCE_REPLICAS, True),),
    "runtimes": ((SERVING_RUNTIMES, True), (CLUSTER_SERVING_RUNTIMES, False)),
    "servingruntimes": ((SERVING_RUNTIMES, True),),
    "clusterservingruntimes": ((CLUSTER_SERVING_RUNTIMES, False),),
}
"""Per resource: what to read, and whether it is namespaced."""


async def _read(kube: KubeClient, kind: str, name: str | None, namespace: str | None,
                selector: str | None) -> list[JSON]:
    found: list[JSON] = []
    for res, namespaced in _SOURCES[kind]:
        ns = namespace if namespaced else None
        if name is not None:
            try:
                obj = await kube.get(res, name, ns)
            except ApiError as exc:
                if exc.not_found:
                    continue
                raise
            obj.setdefault("kind", res.kind)
            obj.setdefault("apiVersion", res.api_version)
            return [obj]
        page = await kube.list(res, ns, label_selector=selector)
        for obj in page.get("items") or ():
            obj.setdefault("kind", res.kind)
            obj.setdefault("apiVersion", res.api_version)
            found.append(obj)
    return found


@click.command("get")
@click.argument("resource")
@click.argument("name", required=False)
@click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")
@click.option("-l", "--selector", default=None, help="Label selector to filter on.")
@_output_wide
@_connection
@click.pass_obj
def get_cmd(target: Target, resource: str, name: str | None, all_namespaces: bool,
            selector: str | None, output: str) -> None:
    """List OME resources (or show one) with OME's columns."""
    kind = go.kind_of(resource)
    if kind is None:
        raise click.UsageError(f"resource {resource!r} is not one of "
                               f"{', '.join(go.KINDS)} (or their short names)")
    if name is not None and (all_namespaces or selector):
        raise click.UsageError("a NAME cannot be combined with -A or -l")
    namespace = None if all_namespaces else target.namespace
    objects = _run(target, lambda kube: _read(kube, kind, name, namespace, selector))
    if name is not None and not objects:
        _fail(f"{kind} {name!r} not found in namespace {target.namespace}")
    if output in ("json", "yaml"):
        _echo_doc(output, objects[0] if name is not None else
                  {"apiVersion": "v1", "kind": "List", "items": objects})
        return
    click.echo(go.format_get(kind, objects, _now(), wide=output == "wide",
                             all_namespaces=all_namespaces))
