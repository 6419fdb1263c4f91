"""Command line: ``python -m omenative_devcluster {build,up,down,status}``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from omenative_devcluster import build as build_mod

# the cluster module (and kubernetes-asyncio) is imported lazily: `build` stays instant
_state_dir = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".state") / "devcluster",
    show_default=True,
    help="Folder for kubeconfig, certs, logs, pids.json and faults.json.",
)


@click.group()
def cli() -> None:
    """Local Kubernetes control plane with a kubelet stand-in or real nodes, for tests and demos."""


@cli.command("build")
@click.option("--with", "extra", default="", metavar="NAMES",
              help="Also build these Go components, comma-separated, or 'all': "
                   "containerd, runc, coredns, scheduler-plugins, kueue, lws, helm, kwok, keda.")
@click.option("--k8s-version", default=build_mod.K8S_VERSION, show_default=True,
              help="Kubernetes release of the control plane (and the etcd it pins); "
                   "$OMENATIVE_K8S_VERSION sets the default.")
def build_cmd(extra: str, k8s_version: str) -> None:
    """Build (or find in the cache) the binaries; print their folder.

    One builder, one build at a time: the control plane first, then the real nodes' images
    (our model server: seconds), then each component named with --with, each timed
    ("BUILD TIME ...").
    """
    from omenative_devcluster import components, images  # noqa: PLC0415 - keeps `up` light

    rc = build_mod.main(version=k8s_version)
    if rc:
        sys.exit(rc)
    names = sorted(components.COMPONENTS) if extra.strip() == "all" else [
        n.strip() for n in extra.split(",") if n.strip()]
    try:
        images.build_image_archives()
        components.build_in_order(names)
    except RuntimeError as exc:
        build_mod.log(f"BUILD FAILED: {exc}")
        sys.exit(1)
    for name in names:
        print(components.component_dir(components.COMPONENTS[name]) / "bin")


@cli.command()
@_state_dir
@click.option("--nodes", type=int, default=None,
              help="Stand-in (fake) nodes to register [default: 4, or 0 with --real-nodes or "
                   "--kwok-nodes]; "
                   "next to real nodes they are tainted so real pods never land on them.")
@click.option("--real-nodes", type=click.IntRange(0, 4), default=0, show_default=True,
              help="Real nodes (containerd + kubelet each, kube-proxy, CoreDNS); needs root. "
                   "See docs/real-nodes.md.")
@click.option("--kwok-nodes", type=click.IntRange(min=0), default=0, show_default=True,
              help="KWOK's simulated nodes (kwok v0.8.0, built once by the shared builder), "
                   "the scale backend: pods Ready after --start-delay + --ready-delay once "
                   "their gates are True, deleted pods pass Succeeded. See docs/benchmarks.md.")
@click.option("--gpus-per-node", default=8, show_default=True, help="nvidia.com/gpu per node.")
@click.option("--start-delay", default=0.5, show_default=True, help="Seconds bound -> Running.")
@click.option("--ready-delay", default=0.5, show_default=True, help="Seconds Running -> Ready.")
@click.option("--delete-delay", default=0.2, show_default=True,
              help="Seconds before a terminating pod is finally deleted.")
@click.option("--node-grace-seconds", default=20, show_default=True,
              help="Controller-manager node-monitor-grace-period (time to NotReady).")
@click.option("--controller-manager-qps", type=float, default=None,
              help="kube-controller-manager client QPS (--kube-api-qps; default: its own, 20).")
@click.option("--controller-manager-burst", type=int, default=None,
              help="kube-controller-manager client burst (--kube-api-burst; default 30).")
@click.option("--scheduler-qps", type=float, default=None,
              help="kube-scheduler client QPS (--kube-api-qps; default: its own, 50).")
@click.option("--scheduler-burst", type=int, default=None,
              help="kube-scheduler client burst (--kube-api-burst; default 100).")
@click.option("--no-build", is_flag=True, help="Fail instead of building missing binaries.")
@click.option("--k8s-version", default=build_mod.K8S_VERSION, show_default=True,
              help="Kubernetes release to run (with its own gang feature gates); "
                   "$OMENATIVE_K8S_VERSION sets the default.")
def up(
    *,
    state_dir: Path,
    nodes: int | None,
    real_nodes: int,
    kwok_nodes: int,
    gpus_per_node: int,
    start_delay: float,
    ready_delay: float,
    delete_delay: float,
    node_grace_seconds: int,
    controller_manager_qps: float | None,
    controller_manager_burst: int | None,
    scheduler_qps: float | None,
    scheduler_burst: int | None,
    no_build: bool,
    k8s_version: str,
) -> None:
    """Start the cluster, print KUBECONFIG=<path> last, and run until Ctrl-C/SIGTERM."""
    from omenative_devcluster.cluster import ClusterOptions  # noqa: PLC0415
    from omenative_devcluster.kwok import KwokOptions  # noqa: PLC0415
    from omenative_devcluster.supervisor import run_up  # noqa: PLC0415

    opts = ClusterOptions(
        state_dir=state_dir,
        nodes=nodes if nodes is not None else (0 if real_nodes or kwok_nodes else 4),
        real_nodes=real_nodes,
        gpus_per_node=gpus_per_node,
        start_delay=start_delay,
        ready_delay=ready_delay,
        delete_delay=delete_delay,
        node_grace_seconds=node_grace_seconds,
        controller_manager_qps=controller_manager_qps,
        controller_manager_burst=controller_manager_burst,
        scheduler_qps=scheduler_qps,
        scheduler_burst=scheduler_burst,
        build_if_missing=not no_build,
        version=k8s_version,
    )
    kwok = KwokOptions(nodes=kwok_nodes, gpus_per_node=gpus_per_node, start_delay=start_delay,
                       ready_delay=ready_delay, delete_delay=delete_delay)
    sys.exit(asyncio.run(run_up(opts, kwok if kwok_nodes else None)))


@cli.command("down")
@_state_dir
def down_cmd(state_dir: Path) -> None:
    """Stop the processes recorded in the state folder's pids.json; remove real-node leftovers."""
    from omenative_devcluster.processes import down  # noqa: PLC0415
    from omenative_devcluster.realnodes import down_host  # noqa: PLC0415

    stopped = down(state_dir)
    click.echo("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    left = down_host(state_dir.resolve())
    if left:
        click.echo("real-node leftovers NOT removed: " + "; ".join(left), err=True)
        sys.exit(1)


@cli.command()
@_state_dir
def status(state_dir: Path) -> None:
    """Show the recorded processes and whether they are alive."""
    from omenative_devcluster.processes import pid_alive, read_pids  # noqa: PLC0415

    pids = read_pids(state_dir.resolve())
    if pids is None:
        click.echo("no cluster recorded")
        sys.exit(1)
    for name, rec in {"supervisor": pids["supervisor"], **pids["components"]}.items():
        state = "alive" if pid_alive(int(rec["pid"])) else "gone"
        click.echo(f"{name:24} {rec['pid']:>8} {state}")
    click.echo(json.dumps({"ports": pids["ports"], "kubeconfig": pids["kubeconfig"]}))


@cli.command()
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path(".state") / "demo", show_default=True,
              help="Folder for the demo cluster's kubeconfig, logs and the manager's log.")
