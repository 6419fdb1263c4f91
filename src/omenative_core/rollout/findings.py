"""Admission findings about ``spec.rollout``: the ``Rejection`` type and its collector.

``validate_rollout`` (``validate.py``) and the canary checks (``validate_canary.py``) both
append to one ``Findings``, so a webhook shows every problem at once, in the order found.
"""

from __future__ import annotations

from attrs import frozen

__all__ = ["Findings", "Rejection", "errors", "warnings"]


@frozen(kw_only=True)
class Rejection:
    """One admission finding: OME's reason, a message, the JSON path; ``warning`` admits."""

    reason: str
    message: str
    path: str
    warning: bool = False


def errors(found: list[Rejection]) -> list[Rejection]:
    """The findings that deny admission."""
    return [r for r in found if not r.warning]


def warnings(found: list[Rejection]) -> list[Rejection]:
    """The findings that only warn."""
    return [r for r in found if r.warning]


class Findings:
    """The rejections and warnings found so far, in order (``out``)."""

    def __init__(self) -> None:
        self.out: list[Rejection] = []

    def reject(self, reason: str, path: str, message: str) -> None:
        """Record a finding that denies admission."""
        self.out.append(Rejection(reason=reason, message=message, path=path))

    def warn(self, reason: str, path: str, message: str) -> None:
        """Record a finding that admits with a warning."""
        self.out.append(Rejection(reason=reason, message=message, path=path, warning=True))
