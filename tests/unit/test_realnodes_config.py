"""What each real node runs with: separate runtimes, dirs, ports, subnets; nothing off-host."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from omenative_devcluster.realnodes import RealNodes, RealNodesError
from omenative_devcluster.realnodes_config import (
    NodeLayout,
    cni_config,
    containerd_config,
    corefile,
    kube_proxy_config,
    kubelet_config,
    kubelet_labels,
)
from omenative_devcluster.realnodes_host import HOST_ADDRESS, iptables_ours

BASE = Path("/var/lib/omenative-realnodes")
NODES = [NodeLayout(i, BASE, 20000 + 2 * i, 20001 + 2 * i) for i in range(4)]


def _containerd(node: NodeLayout) -> dict[str, object]:
    return tomllib.loads(containerd_config(node, Path("/c/bin"), Path("/r/runc"), "pause:v1"))


def test_each_node_has_its_own_containerd_socket_root_state_and_runc_root() -> None:
    confs = [_containerd(n) for n in NODES]
    for key in ("root", "state"):
        assert len({c[key] for c in confs}) == len(NODES)
    sockets = {c["plugins"]["io.containerd.server.v1.grpc"]["address"] for c in confs}  # type: ignore[index]
    assert len(sockets) == len(NODES)
    runtime = confs[0]["plugins"]["io.containerd.cri.v1.runtime"]  # type: ignore[index]
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["options"]["BinaryName"] == "/r/runc"
    assert runc["options"]["Root"].startswith(str(NODES[0].dir))
    assert runtime["cni"]["conf_dir"].startswith(str(NODES[0].dir))


def test_containerd_restricts_oom_score_disables_nri_and_pins_the_local_sandbox_image() -> None:
    conf = _containerd(NODES[0])
    plugins = conf["plugins"]
    assert plugins["io.containerd.cri.v1.runtime"]["restrict_oom_score_adj"] is True  # type: ignore[index]
    assert "io.containerd.nri.v1.nri" in conf["disabled_plugins"]  # type: ignore[operator]
    assert plugins["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "pause:v1"  # type: ignore[index]


def test_one_pod_subnet_per_node_and_no_route_off_the_machine() -> None:
    confs = [json.loads(cni_config(n)) for n in NODES]
    subnets = [c["plugins"][0]["ipam"]["ranges"][0][0]["subnet"] for c in confs]
    assert subnets == [f"10.244.{i}.0/24" for i in range(4)]
    assert len({c["plugins"][0]["bridge"] for c in confs}) == 4
    for conf in confs:
        routes = [r["dst"] for r in conf["plugins"][0]["ipam"]["routes"]]
        assert "0.0.0.0/0" not in routes
        assert conf["plugins"][0]["ipMasq"] is False


def test_kubelets_differ_in_cgroup_root_ports_and_dirs_and_use_cluster_dns() -> None:
    confs = [json.loads(kubelet_config(n, Path("/certs/ca.crt"))) for n in NODES]
    for key in ("cgroupRoot", "port", "healthzPort", "podLogsDir", "containerRuntimeEndpoint"):
        assert len({c[key] for c in confs}) == 4, key
    for conf in confs:
        assert conf["failCgroupV1"] is False
        assert conf["cgroupDriver"] == "cgroupfs"
        assert conf["clusterDNS"] == [HOST_ADDRESS]
        assert conf["address"] == HOST_ADDRESS


def test_kubelets_refuse_anonymous_clients_and_trust_only_the_api_servers_ca() -> None:
    conf = json.loads(kubelet_config(NODES[0], Path("/certs/ca.crt")))
    assert conf["authentication"]["anonymous"]["enabled"] is False
    assert conf["authentication"]["x509"]["clientCAFile"] == "/certs/ca.crt"


def test_node_labels_are_the_stand_in_topology_minus_what_the_kubelet_sets() -> None:
    labels = dict(kv.split("=") for kv in kubelet_labels(NODES[1]).split(","))
    assert labels["topology.kubernetes.io/zone"] == "zone-b"
    assert "kubernetes.io/hostname" not in labels


def test_dns_answers_cluster_names_only_and_kube_proxy_serves_node_ports_on_our_address() -> None:
    dns = corefile(Path("/k"), 1, 2)
    assert "forward" not in dns
    assert f"bind {HOST_ADDRESS}" in dns
    proxy = json.loads(kube_proxy_config(Path("/k"), 1, 2))
    assert proxy["mode"] == "iptables"
    assert proxy["nodePortAddresses"] == [f"{HOST_ADDRESS}/32"]
    assert proxy["iptables"]["localhostNodePorts"] is False


@pytest.mark.parametrize("count", [0, 5])
def test_real_node_count_is_one_to_four(count: int) -> None:
    with pytest.raises(RealNodesError, match=r"1\.\.4"):
        RealNodes(count)


def test_only_kube_and_cni_rules_count_as_ours() -> None:
    save = "\n".join([
        "*nat", ":PREROUTING ACCEPT [0:0]", ":KUBE-SERVICES - [0:0]", ":DOCKER - [0:0]",
        "-A PREROUTING -j KUBE-SERVICES", "-A POSTROUTING -s 10.244.0.0/24 -j CNI-abc",
        "-A DOCKER -j RETURN", "COMMIT"])
    assert iptables_ours(save) == [
        ":KUBE-SERVICES - [0:0]", "-A PREROUTING -j KUBE-SERVICES",
        "-A POSTROUTING -s 10.244.0.0/24 -j CNI-abc"]
