"""KWOK, the ecosystem's node simulator, as the devcluster's scale backend (``up --kwok-nodes N``).

The kubelet stand-in is Python and shares the machine's cores with everything it serves; for
thousands of pods the peers' own scale tests (Kueue, Grove) run KWOK instead. ``kwok``
(v0.8.0, built by the shared builder: ``components.py``) watches the nodes annotated
``kwok.x-k8s.io/node: fake`` and the pods bound to them, and moves each through *stages*:

* nodes: KWOK's own ``node-initialize`` and ``node-heartbeat-with-lease`` stages (read from
  its Go module, not copied here) with ``--node-lease-duration-seconds=40`` (shorter
  leases let nodes flap NotReady under load), GPU capacity and the topology labels the
  stand-in's nodes carry (``kubelet_nodes.node_labels``);
* pods (ours, below): Running with ready containers after ``start_delay + ready_delay``;
  ``Ready`` only once every readiness gate is True, as a kubelet computes it (KWOK's own
  fast stage sets every gate True itself, which would take the manager's serving gate out of
  the picture); ``Ready`` False again when the serving gate goes False (a drain); a deleted
  pod passes the terminal phase ``Succeeded`` after ``delete_delay`` and is then deleted.

The nodes are created here (status included: a Node may carry its status in its create);
kwok runs as one more component of the cluster (``Cluster.spawn``), stopped with it.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from attrs import frozen

from omenative_devcluster import components
from omenative_devcluster.build import _go_env
from omenative_devcluster.cluster import Cluster, ClusterError
from omenative_devcluster.kubelet_api import GPU
from omenative_devcluster.kubelet_nodes import node_labels
from omenative_devcluster.processes import _log, free_ports

__all__ = [
    "KWOK_NODE_ANNOTATION",
    "KwokOptions",
    "create_nodes",
    "kwok_args",
    "kwok_node",
    "module_node_stages",
    "node_parallelism",
    "nodes_ready",
    "pod_stages",
    "prepare",
    "stage_config",
    "start_kwok",
    "wait_until",
]

KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
"""The annotation kwok's ``--manage-nodes-with-annotation-selector`` picks its nodes by."""
SERVING_GATE = "ome.io/serving"
"""The manager's readiness gate: the one gate whose False takes a Ready pod out again."""
NODE_STAGES = ("node/fast/node-initialize.yaml",
               "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
"""KWOK's node stages we run, as paths under the module's ``kustomize/stage/``."""
LEASE_SECONDS = 40
"""``--node-lease-duration-seconds``: shorter leases let nodes flap NotReady under load."""
POD_CIDR = "10.128.0.0/10"
"""Pod IPs (kwok's default /24 holds 254 pods)."""


@frozen
class KwokOptions:
    """How many KWOK nodes, their GPUs, and the pods' stage delays (seconds)."""

    nodes: int
    gpus_per_node: int = 8
    start_delay: float = 0.5
    ready_delay: float = 0.5
    delete_delay: float = 0.2
    prefix: str = "kwok-node-"
    #: pod stage patches kwok sends at once (its ``podPlayStageParallelism``; its default, 4,
    #: made a 1,000-pod bring-up wait 12-16 s per gate in kwok's queue: real kubelets write
    #: in parallel, one per node)
    parallelism: int = 32


def kwok_node(opts: KwokOptions, i: int) -> dict[str, Any]:
    """Node number ``i`` as created: the stand-in's labels, GPU capacity, kwok's annotation."""
    name = f"{opts.prefix}{i}"
    resources = {"cpu": "128", "memory": "1Ti", "pods": "250", "ephemeral-storage": "1Ti",
                 GPU: str(opts.gpus_per_node)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
                     "labels": {**node_labels(name, i), "type": "kwok"},
                     "annotations": {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1],
                                     "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _stage(name: str, match: list[dict[str, Any]], delay: float,
           next_: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                            "selector": {"matchExpressions": match}, "next": next_}
    if delay > 0:
        spec["delay"] = {"durationMilliseconds": _ms(delay)}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
            "metadata": {"name": name}, "spec": spec}