@click.option("--real-nodes", type=click.IntRange(1, 4), default=2, show_default=True,
              help="Real nodes (kubelet + containerd each) to start.")
@click.option("--rate", type=click.FloatRange(min=1), default=25.0, show_default=True,
              help="Requests per second sent through the engine's Service.")
def demo(state_dir: Path, real_nodes: int, rate: float) -> None:
    """omenative on real nodes: roll a leader + worker engine out under traffic, print the
    answers per revision and the failed requests, clean up (exit 1 if a request failed)."""
    from omenative_devcluster.demo import run_demo  # noqa: PLC0415 - keeps `build` light

    sys.exit(run_demo(real_nodes=real_nodes, rate=rate, state_dir=state_dir))


@cli.command("traffic-picture")
@click.argument("data", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("out", required=False, type=click.Path(dir_okay=False, path_type=Path))
def traffic_picture(data: Path, out: Path | None) -> None:
    """Draw a saved traffic run (DATA.json, written by `make demo` or a traffic test) into
    OUT (.svg or .png; default: DATA with .svg)."""
    from omenative_devcluster.traffic_picture import render_file  # noqa: PLC0415
    from omenative_sim.pictures import PlotUnavailable  # noqa: PLC0415

    try:
        click.echo(render_file(data, out or data.with_suffix(".svg")))
    except PlotUnavailable as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    cli()
