"""The ``Rejection`` every admission check of the service layer returns.

One type for InferenceServices and InferenceReplicas, so the webhook and the service
controller treat both alike: OME's reason, a message that starts with it (it reads on its
own in ``kubectl apply`` output), the JSON path of the field, and whether it only warns.
"""

from __future__ import annotations

from attrs import frozen

__all__ = ["Rejection", "reject", "warn"]


@frozen
class Rejection:
    """Why admission refuses an object: OME's reason, a message that starts with it, and
    the JSON path of the offending field. ``group`` is the umbrella reason, when there is
    one (``InvalidLeaderWorkerPairing``); ``warning`` admits the object with the message."""

    reason: str
    message: str
    field: str
    group: str | None = None
    warning: bool = False

    def __str__(self) -> str:
        return self.message


def reject(reason: str, field: str, text: str, group: str | None = None) -> Rejection:
    """A ``Rejection`` whose message is ``[group: ]reason: text``."""
    head = f"{group}: {reason}" if group else reason
    return Rejection(reason=reason, message=f"{head}: {text}", field=field, group=group)


def warn(reason: str, field: str, text: str) -> Rejection:
    """A warning (admits): message ``reason: text``."""
    return Rejection(reason=reason, message=f"{reason}: {text}", field=field, warning=True)
