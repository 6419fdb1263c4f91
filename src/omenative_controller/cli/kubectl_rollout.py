"""``kubectl ome rollout``: a replica's rollout (status, pause, resume) and an
InferenceService's rollout groups (status, explain, history, promote, rollback, repin).
"""

from __future__ import annotations

import click

from omenative_controller.cli import ome_output as out
from omenative_controller.cli.kubectl_common import (
    EXIT_CONFLICT,
    CliError,
    Target,
    _component,
    _confirm,
    _connection,
    _echo_doc,
    _fail,
    _find_isvc,
    _get_isvc,
    _get_replica,
    _guarded,
    _kept,
    _now,
    _output,
    _patch,
    _projected_note,
    _read,
    _read_guarded,
    _ref,
    _run,
    _status,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
)
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_core.labels import LABEL_REPLICA
from omenative_core.rollout import RolloutState, RolloutStateError

# ------------------------------------------------------------------ rollout


@click.group()
def rollout() -> None:
    """Rollouts: an InferenceReplica's (status, pause, resume) and an InferenceService's
    rollout groups (status, explain, history, promote, rollback, repin)."""



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
        if output in ("json", "yaml"):
            _echo_doc(output, out.service_rollout_json(isvc, state, replicas, _now()))
            return
        click.echo(out.format_service_rollout(isvc, state, replicas, _now()))
        return
    assert found is not None
    ir = found
    status = _status(ir)
    if output in ("json", "yaml"):
        _echo_doc(output, out.rollout_json(ir, status))
        return
    click.echo(out.format_rollout_status(ir, status, _now()))


@rollout.command("pause")
@click.argument("name")
@click.option("--freeze", is_flag=True, help="pauseMode Freeze: also stop repairs.")
@_component
@_guarded
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
@_guarded
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
    # a resourceVersion conflict (the controller writes the status all the time) runs the
    # command again (``_guarded``): it re-reads, and writes only if the change is the one
    # the preview showed
    _patch(target, isvc, {"metadata": {"annotations": {key: value}}},
           resource=INFERENCE_SERVICES)
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
    if output in ("json", "yaml"):
        _echo_doc(output, out.history_json(isvc, state, replicas, revisions))
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
@_guarded
@_connection
@click.pass_obj
def rollout_promote(target: Target, name: str, override_analysis: bool, group: int | None,
                    yes: bool) -> None:
    """Pass the current canary gate of InferenceService NAME one step
    (ome.io/rollout-promote=<canary revision hash>)."""
    isvc, state = _read_isvc(target, name)
    found = out.promote_target(isvc, state, _kept("now", _now), group=group,
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
@_guarded
@_connection
@click.pass_obj
def rollout_rollback(target: Target, name: str, yes: bool) -> None:
    """Send every member of InferenceService NAME's rollout back to its stable revision
    (ome.io/rollout-rollback=true; it stays until a new revision appears)."""
    isvc, state = _read_isvc(target, name)
    preview = out.rollback_preview(isvc, state, _kept("now", _now))
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
@_guarded
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
