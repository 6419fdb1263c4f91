"""The configuration files of one real node, and of the cluster's kube-proxy and CoreDNS.

Pure text rendering: every path and port comes in as an argument, so a unit test can read
what a node would run with. Facts behind the settings: ``docs/real-nodes.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

from attrs import frozen

from omenative_devcluster.kubelet_nodes import node_labels
from omenative_devcluster.realnodes_host import (
    BRIDGE_PREFIX,
    CGROUP_PREFIX,
    HOST_ADDRESS,
    POD_CIDR,
    SERVICE_CIDR,
)

CLUSTER_DOMAIN = "cluster.local"
#: Labels the kubelet sets itself (``--node-labels`` may not set them).
KUBELET_OWN_LABELS = ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch")


@frozen
class NodeLayout:
    """Where node ``index``'s files, sockets and ports are."""

    index: int
    base: Path
    kubelet_port: int
    healthz_port: int

    @property
    def name(self) -> str:
        """The node's name (``--hostname-override``)."""
        return f"node-{self.index}"

    @property
    def dir(self) -> Path:
        """The node's own folder."""
        return self.base / self.name

    @property
    def socket(self) -> Path:
        """containerd's gRPC socket (the kubelet's container runtime endpoint)."""
        return self.dir / "containerd" / "containerd.sock"

    @property
    def subnet(self) -> str:
        """The node's pod /24 (CNI host-local range)."""
        return f"10.244.{self.index}.0/24"

    @property
    def bridge(self) -> str:
        """The node's CNI bridge."""
        return f"{BRIDGE_PREFIX}{self.index}"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's ``cgroupRoot`` (created in every v1 hierarchy before it starts)."""
        return f"/{CGROUP_PREFIX}{self.index}"


def containerd_config(node: NodeLayout, bin_dir: Path, runc: Path, pause_image: str) -> str:
    """containerd v2.4 config (version 4, no imports) of one node.

    Its own root, state, socket, runc root and CNI conf; OOM score restricted (root here
    lacks CAP_SYS_RESOURCE), NRI off (its socket path is shared), the sandbox image pinned.
    """
    d = node.dir / "containerd"
    return f"""version = 4
imports = []
root = "{d / 'root'}"
state = "{d / 'state'}"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt",
                    "io.containerd.snapshotter.v1.blockfile",
                    "io.containerd.tracing.processor.v1.otlp"]

[plugins."io.containerd.server.v1.grpc"]
  address = "{node.socket}"

[plugins."io.containerd.server.v1.ttrpc"]
  address = "{node.socket}.ttrpc"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{pause_image}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = true
  cdi_spec_dirs = []
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{node.dir / 'cni'}"
    use_internal_loopback = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "{bin_dir / 'containerd-shim-runc-v2'}"
      disable_pause_image_pull = true
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{d / 'runc'}"
        SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def cni_config(node: NodeLayout) -> str:
    """CNI bridge + host-local: the node's /24; routes only to the cluster, no default route.

    Pods reach pods, Services and the host address, and nothing else: no packet of theirs
    is routed off the machine.
    """
    routes = [{"dst": POD_CIDR}, {"dst": SERVICE_CIDR}, {"dst": f"{HOST_ADDRESS}/32"}]
    conf = {
        "cniVersion": "1.0.0",
        "name": f"omn-{node.name}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.subnet}]],
                    "routes": routes,
                    "dataDir": str(node.dir / "cni-ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


def kubelet_config(node: NodeLayout, client_ca: Path) -> str:
    """KubeletConfiguration of one node (JSON is YAML): cgroupfs on cgroup v1, own dirs/ports;
    only clients with a certificate from ``client_ca`` (the API server) are served."""
    conf = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": HOST_ADDRESS,
        "port": node.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": node.healthz_port,
        # pods reach the host address the kubelet listens on: no anonymous request (exec,
        # logs, pod lists); only the API server's client certificate is accepted
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(client_ca)}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "clusterDNS": [HOST_ADDRESS],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": "",
        "podLogsDir": str(node.dir / "pod-logs"),
        "failSwapOn": False,
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "4s",
        "maxPods": 110,
    }
    return json.dumps(conf, indent=2) + "\n"


def kubelet_labels(node: NodeLayout) -> str:
    """``--node-labels``: the stand-in's topology and GPU labels, minus the kubelet's own."""
    labels = node_labels(node.name, node.index)
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in KUBELET_OWN_LABELS)


def kube_proxy_config(kubeconfig: Path, healthz_port: int, metrics_port: int) -> str:
    """KubeProxyConfiguration: iptables mode, node ports only on our address, no sysctl edits."""
    conf = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "hostnameOverride": "node-0",
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "nodePortAddresses": [f"{HOST_ADDRESS}/32"],
        "iptables": {"localhostNodePorts": False, "minSyncPeriod": "0s", "syncPeriod": "30s"},
        # zero: leave the machine's conntrack sysctls as they are
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
    }
    return json.dumps(conf, indent=2) + "\n"


def corefile(kubeconfig: Path, health_port: int, ready_port: int) -> str:
    """CoreDNS: cluster names only (no ``forward``), on the host address pods reach."""
    return f""".:53 {{
    bind {HOST_ADDRESS}
    errors
    health 127.0.0.1:{health_port}
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} devcluster
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
    loadbalance
}}
"""
