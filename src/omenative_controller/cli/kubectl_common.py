"""What every ``kubectl ome`` subcommand shares: the connection, exit codes, writes, options.

The root ``cli`` group lives here; ``kubectl_ome`` adds the subcommand groups to it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import yaml

from omenative_controller.cli import ome_output as out
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    INFERENCE_REPLICAS,
    Resource,
)
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_core.codec import CodecError
from omenative_core.model.status import InferenceReplicaStatus

T = TypeVar("T")

EXIT_ERROR = 1
"""An error (API, kubeconfig, not found) or a write that was not confirmed."""
EXIT_CONFLICT = 3
"""Refused: a precondition does not hold, or the object changed since it was read."""
BUDGET_SECONDS = 45.0
"""Time allowed for the API calls of one step (a read, or a write)."""
WRITE_ATTEMPTS = 5
"""How often a confirmed write is read, checked and sent again when the object changed
meanwhile (the manager writes the status all the time) and the change is still the same."""


class CliError(Exception):
    """An error to report as one line on stderr with an exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class StaleWrite(CliError):
    """A write the API server refused because the object changed since it was read (a
    resourceVersion conflict): nothing was written."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_CONFLICT)


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
        self.dry_run = "none"
        """``--dry-run``: none (write), client (preview only) or server (the API server
        admits the write but stores nothing)."""
        self.confirmed: list[str] | None = None
        """The change lines the user saw (and agreed to) on this command's first attempt."""
        self.attempt = 0
        """Which attempt of a guarded verb runs (0: the first; more after a StaleWrite)."""
        self.kept: dict[str, Any] = {}
        """Values a verb makes once and keeps across its attempts (see ``_kept``)."""

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


def _run(target: Target, work: Callable[[KubeClient], Awaitable[T]],
         budget: float = BUDGET_SECONDS) -> T:
    """Open a client, run ``work`` within ``budget`` seconds, close; API trouble is a
    CliError."""

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
            async with asyncio.timeout(budget):
                return await work(kube)
        finally:
            await kube.close()

    try:
        return asyncio.run(main())
    except TimeoutError:
        raise CliError(f"no answer from the API server within {budget:.0f}s") from None
    except ApiError as exc:
        if exc.conflict:
            raise StaleWrite(_api_message(exc)) from None
        raise CliError(_api_message(exc), EXIT_ERROR) from None


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


def _echo_doc(output: str, value: Any) -> None:
    """A report or object as ``-o json`` or ``-o yaml`` (keys in the report's order)."""
    if output == "yaml":
        click.echo(yaml.safe_dump(value, sort_keys=False, default_flow_style=False).rstrip())
    else:
        _echo_json(value)


# ---------------------------------------------------------------------------- writes


def _confirm(ir: JSON, changes: list[str], yes: bool, notes: list[str] | None = None) -> None:
    """Show what will change on which object; unless ``yes`` or a dry run, ask [y/N].

    On a later attempt (the object changed after the first read) the change must be the one
    already shown: it is then sent without asking again; any other change is refused."""
    rv = (ir.get("metadata") or {}).get("resourceVersion", "?")
    target = _current_target()
    if target is not None and target.attempt > 0:
        if changes != target.confirmed:
            raise CliError(
                f"{_ref(ir)} changed since it was read and the change would now be "
                f"{'; '.join(changes)}: nothing was written, run the command again",
                EXIT_CONFLICT)
        click.echo(f"note: {_ref(ir)} changed meanwhile (now resourceVersion {rv}); the "
                   "change is the same: sending it again", err=True)
        return
    if target is not None:
        target.confirmed = list(changes)
    click.echo(f"{_ref(ir)} (resourceVersion {rv}) will change:")
    for line in changes:
        click.echo(f"  {line}")
    for note in notes or ():
        click.echo(f"note: {note}", err=True)
    if yes or _dry_run_mode() != "none":
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
    """Merge patch carrying the resourceVersion read, so a concurrent change fails: a
    ``StaleWrite`` (exit 3), which a ``_guarded`` verb turns into another attempt.

    Under ``--dry-run`` this ends the command (exit 0) after saying what happened: client,
    nothing is sent; server, the API server checks the patch (schema, admission, the
    resourceVersion) and stores nothing."""
    meta = ir.get("metadata") or {}
    body = dict(patch)
    body["metadata"] = {**(patch.get("metadata") or {}),
                        "resourceVersion": meta.get("resourceVersion")}
    name = str(meta.get("name"))
    mode = target.dry_run
    if mode == "client":
        click.echo(f"{_ref(ir)}: dry run (client): nothing was sent")
        raise click.exceptions.Exit(0)

    async def work(kube: KubeClient) -> JSON:
        return await kube.patch(resource, name, body, target.namespace,
                                subresource=subresource, dry_run=mode == "server")

    result = _run(target, work)
    if mode == "server":
        click.echo(f"{_ref(ir)}: dry run (server): the API server accepted the change; "
                   "nothing was stored")
        raise click.exceptions.Exit(0)
    return result


