"""Node status and labels as a kubelet registers and heartbeats them.

Pure: GPU capacity, the pressure and Ready conditions, addresses and node info.
"""

from __future__ import annotations

import hashlib

from omenative_devcluster.kubelet_api import GPU, Json
from omenative_devcluster.kubelet_config import StandInConfig


def node_status(cfg: StandInConfig, node: str, ip: str, now: str, since: str) -> Json:
    """A Ready node's status at ``now`` (Ready since ``since``): GPU capacity, conditions."""
    resources = {
        "cpu": cfg.cpu,
        "memory": cfg.memory,
        "pods": cfg.pods,
        "ephemeral-storage": "1Ti",
        GPU: str(cfg.gpus_per_node),
    }

    def cond(type_: str, status: str, reason: str, message: str) -> Json:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": since,
        }

    return {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "ok"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "ok"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "ok"),
            cond("Ready", "True", "KubeletReady", "kubelet stand-in is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": node},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": hashlib.md5(node.encode()).hexdigest(),
            "systemUUID": hashlib.md5(node.encode()).hexdigest(),
            "bootID": hashlib.md5(f"boot-{node}".encode()).hexdigest(),
            "kernelVersion": "6.1.0-devcluster",
            "osImage": "omenative devcluster kubelet stand-in",
            "containerRuntimeVersion": "containerd://fake",
            "kubeletVersion": cfg.kubelet_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_labels(node: str, i: int) -> dict[str, str]:
    """The labels of node number ``i``: hostname, zone (two, alternating), GPU present."""
    return {
        "kubernetes.io/hostname": node,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/region": "local",
        "topology.kubernetes.io/zone": "zone-a" if i % 2 == 0 else "zone-b",
        "nvidia.com/gpu.present": "true",
        "omenative.io/devcluster": "true",
    }