def _status_patch(template: str) -> dict[str, Any]:
    """A strategic merge of the pod's status (conditions merge by type, as kubelets patch),
    guarded by the pod's UID: kwok patches by name, so a patch it still held for a deleted
    pod (the terminal phase, say) would land on a new pod of the same name, as a real
    kubelet's never does; the API server refuses a changed ``metadata.uid`` (immutable).
    At 5,000 pods that turned recreated pods ``Succeeded`` over and over."""
    body = ("metadata:\n  uid: {{ .metadata.uid | Quote }}\nstatus:\n"
            + textwrap.indent(template, "  "))
    return {"patches": [{"subresource": "status", "type": "strategic", "template": body}]}


def _cond(type_: str) -> str:
    return f'.status.conditions.[] | select( .type == "{type_}" ) | .status'


_ALIVE = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

_RUNNING = """{{ $now := Now }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
- type: Ready
  status: {{ if .spec.readinessGates }}"False"{{ else }}"True"{{ end }}
  lastTransitionTime: {{ $now | Quote }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
{{ end }}
{{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""

_READY = """conditions:
- {type: Ready, status: "%s", lastTransitionTime: {{ Now | Quote }}}
"""

_TERMINATED = """{{ $now := Now }}
conditions:
- {type: Ready, status: "False", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "False", lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
"""


def pod_stages(opts: KwokOptions) -> list[dict[str, Any]]:
    """Our pod stages: running, Ready by the serving gate, terminal phase, deleted."""
    gate_true = {"key": _cond(SERVING_GATE), "operator": "In", "values": ["True"]}
    gate_false = {"key": _cond(SERVING_GATE), "operator": "In", "values": ["False"]}
    running = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
    return [
        _stage("omenative-pod-running",
               [_ALIVE, {"key": ".status.phase", "operator": "In", "values": ["Pending"]}],
               opts.start_delay + opts.ready_delay, _status_patch(_RUNNING)),
        _stage("omenative-pod-gate-ready",
               [_ALIVE, running, gate_true,
                {"key": _cond("Ready"), "operator": "NotIn", "values": ["True"]}],
               0, _status_patch(_READY % "True")),
        _stage("omenative-pod-gate-unready",
               [_ALIVE, running, gate_false,
                {"key": _cond("Ready"), "operator": "In", "values": ["True"]}],
               0, _status_patch(_READY % "False")),
        _stage("omenative-pod-terminated",
               [{"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                {"key": ".status.phase", "operator": "NotIn",
                 "values": ["Succeeded", "Failed"]}],
               opts.delete_delay, _status_patch(_TERMINATED)),
        _stage("omenative-pod-delete",
               [{"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                {"key": ".status.phase", "operator": "In", "values": ["Succeeded", "Failed"]}],
               0, {"delete": True}),
    ]


def module_node_stages(cwd: Path) -> list[dict[str, Any]]:
    """KWOK's node stages, read from its Go module (``go mod download``, cached)."""
    kwok = components.COMPONENTS["kwok"]
    out = subprocess.run(["go", "mod", "download", "-json", f"{kwok.module}@{kwok.version}"],
                         cwd=cwd, env=_go_env(), capture_output=True, text=True, check=True)
    root = Path(json.loads(out.stdout)["Dir"]) / "kustomize" / "stage"
    return [yaml.safe_load((root / rel).read_text()) for rel in NODE_STAGES]


def stage_config(opts: KwokOptions, node_stages: list[dict[str, Any]]) -> str:
    """kwok's ``--config`` file: its options (the stage parallelism), then every stage, one
    YAML document each."""
    options = {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
               "options": {"podPlayStageParallelism": opts.parallelism,
                           # a KwokConfiguration leaves every option it omits at zero;
                           # too few lease writers let 1,250 nodes' leases lapse under load
                           "nodePlayStageParallelism": node_parallelism(opts.nodes),
                           "nodeLeaseParallelism": node_parallelism(opts.nodes),
                           "podsOnNodeSyncParallelism": 1}}
    return yaml.safe_dump_all([options, *node_stages, *pod_stages(opts)], sort_keys=False)


def node_parallelism(nodes: int) -> int:
    """Node stage and lease writes kwok sends at once. Each node renews its lease every 10 s
    (a quarter of ``LEASE_SECONDS``), so N nodes need N/10 writes a second; a saturated API
    server answers one in up to ~400 ms, so N/25 in flight keep up (kwok's default 4 up to
    100 nodes; 50 for 1,250). 16 for 1,250 fell behind at 10,000 pods and nodes lost Ready."""
    return max(4, -(-nodes // 25))


def kwok_args(binary: Path, kubeconfig: Path, config: Path, server_port: int) -> list[str]:
    """kwok's command line: our nodes only, leases of ``LEASE_SECONDS``, a loopback port."""
    key, value = KWOK_NODE_ANNOTATION
    return [str(binary), f"--kubeconfig={kubeconfig}", f"--config={config}",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            f"--node-lease-duration-seconds={LEASE_SECONDS}",
            f"--server-address=127.0.0.1:{server_port}", f"--cidr={POD_CIDR}",
            "--node-ip=127.0.0.1"]


def nodes_ready(kubectl_json: str, expected: int, prefix: str) -> int:
    """How many of our ``expected`` KWOK nodes a ``kubectl get nodes -o json`` shows Ready."""
    items = json.loads(kubectl_json).get("items") or []
    ready = 0
    for node in items:
        if not node["metadata"]["name"].startswith(prefix):
            continue
        conds = (node.get("status") or {}).get("conditions") or []
        ready += any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    return min(ready, expected)


def wait_until(check: Any, timeout: float, what: str, every: float = 0.5) -> None:
    """Poll ``check`` (True when done) every ``every`` s; ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout:.0f}s")
        time.sleep(every)


def prepare(state_dir: Path, opts: KwokOptions, kubeconfig: Path, *,
            build_if_missing: bool = True) -> list[str]:
    """Build (or find) kwok, write its stage config into ``state_dir``; its command line.
    ``ClusterError`` when kwok is missing and may not be built."""
    kwok = components.COMPONENTS["kwok"]
    if components.missing(kwok) and not build_if_missing:
        raise ClusterError(f"kwok {kwok.version} is not built: run `python -m "
                           "omenative_devcluster build --with kwok`")
    binary = components.build_component("kwok") / "kwok"
    state_dir.mkdir(parents=True, exist_ok=True)
    config = state_dir / "kwok.yaml"
    config.write_text(stage_config(opts, module_node_stages(state_dir)))
    return kwok_args(binary, kubeconfig, config, free_ports(1)[0])


def create_nodes(kubectl: Callable[..., str], opts: KwokOptions, state_dir: Path,
                 timeout: float | None = None) -> None:
    """Create the ``opts.nodes`` nodes (one ``kubectl create``) and wait until kwok has
    turned them all Ready (``TimeoutError``; by default 120 s and 0.1 s a node, polled
    every 0.5 s and 1 s per 250 nodes: a listing of 1,250 nodes is ~10 MB)."""
    nodes = state_dir / "kwok-nodes.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        kwok_node(opts, i) for i in range(opts.nodes)]}))
    kubectl("create", "-f", str(nodes))
    started = time.monotonic()
    wait_until(lambda: nodes_ready(kubectl("get", "nodes", "-o", "json"), opts.nodes,
                                   opts.prefix) >= opts.nodes,
               120.0 + 0.1 * opts.nodes if timeout is None else timeout,
               f"{opts.nodes} KWOK nodes Ready", every=0.5 + opts.nodes / 250)
    _log(f"{opts.nodes} KWOK nodes Ready after {time.monotonic() - started:.1f}s")


def start_kwok(cluster: Cluster, opts: KwokOptions, *, build_if_missing: bool = True) -> None:
    """Run kwok as a component of ``cluster`` (recorded, stopped with it) and its nodes."""
    args = prepare(cluster.state_dir, opts, cluster.kubeconfig_path,
                   build_if_missing=build_if_missing)
    cluster.spawn("kwok", args)
    create_nodes(cluster.kubectl, opts, cluster.state_dir)
