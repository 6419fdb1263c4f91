"""Failure classification: the revision's own fault versus the cluster's.

A revision's own fault (an image that cannot be pulled, a bad config, a pod the API server
rejects) counts against its RetryBlock and ends Held; crashes, timeouts and scheduling
trouble could be a node's or a GPU's fault and never hold a revision.
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from omenative_core.model.observed import CRASH_REASONS, PodView

__all__ = [
    "CRASH_REASONS",
    "IMAGE_PULL_REASONS",
    "REVISION_FAULT_REASONS",
    "Failure",
    "blame_at_deadline",
    "is_revision_fault",
]

REVISION_FAULT_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "InvalidPodSpec",
    }
)
"""Kubelet waiting reasons (and our ``InvalidPodSpec``) that blame the revision."""

IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})
"""Kubelet waiting reasons of a container whose image cannot be pulled (yet)."""



def is_revision_fault(reason: str) -> bool:
    """True when a failure with this reason counts toward holding the revision."""
    return reason in REVISION_FAULT_REASONS


@frozen(kw_only=True)
class Failure:
    """Why an attempt failed, as recorded in ``lastFailure`` and the RetryBlock."""

    reason: str
    message: str = ""
    pod_name: str = ""
    container_name: str = ""
    exit_code: int | None = None
    node: str | None = None

    @property
    def revision_fault(self) -> bool:
        """The revision itself is to blame."""
        return is_revision_fault(self.reason)


def blame_at_deadline(failure: Failure, pods: Iterable[PodView]) -> Failure:
    """A readiness timeout while a container still cannot pull its image is the revision's.

    The kubelet keeps retrying a bad image (``ErrImagePull`` then ``ImagePullBackOff``), so
    without a stuck-pod grace period the attempt only ends at its deadline. Recording that
    as a plain ``DeadlineExceeded`` would never hold the revision and the retry ladder would
    rebuild the same unpullable image forever; the pull reason is what the user must fix.
    Any other failure, or a timeout with no container stuck pulling, is returned unchanged.
    """
    if failure.reason != "DeadlineExceeded":
        return failure
    for pod in sorted(pods, key=lambda p: p.name):
        if pod.terminating:
            continue
        for c in pod.containers:
            if c.waiting_reason in IMAGE_PULL_REASONS:
                pulled = f": {c.waiting_message}" if c.waiting_message else ""
                return Failure(
                    reason=c.waiting_reason,
                    message=f"{failure.message}: container {c.name} of pod {pod.name} "
                    f"could not pull its image ({c.waiting_reason}{pulled})",
                    pod_name=pod.name,
                    container_name=c.name,
                    node=pod.node_name,
                )
    return failure
