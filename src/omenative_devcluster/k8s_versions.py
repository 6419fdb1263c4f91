"""What differs between the Kubernetes releases the local control plane runs (1.36, 1.37).

The builder's versions live in ``build``; here, the flags each release starts with.
"""

from __future__ import annotations

__all__ = ["GANG_FLAGS", "gang_flags"]

#: Gang scheduling per Kubernetes minor release: (feature gates, ``--runtime-config``) of the
#: Workload and PodGroup API and kube-scheduler's gang and topology-aware placement; they
#: change nothing for pods without ``spec.schedulingGroup``. 1.36: ``v1alpha2``, alpha gates
#: ``GenericWorkload`` and ``GangScheduling``. 1.37: ``v1beta1`` (beta APIs are off by
#: default), gate ``GenericWorkload`` (beta, off by default) brings the gang plugin; there is
#: no ``GangScheduling`` gate in 1.37's ``pkg/features`` and a binary refuses a gate it does
#: not know.
GANG_FLAGS = {
    "1.36": ("GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true",
             "scheduling.k8s.io/v1alpha2=true"),
    "1.37": ("GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
             "scheduling.k8s.io/v1beta1=true"),
}


def gang_flags(version: str) -> tuple[str, str]:
    """(``--feature-gates``, ``--runtime-config``) for gang scheduling on ``version``."""
    minor = ".".join(version.removeprefix("v").split(".")[:2])
    try:
        return GANG_FLAGS[minor]
    except KeyError:
        raise ValueError(f"Kubernetes {version}: no gang flags known (known minor releases: "
                         f"{', '.join(sorted(GANG_FLAGS))})") from None
