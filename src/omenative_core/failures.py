"""Failure classification: the revision's own fault versus the cluster's.

A revision's own fault (an image that cannot be pulled, a bad config, a pod the API server
rejects) counts against its RetryBlock and ends Held; crashes, timeouts and scheduling
trouble could be a node's or a GPU's fault and never hold a revision.
"""

from __future__ import annotations

from attrs import frozen

__all__ = [
    "CRASH_REASONS",
    "REVISION_FAULT_REASONS",
    "Failure",
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

CRASH_REASONS = frozenset({"CrashLoopBackOff", "CreateContainerError", "RunContainerError"})
"""Container trouble that a bad node or GPU could cause: never holds a revision."""


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
