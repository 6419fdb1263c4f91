"""``omenative-manager``: run the OMENative Instance lifecycle manager against a cluster.

    omenative-manager --kubeconfig ~/.kube/config            # any cluster
    omenative-manager                                        # in-cluster service account

SIGTERM or SIGINT stops it gracefully (in-flight reconciles finish, the Lease is released);
a second signal stops it at once. Exit codes: 0 after a graceful stop, 2 for bad flags or
an invalid lifecycle config (the message says which key), 1 for anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

import click

from omenative_controller.manager import Manager, ManagerOptions, StartupError, default_identity
from omenative_controller.observability import configure_logging
from omenative_core.model.timefmt import DurationError, parse_duration

__all__ = ["main"]


class _Duration(click.ParamType[float, object]):
    """A Go duration (``15s``, ``1m30s``) or a plain number of seconds."""

    name = "duration"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            return float(value)
        text = str(value).strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return parse_duration(text).total_seconds()
        except DurationError as exc:
            self.fail(str(exc), param, ctx)


DURATION = _Duration()


async def _run(options: ManagerOptions) -> int:
    manager = Manager(options)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    signals = 0

    def on_signal(signame: str) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            click.echo(f"omenative-manager: {signame}: stopping gracefully", err=True)
            manager.stop()
        elif task is not None:
            click.echo(f"omenative-manager: {signame} again: stopping now", err=True)
            task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        await manager.run()
    except asyncio.CancelledError:
        return 1
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"],
                                 "show_default": True})
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Kubeconfig file (default: in-cluster config, else $KUBECONFIG).")
@click.option("--context", "kube_context", default=None, help="Kubeconfig context.")
@click.option("--namespace", "namespaces", multiple=True,
              help="Namespace to manage (repeatable; default: all).")
@click.option("--config-namespace", default="ome",
              help="Namespace of the inferenceservice-config ConfigMap.")
@click.option("--config-name", default="inferenceservice-config",
              help="ConfigMap holding the 'lifecycle' entry (absent: chart defaults).")
@click.option("--lease-name", default="omenative-manager", help="Leader-election Lease name.")
@click.option("--lease-namespace", default=None,
              help="Lease namespace (default: --config-namespace).")
@click.option("--lease-duration", type=DURATION, default="15s",
              help="How long a standby waits before taking an unrenewed Lease.")
@click.option("--renew-deadline", type=DURATION, default="10s",
              help="The leader stops acting when it could not renew for this long.")
@click.option("--retry-period", type=DURATION, default="2s",
              help="Interval between acquire/renew attempts.")
@click.option("--bind-address", default="0.0.0.0", help="Address of the metrics and probe ports.")
@click.option("--metrics-port", type=int, default=8080, help="/metrics port (0: a free one).")
@click.option("--probe-port", type=int, default=8081,
              help="/healthz and /readyz port (0: a free one).")
@click.option("--workers", type=click.IntRange(min=1), default=64,
              help="Concurrent reconciles (their writes share --max-inflight).")
@click.option("--qps", type=click.FloatRange(min=0), default=100.0,
              help="Client-side API rate limit (requests per second; 0: unlimited; OME's "
                   "chart sets 100).")
@click.option("--burst", type=click.IntRange(min=1), default=200,
              help="Client-side API burst (OME's chart sets 200).")
@click.option("--max-inflight", type=click.IntRange(min=1), default=32,
              help="Plan actions talking to the API server at once, over every worker.")
@click.option("--creates-per-pass", type=click.IntRange(min=0), default=None,
              help="Pod creates one reconcile pass sends at most, whole gangs (default: "
                   "--max-inflight; 0: no bound); the rest go in the next pass, so a big "
                   "replica's ready gangs get their serving gates between chunks.")
@click.option("--pipeline-creates/--no-pipeline-creates", default=True,
              help="A pass that leaves pod creates for the next (--creates-per-pass) sends "
                   "its own behind it, the pods expected in the cache, so the replica's "
                   "next pass plans while they are answered (at most two chunks out per "
                   "replica); --no-pipeline-creates answers every create within its pass.")
@click.option("--status-coalesce", type=DURATION, default="10s",
              help="How long a progress-only status write may wait for the next one "
                   "(0s: write every status as planned).")
@click.option("--status-readiness-coalesce", type=DURATION, default="1s",
              help="How long a status write that only adds Ready Instances may wait, no "
                   "condition changed (0s: readiness is never held; at most "
                   "--status-coalesce).")
@click.option("--request-timeout", type=DURATION, default="30s",
              help="Timeout of every API request (watches: the connect and idle timeouts).")
@click.option("--identity", default=None,
              help="Leader-election identity (default: hostname_pid_random).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info")
@click.option("--log-format", type=click.Choice(["json", "console"]), default="json")
@click.option("--webhook-port", type=click.IntRange(min=0), default=None,
              help="Serve the validating admission webhook on this HTTPS port (0: a free "
                   "one; default: off).")
@click.option("--webhook-cert-dir", type=click.Path(file_okay=False),
              default="/tmp/k8s-webhook-server/serving-certs", show_default=True,
              help="Directory with the webhook's tls.crt and tls.key.")
@click.option("--inference-services/--no-inference-services", default=True,
              help="Also project InferenceService components onto InferenceReplicas.")
@click.option("--advisor", type=click.Choice(["off", "recommend", "apply"]), default="off",
              show_default=True,
              help="The GPU caretaker while leading: recommend (Events and metrics) or apply "
                   "(also request the moves as migrations, one at a time).")
@click.option("--advisor-interval", type=DURATION, default="60s", show_default=True,
              help="How often the advisor looks.")
@click.option("--advisor-bad-gpu-condition", "advisor_bad", multiple=True,
              help="Node condition type that flags bad GPUs when True (repeatable).")
@click.option("--runtime-revision-retention", type=click.IntRange(min=0), default=10,
              show_default=True,
              help="Runtime revisions kept per runtime name, newest first, even unused (OME's "
                   "flag).")
@click.option("--runtime-revision-grace-period", "runtime_revision_grace", type=DURATION,
              default="24h", show_default=True,
              help="How long an unkept runtime revision waits before it is deleted.")
def main(
    kubeconfig: str | None,
    kube_context: str | None,
    namespaces: tuple[str, ...],
    config_namespace: str,
    config_name: str,
    lease_name: str,
    lease_namespace: str | None,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    bind_address: str,
    metrics_port: int,
    probe_port: int,
    workers: int,
    qps: float,
    burst: int,
    max_inflight: int,
    creates_per_pass: int | None,
    pipeline_creates: bool,
    status_coalesce: float,
    status_readiness_coalesce: float,
    request_timeout: float,
    identity: str | None,
    webhook_port: int | None,
    webhook_cert_dir: str,
    inference_services: bool,
    advisor: str,
    advisor_interval: float,
    advisor_bad: tuple[str, ...],
    runtime_revision_retention: int,
    runtime_revision_grace: float,
    log_level: str,
    log_format: str,
) -> None:
    """Run the OMENative Instance lifecycle manager."""
    configure_logging(log_level, json_logs=log_format == "json")
    options = ManagerOptions(
        kubeconfig=kubeconfig,
        context=kube_context,
        namespaces=tuple(namespaces),
        config_namespace=config_namespace,
        config_name=config_name,
        lease_name=lease_name,
        lease_namespace=lease_namespace,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        bind_address=bind_address,
        metrics_port=metrics_port,
        probe_port=probe_port,
        workers=workers,
        qps=qps,
        burst=burst,
        max_inflight=max_inflight,
        creates_per_pass=creates_per_pass,
        pipeline_creates=pipeline_creates,
        status_coalesce=status_coalesce,
        status_readiness_coalesce=status_readiness_coalesce,
        request_timeout=request_timeout,
        identity=identity or default_identity(),
        inference_services=inference_services,
        advisor=advisor,
        advisor_interval=advisor_interval,
        advisor_bad_gpu_conditions=advisor_bad,
        webhook_port=webhook_port,
        webhook_cert_dir=webhook_cert_dir,
        runtime_revision_retention=runtime_revision_retention,
        runtime_revision_grace=runtime_revision_grace,
    )
    try:
        options.leader_config().validate()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        code = asyncio.run(_run(options))
    except StartupError as exc:
        click.echo(f"omenative-manager: error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        code = 1
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