def _kept(key: str, make: Callable[[], T]) -> T:
    """``make()`` on a verb's first attempt, the same value on later ones (a request UUID,
    a timestamp), so the change shown again is the change the user confirmed."""
    target = _current_target()
    if target is None:
        return make()
    if key not in target.kept:
        target.kept[key] = make()
    value: T = target.kept[key]
    return value


def _current_target() -> Target | None:
    """The running command's Target (None outside a command)."""
    ctx = click.get_current_context(silent=True)
    return ctx.find_object(Target) if ctx is not None else None


def _dry_run_mode() -> str:
    """The ``--dry-run`` of the running command (``none`` outside one)."""
    target = _current_target()
    return target.dry_run if target is not None else "none"


def _projected_note(ir: JSON) -> list[str]:
    parent = ((ir.get("spec") or {}).get("parentRef") or {}).get("name")
    if not parent:
        return []
    return [f"projected from InferenceService {parent}: its controller owns this spec and may "
            "write it back"]


# ---------------------------------------------------------------------------- CLI


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    raise CliError(message, code)


_output = click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]),
                       default="table", show_default=True, help="Output format.")
_output_wide = click.option("-o", "--output",
                            type=click.Choice(["table", "wide", "json", "yaml"]),
                            default="table", show_default=True, help="Output format.")
_component = click.option("--component", default=None,
                          help="Component (engine/decoder/router): NAME is then an "
                               "InferenceService and the replica is NAME-COMPONENT.")
_yes = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


def _guarded(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--yes`` and OME's ``--dry-run none|client|server`` on a verb that writes; the verb
    runs again (reads, checks, the change shown) when its write met a resourceVersion
    conflict after the user confirmed: the manager's status writes are no reason to fail."""
    f = _retrying(f)
    f = click.option("--dry-run", type=click.Choice(["none", "client", "server"]),
                     default="none", show_default=True, expose_value=False,
                     callback=_set("dry_run"),
                     help="client: show the change only; server: the API server checks it "
                          "and stores nothing.")(f)
    return _yes(f)


def _retrying(f: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``f`` up to WRITE_ATTEMPTS times while its confirmed write meets a StaleWrite;
    ``_confirm`` refuses on a later attempt unless the change is the one already shown."""

    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Any:
        target = _current_target()
        for attempt in range(WRITE_ATTEMPTS):
            if target is not None:
                target.attempt = attempt
            try:
                return f(*args, **kwargs)
            except StaleWrite:
                if target is None or target.confirmed is None or \
                        attempt == WRITE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    return run


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


async def _find_isvc(kube: KubeClient, target: Target, name: str) -> JSON | None:
    """The InferenceService ``name`` (None: there is none, or the CRD is not installed)."""
    isvc = await get_or_none(kube, INFERENCE_SERVICES, name, target.namespace)
    if isvc is None:
        return None
    isvc.setdefault("kind", "InferenceService")
    return isvc


async def _get_isvc(kube: KubeClient, target: Target, name: str) -> JSON:
    isvc = await _find_isvc(kube, target, name)
    if isvc is None:
        raise CliError(f"no InferenceService {name} in namespace {target.namespace}")
    return isvc

# ---------------------------------------------------------------------------- handover


async def get_or_none(kube: KubeClient, res: Resource, name: str, namespace: str
                       ) -> JSON | None:
    """The object, or None when it (or its CRD) is not there: an absent object is an answer,
    not an error, for the reads that report progress (handover, a parent InferenceService)."""
    try:
        return await kube.get(res, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
