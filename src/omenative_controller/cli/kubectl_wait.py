"""``kubectl ome wait``: block until an InferenceService reaches the state ``--for`` names,
print one WaitReport, exit 0 (matched), 2 (timed out, not found, deleted, replaced) or 1.

The first check runs at once; then every 5 seconds (OME polls its migration, replica and
held-revision predicates so; its ``condition=Ready`` watches, ours polls too)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import click

from omenative_controller.cli import wait_output as wo
from omenative_controller.cli.kubectl_common import (
    BUDGET_SECONDS,
    Target,
    _connection,
    _echo_doc,
    _now,
    _output_wide,
    _run,
    get_or_none,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.service_controller import INFERENCE_SERVICES

POLL_SECONDS = 5.0
"""Seconds between checks, as OME."""


class _Tally:
    """Reads and polls made, for the report's ``GET / WATCH / polls`` row."""

    def __init__(self) -> None:
        self.counts = {"gets": 0, "polls": 0}

    def got(self, n: int = 1) -> None:
        self.counts["gets"] += n


async def _replicas_for(kube: KubeClient, target: Target, name: str, spec: wo.WaitSpec,
                        tally: _Tally) -> list[JSON]:
    """The InferenceReplicas the predicate reads: the named one, or the service's."""
    if spec.kind in ("condition", "rollout", "runtime-sync"):
        return []
    tally.got()
    if spec.ir_name:
        ir = await get_or_none(kube, INFERENCE_REPLICAS, spec.ir_name, target.namespace)
        return [] if ir is None else [ir]
    page = await kube.list(INFERENCE_REPLICAS, target.namespace)
    return [ir for ir in page.get("items") or ()
            if ((ir.get("spec") or {}).get("parentRef") or {}).get("name") == name]


async def _wait(kube: KubeClient, target: Target, name: str, spec: wo.WaitSpec,
                timeout: float, poll: float, tally: _Tally) -> tuple[str, wo.Check | None]:
    """Check until matched, the service goes away or changes UID, or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    uid: str | None = None
    last: wo.Check | None = None
    while True:
        tally.got()
        isvc = await get_or_none(kube, INFERENCE_SERVICES, name, target.namespace)
        if isvc is None:
            return ("NotFound" if uid is None else "Deleted"), last
        meta = isvc.get("metadata") or {}
        if uid is not None and meta.get("uid") != uid:
            return "Replaced", last
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            return "Deleted", last
        last = wo.check(spec, isvc, await _replicas_for(kube, target, name, spec, tally))
        if last.matched:
            return "Matched", last
        left = deadline - time.monotonic()
        if left <= 0:
            return "TimedOut", last
        await asyncio.sleep(min(poll, left))
        tally.counts["polls"] += 1


@click.command("wait")
@click.argument("name")
@click.option("--for", "predicate", required=True,
              help="condition=Ready[=True|False|Unknown], rollout=stable|failed|rolled-back, "
                   "migration=terminal, replicas=ready|current, runtime-sync=acknowledged "
                   "or held-revision=unheld.")
@click.option("--component", default=None,
              help="IR component for replica or held-revision waits: engine, decoder, router.")
@click.option("--replicas", type=int, default=None,
              help="Exact count: >= 0 for replicas=ready, >= 1 for replicas=current.")
@click.option("--request-id", default=None,
              help="Canonical UUID for migration=terminal; canonical v4 UUID for "
                   "runtime-sync=acknowledged.")
@click.option("--revision", default=None,
              help="Full ISVC-COMPONENT-HASH revision, for held-revision=unheld.")
@click.option("--ir-name", default=None, help="The InferenceReplica's exact name.")
@click.option("--ir-uid", default=None, help="The InferenceReplica's exact UID.")
@click.option("--timeout", "timeout_text", default="1m0s", show_default=True,
              help="Positive wait timeout, at most 24h.")
@click.option("--poll-interval", type=float, default=POLL_SECONDS, hidden=True)
@_output_wide
@_connection
@click.pass_obj
def wait_cmd(target: Target, name: str, predicate: str, component: str | None,
             replicas: int | None, request_id: str | None, revision: str | None,
             ir_name: str | None, ir_uid: str | None, timeout_text: str,
             poll_interval: float, output: str) -> None:
    """Block until the InferenceService reaches the state --for names (read only)."""
    given: Mapping[str, object] = {
        "component": component, "replicas": replicas, "request_id": request_id,
        "revision": revision, "ir_name": ir_name, "ir_uid": ir_uid}
    try:
        spec = wo.parse_wait(predicate, given)
        timeout = wo.parse_duration(timeout_text)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    tally = _Tally()
    started = time.monotonic()
    outcome, last = _run(
        target, lambda kube: _wait(kube, target, name, spec, timeout,
                                   max(poll_interval, 0.1), tally),
        budget=timeout + BUDGET_SECONDS)
    elapsed_ms = int((time.monotonic() - started) * 1000)
    if output in ("json", "yaml"):
        _echo_doc(output, wo.report_json(target.namespace, name, spec, outcome, last,
                                         elapsed_ms, tally.counts,
                                         _now().strftime("%Y-%m-%dT%H:%M:%SZ")))
    else:
        click.echo(wo.report_table(f"{target.namespace}/{name}", spec, outcome, last,
                                   elapsed_ms, tally.counts))
    code = wo.OUTCOME_EXIT[outcome]
    if code:
        click.echo(f"error: {outcome}: {last.reason if last else 'PredicateUnmet'}", err=True)
        raise click.exceptions.Exit(code)
