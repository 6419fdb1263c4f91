"""``kubectl-ome``: a kubectl plugin to inspect and steer OMENative InferenceReplicas and
the rollout groups of InferenceServices.

    kubectl ome instance list llama --component engine
    kubectl ome rollout pause llama-engine --yes
    kubectl ome rollout explain llama
    kubectl ome rollout promote llama --yes
    kubectl ome migration start llama-engine --instance 0 --yes
    kubectl ome advise -A
    kubectl ome handover llama

Reads print a table (or ``-o json``). Every write shows what will change on which object,
asks ``[y/N]`` unless ``--yes`` is given, and carries the resourceVersion it read, so a
concurrent change makes it fail instead of overwriting. Exit codes: 0 done (or nothing to
do), 1 an error or a write not confirmed, 2 bad usage, 3 refused: a precondition does not
hold or the object changed while we looked at it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import yaml
from attrs import evolve

from omenative_controller.cli import ome_output as out
from omenative_controller.cli.advise_output import (
    advice_json,
    format_advice,
    move_line,
    move_request,
)
from omenative_controller.cli.handover_output import (
    format_handover,
    handover_json,
    handover_rows,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    NODES,
    PODS,
    Resource,
)
from omenative_controller.lws_handover import LEADER_WORKER_SETS
from omenative_core.advisor import (
    Advice,
    AdvisorConfig,
    Recommendation,
    advise,
    cluster_view_from_json,
)
from omenative_core.codec import CodecError
from omenative_core.labels import LABEL_REPLICA
from omenative_core.model.config import AuditConfig, ConfigError, parse_lifecycle_config
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.rollout import RolloutState, RolloutStateError
from omenative_core.service.handover import lws_name

__all__ = ["BUDGET_SECONDS", "EXIT_CONFLICT", "EXIT_ERROR", "CliError", "main"]

T = TypeVar("T")

EXIT_ERROR = 1
"""An error (API, kubeconfig, not found) or a write that was not confirmed."""
EXIT_CONFLICT = 3
"""Refused: a precondition does not hold, or the object changed since it was read."""
BUDGET_SECONDS = 45.0
"""Time allowed for the API calls of one step (a read, or a write)."""
INFERENCE_SERVICES = Resource("ome.io", "v1beta1", "inferenceservices", "InferenceService")
"""OME's InferenceService (the rollout-group verbs read and annotate it)."""


class CliError(Exception):
    """An error to report as one line on stderr with an exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# ---------------------------------------------------------------------------- connection


class Target:
    """Where the command acts: kubeconfig, context and namespace (resolved on first use).

    The connection flags are accepted before the subcommand and after it
    (``kubectl ome instance list NAME -n NS``); the later one wins.
    """

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 namespace: str | None = None) -> None:
        self.kubeconfig_flag = kubeconfig
        self.context = context
        self.namespace_flag = namespace

    @property
    def kubeconfig(self) -> str | None:
        """The kubeconfig file in use (None: in-cluster or the client's default)."""
        return _kubeconfig_path(self.kubeconfig_flag)

    @property
    def namespace(self) -> str:
        """``-n``, else the context's namespace, else ``default``."""
        return self.namespace_flag or _context_namespace(self.kubeconfig, self.context)


def _kubeconfig_path(flag: str | None) -> str | None:
    if flag:
        return flag
    env = os.environ.get("KUBECONFIG")
    if env:
        first = next((p for p in env.split(os.pathsep) if p), None)
        if first:
            return first
    default = Path.home() / ".kube" / "config"
    return str(default) if default.is_file() else None


def _context_namespace(path: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context (``default`` when it names none)."""
    if path is None:
        sa = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        try:
            return sa.read_text().strip() or "default"
        except OSError:
            return "default"
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"cannot read kubeconfig {path}: {exc}") from None
    if not isinstance(data, dict):
        raise CliError(f"kubeconfig {path} is not a mapping")
    name = context or data.get("current-context")
    for entry in data.get("contexts") or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            ns = (entry.get("context") or {}).get("namespace")
            return str(ns) if ns else "default"
    if context:
        raise CliError(f"context {context!r} not found in kubeconfig {path}")
    return "default"


def _run(target: Target, work: Callable[[KubeClient], Awaitable[T]]) -> T:
    """Open a client, run ``work`` within the budget, close; API trouble is a CliError."""

    path = target.kubeconfig
    if path is not None and not Path(path).is_file():
        raise CliError(f"kubeconfig {path} not found")

    async def main() -> T:
        try:
            kube = await KubeClient.connect(path, context=target.context, qps=0,
                                            burst=1, timeout=BUDGET_SECONDS)
        except CliError:
            raise
        except Exception as exc:
            raise CliError(f"cannot load the cluster configuration: {exc}") from None
        try:
            return await asyncio.wait_for(work(kube), BUDGET_SECONDS)
        finally:
            await kube.close()

    try:
        return asyncio.run(main())
    except TimeoutError:
        raise CliError(f"no answer from the API server within {BUDGET_SECONDS:.0f}s") from None
    except ApiError as exc:
        raise CliError(_api_message(exc), EXIT_CONFLICT if exc.conflict else EXIT_ERROR) \
            from None


def _api_message(exc: ApiError) -> str:
    if exc.conflict:
        return ("the object changed since it was read (resourceVersion conflict); nothing "
                "was written, run the command again")
    if exc.status == 0:
        return f"cannot reach the API server: {exc.message}"
    text = exc.message or exc.reason
    return f"API server refused ({exc.status} {exc.reason}): {text}"


async def _get_replica(kube: KubeClient, target: Target, name: str,
                       component: str | None) -> JSON:
    """The InferenceReplica: ``{name}-{component}`` when a component is given, else ``name``."""
    candidates = [name]
    if component and not name.endswith(f"-{component}"):
        candidates = [f"{name}-{component}", name]
    for cand in candidates:
        try:
            ir = await kube.get(INFERENCE_REPLICAS, cand, target.namespace)
        except ApiError as exc:
            if exc.not_found:
                continue
            raise
        if component and (ir.get("spec") or {}).get("component") != component:
            continue
        return ir
    tried = " or ".join(candidates)
    what = f" with component {component}" if component else ""
    raise CliError(f"no InferenceReplica {tried}{what} in namespace {target.namespace}")


def _status(ir: JSON) -> InferenceReplicaStatus:
    try:
        return out.decode_status(ir)
    except CodecError as exc:
        raise CliError(f"cannot decode the status of {_ref(ir)}: {exc}") from None


def _ref(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind") or "InferenceReplica").lower()
    return f"{kind} {meta.get('namespace', '?')}/{meta.get('name', '?')}"


def _now() -> datetime:
    return datetime.now(UTC)


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=False))


# ---------------------------------------------------------------------------- writes


def _confirm(ir: JSON, changes: list[str], yes: bool, notes: list[str] | None = None) -> None:
    """Show what will change on which object; unless ``yes``, ask [y/N]."""
    rv = (ir.get("metadata") or {}).get("resourceVersion", "?")
    click.echo(f"{_ref(ir)} (resourceVersion {rv}) will change:")
    for line in changes:
        click.echo(f"  {line}")
    for note in notes or ():
        click.echo(f"note: {note}", err=True)
    if yes:
        return
    try:
        ok = click.confirm("Apply?", default=False)
    except click.Abort:
        ok = False
        click.echo("", err=True)
    if not ok:
        raise CliError("not confirmed: nothing was changed")


def _patch(target: Target, ir: JSON, patch: JSON, *, subresource: str | None = None,
           resource: Resource = INFERENCE_REPLICAS) -> JSON:
    """Merge patch carrying the resourceVersion read, so a concurrent change fails (exit 3)."""
    meta = ir.get("metadata") or {}
    body = dict(patch)
    body["metadata"] = {**(patch.get("metadata") or {}),
                        "resourceVersion": meta.get("resourceVersion")}
    name = str(meta.get("name"))

    async def work(kube: KubeClient) -> JSON:
        return await kube.patch(resource, name, body, target.namespace,
                                subresource=subresource)

    return _run(target, work)


def _projected_note(ir: JSON) -> list[str]:
    parent = ((ir.get("spec") or {}).get("parentRef") or {}).get("name")
    if not parent:
        return []
    return [f"projected from InferenceService {parent}: its controller owns this spec and may "
            "write it back"]


# ---------------------------------------------------------------------------- CLI


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    raise CliError(message, code)


_output = click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table",
                       show_default=True, help="Output format.")
_component = click.option("--component", default=None,
                          help="Component (engine/decoder/router): NAME is then an "
                               "InferenceService and the replica is NAME-COMPONENT.")
_yes = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


def _set(attr: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _: click.Parameter, value: Any) -> None:
        if value is not None:
            target = ctx.ensure_object(Target)
            setattr(target, attr, value)
    return callback


def _connection(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--kubeconfig``, ``--context`` and ``-n/--namespace`` on a command."""
    options = [
        click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
                     expose_value=False, callback=_set("kubeconfig_flag"),
                     help="Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)."),
        click.option("--context", default=None, expose_value=False, callback=_set("context"),
                     help="Kubeconfig context."),
        click.option("-n", "--namespace", default=None, expose_value=False,
                     callback=_set("namespace_flag"),
                     help="Namespace (default: the context's, else 'default')."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@_connection
def cli() -> None:
    """Inspect and steer OMENative InferenceReplicas (standalone or projected) and the
    rollout groups of InferenceServices."""


def _read(target: Target, name: str, component: str | None) -> JSON:
    return _run(target, lambda kube: _get_replica(kube, target, name, component))


def _read_guarded(target: Target, name: str, component: str | None, verb: str) -> JSON:
    """The replica, refused (exit 3) while its parent InferenceService carries
    ``ome.io/rollout-rollback`` (OME refuses pause and scale during a rollback)."""

    async def work(kube: KubeClient) -> tuple[JSON, JSON | None]:
        ir = await _get_replica(kube, target, name, component)
        parent = ((ir.get("spec") or {}).get("parentRef") or {}).get("name")
        return ir, (await _find_isvc(kube, target, str(parent)) if parent else None)

    ir, isvc = _run(target, work)
    value = None if isvc is None else out.rollback_requested(isvc)
    if value is not None:
        _fail(f"{_ref(ir)}: InferenceService {isvc and isvc['metadata']['name']} has "
              f"{out.ANNOTATION_ROLLBACK}={value}: {verb} is refused during a rollback",
              EXIT_CONFLICT)
    return ir


# ------------------------------------------------------------------ instance


@cli.group()
def instance() -> None:
    """Instances of an InferenceReplica: list, status, retry blocks, release a hold."""


@instance.command("list")
@click.argument("name")
@_component
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json"]), default="table",
              show_default=True, help="Output format; wide adds each Instance's gang mechanism.")
@_connection
@click.pass_obj
def instance_list(target: Target, name: str, component: str | None, output: str) -> None:
    """One line per Instance: phase, pods, revisions, active ordinal, evidence."""

    async def work(kube: KubeClient) -> tuple[JSON, list[JSON]]:
        ir = await _get_replica(kube, target, name, component)
        if output != "wide":
            return ir, []
        selector = f"ome.io/inferencereplica={ir['metadata']['name']}"
        page = await kube.list(PODS, target.namespace, label_selector=selector)
        return ir, list(page.get("items") or ())

    ir, pods = _run(target, work)
    status = _status(ir)
    comp = str((ir.get("spec") or {}).get("component") or "")
    if output == "json":
        _echo_json({"name": ir["metadata"]["name"], "component": comp,
                    "instances": [out.instance_json(r, comp) for r in status.instances]})
        return
    gangs = out.gang_by_instance(pods) if output == "wide" else None
    click.echo(out.format_instance_table(comp, status, gangs))


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
    if output == "json":
        _echo_json({"name": ir["metadata"]["name"], "instance": out.instance_json(row, comp),
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
    if output == "json":
        _echo_json({"name": ir["metadata"]["name"],
                    "retryBlocks": out.retry_blocks_json(status)})
        return
    click.echo(out.format_retry_blocks(status, _now()))


@instance.command("release-held")
@click.argument("name")
@click.option("--revision", required=True, help="Held revision: full name or hash.")
@_component
@_yes
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


# ------------------------------------------------------------------ rollout


@cli.group()
def rollout() -> None:
    """Rollouts: an InferenceReplica's (status, pause, resume) and an InferenceService's
    rollout groups (status, explain, history, promote, rollback, repin)."""


async def _find_isvc(kube: KubeClient, target: Target, name: str) -> JSON | None:
    """The InferenceService ``name`` (None: there is none, or the CRD is not installed)."""
    try:
        isvc = await kube.get(INFERENCE_SERVICES, name, target.namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    isvc.setdefault("kind", "InferenceService")
    return isvc


async def _get_isvc(kube: KubeClient, target: Target, name: str) -> JSON:
    isvc = await _find_isvc(kube, target, name)
    if isvc is None:
        raise CliError(f"no InferenceService {name} in namespace {target.namespace}")
    return isvc


def _group_components(isvc: JSON, state: RolloutState) -> list[str]:
    """The components the rollout groups name (state first, then spec.rollout)."""
    comps: list[str] = []
    for g in state.groups:
        comps.extend(c for c in g.components if c not in comps)
    for g in ((isvc.get("spec") or {}).get("rollout") or {}).get("groups") or ():
        if isinstance(g, dict):
            comps.extend(str(c) for c in g.get("components") or () if str(c) not in comps)
    return comps


async def _member_replicas(kube: KubeClient, target: Target, isvc: JSON,
                           state: RolloutState) -> dict[str, JSON]:
    """The projected InferenceReplica ``{isvc}-{component}`` of each group member that exists."""
    out: dict[str, JSON] = {}
    for comp in _group_components(isvc, state):
        try:
            out[comp] = await kube.get(INFERENCE_REPLICAS, f"{isvc['metadata']['name']}-{comp}",
                                       target.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
    return out


def _state(isvc: JSON) -> RolloutState:
    try:
        return out.rollout_state(isvc)
    except RolloutStateError as exc:
        raise CliError(f"cannot read the rollout state of {_ref(isvc)}: {exc}") from None


def _read_isvc(target: Target, name: str) -> tuple[JSON, RolloutState]:
    isvc = _run(target, lambda kube: _get_isvc(kube, target, name))
    return isvc, _state(isvc)


@rollout.command("status")
@click.argument("name")
@_component
@_output
@_connection
@click.pass_obj
def rollout_status(target: Target, name: str, component: str | None, output: str) -> None:
    """Rollout groups of InferenceService NAME (per group and member: phase, step, stable /
    canary revisions, capacity, traffic, holds); else InferenceReplica NAME's rollout
    (revisions, counts, pause, rolloutHold, Ready). ``--component`` always means the
    replica."""

    async def work(kube: KubeClient) -> tuple[JSON | None, dict[str, JSON], JSON | None]:
        isvc = None if component else await _find_isvc(kube, target, name)
        if isvc is not None:
            return isvc, await _member_replicas(kube, target, isvc, _state(isvc)), None
        return None, {}, await _get_replica(kube, target, name, component)

    isvc, replicas, found = _run(target, work)
    if isvc is not None:
        state = _state(isvc)
        if output == "json":
            _echo_json(out.service_rollout_json(isvc, state, replicas, _now()))
            return
        click.echo(out.format_service_rollout(isvc, state, replicas, _now()))
        return
    assert found is not None
    ir = found
    status = _status(ir)
    if output == "json":
        _echo_json(out.rollout_json(ir, status))
        return
    click.echo(out.format_rollout_status(ir, status, _now()))


@rollout.command("pause")
@click.argument("name")
@click.option("--freeze", is_flag=True, help="pauseMode Freeze: also stop repairs.")
@_component
@_yes
@_connection
@click.pass_obj
def rollout_pause(target: Target, name: str, freeze: bool, component: str | None,
                  yes: bool) -> None:
    """Stop starting or advancing updates, new Instances and migrations: on InferenceService
    NAME every OMENative component (ome.io/rollout-paused), else InferenceReplica NAME
    (spec.paused)."""
    isvc = None if component else _run(target, lambda kube: _find_isvc(kube, target, name))
    if isvc is not None:
        _pause_isvc(target, isvc, "freeze" if freeze else "true", yes)
        return
    ir = _read_guarded(target, name, component, "pause")
    _refuse_projected(ir, "pause", "rollout pause")
    spec = ir.get("spec") or {}
    mode = "Freeze" if freeze else None
    if spec.get("paused") and (spec.get("pauseMode") or None) == mode:
        click.echo(f"{_ref(ir)} is already paused ({mode or 'Recover'}): nothing to do")
        return
    changes = [f"spec.paused: {str(bool(spec.get('paused'))).lower()} -> true"]
    if (spec.get("pauseMode") or None) != mode:
        changes.append(f"spec.pauseMode: {spec.get('pauseMode') or '(unset)'} -> "
                       f"{mode or '(unset: Recover)'}")
    _confirm(ir, changes, yes, _projected_note(ir))
    _patch(target, ir, {"spec": {"paused": True, "pauseMode": mode}})
    click.echo(f"{_ref(ir)} paused ({mode or 'Recover'})")


@rollout.command("resume")
@click.argument("name")
@_component
@_yes
@_connection
@click.pass_obj
def rollout_resume(target: Target, name: str, component: str | None, yes: bool) -> None:
    """Undo a pause: remove ome.io/rollout-paused from InferenceService NAME, else clear
    InferenceReplica NAME's spec.paused (and pauseMode)."""
    isvc = None if component else _run(target, lambda kube: _find_isvc(kube, target, name))
    if isvc is not None:
        _pause_isvc(target, isvc, None, yes)
        return
    ir = _read(target, name, component)
    _refuse_projected(ir, "resume", "rollout resume")
    spec = ir.get("spec") or {}
    if not spec.get("paused") and not spec.get("pauseMode"):
        click.echo(f"{_ref(ir)} is not paused: nothing to do")
        return
    changes = [f"spec.paused: {str(bool(spec.get('paused'))).lower()} -> (unset: false)"]
    if spec.get("pauseMode"):
        changes.append(f"spec.pauseMode: {spec['pauseMode']} -> (unset)")
    _confirm(ir, changes, yes, _projected_note(ir))
    _patch(target, ir, {"spec": {"paused": None, "pauseMode": None}})
    click.echo(f"{_ref(ir)} resumed")


def _refuse_projected(ir: JSON, verb: str, command: str) -> None:
    """A projected replica's pause is its InferenceService's (OME pauses per service, and
    the manager owns the replica's spec): refuse (exit 3) and name the command to run."""
    parent = ((ir.get("spec") or {}).get("parentRef") or {}).get("name")
    if parent:
        _fail(f"{_ref(ir)} is projected from InferenceService {parent}, whose controller owns "
              f"its spec: {verb} the InferenceService instead (kubectl ome {command} "
              f"{parent}); it covers all of its components", EXIT_CONFLICT)


def _pause_isvc(target: Target, isvc: JSON, value: str | None, yes: bool) -> None:
    """Set ``ome.io/rollout-paused`` to ``value`` (``true`` or ``freeze``), or remove it
    (None); the InferenceService controller passes it to every OMENative component."""
    key = out.ANNOTATION_PAUSED
    have = ((isvc.get("metadata") or {}).get("annotations") or {}).get(key)
    if value is not None:
        rollback = out.rollback_requested(isvc)
        if rollback is not None:
            _fail(f"{_ref(isvc)} has {out.ANNOTATION_ROLLBACK}={rollback}: pause is refused "
                  "during a rollback", EXIT_CONFLICT)
    if have == value or (value is None and have is None):
        state = f"paused ({have})" if have else "not paused"
        click.echo(f"{_ref(isvc)} is already {state}: nothing to do")
        return
    if value is None:
        changes = [f"metadata.annotations[{key}]: {have!r} -> (unset)"]
    else:
        changes = _annotation_changes(isvc, {key: value})
    what = ("(every OMENative component: updates, new Instances and migrations wait"
            + ("; repairs too)" if value == "freeze" else ")") if value else
            "(every OMENative component carries on)")
    _confirm(isvc, [*changes, what], yes)
    name = str(isvc["metadata"]["name"])
    for _attempt in range(5):
        try:
            _patch(target, isvc, {"metadata": {"annotations": {key: value}}},
                   resource=INFERENCE_SERVICES)
            break
        except CliError as exc:
            if exc.code != EXIT_CONFLICT:
                raise
        # the controller writes the status all the time: that is no reason to refuse, as
        # long as the annotation is still what the preview showed
        isvc = _run(target, lambda kube: _get_isvc(kube, target, name))
        now = ((isvc.get("metadata") or {}).get("annotations") or {}).get(key)
        if now != have:
            _fail(f"{_ref(isvc)}: {key} changed meanwhile ({have!r} -> {now!r}): nothing "
                  "was written, run the command again", EXIT_CONFLICT)
    else:
        _fail(f"{_ref(isvc)} kept changing: nothing was written, run the command again",
              EXIT_CONFLICT)
    click.echo(f"{_ref(isvc)} " + (f"paused ({value})" if value else "resumed"))


@rollout.command("explain")
@click.argument("name")
@_connection
@click.pass_obj
def rollout_explain(target: Target, name: str) -> None:
    """One line: which gate holds InferenceService NAME's rollout and what releases it."""
    isvc, state = _read_isvc(target, name)
    click.echo(out.explain_line(isvc, state, _now()))


@rollout.command("history")
@click.argument("name")
@_output
@_connection
@click.pass_obj
def rollout_history(target: Target, name: str, output: str) -> None:
    """The revisions of each component of InferenceService NAME, oldest first: which is
    stable, canary or rejected, when each was created, how many Instances run it."""

    async def work(kube: KubeClient) -> tuple[JSON, dict[str, JSON], dict[str, list[JSON]]]:
        isvc = await _get_isvc(kube, target, name)
        replicas = await _member_replicas(kube, target, isvc, _state(isvc))
        revisions: dict[str, list[JSON]] = {}
        for comp in _group_components(isvc, _state(isvc)) or sorted(replicas):
            selector = f"{LABEL_REPLICA}={isvc['metadata']['name']}-{comp}"
            page = await kube.list(CONTROLLER_REVISIONS, target.namespace,
                                   label_selector=selector)
            if page.get("items"):
                revisions[comp] = list(page["items"])
        return isvc, replicas, revisions

    isvc, replicas, revisions = _run(target, work)
    state = _state(isvc)
    if output == "json":
        _echo_json(out.history_json(isvc, state, replicas, revisions))
        return
    click.echo(out.format_history(isvc, state, replicas, revisions, _now()))


def _annotation_changes(isvc: JSON, wanted: dict[str, str]) -> list[str]:
    ann = (isvc.get("metadata") or {}).get("annotations") or {}
    return [f"metadata.annotations[{k}]: "
            f"{repr(ann[k]) if k in ann else '(unset)'} -> {v!r}" for k, v in wanted.items()]


@rollout.command("promote")
@click.argument("name")
@click.option("--override-analysis", is_flag=True,
              help="Also pass an analysis gate (sets ome.io/rollout-override-analysis).")
@click.option("--group", "group", type=int, default=None,
              help="Group index to promote (default: the one waiting at a gate).")
@_yes
@_connection
@click.pass_obj
def rollout_promote(target: Target, name: str, override_analysis: bool, group: int | None,
                    yes: bool) -> None:
    """Pass the current canary gate of InferenceService NAME one step
    (ome.io/rollout-promote=<canary revision hash>)."""
    isvc, state = _read_isvc(target, name)
    found = out.promote_target(isvc, state, _now(), group=group,
                               override_analysis=override_analysis)
    if isinstance(found, str):
        _fail(f"{_ref(isvc)}: {found}", EXIT_CONFLICT)
    wanted = {out.ANNOTATION_PROMOTE: found.value}
    if override_analysis:
        wanted[out.ANNOTATION_OVERRIDE_ANALYSIS] = "true"
    if out.rollout_requests(isvc).items() >= wanted.items():
        click.echo(f"{_ref(isvc)}: promote {found.value} is already requested: nothing to do")
        return
    label = f"group {found.group.index} ({'+'.join(found.group.components)})"
    _confirm(isvc, [*_annotation_changes(isvc, wanted),
                    f"(promotes {label}, {found.group.phase} at gate "
                    f"{found.group.gate or '-'})"], yes, list(found.notes))
    _patch(target, isvc, {"metadata": {"annotations": wanted}}, resource=INFERENCE_SERVICES)
    click.echo(f"{_ref(isvc)}: promote of {label} requested "
               f"({out.ANNOTATION_PROMOTE}={found.value})")


@rollout.command("rollback")
@click.argument("name")
@_yes
@_connection
@click.pass_obj
def rollout_rollback(target: Target, name: str, yes: bool) -> None:
    """Send every member of InferenceService NAME's rollout back to its stable revision
    (ome.io/rollout-rollback=true; it stays until a new revision appears)."""
    isvc, state = _read_isvc(target, name)
    preview = out.rollback_preview(isvc, state, _now())
    if isinstance(preview, str):
        _fail(f"{_ref(isvc)}: {preview}", EXIT_CONFLICT)
    wanted = {out.ANNOTATION_ROLLBACK: "true"}
    _confirm(isvc, [*_annotation_changes(isvc, wanted),
                    *(f"(rolls back {line})" for line in preview)], yes)
    _patch(target, isvc, {"metadata": {"annotations": wanted}}, resource=INFERENCE_SERVICES)
    click.echo(f"{_ref(isvc)}: rollback requested")


def _repin_token(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None and not out.valid_repin_token(value):
        raise click.BadParameter(f"{value!r}: expected rp1:<12 hex digits> or now")
    return value


@rollout.command("repin")
@click.argument("name")
@click.option("--token", default=None, callback=_repin_token,
              help="rp1:<12 hex> (must be the current plan's) or now (default: the "
                   "current spec.rollout's token).")
@_yes
@_connection
@click.pass_obj
def rollout_repin(target: Target, name: str, token: str | None, yes: bool) -> None:
    """Move InferenceService NAME's running rollout onto the plan spec.rollout says now
    (ome.io/rollout-repin)."""
    isvc, state = _read_isvc(target, name)
    value = token or out.spec_plan_token(isvc) or "now"
    refusal = out.repin_refusal(isvc, state, value)
    if refusal is not None:
        _fail(f"{_ref(isvc)}: {refusal}", EXIT_CONFLICT)
    wanted = {out.ANNOTATION_REPIN: value}
    if out.rollout_requests(isvc).get(out.ANNOTATION_REPIN) == value:
        click.echo(f"{_ref(isvc)}: repin {value} is already requested: nothing to do")
        return
    _confirm(isvc, [*_annotation_changes(isvc, wanted),
                    f"(moves the run from plan {state.plan_token or '-'} to "
                    f"{out.spec_plan_token(isvc)})"], yes)
    _patch(target, isvc, {"metadata": {"annotations": wanted}}, resource=INFERENCE_SERVICES)
    click.echo(f"{_ref(isvc)}: repin to {value} requested")


# ------------------------------------------------------------------ migration


@cli.group()
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
    if output == "json":
        _echo_json({"name": ir["metadata"]["name"], **out.migrations_json(status, pending)})
        return
    click.echo(out.format_migrations(status, pending, _now()))


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
@_yes
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
        request_uuid = str(uuid.UUID(request_id)) if request_id else str(uuid.uuid4())
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
        requested_at=_now())
    notes = ["the InferenceReplica is paused: the migration waits for resume"] \
        if spec.get("paused") else []
    _confirm(ir, [f"metadata.annotations[{key}] = {value}"], yes, notes)
    _patch(target, ir, {"metadata": {"annotations": {key: value}}})
    click.echo(f"{_ref(ir)}: migration {request_uuid} of Instance {index} requested")


# ------------------------------------------------------------------ scale


@cli.command("scale")
@click.argument("name")
@click.argument("replicas", type=int)
@click.option("--override-autoscaler", is_flag=True,
              help="Scale even though spec.autoscaler manages the count.")
@_component
@_yes
@_connection
@click.pass_obj
def scale(target: Target, name: str, replicas: int, override_autoscaler: bool,
          component: str | None, yes: bool) -> None:
    """Set the Instance count through the scale subresource (transient under an autoscaler)."""
    ir = _read_guarded(target, name, component, "scale")
    status = _status(ir)
    refusal = out.scale_refusal(ir, status, replicas)
    spec = ir.get("spec") or {}
    if refusal is None and spec.get("autoscaler") and not override_autoscaler:
        refusal = "spec.autoscaler manages the count: pass --override-autoscaler to scale anyway"
    if refusal is not None:
        _fail(f"{_ref(ir)}: {refusal}", EXIT_CONFLICT)
    current = spec.get("replicas")
    if current == replicas:
        click.echo(f"{_ref(ir)} already has spec.replicas {replicas}: nothing to do")
        return
    _confirm(ir, [f"scale: spec.replicas {current if current is not None else '(unset: 1)'} "
                  f"-> {replicas}"], yes, _projected_note(ir))
    _patch(target, ir, {"spec": {"replicas": replicas}}, subresource="scale")
    click.echo(f"{_ref(ir)} scaled to {replicas}")


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
            audit = parse_lifecycle_config((cm.get("data") or {}).get("lifecycle")).audit
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


@cli.command("advise")
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
    if output == "json":
        _echo_json(advice_json(advice))
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


# ---------------------------------------------------------------------------- entry point


# ---------------------------------------------------------------------------- handover


async def _get_or_none(kube: KubeClient, res: Resource, name: str, namespace: str
                       ) -> JSON | None:
    """The object, or None when it (or its CRD) is not there."""
    try:
        return await kube.get(res, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


@cli.command("handover")
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
            sets[comp] = await _get_or_none(kube, LEADER_WORKER_SETS, lws_name(name, comp),
                                            target.namespace)
            replicas[comp] = await _get_or_none(kube, INFERENCE_REPLICAS, f"{name}-{comp}",
                                                target.namespace)
        return isvc, sets, replicas

    isvc, sets, replicas = _run(target, work)
    rows = handover_rows(isvc, sets, replicas)
    if output == "json":
        _echo_json(handover_json(rows))
        return
    click.echo(format_handover(name, rows))


def _one_line(exc: BaseException) -> tuple[str, int]:
    """The one stderr line (after ``error: ``) and the exit code for a failure."""
    if isinstance(exc, CliError):
        return exc.message, exc.code
    if isinstance(exc, click.exceptions.Abort):
        return "aborted", EXIT_ERROR
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", 130
    return f"{type(exc).__name__}: {exc}", EXIT_ERROR


def main(argv: list[str] | None = None) -> int:
    """Run the plugin; errors are one line on stderr and a non-zero exit."""
    try:
        cli.main(args=argv, prog_name="kubectl ome", standalone_mode=False, obj=Target())
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (Exception, KeyboardInterrupt) as exc:  # one line, never a traceback
        message, code = _one_line(exc)
        click.echo(f"error: {message}", err=True)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
